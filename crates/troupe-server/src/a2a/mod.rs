//! A2A 1.0: the agent card and the protocol's operations over JSON-RPC and
//! HTTP+JSON, backed by the board and the Lead.

use axum::Router;

use crate::state::AppState;

/// The A2A routes, merged into [`crate::router`] behind the same token rule.
pub fn routes() -> Router<AppState> {
    Router::new()
}
