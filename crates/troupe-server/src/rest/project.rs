//! Specs (phase, changelog, design.md/research.md/tasks.yaml, verdict
//! history), runs (teammates, turns, cost, outcome) and the gateway's audit
//! log (stats, denials, export).

use std::io::BufRead;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use troupe_project::Project;
use troupe_project::specs::{SpecFileError, Specs};
use troupe_store::{AuditFilter, Decision};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ids::{agent_id, feature};
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, ErrorBody};
use crate::state::AppState;

/// The files of a spec folder the API reads, by the name a client asks for.
pub const SPEC_FILES: [&str; 4] = ["design.md", "research.md", "tasks.yaml", "verdicts.md"];

/// The routes of specs, runs and audit.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(specs))
        .routes(routes!(spec))
        .routes(routes!(spec_file))
        .routes(routes!(run))
        .routes(routes!(audit_stats))
        .routes(routes!(audit_denials))
        .routes(routes!(audit_export))
}

pub(crate) fn spec_error(e: SpecFileError) -> ApiError {
    match e {
        SpecFileError::NotFound { .. } => {
            ApiError::not_found("no such feature").with_hint("GET /specs lists the features")
        }
        SpecFileError::Malformed { .. } | SpecFileError::NameMismatch { .. } => {
            ApiError::conflict("the feature's spec.yaml cannot be read").with_hint("`troupe doctor` names the problem")
        }
        other => ApiError::internal(other),
    }
}

/// A feature and where it stands.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SpecSummary {
    /// The feature.
    pub feature: String,
    /// Its phase.
    pub phase: String,
}

/// Every feature with a spec, by name.
#[utoipa::path(get, path = "/specs", tag = "specs", responses((status = 200, body = Vec<SpecSummary>)))]
async fn specs(state: axum::extract::State<AppState>) -> ApiResult<ApiJson<Vec<SpecSummary>>> {
    let project = Project::at(state.layout().root());
    let list = tokio::task::spawn_blocking(move || -> ApiResult<Vec<SpecSummary>> {
        let specs = Specs::new(&project);
        let mut out = Vec::new();
        for name in specs.names().map_err(spec_error)? {
            // A spec that cannot be read is listed with its problem, not hidden.
            let phase = specs.load(&name).map(|s| s.phase.to_string()).unwrap_or_else(|_| "unreadable".into());
            out.push(SpecSummary { feature: name, phase });
        }
        Ok(out)
    });
    list.await.map_err(ApiError::internal)?.map(ApiJson)
}

/// A feature's spec.yaml (phase, approvals, changelog, engine_override, …), as JSON.
#[utoipa::path(get, path = "/specs/{feature}", tag = "specs", params(("feature" = String, Path, description = "The feature")),
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn spec(
    state: axum::extract::State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<ApiJson<serde_json::Value>> {
    feature(&name)?;
    let project = Project::at(state.layout().root());
    let spec = tokio::task::spawn_blocking(move || Specs::new(&project).load(&name))
        .await
        .map_err(ApiError::internal)?
        .map_err(spec_error)?;
    Ok(ApiJson(serde_json::to_value(spec).map_err(ApiError::internal)?))
}

/// A file of a spec folder.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SpecFile {
    /// `design.md`, `research.md`, `tasks.yaml` or `verdicts.md` (the verdict history).
    pub name: String,
    /// Its text.
    pub content: String,
}

/// One of a feature's documents: design.md, research.md, tasks.yaml, or verdicts.md (verdict history).
#[utoipa::path(get, path = "/specs/{feature}/files/{name}", tag = "specs",
    params(("feature" = String, Path, description = "The feature"), ("name" = String, Path, description = "design.md, research.md, tasks.yaml or verdicts.md")),
    responses((status = 200, body = SpecFile), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn spec_file(
    state: axum::extract::State<AppState>,
    ApiPath((name, file)): ApiPath<(String, String)>,
) -> ApiResult<ApiJson<SpecFile>> {
    feature(&name)?;
    // A fixed list, never a path from the request.
    let Some(file) = SPEC_FILES.iter().find(|f| **f == file) else {
        return Err(ApiError::bad_request(format!("`{}` is not a spec document", file.escape_debug()))
            .with_hint(format!("ask for one of {}", SPEC_FILES.join(", "))));
    };
    let path = state.layout().spec_dir(&name).join(file);
    match tokio::fs::read_to_string(&path).await {
        Ok(content) => Ok(ApiJson(SpecFile { name: file.to_string(), content })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ApiError::not_found(format!("feature `{name}` has no {file} yet")))
        }
        Err(e) => Err(ApiError::internal(format!("{}: {e}", path.display()))),
    }
}

/// One teammate of a run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunTeammate {
    /// Its agent id.
    pub agent: String,
    /// Its role.
    pub role: String,
    /// Its engine.
    pub engine: String,
    /// Its registry status.
    pub status: String,
    /// Turns its engine reported.
    pub turns: u64,
    /// What its model turns cost in US dollars, as the usage ledger booked them.
    pub cost_usd: f64,
    /// How its last launch ended (`success`, `error_max_turns`, …), once it ended.
    pub outcome: Option<String>,
}

/// A feature's run: its teammates with their turns, cost and outcome.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Run {
    /// The feature.
    pub feature: String,
    /// Its spec's phase (the run's progress).
    pub phase: Option<String>,
    /// Its teammates, oldest first.
    pub teammates: Vec<RunTeammate>,
    /// Turns of every teammate.
    pub turns: u64,
    /// Cost of every teammate, in US dollars.
    pub cost_usd: f64,
}

/// The run of a feature: teammates (from the registry), cost (from the usage ledger), turns and outcome (from their logs).
#[utoipa::path(get, path = "/runs/{feature}", tag = "runs", params(("feature" = String, Path, description = "The feature")),
    responses((status = 200, body = Run), (status = 400, body = ErrorBody)))]
async fn run(state: axum::extract::State<AppState>, ApiPath(name): ApiPath<String>) -> ApiResult<ApiJson<Run>> {
    feature(&name)?;
    let f = name.clone();
    let agents = state.with_store(move |s| Ok(s.agents()?)).await?;
    let agents: Vec<_> = agents.into_iter().filter(|a| a.feature.as_deref() == Some(f.as_str())).collect();
    let costs = ledger_costs(&state, Some(name.clone())).await?;
    let layout = state.layout().clone();
    let run = tokio::task::spawn_blocking(move || run_of(&layout, name, agents, &costs));
    run.await.map_err(ApiError::internal).map(ApiJson)
}

/// What each agent's model turns cost, from the usage ledger (of one feature,
/// or every one): the one source of cost, as `troupe cost` reads it.
pub(crate) async fn ledger_costs(
    state: &AppState,
    feature: Option<String>,
) -> ApiResult<std::collections::HashMap<String, f64>> {
    let filter = troupe_store::UsageFilter { feature, ..Default::default() };
    let rows = state.with_store(move |s| Ok(s.usage(&filter)?)).await?;
    let mut costs = std::collections::HashMap::new();
    for r in rows {
        *costs.entry(r.usage.context.agent).or_insert(0.0) += r.usage.cost_usd;
    }
    Ok(costs)
}

/// The run of feature `name` made by `agents` (its teammates in the registry):
/// cost from `costs` (the ledger's, by agent), turns and outcome from their
/// logs, the phase from spec.yaml.
pub(crate) fn run_of(
    layout: &troupe_core::layout::Layout,
    name: String,
    agents: Vec<troupe_store::Agent>,
    costs: &std::collections::HashMap<String, f64>,
) -> Run {
    let project = Project::at(layout.root());
    let phase = Specs::new(&project).load(&name).ok().map(|s| s.phase.to_string());
    let teammates: Vec<RunTeammate> = agents
        .into_iter()
        .map(|a| {
            let (turns, outcome) = results(&layout.logs_dir().join(format!("{}.jsonl", a.id)));
            let cost_usd = costs.get(&a.id).copied().unwrap_or(0.0);
            RunTeammate {
                agent: a.id,
                role: a.role,
                engine: a.engine,
                status: a.status.to_string(),
                turns,
                cost_usd,
                outcome,
            }
        })
        .collect();
    let turns = teammates.iter().map(|t| t.turns).sum();
    let cost_usd = teammates.iter().map(|t| t.cost_usd).sum();
    Run { feature: name, phase, teammates, turns, cost_usd }
}

/// Turns and last outcome from the `result` events of a teammate's log (its
/// cost is the usage ledger's, [`ledger_costs`]).
pub(crate) fn results(log: &std::path::Path) -> (u64, Option<String>) {
    let (mut turns, mut outcome) = (0, None);
    let Ok(file) = std::fs::File::open(log) else { return (turns, outcome) };
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(record) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let event = &record["event"];
        if event["type"] != "result" {
            continue;
        }
        let output = &event["output"];
        turns += output["stats"]["num_turns"].as_u64().unwrap_or(0);
        outcome = output["type"].as_str().map(str::to_string);
    }
    (turns, outcome)
}

/// Which audit records.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only this agent's calls.
    pub agent: Option<String>,
    /// At most this many (denials: default 10).
    pub limit: Option<u32>,
    /// `json` (default) or `csv` (export only).
    pub format: Option<String>,
}

fn audit_filter(q: &AuditQuery, decision: Option<Decision>, limit: Option<u32>) -> ApiResult<AuditFilter> {
    if let Some(a) = &q.agent {
        agent_id(a)?;
    }
    Ok(AuditFilter { agent: q.agent.clone(), decision, limit, ..AuditFilter::default() })
}

/// Counts of allowed, denied and rate-limited gateway calls, by role, tool and agent.
#[utoipa::path(get, path = "/audit/stats", tag = "audit", params(AuditQuery), responses((status = 200, body = Object)))]
async fn audit_stats(
    state: axum::extract::State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<ApiJson<serde_json::Value>> {
    let filter = audit_filter(&q, None, None)?;
    let records = state.with_store(move |s| Ok(s.audit(&filter)?)).await?;
    let stats = troupe_gateway::audit::stats(&records);
    Ok(ApiJson(serde_json::to_value(stats).map_err(ApiError::internal)?))
}

/// The most recent denied calls, newest first.
#[utoipa::path(get, path = "/audit/denials", tag = "audit", params(AuditQuery), responses((status = 200, body = Vec<Object>)))]
async fn audit_denials(
    state: axum::extract::State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<ApiJson<serde_json::Value>> {
    let filter = audit_filter(&q, Some(Decision::Denied), Some(q.limit.unwrap_or(10)))?;
    let records = state.with_store(move |s| Ok(s.audit(&filter)?)).await?;
    Ok(ApiJson(serde_json::to_value(records).map_err(ApiError::internal)?))
}

/// Every audit record, as JSON or CSV (`format=csv`).
#[utoipa::path(get, path = "/audit/export", tag = "audit", params(AuditQuery),
    responses((status = 200, body = Vec<Object>), (status = 200, content_type = "text/csv", body = String)))]
async fn audit_export(state: axum::extract::State<AppState>, ApiQuery(q): ApiQuery<AuditQuery>) -> ApiResult<Response> {
    let csv = match q.format.as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!("unknown format `{}`", other.escape_debug()))
                .with_hint("use format=json or format=csv"));
        }
    };
    let filter = audit_filter(&q, None, q.limit)?;
    let records = state.with_store(move |s| Ok(s.audit(&filter)?)).await?;
    if csv {
        Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], troupe_gateway::audit::to_csv(&records))
            .into_response())
    } else {
        Ok(ApiJson(serde_json::to_value(records).map_err(ApiError::internal)?).into_response())
    }
}
