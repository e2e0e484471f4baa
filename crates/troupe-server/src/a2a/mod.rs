//! troupe as an A2A 1.0 server: the agent card, the JSON-RPC and HTTP+JSON
//! bindings, and the three skills a client can ask of the team.
//!
//! The bindings (request parsing, ProtoJSON, SSE framing, the spec's error
//! mapping) are the official Rust SDK's (`a2a-server-lf`); what each
//! operation means for troupe is [`A2a`], its `RequestHandler`:
//!
//! - `run-feature` starts `troupe run` (the real Lead) and tracks it;
//! - `post-task` puts a task on the board and tracks it there;
//! - `message-teammate` writes to a teammate's mailbox (`x-troupe-agent`),
//!   optionally asking for a plan first (`x-troupe-plan-mode`), which makes the
//!   task `INPUT_REQUIRED` until a follow-up message approves or rejects it.
//!
//! Every task and every change of it is in the store (`A2aTasks`, schema V4),
//! and each change appends an `a2a_task` event in the same transaction:
//! streams (SendStreamingMessage, SubscribeToTask) and blocking SendMessage
//! follow the event log, so they see changes made by any process, and survive
//! a restart of the server.

mod card;
mod follow;
mod handler;
mod push;
mod skills;
mod tasks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use a2a::A2AError;
use a2a_server::ServiceParams;
use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use troupe_store::Store;

use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;

pub use card::{EXTENSION_URI, SKILLS};

/// Where the JSON-RPC binding answers (one POST endpoint).
pub const JSONRPC_PATH: &str = "/a2a/jsonrpc";
/// Where the HTTP+JSON binding's paths (`/message:send`, `/tasks/{id}`, ...) start.
pub const REST_PATH: &str = "/a2a/rest";
/// The protocol version troupe speaks (`Major.Minor`, §3.6).
pub const VERSION: &str = a2a::VERSION;

/// The A2A request handler: every operation, on troupe's store.
pub struct A2a {
    state: AppState,
    store: Arc<dyn Store>,
    root: PathBuf,
    /// The `troupe` executable that runs features.
    troupe: PathBuf,
    /// True when every request carries the server's token (checked before any
    /// route): the card then declares the scheme and the extended card is served.
    authenticated: bool,
    /// One lock per task: a task's changes are read-modify-write.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The runs this process started, by task id, for CancelTask.
    runs: Mutex<HashMap<String, skills::run::RunHandle>>,
    push: a2a_server::HttpPushSender,
    /// The one follower of board changes for every post-task task (started on first use).
    board_watch: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<skills::board::Watch>>,
    /// Itself, for the background work a request starts.
    this: std::sync::Weak<A2a>,
}

impl A2a {
    /// The handler of the server over `state`; `troupe` is the executable
    /// that runs features (this one, in `troupe serve`).
    pub fn new(state: &AppState, troupe: PathBuf) -> Arc<A2a> {
        Arc::new_cyclic(|this| A2a {
            this: this.clone(),
            state: state.clone(),
            store: state.store().clone(),
            root: state.layout().root().to_path_buf(),
            troupe,
            authenticated: state.auth().required(),
            locks: Mutex::new(HashMap::new()),
            runs: Mutex::new(HashMap::new()),
            push: push::sender(),
            board_watch: std::sync::OnceLock::new(),
        })
    }
}

impl A2a {
    /// This handler as an `Arc`, for work that outlives a request.
    fn me(&self) -> Arc<A2a> {
        self.this.upgrade().expect("the handler lives while its requests run")
    }
}

/// The A2A routes of the server over `state`: the agent card at
/// `/.well-known/agent-card.json`, the JSON-RPC binding at [`JSONRPC_PATH`] and
/// the HTTP+JSON binding under [`REST_PATH`]. Tasks a previous server left
/// unfinished are picked up again once the runtime runs (`skills::resume`).
pub fn routes(state: &AppState) -> Router<AppState> {
    let troupe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("troupe"));
    let a2a = A2a::new(state, troupe);
    skills::resume(&a2a);
    let authenticated = a2a.authenticated;
    Router::new()
        .route(
            a2a_server::WELL_KNOWN_AGENT_CARD_PATH,
            axum::routing::get(move |headers: HeaderMap| async move {
                axum::Json(card::card(authenticated, &host(&headers), None)).into_response()
            }),
        )
        .nest_service(
            JSONRPC_PATH,
            a2a_server::jsonrpc::jsonrpc_router(a2a.clone()).layer(axum::middleware::from_fn(limit_body)),
        )
        .nest_service(
            REST_PATH,
            a2a_server::rest::rest_router(a2a)
                .layer(axum::middleware::from_fn(version_from_query))
                .layer(axum::middleware::from_fn(limit_body)),
        )
}

/// The server's body limit for the A2A bindings too: the SDK's routers set a
/// limit of their own (10 MiB), which would replace the server's.
async fn limit_body(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, crate::BODY_LIMIT).await {
        Ok(bytes) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Err(_) => ApiError::new(ErrorKind::PayloadTooLarge, "the request body is too large")
            .with_hint(format!("send at most {} bytes", crate::BODY_LIMIT))
            .into_response(),
    }
}

/// The `Host` the client used, for the card's interface URLs.
fn host(headers: &HeaderMap) -> String {
    headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1").to_string()
}

/// §3.6.1: a client may send the version as the `A2A-Version` query parameter
/// instead of the header. The SDK's REST binding reads headers only, so the
/// parameter is copied into the header here.
async fn version_from_query(mut request: Request, next: Next) -> Response {
    if !request.headers().contains_key(a2a::SVC_PARAM_VERSION)
        && let Some(query) = request.uri().query()
        && let Some(value) = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(a2a::SVC_PARAM_VERSION))
            .map(|(_, v)| v.to_string())
        && let Ok(value) = HeaderValue::from_str(&value)
    {
        request.headers_mut().insert(a2a::SVC_PARAM_VERSION, value);
    }
    next.run(request).await
}

/// §3.6.2: requests are processed with the semantics of the version they ask
/// for; a missing version means 0.3, which troupe does not speak.
fn check_version(params: &ServiceParams) -> Result<(), A2AError> {
    let asked = params.get("a2a-version").and_then(|v| v.first()).map(|v| v.trim()).unwrap_or("");
    let requested = if asked.is_empty() { "0.3" } else { asked };
    let major_minor = |v: &str| {
        let mut it = v.split('.');
        (it.next().map(str::to_string), it.next().map(str::to_string))
    };
    let (major, minor) = major_minor(requested);
    let (ours_major, ours_minor) = major_minor(VERSION);
    if major == ours_major && minor.as_deref().unwrap_or("0") == ours_minor.as_deref().unwrap_or("0") {
        return Ok(());
    }
    let mut error = A2AError::version_not_supported(requested);
    error.message =
        format!("A2A version {requested} is not supported: troupe speaks {VERSION} (send `A2A-Version: {VERSION}`)");
    Err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(version: Option<&str>) -> ServiceParams {
        version.map(|v| ServiceParams::from([("a2a-version".to_string(), vec![v.to_string()])])).unwrap_or_default()
    }

    #[test]
    fn only_version_1_0_is_spoken_and_a_missing_one_means_0_3() {
        assert!(check_version(&params(Some("1.0"))).is_ok());
        assert!(check_version(&params(Some("1"))).is_ok(), "a bare major is 1.0");
        for bad in [None, Some(""), Some("0.3"), Some("2.0"), Some("1.1"), Some("x")] {
            let e = check_version(&params(bad)).unwrap_err();
            assert_eq!(e.code, a2a::error_code::VERSION_NOT_SUPPORTED, "{bad:?}");
        }
        let e = check_version(&params(None)).unwrap_err();
        assert!(e.message.contains("0.3"), "{}", e.message);
    }
}
