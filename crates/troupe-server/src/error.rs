//! The one error body every endpoint answers with:
//! `{"error": {"kind": "...", "message": "...", "hint": "..." | null}}`.
//!
//! Messages name the caller's input (a task id, a field), never a file path,
//! a database detail or a stack trace: failures of the server itself are
//! logged in full and answered as `internal` with a generic message.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use troupe_store::StoreError;
use utoipa::ToSchema;

/// What went wrong, as a client can act on it. Serialised in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request is malformed: bad JSON, a missing field, an invalid id (400).
    BadRequest,
    /// No valid bearer token (401). Says nothing about the resource.
    Unauthorized,
    /// The caller may not do this to this resource (403).
    Forbidden,
    /// No such resource (404).
    NotFound,
    /// The endpoint exists but not with this method (405).
    MethodNotAllowed,
    /// The resource's state refuses the operation: a task held by another
    /// agent, a blocked task, a changed plan (409).
    Conflict,
    /// The request body is larger than the server accepts (413).
    PayloadTooLarge,
    /// A quality gate refused the operation (422).
    GateRefused,
    /// The server could not do it (500). The details are in the server's log.
    Internal,
    /// The store stayed busy too long; retry (503).
    Unavailable,
}

impl ErrorKind {
    /// The HTTP status of this kind.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::GateRefused => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// An error answer. Build one with a kind constructor and add a hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ApiError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// One sentence naming the input.
    pub message: String,
    /// What to do about it, when there is something to do.
    pub hint: Option<String>,
}

/// The result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

/// The body of every error answer.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ApiError,
}

impl ApiError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError { kind, message: message.into(), hint: None }
    }

    /// A malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, message)
    }

    /// A missing resource.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// A refusal by the resource's state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    /// The answer to a request without a valid token: the same for every
    /// path, so it reveals nothing about what exists.
    pub fn unauthorized() -> Self {
        Self::new(ErrorKind::Unauthorized, "authentication required")
            .with_hint("send the server's token as `Authorization: Bearer <token>`")
    }

    /// A failure of the server itself. `detail` (which may hold paths or
    /// database errors) is logged, never sent.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(%detail, "request failed");
        Self::new(ErrorKind::Internal, "the server failed to handle the request")
            .with_hint("the server's log has the details")
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let unauthorized = self.kind == ErrorKind::Unauthorized;
        let mut response = (status, Json(ErrorBody { error: self })).into_response();
        if unauthorized {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        use StoreError as E;
        let message = err.to_string();
        match &err {
            E::TaskNotFound(_) | E::MessageNotFound(_) | E::AgentNotFound(_) => ApiError::not_found(message),
            E::NotAssignee { .. } | E::NotRecipient { .. } => ApiError::new(ErrorKind::Forbidden, message)
                .with_hint("only the agent holding the task (or the recipient of the message) may do this"),
            E::NotClaimable { .. }
            | E::WrongStatus { .. }
            | E::DuplicateTask(_)
            | E::Cycle { .. }
            | E::AgentRunning { .. }
            | E::PlanChanged { .. }
            | E::PlanInProgress { .. }
            | E::PlanDependedOn { .. } => ApiError::conflict(message),
            _ if err.is_busy() => ApiError::new(ErrorKind::Unavailable, "the store is busy")
                .with_hint("another troupe process held the database too long; retry"),
            // Every other refusal is about the caller's input; failures name
            // the database file, so they are logged, not answered.
            _ if err.is_refusal() => ApiError::bad_request(message),
            _ => ApiError::internal(format!("{err:#}: {}", source_chain(&err))),
        }
    }
}

fn source_chain(err: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut cur = err.source();
    while let Some(e) = cur {
        parts.push(e.to_string());
        cur = e.source();
    }
    parts.join(": ")
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::new(ErrorKind::PayloadTooLarge, "the request body is too large")
                .with_hint(format!("send at most {} bytes", crate::BODY_LIMIT));
        }
        ApiError::bad_request(rejection.body_text()).with_hint("send a JSON body with `Content-Type: application/json`")
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

/// A JSON body whose rejections (bad JSON, too large) answer with [`ApiError`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ApiJson(Json::<T>::from_request(req, state).await?.0))
    }
}

impl<T: Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        Json(self.0).into_response()
    }
}

/// Query parameters whose rejections answer with [`ApiError`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ApiQuery(Query::<T>::from_request_parts(parts, state).await?.0))
    }
}

/// Path parameters whose rejections answer with [`ApiError`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ApiPath(Path::<T>::from_request_parts(parts, state).await?.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_failure_never_leaks_its_path() {
        let err =
            StoreError::Io { path: "/secret/place/troupe.db".into(), source: std::io::Error::other("disk on fire") };
        let api = ApiError::from(err);
        assert_eq!(api.kind, ErrorKind::Internal);
        assert!(!api.message.contains("/secret"), "{api:?}");
        assert!(!api.hint.as_deref().unwrap_or_default().contains("/secret"));
    }

    #[test]
    fn refusals_map_to_their_status() {
        assert_eq!(ApiError::from(StoreError::TaskNotFound("t1".into())).status(), StatusCode::NOT_FOUND);
        let held = StoreError::NotClaimable {
            task: "t1".into(),
            agent: "b".into(),
            reason: troupe_store::ClaimRefusal::HeldBy("a".into()),
        };
        assert_eq!(ApiError::from(held).status(), StatusCode::CONFLICT);
        assert_eq!(ApiError::from(StoreError::EmptySubject).status(), StatusCode::BAD_REQUEST);
    }
}
