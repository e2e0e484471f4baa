//! Plan approval, seed 003 B3: `GET /approvals` lists what waits for a
//! decision, `POST /tasks/{id}/approve` and `POST /tasks/{id}/reject` decide.
//! `{id}` is the id of a `plan` message (what a teammate's
//! `request_plan_approval` call sent, or a call held in adhoc mode); the
//! answer is the `plan_decision` message troupe-store's one writer sends back.

use serde::{Deserialize, Serialize};
use troupe_store::Message;
use troupe_store::approval::{DecideError, decide_plan};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ids::agent_id;
use super::team::{Message as MessageView, MessageList};
use crate::caller::Caller;
use crate::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use crate::state::AppState;

/// The approval routes.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(approvals)).routes(routes!(approve)).routes(routes!(reject))
}

/// Everything waiting for a decision, oldest first: each `plan` message (a
/// teammate's plan, a call held in adhoc mode, whatever else asks through a
/// `plan`) that no `plan_decision` answers yet — the store's `pending_plans`,
/// which `troupe approve --list` reads too. The one reader of pending
/// approvals here: `GET /approvals` and the dashboard's Approvals page both
/// list what it returns.
pub(crate) async fn pending(state: &AppState) -> ApiResult<Vec<Message>> {
    state.with_store(|s| Ok(s.pending_plans()?)).await
}

/// What waits for a decision: every `plan` message no `plan_decision`
/// answers yet (teammates' plans, calls held in adhoc mode), oldest first.
#[utoipa::path(get, path = "/approvals", tag = "plans", responses((status = 200, body = MessageList)))]
async fn approvals(state: axum::extract::State<AppState>) -> ApiResult<ApiJson<MessageList>> {
    let waiting = pending(&state.0).await?;
    Ok(ApiJson(MessageList { messages: waiting.into_iter().map(MessageView::from).collect() }))
}

/// Who decides, and why.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// Who decides (an agent id or a person's name as an id; default `api`).
    pub by: Option<String>,
    /// Why; required to reject (what the teammate should change).
    #[serde(default)]
    pub reason: String,
}

/// The decision sent.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Decided {
    /// The `plan` message decided.
    pub request_id: i64,
    /// The `plan_decision` message sent to the plan's author.
    pub decision_id: i64,
    /// Whom it was sent to.
    pub to: String,
    /// The verdict.
    pub approved: bool,
}

/// Approve a teammate's plan: it may go ahead.
#[utoipa::path(post, path = "/tasks/{id}/approve", tag = "plans", request_body = DecisionBody,
    params(("id" = i64, Path, description = "The plan message's id")),
    responses((status = 200, body = Decided), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn approve(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> ApiResult<ApiJson<Decided>> {
    caller.person("approve a plan")?;
    decide(state.0, id, true, body).await
}

/// Reject a teammate's plan with a reason: it revises and submits again.
#[utoipa::path(post, path = "/tasks/{id}/reject", tag = "plans", request_body = DecisionBody,
    params(("id" = i64, Path, description = "The plan message's id")),
    responses((status = 200, body = Decided), (status = 403, body = ErrorBody), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn reject(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> ApiResult<ApiJson<Decided>> {
    caller.person("reject a plan")?;
    decide(state.0, id, false, body).await
}

async fn decide(state: AppState, request: i64, approved: bool, body: DecisionBody) -> ApiResult<ApiJson<Decided>> {
    let by = body.by.unwrap_or_else(|| super::API_ACTOR.to_string());
    agent_id(&by)?;
    let sent = state
        .with_store(move |store| {
            decide_plan(store, request, approved, &by, &body.reason).map_err(|e| match e {
                DecideError::Store(e) => ApiError::from(e),
                e @ DecideError::NoReason => ApiError::bad_request(e.to_string()),
                e @ (DecideError::NotAPlan(_) | DecideError::AlreadyDecided { .. }) => {
                    ApiError::conflict(e.to_string())
                }
            })
        })
        .await?;
    Ok(ApiJson(Decided { request_id: request, decision_id: sent.id, to: sent.to, approved }))
}
