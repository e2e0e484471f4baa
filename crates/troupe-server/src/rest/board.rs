//! The shared task board over HTTP: seed 003 B1's four endpoints (`GET` and
//! `POST /tasks/board`, `POST /tasks/board/{id}/claim`, `POST
//! /tasks/board/{id}/complete`) plus show, assign, release and plan import.
//! The rules are the store's and the CLI's: an atomic claim, only the holder
//! completes, the `on_task_completed` gate (troupe-gate's one runner) before
//! a completion, the unblocked tasks in its answer.

use axum::http::StatusCode;
use serde::Deserialize;
use troupe_store::{ListFilter, NewTask, TaskFilter};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ids::{agent_id, task_id};
use super::views::{Claimed, Completed, Task, TaskList, TaskStatus};
use crate::caller::Caller;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, ErrorBody, ErrorKind};
use crate::state::AppState;

/// The board's routes.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show))
        .routes(routes!(claim))
        .routes(routes!(complete))
        .routes(routes!(assign))
        .routes(routes!(release))
        .routes(routes!(super::plan_import::import))
}

/// Filters of `GET /tasks/board`. None given: the whole board.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BoardQuery {
    /// Only tasks in this status (not with `available`).
    pub status: Option<TaskStatus>,
    /// Only tasks held by or reserved for this agent; with `available`, the agent asking.
    pub agent: Option<String>,
    /// Only tasks of this feature.
    pub feature: Option<String>,
    /// Only tasks of this wave.
    pub wave: Option<u32>,
    /// Only tasks that can be claimed now: pending, unblocked, unassigned or reserved for `agent`.
    pub available: Option<bool>,
}

/// The board, or the tasks matching the filters, oldest first.
#[utoipa::path(get, path = "/tasks/board", tag = "board", params(BoardQuery),
    responses((status = 200, body = TaskList), (status = 400, body = ErrorBody)))]
async fn list(
    state: axum::extract::State<AppState>,
    ApiQuery(q): ApiQuery<BoardQuery>,
) -> ApiResult<axum::response::Response> {
    let available = q.available.unwrap_or(false);
    if available && q.status.is_some() {
        return Err(ApiError::bad_request("`status` and `available=true` cannot be combined")
            .with_hint("available tasks are pending ones; drop `status`"));
    }
    if let Some(a) = &q.agent {
        agent_id(a)?;
    }
    // Same query, same newest event: the answer kept last time (see `listing`).
    let query = format!("{available}|{:?}|{:?}|{:?}|{:?}", q.status, q.agent, q.feature, q.wave);
    let from = *state.events().subscribe().borrow();
    let kept = state.clone();
    // A listing can be megabytes of JSON (10k tasks): it is written on the
    // store's blocking thread, into a buffer sized for it, not on the
    // runtime's workers through a buffer grown by doubling.
    let body = state
        .with_store(move |store| {
            // Read before the tasks, so a write in between is never kept as older.
            let newest = crate::feed::newest_id(store, from)?;
            if let Some(body) = kept.listings().get(&query, newest) {
                return Ok(body);
            }
            let tasks = if available {
                let filter = TaskFilter { feature: q.feature, wave: q.wave, group: None };
                store.available(q.agent.as_deref().unwrap_or(""), &filter)?
            } else {
                let filter = ListFilter {
                    status: q.status.map(Into::into),
                    assignee: q.agent,
                    feature: q.feature,
                    wave: q.wave,
                };
                store.list(&filter)?
            };
            let mut body = Vec::with_capacity(64 + tasks.len() * 512);
            serde_json::to_writer(&mut body, &TaskList::of(tasks))
                .map_err(|e| ApiError::internal(format!("cannot write the task list: {e}")))?;
            let body = axum::body::Bytes::from(body);
            kept.listings().put(query, newest, body.clone());
            Ok(body)
        })
        .await?;
    Ok(axum::response::IntoResponse::into_response(([(axum::http::header::CONTENT_TYPE, "application/json")], body)))
}

/// A new task.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    /// One line saying what to do.
    pub subject: String,
    /// Details.
    #[serde(default)]
    pub description: String,
    /// Ids of tasks that must be completed first.
    #[serde(default)]
    pub blocked_by: Vec<String>,
    /// Who creates it (an agent id; default `api`).
    pub created_by: Option<String>,
    /// The feature it belongs to.
    pub feature: Option<String>,
}

/// Create a task; its id is generated (`t<n>`).
#[utoipa::path(post, path = "/tasks/board", tag = "board", request_body = CreateTask,
    responses((status = 201, body = Task), (status = 403, body = ErrorBody), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn create(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<CreateTask>,
) -> ApiResult<(StatusCode, ApiJson<Task>)> {
    let by = caller.actor(body.created_by, super::API_ACTOR)?;
    agent_id(&by)?;
    for id in &body.blocked_by {
        task_id(id)?;
    }
    if let Some(f) = &body.feature {
        super::ids::feature(f)?;
    }
    let new = NewTask {
        subject: body.subject,
        description: body.description,
        created_by: by,
        blocked_by: body.blocked_by,
        feature: body.feature,
        ..NewTask::default()
    };
    let task = state.with_store(move |store| Ok(store.create_task(new)?)).await?;
    Ok((StatusCode::CREATED, ApiJson(task.into())))
}

/// One task.
#[utoipa::path(get, path = "/tasks/board/{id}", tag = "board", params(("id" = String, Path, description = "The task id")),
    responses((status = 200, body = Task), (status = 404, body = ErrorBody)))]
async fn show(state: axum::extract::State<AppState>, ApiPath(id): ApiPath<String>) -> ApiResult<ApiJson<Task>> {
    task_id(&id)?;
    let task = state.with_store(move |store| Ok(store.task(&id)?)).await?;
    Ok(ApiJson(task.into()))
}

/// The agent acting.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentBody {
    /// The agent's id.
    pub agent: String,
}

/// Claim a task for an agent: an atomic compare-and-swap that succeeds only
/// for a pending, unblocked task that is unassigned or reserved for it.
#[utoipa::path(post, path = "/tasks/board/{id}/claim", tag = "board", request_body = AgentBody,
    params(("id" = String, Path, description = "The task id")),
    responses((status = 200, body = Claimed), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn claim(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AgentBody>,
) -> ApiResult<ApiJson<Claimed>> {
    task_id(&id)?;
    agent_id(&body.agent)?;
    caller.act_as(&body.agent)?;
    let claim = state.with_store(move |store| Ok(store.claim(&id, &body.agent)?)).await?;
    Ok(ApiJson(Claimed { task: claim.task.into(), already_held: claim.already_held }))
}

/// Complete a task the agent holds. The `on_task_completed` quality gate runs
/// first (as for `troupe board complete`); its refusal leaves the task in
/// progress and answers 422 with what failed.
#[utoipa::path(post, path = "/tasks/board/{id}/complete", tag = "board", request_body = AgentBody,
    params(("id" = String, Path, description = "The task id")),
    responses((status = 200, body = Completed), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn complete(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AgentBody>,
) -> ApiResult<ApiJson<Completed>> {
    use troupe_gate::run::{CompletionRefused, gate_task_completion};
    task_id(&id)?;
    agent_id(&body.agent)?;
    caller.act_as(&body.agent)?;
    let root = state.layout().root().to_path_buf();
    let done = state
        .with_store(move |store| {
            let agent = body.agent;
            let task = store.task(&id)?;
            if task.assignee.as_deref() != Some(agent.as_str()) || task.status != troupe_store::TaskStatus::InProgress {
                // The store's own refusal, before any gate runs.
                store.complete(&id, &agent)?;
            }
            // The engine decides which `[gates]` command applies; a
            // registered agent names its own.
            let (engine, name) = match store.agent(&agent) {
                Ok(a) => (Some(a.engine), Some(a.name)),
                Err(_) => (None, None),
            };
            let warning = match gate_task_completion(&root, &id, &agent, name, engine.as_deref()) {
                Ok(w) => w,
                Err(CompletionRefused::Config(e)) => {
                    return Err(ApiError::internal(format!("on_task_completed gate: {e}")));
                }
                Err(CompletionRefused::Failed(run)) => {
                    let mut message = format!(
                        "the on_task_completed quality gate refused to complete {id}: {} `{}` failed ({})",
                        run.label, run.command, run.detail
                    );
                    if !run.tail.is_empty() {
                        message.push('\n');
                        message.push_str(&run.tail);
                    }
                    return Err(ApiError::new(ErrorKind::GateRefused, message)
                        .with_hint("fix what failed, then complete the task again; it stays in progress"));
                }
            };
            let done = store.complete(&id, &agent)?;
            Ok(Completed { task: done.task.into(), unblocked: done.unblocked, warning })
        })
        .await?;
    Ok(ApiJson(done))
}

/// Who reserves a task for whom.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignBody {
    /// The agent the task is reserved for.
    pub agent: String,
    /// Who assigns it (default `api`).
    pub by: Option<String>,
}

/// Reserve a pending task for an agent.
#[utoipa::path(post, path = "/tasks/board/{id}/assign", tag = "board", request_body = AssignBody,
    params(("id" = String, Path, description = "The task id")),
    responses((status = 200, body = Task), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn assign(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AssignBody>,
) -> ApiResult<ApiJson<Task>> {
    task_id(&id)?;
    agent_id(&body.agent)?;
    let by = caller.actor(body.by, super::API_ACTOR)?;
    agent_id(&by)?;
    let task = state.with_store(move |store| Ok(store.assign(&id, &body.agent, &by)?)).await?;
    Ok(ApiJson(task.into()))
}

/// Who releases a task.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    /// Release only if this agent holds or is reserved the task; absent: unconditionally.
    pub agent: Option<String>,
    /// Who releases it (default `api`).
    pub by: Option<String>,
}

/// Put a task back to pending and unassigned.
#[utoipa::path(post, path = "/tasks/board/{id}/release", tag = "board", request_body = ReleaseBody,
    params(("id" = String, Path, description = "The task id")),
    responses((status = 200, body = Task), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn release(
    state: axum::extract::State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReleaseBody>,
) -> ApiResult<ApiJson<Task>> {
    task_id(&id)?;
    if let Some(a) = &body.agent {
        agent_id(a)?;
    }
    // An agent releases only what it holds or is reserved: never unconditionally.
    let holder = match &caller {
        Caller::Agent(me) => Some(caller.actor(body.agent, me)?),
        Caller::Person => body.agent,
    };
    let by = caller.actor(body.by, super::API_ACTOR)?;
    agent_id(&by)?;
    let task = state.with_store(move |store| Ok(store.release(&id, holder.as_deref(), &by)?)).await?;
    Ok(ApiJson(task.into()))
}
