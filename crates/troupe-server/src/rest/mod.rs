//! The REST API (JSON): the board, plan approval, agents, messages, specs,
//! runs, cost, audit and engines. Every route is registered through utoipa-axum,
//! which records its documentation from the handler's own types, so
//! `/api/openapi.json` ([`crate::openapi`]) always describes what is served.

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub(crate) mod approval;
mod board;
mod cost;
mod engine_override;
pub(crate) mod engines;
pub(crate) mod ids;
pub(crate) mod listing;
mod plan_import;
pub(crate) mod project;
mod team;
pub mod views;

/// Who acts when a request names nobody.
pub const API_ACTOR: &str = "api";

/// Every REST route, with its documentation.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(board::routes())
        .merge(approval::routes())
        .merge(team::routes())
        .merge(project::routes())
        .merge(engines::routes())
        .merge(engine_override::routes())
        .merge(cost::routes())
}
