//! Approvals (plans waiting for a decision, decided through `POST
//! /tasks/{id}/approve|reject`, the one `plan_decision` writer), the audit log
//! (stats, thinking coverage, denials, export) and runs (teammates, outcome,
//! duration, turns, cost).

use std::collections::BTreeMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::State;
use axum::response::{Html, Response};
use axum::routing::get;
use troupe_store::{AuditFilter, Decision};

use super::html::{esc, page, seg};
use super::{Page, blocking, fragment, last_event};
use crate::error::ApiResult;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui/approvals", get(approvals_page))
        .route("/ui/fragment/approvals", get(approvals_fragment))
        .route("/ui/audit", get(audit_page))
        .route("/ui/runs", get(runs_page))
}

/// Plans no `plan_decision` answers yet, oldest first (the store's
/// `pending_plans`, which `troupe approve --list` shows too).
async fn waiting_plans(state: &AppState) -> ApiResult<Vec<troupe_store::Message>> {
    state.with_store(|s| Ok(s.pending_plans()?)).await
}

async fn approvals(state: &AppState) -> ApiResult<String> {
    let plans = waiting_plans(state).await?;
    let mut out = String::new();
    if plans.is_empty() {
        out.push_str(r#"<p data-testid="approvals-empty">No plan is waiting for approval.</p>"#);
    }
    for p in plans {
        let id = p.id;
        let _ = write!(
            out,
            r#"<article class="plan" data-plan="{id}" data-testid="plan-{id}"><h2>Plan {id} from <a href="/ui/agents/{href}">{from}</a> to {to}</h2>
<pre>{body}</pre><label for="reason-{id}">Reason (needed to reject)</label>
<textarea id="reason-{id}" rows="2" data-testid="reason-{id}"></textarea>
<div class="actions"><button type="button" data-act="approve" data-testid="approve-{id}">Approve</button>
<button type="button" data-act="reject" data-testid="reject-{id}">Reject</button></div></article>"#,
            href = seg(&p.from),
            from = esc(&p.from),
            to = esc(&p.to),
            body = esc(&p.body),
        );
    }
    Ok(out)
}

async fn approvals_page(State(state): State<AppState>) -> Page {
    let last = last_event(&state).await?;
    let body = format!(
        r#"<p role="status" aria-live="polite" data-testid="approval-status"></p><div id="approvals" data-page="approvals" data-testid="approvals">{}</div>"#,
        approvals(&state).await?
    );
    Ok(Html(page("Approvals", "/ui/approvals", last, &body)))
}

async fn approvals_fragment(State(state): State<AppState>) -> ApiResult<Response> {
    Ok(fragment(approvals(&state).await?))
}

fn counts(title: &str, map: &BTreeMap<String, usize>) -> String {
    let mut out = format!(r#"<table><caption>{}</caption><tbody>"#, esc(title));
    for (k, v) in map {
        let _ = write!(out, "<tr><th scope=\"row\">{}</th><td>{v}</td></tr>", esc(k));
    }
    out.push_str("</tbody></table>");
    out
}

async fn audit_page(State(state): State<AppState>) -> Page {
    let last = last_event(&state).await?;
    let records = state.with_store(|s| Ok(s.audit(&AuditFilter::default())?)).await?;
    let stats = troupe_gateway::audit::stats(&records);
    let thinking = troupe_gateway::audit::thinking_stats(&records);
    let mut body = format!(
        r#"<div data-page="audit"><dl class="facts" data-testid="audit-stats"><dt>Calls</dt><dd>{}</dd><dt>Allowed</dt><dd>{}</dd><dt>Denied</dt><dd data-testid="audit-denied">{}</dd><dt>Rate-limited</dt><dd>{}</dd><dt>Denial rate</dt><dd>{:.1}%</dd><dt>Thinking coverage</dt><dd data-testid="thinking-coverage">{:.1}% ({} calls, {} tokens)</dd></dl>
<p><a href="/audit/export?format=csv" data-testid="export-csv" download>Export CSV</a> · <a href="/audit/export" data-testid="export-json">Export JSON</a></p>
<div class="tables">{}{}{}</div><h2>Recent denials</h2><table data-testid="denials"><thead><tr><th scope="col">When</th><th scope="col">Agent</th><th scope="col">Role</th><th scope="col">Tool</th><th scope="col">Reason</th></tr></thead><tbody>"#,
        stats.total,
        stats.allowed,
        stats.denied,
        stats.rate_limited,
        stats.denial_rate * 100.0,
        thinking.thinking_coverage_rate * 100.0,
        thinking.entries_with_thinking,
        thinking.total_thinking_tokens,
        counts("By role", &stats.by_role),
        counts("By tool", &stats.by_tool),
        counts("By agent", &stats.by_agent),
    );
    for r in records.iter().rev().filter(|r| r.decision == Decision::Denied).take(50) {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.at,
            esc(&r.agent),
            esc(&r.role),
            esc(&r.tool),
            esc(r.reason.as_deref().unwrap_or(""))
        );
    }
    body.push_str("</tbody></table></div>");
    Ok(Html(page("Audit", "/ui/audit", last, &body)))
}

async fn runs_page(State(state): State<AppState>) -> Page {
    let last = last_event(&state).await?;
    let agents = state.with_store(|s| Ok(s.agents()?)).await?;
    let mut by_feature: BTreeMap<String, Vec<troupe_store::Agent>> = BTreeMap::new();
    for a in agents {
        by_feature.entry(a.feature.clone().unwrap_or_default()).or_default().push(a);
    }
    let layout = state.layout().clone();
    let runs = blocking(move || {
        by_feature
            .into_iter()
            .map(|(feature, agents)| {
                let start = agents.iter().map(|a| a.started_at).min();
                let end = agents.iter().map(|a| a.last_event_at).max();
                let secs = start.zip(end).map_or(0, |(s, e)| (e.as_second() - s.as_second()).max(0));
                (crate::rest::project::run_of(&layout, feature, agents), secs)
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut body = String::from(r#"<div data-page="runs">"#);
    if runs.is_empty() {
        body.push_str("<p>No runs yet.</p>");
    }
    for (run, secs) in runs {
        let f = esc(if run.feature.is_empty() { "(no feature)" } else { &run.feature });
        let _ = write!(
            body,
            r#"<section data-testid="run-{f}"><h2>{f} <small>{phase}</small></h2><p>{m}m {s:02}s · {turns} turns · ${cost:.4}</p><table><thead><tr><th scope="col">Teammate</th><th scope="col">Role</th><th scope="col">Engine</th><th scope="col">Status</th><th scope="col">Outcome</th><th scope="col">Turns</th><th scope="col">Cost</th></tr></thead><tbody>"#,
            phase = esc(run.phase.as_deref().unwrap_or("")),
            m = secs / 60,
            s = secs % 60,
            turns = run.turns,
            cost = run.cost_usd,
        );
        for t in &run.teammates {
            let _ = write!(
                body,
                r#"<tr><td><a href="/ui/agents/{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>${:.4}</td></tr>"#,
                seg(&t.agent),
                esc(&t.agent),
                esc(&t.role),
                esc(&t.engine),
                esc(&t.status),
                esc(t.outcome.as_deref().unwrap_or("")),
                t.turns,
                t.cost_usd
            );
        }
        body.push_str("</tbody></table></section>");
    }
    body.push_str("</div>");
    Ok(Html(page("Runs", "/ui/runs", last, &body)))
}
