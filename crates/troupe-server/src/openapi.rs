//! The OpenAPI 3.1 document, assembled from the routes themselves (see
//! [`crate::rest`]) and served at `/api/openapi.json`.

use std::sync::Arc;

use axum::Json;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;

use crate::error::ErrorBody;
use crate::state::AppState;

/// Where the document is served.
pub const PATH: &str = "/api/openapi.json";

#[derive(OpenApi)]
#[openapi(
    info(title = "troupe", description = "troupe's HTTP API: the task board, plan approval, agents, messages, specs, runs, audit, engines and live events."),
    components(schemas(ErrorBody)),
    modifiers(&Bearer),
    security(("bearer" = [])),
)]
struct Doc;

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The documented routes and their document, with the document's own route added.
pub(crate) fn routes(documented: OpenApiRouter<AppState>) -> axum::Router<AppState> {
    let (router, doc) = assemble(documented);
    let doc = Arc::new(doc);
    router.route(PATH, get(move || async move { Json(doc.as_ref().clone()) }))
}

/// The document the server serves, without a server (for tests and tooling).
pub fn document() -> utoipa::openapi::OpenApi {
    assemble(crate::documented()).1
}

fn assemble(documented: OpenApiRouter<AppState>) -> (axum::Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = OpenApiRouter::with_openapi(Doc::openapi()).merge(documented).split_for_parts();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    (router, doc)
}
