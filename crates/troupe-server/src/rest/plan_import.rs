//! `POST /tasks/board/import`: a feature's tasks.yaml onto the board, as
//! `troupe board import` does (the store's `import_plan`, or `replace_plan`).

use serde::{Deserialize, Serialize};
use troupe_core::plan::TaskPlan;
use troupe_store::ImportOutcome;
use troupe_store::plan::plan_tasks;
use utoipa::ToSchema;

use super::ids;
use crate::caller::Caller;
use crate::error::{ApiError, ApiJson, ApiResult, ErrorBody};
use crate::state::AppState;

/// Which plan to import.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    /// The feature whose `.troupe/specs/<feature>/tasks.yaml` to import.
    pub feature: String,
    /// Replace the plan the board holds for this feature (refused while one of its tasks is in progress).
    #[serde(default)]
    pub replace: bool,
    /// Who imports it (default `api`).
    pub by: Option<String>,
}

/// What the import did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Imported {
    /// The feature.
    pub feature: String,
    /// True when the board already held this plan and nothing changed.
    pub unchanged: bool,
    /// Tasks created.
    pub created: usize,
    /// Of those, tasks already done in tasks.yaml.
    pub completed: usize,
}

/// Import a feature's plan (tasks.yaml) onto the board. The same plan again
/// changes nothing; a changed plan is refused (409, naming each change) unless `replace`.
#[utoipa::path(post, path = "/tasks/board/import", tag = "board", request_body = ImportBody,
    responses((status = 200, body = Imported), (status = 403, body = ErrorBody), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(crate) async fn import(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ImportBody>,
) -> ApiResult<ApiJson<Imported>> {
    caller.person("import a plan")?;
    ids::feature(&body.feature)?;
    let by = body.by.unwrap_or_else(|| super::API_ACTOR.to_string());
    ids::agent_id(&by)?;
    let path = state.layout().tasks_file(&body.feature);
    let feature = body.feature;
    let replace = body.replace;
    state
        .with_store(move |store| {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ApiError::not_found(format!("feature `{feature}` has no tasks.yaml"))
                        .with_hint("the TaskGenerator writes it during `troupe impl`"));
                }
                Err(e) => return Err(ApiError::internal(format!("cannot read {}: {e}", path.display()))),
            };
            let plan = TaskPlan::from_yaml(&text).map_err(|e| {
                ApiError::bad_request(format!("the tasks.yaml of `{feature}` is not a valid plan: {e}"))
            })?;
            let checked = plan.check().map_err(|errors| {
                let problems: Vec<String> = errors.errors.iter().map(ToString::to_string).collect();
                ApiError::bad_request(format!(
                    "the tasks.yaml of `{feature}` does not validate: {}",
                    problems.join("; ")
                ))
                .with_hint("fix tasks.yaml, then import again; nothing was put on the board")
            })?;
            let tasks = plan_tasks(&feature, &checked, &by);
            let outcome = if replace { store.replace_plan(tasks)? } else { store.import_plan(tasks)? };
            Ok(match outcome {
                ImportOutcome::Imported { created, completed } => {
                    Imported { feature, unchanged: false, created, completed }
                }
                ImportOutcome::Unchanged => Imported { feature, unchanged: true, created: 0, completed: 0 },
            })
        })
        .await
        .map(ApiJson)
}
