//! Agents: every teammate with role, engine, model, status (a teammate whose
//! process is gone is shown dead, never running), current tool call, elapsed
//! time, turns and cost; and a teammate's page, which streams its normalised
//! log (gate denials highlighted) and sends it a message or a shutdown request
//! through `POST /messages`.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::PathBuf;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::Value;
use troupe_store::Agent;

use super::html::{esc, page, seg};
use super::{Page, blocking, fragment, last_event};
use crate::error::{ApiError, ApiResult};
use crate::rest::ids::agent_id;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui/agents", get(agents_page))
        .route("/ui/fragment/agents", get(agents_fragment))
        .route("/ui/agents/{id}", get(agent_page))
        .route("/ui/fragment/log/{id}", get(log_fragment))
}

/// Registry agents with the ids of the stale ones (process gone, status unfinished).
async fn registry(state: &AppState) -> ApiResult<(Vec<Agent>, BTreeSet<String>)> {
    state
        .with_store(|s| {
            let stale = s.stale_agents()?.into_iter().map(|a| a.agent.id).collect();
            Ok((s.agents()?, stale))
        })
        .await
}

/// The status as shown: `dead` when the registry still says it works but its process is gone.
fn shown_status(a: &Agent, stale: &BTreeSet<String>) -> String {
    if stale.contains(&a.id) { format!("dead (was {})", a.status) } else { a.status.to_string() }
}

/// The log's records, one JSON value per complete line, from line `offset`.
fn read_log(path: &std::path::Path, offset: usize, limit: usize) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    // A line still being written is left for the next read.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .skip(offset)
        .take(limit)
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_string())))
        .collect()
}

/// What a log says now: the tool call in flight.
fn current_tool(records: &[Value]) -> Option<String> {
    let mut open: Vec<(String, String)> = Vec::new();
    for r in records {
        let e = &r["event"];
        match e["type"].as_str() {
            Some("tool_use") => {
                open.push((e["id"].as_str().unwrap_or("").to_string(), e["name"].as_str().unwrap_or("").to_string()))
            }
            Some("tool_result") => open.retain(|(id, _)| Some(id.as_str()) != e["id"].as_str()),
            _ => {}
        }
        if r["kind"] == "exited" {
            open.clear();
        }
    }
    open.pop().map(|(_, name)| name)
}

fn log_path(state: &AppState, id: &str) -> PathBuf {
    state.layout().logs_dir().join(format!("{id}.jsonl"))
}

fn elapsed(a: &Agent) -> String {
    let secs = (a.last_event_at.as_second() - a.started_at.as_second()).max(0);
    format!("{}m {:02}s", secs / 60, secs % 60)
}

async fn table(state: &AppState) -> ApiResult<String> {
    let (agents, stale) = registry(state).await?;
    let logs: Vec<PathBuf> = agents.iter().map(|a| log_path(state, &a.id)).collect();
    let costs = crate::rest::project::ledger_costs(state, None).await?;
    let facts = blocking(move || {
        logs.iter()
            .map(|p| (current_tool(&read_log(p, 0, usize::MAX)), crate::rest::project::results(p)))
            .collect::<Vec<_>>()
    })
    .await?;
    let mut out = String::from(
        r#"<table data-testid="agents-table"><thead><tr><th scope="col">Agent</th><th scope="col">Role</th><th scope="col">Engine</th><th scope="col">Model</th><th scope="col">Status</th><th scope="col">Tool call</th><th scope="col">Elapsed</th><th scope="col">Turns</th><th scope="col">Cost</th></tr></thead><tbody>"#,
    );
    for (a, (tool, (turns, _))) in agents.iter().zip(facts) {
        let id = esc(&a.id);
        let cost = costs.get(&a.id).copied().unwrap_or(0.0);
        let _ = write!(
            out,
            r#"<tr data-testid="agent-{id}"><td><a href="/ui/agents/{href}" data-testid="agent-link-{id}">{id}</a></td><td>{role}</td><td data-testid="engine-{id}">{engine}</td><td>{model}</td><td data-testid="status-{id}">{status}</td><td>{tool}</td><td>{elapsed}</td><td>{turns}</td><td>${cost:.4}</td></tr>"#,
            href = seg(&a.id),
            role = esc(&a.role),
            engine = esc(&a.engine),
            model = esc(a.model.as_deref().unwrap_or("")),
            status = esc(&shown_status(a, &stale)),
            tool = esc(tool.as_deref().unwrap_or("")),
            elapsed = elapsed(a),
        );
    }
    out.push_str("</tbody></table>");
    if agents.is_empty() {
        out.push_str(r#"<p data-testid="agents-empty">No agents registered.</p>"#);
    }
    Ok(out)
}

async fn agents_page(State(state): State<AppState>) -> Page {
    let last = last_event(&state).await?;
    let body = format!(r#"<div id="agents" data-page="agents">{}</div>"#, table(&state).await?);
    Ok(Html(page("Agents", "/ui/agents", last, &body)))
}

async fn agents_fragment(State(state): State<AppState>) -> ApiResult<Response> {
    Ok(fragment(table(&state).await?))
}

/// One log record as a list item; a refused tool call is marked as a denial.
fn record(r: &Value) -> String {
    let seq = r["seq"].as_u64().unwrap_or(0);
    let pre = |v: &Value| format!("<pre>{}</pre>", esc(&serde_json::to_string_pretty(v).unwrap_or_default()));
    let (class, text) = match r["kind"].as_str() {
        Some("event") => {
            let e = &r["event"];
            match e["type"].as_str().unwrap_or("") {
                "text" => ("text", esc(e["text"].as_str().unwrap_or(""))),
                "thinking" => ("thinking", format!("<em>{}</em>", esc(e["text"].as_str().unwrap_or("")))),
                "tool_use" => {
                    ("tool", format!("<strong>{}</strong>{}", esc(e["name"].as_str().unwrap_or("")), pre(&e["input"])))
                }
                "tool_result" => {
                    let output = e["output"].as_str().unwrap_or("");
                    let ok = e["ok"].as_bool().unwrap_or(true);
                    let class = if ok {
                        "result"
                    } else if output.contains("denied") || output.contains("blocked by troupe") {
                        "denial"
                    } else {
                        "failed"
                    };
                    let label = match class {
                        "denial" => "DENIED",
                        "failed" => "failed",
                        _ => "ok",
                    };
                    (class, format!("<strong>{label}</strong> <pre>{}</pre>", esc(output)))
                }
                "error" => ("error", esc(e["message"].as_str().unwrap_or(""))),
                "result" => ("outcome", format!("finished: {}", esc(e["output"]["type"].as_str().unwrap_or("")))),
                "usage" => return String::new(),
                _ => ("raw", pre(e)),
            }
        }
        Some("spawned") => (
            "status",
            format!(
                "spawned on {} {} (pid {})",
                esc(r["engine"].as_str().unwrap_or("")),
                esc(r["model"].as_str().unwrap_or("")),
                r["pid"]
            ),
        ),
        Some("exited") => ("status", format!("exited: {}", esc(r["outcome"]["type"].as_str().unwrap_or("")))),
        Some(k) => ("status", esc(k)),
        None => ("raw", pre(r)),
    };
    let testid = if class == "denial" { r#" data-testid="denial""# } else { "" };
    format!(r#"<li class="rec {class}" data-seq="{seq}"{testid}>{text}</li>"#)
}

/// A page of the log from line `offset`, and the offset after it.
fn log_rows(path: &std::path::Path, offset: usize) -> (String, usize) {
    let records = read_log(path, offset, 500);
    let next = offset + records.len();
    (records.iter().map(record).collect(), next)
}

async fn agent_page(State(state): State<AppState>, Path(id): Path<String>) -> Page {
    agent_id(&id)?;
    let last = last_event(&state).await?;
    let (agents, stale) = registry(&state).await?;
    let Some(a) = agents.into_iter().find(|a| a.id == id) else {
        return Err(ApiError::not_found(format!("no agent `{id}`")));
    };
    let path = log_path(&state, &id);
    let (rows, next) = blocking(move || log_rows(&path, 0)).await?;
    let eid = esc(&a.id);
    let body = format!(
        r#"<dl class="facts"><dt>Role</dt><dd>{role}</dd><dt>Engine</dt><dd data-testid="agent-engine">{engine}</dd><dt>Model</dt><dd>{model}</dd>
<dt>Status</dt><dd data-testid="agent-status">{status}</dd><dt>Feature</dt><dd>{feature}</dd><dt>Task</dt><dd>{task}</dd></dl>
<form class="send" data-agent="{eid}" data-testid="message-form"><label for="message">Message to {eid}</label>
<textarea id="message" name="body" rows="2" required data-testid="message-body"></textarea>
<button type="submit" data-testid="send-message">Send</button>
<button type="button" data-act="shutdown" data-testid="request-shutdown">Ask to shut down</button>
<span role="status" aria-live="polite" data-testid="message-status"></span></form>
<h2>Log</h2><ol id="log" class="log" data-page="log" data-agent="{eid}" data-next="{next}" data-testid="log" aria-live="polite">{rows}</ol>"#,
        role = esc(&a.role),
        engine = esc(&a.engine),
        model = esc(a.model.as_deref().unwrap_or("")),
        status = esc(&shown_status(&a, &stale)),
        feature = esc(a.feature.as_deref().unwrap_or("")),
        task = esc(a.task.as_deref().unwrap_or("")),
    );
    Ok(Html(page(&format!("Agent {}", a.id), "/ui/agents", last, &body)))
}

#[derive(Debug, Deserialize)]
struct Offset {
    #[serde(default)]
    offset: usize,
}

/// Log rows after `offset`; the header `x-troupe-next` is where to read next.
async fn log_fragment(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<Offset>,
) -> ApiResult<Response> {
    agent_id(&id)?;
    let path = log_path(&state, &id);
    let (rows, next) = blocking(move || log_rows(&path, q.offset)).await?;
    let mut response = fragment(rows);
    response.headers_mut().insert("x-troupe-next", next.into());
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_denied_call_is_highlighted_and_the_call_in_flight_is_known() {
        let use_ = json!({"seq": 1, "kind": "event", "event": {"type": "tool_use", "id": "c1", "name": "Write", "kind": "file_edit", "input": {"file_path": "x"}}});
        let denied = json!({"seq": 2, "kind": "event", "event": {"type": "tool_result", "id": "c1", "ok": false, "output": "denied by troupe: <rule>"}});
        assert!(record(&denied).contains(r#"class="rec denial" data-seq="2" data-testid="denial""#));
        assert!(record(&denied).contains("&lt;rule&gt;"));
        assert_eq!(current_tool(std::slice::from_ref(&use_)).as_deref(), Some("Write"));
        assert_eq!(current_tool(&[use_, denied]), None);
    }
}
