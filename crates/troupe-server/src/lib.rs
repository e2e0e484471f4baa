//! `troupe serve`: troupe's HTTP surface, and the only crate that knows HTTP
//! shapes.
//!
//! [`router`] builds the whole application over an [`AppState`] (the
//! project's paths, its store, its config and the token rule of
//! [`auth::resolve`]); [`serve`] runs it on a listener until a shutdown
//! future resolves, ending event streams so the graceful shutdown completes.
//! Every error is one JSON shape ([`error::ApiError`]); every request passes
//! [`auth::require_token`] first, unknown paths included.
//!
//! ```no_run
//! # async fn example(store: std::sync::Arc<dyn troupe_store::Store>) -> std::io::Result<()> {
//! use troupe_server::{AppState, auth::Auth};
//!
//! let layout = troupe_core::layout::Layout::new("/path/to/project");
//! let state = AppState::new(layout, store, Default::default(), Auth::open());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7878").await?;
//! troupe_server::serve(listener, state, troupe_server::shutdown_signal()).await
//! # }
//! ```
#![deny(missing_docs)]

pub mod a2a;
pub mod auth;
pub mod caller;
pub mod dashboard;
pub mod error;
pub mod events;
pub mod feed;
pub mod openapi;
pub mod rest;
pub mod state;

use std::future::Future;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};

pub use error::{ApiError, ApiResult, ErrorKind};
pub use state::AppState;

/// The largest request body any endpoint accepts (a tasks.yaml import is the
/// largest legitimate one). Larger bodies are answered 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The whole application: REST, events, A2A and the dashboard, behind the token rule.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(openapi::routes(documented()))
        .merge(a2a::routes(&state))
        .merge(dashboard::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Outermost last: a panic becomes a JSON 500, then the token is
        // checked before any route (or the fallback) sees the request.
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_token))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .with_state(state)
}

/// Every route that has OpenAPI documentation (all but A2A's, which has its own
/// protocol description in the agent card).
fn documented() -> utoipa_axum::router::OpenApiRouter<AppState> {
    rest::routes().merge(events::routes())
}

/// Serve [`router`] on `listener` until `shutdown` resolves; then end every
/// event stream ([`AppState::closing`]) and let requests in flight finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let closing = state.closing().clone();
    let app = router(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            closing.cancel();
        })
        .await
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stop the server with Ctrl-C");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint").with_hint("GET /api/openapi.json lists every endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(ErrorKind::MethodNotAllowed, "this endpoint does not accept that method")
        .with_hint("GET /api/openapi.json lists every endpoint and its methods")
}

fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("a handler panicked").into_response()
}
