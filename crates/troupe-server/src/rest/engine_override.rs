//! A feature's own engines (seed 002): `PUT /specs/{feature}/engine_override`
//! edits spec.yaml's `engine_override` through troupe-project's spec writer
//! (`Specs::update`: load, change, atomic save), which every spec.yaml change
//! of the Lead and the CLI goes through. It wins over config.toml's
//! `[engines.phases]` for that feature only, from its next spawn.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use troupe_core::config::ENGINE_PHASES;
use troupe_project::Project;
use troupe_project::specs::Specs;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ids::feature;
use crate::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use crate::state::AppState;

/// The engine override route.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set_override))
}

/// A change of a feature's overrides. Phases not named stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OverrideChange {
    /// Phase → engine; `null` removes the phase's override.
    pub phases: BTreeMap<String, Option<String>>,
}

/// A feature's overrides after the change.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EngineOverride {
    /// The feature.
    pub feature: String,
    /// spec.yaml's `engine_override`: phase → engine.
    pub engine_override: BTreeMap<String, String>,
}

/// Set or remove a feature's per-phase engines (spec.yaml `engine_override`).
#[utoipa::path(put, path = "/specs/{feature}/engine_override", tag = "specs", request_body = OverrideChange,
    params(("feature" = String, Path, description = "The feature")),
    responses((status = 200, body = EngineOverride), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn set_override(
    state: axum::extract::State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(change): ApiJson<OverrideChange>,
) -> ApiResult<ApiJson<EngineOverride>> {
    feature(&name)?;
    let (_, config) = super::engines::read(&state)?;
    let known = super::engines::view(&config).engines;
    for (phase, engine) in &change.phases {
        if !ENGINE_PHASES.contains(&phase.as_str()) {
            return Err(ApiError::bad_request(format!("unknown phase `{}`", phase.escape_debug()))
                .with_hint(format!("phases are {}", ENGINE_PHASES.join(", "))));
        }
        if let Some(e) = engine.as_deref().filter(|e| !known.iter().any(|k| k == e)) {
            return Err(ApiError::bad_request(format!("unknown engine `{}`", e.escape_debug()))
                .with_hint(format!("use one of {}", known.join(", "))));
        }
    }
    let root = state.layout().root().to_path_buf();
    let spec = tokio::task::spawn_blocking(move || {
        let project = Project::at(&root);
        Specs::new(&project).update(&name, |spec| {
            for (phase, engine) in change.phases {
                match engine {
                    Some(e) => spec.engine_override.insert(phase, e),
                    None => spec.engine_override.remove(&phase),
                };
            }
            Ok(())
        })
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(super::project::spec_error)?
    .0;
    Ok(ApiJson(EngineOverride { feature: spec.feature_name, engine_override: spec.engine_override }))
}
