//! The board: tasks by status (pending, in progress, blocked, completed),
//! grouped by feature and wave, with blockers, assignee and group files;
//! claim, assign and release through the REST endpoints; filters as a plain
//! GET form. The live script follows `/ui/events`, whose task events carry
//! their card as rendered now, and replaces the whole board when a plan changes.
//!
//! A column shows its first [`CARDS`] cards and a link to the rest (the
//! group's own page, `all=1`), so a board of ten thousand tasks paints as
//! fast as one of a few hundred; the counts are always the whole column's.
//! The live script moves a card into a column shown whole and adjusts the
//! counts; a change it cannot place (into a cut column) fetches the group again.

use std::collections::BTreeMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::{Query, State};
use axum::response::IntoResponse;
use axum::response::{Html, Response};
use axum::routing::get;
use serde::Deserialize;
use troupe_store::{ListFilter, Task, TaskStatus};

use super::html::{esc, page, seg};
use super::{Page, fragment, last_event};
use crate::error::{ApiError, ApiResult};
use crate::rest::views;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(board_page))
        .route("/ui/fragment/board", get(board_fragment))
        .route("/ui/events", get(board_events))
}

/// Where the live script resumes (`Last-Event-ID` wins).
#[derive(Debug, Default, Deserialize)]
struct Resume {
    after: Option<i64>,
}

/// `GET /events`'s stream for the live script: every event, and with each
/// task event its card as rendered now, so the page moves the card the
/// moment its event arrives (no request of its own, nothing rendered twice).
async fn board_events(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Query(q): Query<Resume>,
) -> ApiResult<Response> {
    let after = crate::events::resume_point(&headers, q.after)?;
    Ok(crate::events::stream(&state, after, crate::events::Filter::default(), Some(card)).into_response())
}

/// The board's filters (all optional; empty fields of the form are ignored).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filters {
    status: Option<String>,
    agent: Option<String>,
    feature: Option<String>,
    wave: Option<String>,
    /// `1`: every card of every column, not the first [`CARDS`].
    all: Option<String>,
}

impl Filters {
    fn of(&self) -> ApiResult<ListFilter> {
        let some = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let status = match some(&self.status) {
            None => None,
            Some(s) => Some(
                serde_json::from_value::<views::TaskStatus>(serde_json::Value::String(s.clone()))
                    .map_err(|_| {
                        ApiError::bad_request(format!("`{}` is not a task status", s.escape_debug()))
                            .with_hint("pending, in_progress or completed")
                    })?
                    .into(),
            ),
        };
        let wave = match some(&self.wave) {
            None => None,
            Some(w) => Some(w.trim().parse().map_err(|_| ApiError::bad_request("`wave` is a number"))?),
        };
        Ok(ListFilter { status, assignee: some(&self.agent), feature: some(&self.feature), wave })
    }

    fn active(&self) -> bool {
        [&self.status, &self.agent, &self.feature, &self.wave]
            .iter()
            .any(|v| v.as_deref().is_some_and(|s| !s.is_empty()))
    }
}

/// Cards a column shows before its "show all" link.
pub(super) const CARDS: usize = 40;

/// The columns, in board order: (key, heading).
const COLUMNS: [(&str, &str); 4] =
    [("pending", "Pending"), ("in_progress", "In progress"), ("blocked", "Blocked"), ("completed", "Completed")];

fn column(t: &Task) -> &'static str {
    match t.status {
        TaskStatus::Pending if t.blocked => "blocked",
        TaskStatus::Pending => "pending",
        TaskStatus::InProgress => "in_progress",
        TaskStatus::Completed => "completed",
    }
}

/// The key of a task's group: its feature and wave.
fn group_key(t: &Task) -> String {
    format!("{}|{}", t.feature.as_deref().unwrap_or(""), t.wave.map(|w| w.to_string()).unwrap_or_default())
}

/// One task's card.
pub(super) fn card(t: &Task) -> String {
    let id = esc(&t.id);
    let mut out = format!(
        r#"<article class="task {col}" id="task-{anchor}" data-testid="task-{id}" data-task="{id}" data-col="{col}" data-group="{group}">
<h4><code>{id}</code> <span class="subject">{subject}</span></h4><p class="meta">"#,
        col = column(t),
        anchor = seg(&t.id),
        group = esc(&group_key(t)),
        subject = esc(&t.subject),
    );
    match &t.assignee {
        Some(a) => {
            let _ = write!(out, r#"<a href="/ui/agents/{}" data-testid="assignee-{id}">{}</a>"#, seg(a), esc(a));
        }
        None => out.push_str("unassigned"),
    }
    if let Some(g) = &t.group {
        let _ = write!(out, " · group {}", esc(g));
    }
    out.push_str("</p>");
    if !t.files.is_empty() {
        let files: Vec<String> = t.files.iter().map(|f| format!("<code>{}</code>", esc(f))).collect();
        let _ = write!(out, r#"<p class="files">{}</p>"#, files.join(" "));
    }
    if !t.blocked_by.is_empty() {
        let links: Vec<String> = t
            .blocked_by
            .iter()
            .map(|b| format!(r##"<a href="#task-{}" data-testid="blocker-{id}-{}">{}</a>"##, seg(b), esc(b), esc(b)))
            .collect();
        let _ = write!(out, r#"<p class="blockers" data-testid="blockers-{id}">blocked by {}</p>"#, links.join(", "));
    }
    if t.status != TaskStatus::Completed {
        let _ = write!(
            out,
            r#"<div class="actions"><button type="button" data-act="claim" data-testid="claim-{id}">Claim</button><button type="button" data-act="assign" data-testid="assign-{id}">Assign</button><button type="button" data-act="release" data-testid="release-{id}">Release</button></div>"#
        );
    }
    out.push_str("</article>");
    out
}

impl Filters {
    /// How many cards a column shows: all with `all=1`, else [`CARDS`].
    fn limit(&self) -> usize {
        if self.all.as_deref().is_some_and(|a| !a.is_empty() && a != "0") { usize::MAX } else { CARDS }
    }
}

/// The groups of the board, each with its four columns of at most `limit` cards.
fn groups(tasks: &[Task], limit: usize) -> String {
    let mut by_group: BTreeMap<(String, Option<u32>), Vec<&Task>> = BTreeMap::new();
    for t in tasks {
        by_group.entry((t.feature.clone().unwrap_or_default(), t.wave)).or_default().push(t);
    }
    let mut out = String::with_capacity(tasks.len() * 480);
    if tasks.is_empty() {
        out.push_str(r#"<p data-testid="board-empty">No tasks on the board.</p>"#);
    }
    for ((feature, wave), tasks) in by_group {
        let key = esc(&format!("{feature}|{}", wave.map(|w| w.to_string()).unwrap_or_default()));
        let title = match (feature.as_str(), wave) {
            ("", _) => "No feature".to_string(),
            (f, Some(w)) => format!("{} · wave {w}", esc(f)),
            (f, None) => esc(f),
        };
        let cut = COLUMNS.iter().any(|(col, _)| tasks.iter().filter(|t| column(t) == *col).count() > limit);
        let _ = write!(
            out,
            r#"<section class="group" data-group="{key}" data-cut="{cut}" data-testid="group-{key}"><h2>{title}</h2><div class="cols">"#
        );
        for (col, heading) in COLUMNS {
            let count = tasks.iter().filter(|t| column(t) == col).count();
            let _ = write!(
                out,
                r#"<div class="col" data-col="{col}" data-cut="{}"><h3>{heading} <span class="count">{count}</span></h3>"#,
                count > limit
            );
            for t in tasks.iter().filter(|t| column(t) == col).take(limit) {
                out.push_str(&card(t));
            }
            if count > limit {
                let mut all = format!("/?feature={}", seg(&feature));
                if let Some(w) = wave {
                    let _ = write!(all, "&amp;wave={w}");
                }
                let _ = write!(
                    out,
                    r#"<p class="more"><a href="{all}&amp;all=1" data-testid="more-{key}-{col}">all {count} {heading}</a></p>"#,
                    heading = heading.to_lowercase()
                );
            }
            out.push_str("</div>");
        }
        out.push_str("</div></section>");
    }
    out
}

async fn tasks(state: &AppState, filters: &Filters) -> ApiResult<Vec<Task>> {
    let filter = filters.of()?;
    state.with_store(move |s| Ok(s.list(&filter)?)).await
}

async fn board_page(State(state): State<AppState>, Query(f): Query<Filters>) -> Page {
    let last = last_event(&state).await?;
    let tasks = tasks(&state, &f).await?;
    let v = |o: &Option<String>| esc(o.as_deref().unwrap_or(""));
    let status_options: String = ["", "pending", "in_progress", "completed"]
        .iter()
        .map(|s| {
            let sel = if f.status.as_deref().unwrap_or("") == *s { " selected" } else { "" };
            format!(r#"<option value="{s}"{sel}>{}</option>"#, if s.is_empty() { "any" } else { s })
        })
        .collect();
    let body = format!(
        r#"<form class="filters" method="get" action="/" data-testid="board-filters">
<label for="f-status">Status</label><select id="f-status" name="status" data-testid="filter-status">{status_options}</select>
<label for="f-agent">Agent</label><input id="f-agent" name="agent" value="{agent}" data-testid="filter-agent">
<label for="f-feature">Feature</label><input id="f-feature" name="feature" value="{feature}" data-testid="filter-feature">
<label for="f-wave">Wave</label><input id="f-wave" name="wave" inputmode="numeric" value="{wave}" data-testid="filter-wave">
<button type="submit" data-testid="filter-apply">Filter</button></form>
<p class="actor"><label for="actor">Claim, assign or release as agent</label>
<input id="actor" value="user" data-testid="actor"> <span role="status" aria-live="polite" data-testid="action-status"></span></p>
<div id="board" data-page="board" data-filtered="{filtered}" data-testid="board">{groups}</div>
<details class="activity" open><summary data-testid="activity-toggle">Activity</summary><ol id="activity" data-testid="activity"></ol></details>"#,
        agent = v(&f.agent),
        feature = v(&f.feature),
        wave = v(&f.wave),
        filtered = f.active(),
        groups = groups(&tasks, f.limit()),
    );
    Ok(Html(page("Board", "/", last, &body)))
}

async fn board_fragment(State(state): State<AppState>, Query(f): Query<Filters>) -> ApiResult<Response> {
    Ok(fragment(groups(&tasks(&state, &f).await?, f.limit())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: TaskStatus, blocked: bool) -> Task {
        let now = jiff::Timestamp::now();
        Task {
            id: id.into(),
            subject: "do <it>".into(),
            description: String::new(),
            status,
            assignee: Some("builder-1".into()),
            created_by: "lead".into(),
            blocked_by: if blocked { vec!["t0".into()] } else { vec![] },
            blocked,
            feature: Some("login".into()),
            wave: Some(1),
            group: Some("G1".into()),
            files: vec!["src/a.rs".into()],
            created_at: now,
            updated_at: now,
            completed_at: None,
        }
    }

    #[test]
    fn cards_land_in_their_column_of_their_group_escaped() {
        let html =
            groups(&[task("login/1.1", TaskStatus::Pending, true), task("t2", TaskStatus::InProgress, false)], CARDS);
        assert!(html.contains(r#"data-group="login|1""#), "{html}");
        assert!(
            html.contains(
                r#"id="task-login%2F1.1" data-testid="task-login/1.1" data-task="login/1.1" data-col="blocked""#
            ),
            "{html}"
        );
        assert!(html.contains("do &lt;it&gt;") && !html.contains("<it>"), "{html}");
        assert!(
            html.contains(r##"blocked by <a href="#task-t0" data-testid="blocker-login/1.1-t0">t0</a>"##),
            "{html}"
        );
        assert!(html.contains(r#"data-col="in_progress" data-group"#), "{html}");
        assert!(html.contains(r#"data-cut="false""#) && !html.contains("class=\"more\""), "{html}");
    }

    #[test]
    fn a_long_column_shows_its_first_cards_its_whole_count_and_a_link_to_the_rest() {
        let tasks: Vec<Task> = (0..5).map(|i| task(&format!("login/{i}"), TaskStatus::Pending, false)).collect();
        let html = groups(&tasks, 2);
        assert_eq!(html.matches("<article").count(), 2, "{html}");
        assert!(html.contains(r#"data-cut="true""#), "{html}");
        assert!(html.contains(r#"Pending <span class="count">5</span>"#), "{html}");
        assert!(
            html.contains(
                r#"<a href="/?feature=login&amp;wave=1&amp;all=1" data-testid="more-login|1-pending">all 5 pending</a>"#
            ),
            "{html}"
        );
        let all = Filters { all: Some("1".into()), ..Filters::default() };
        assert_eq!(groups(&tasks, all.limit()).matches("<article").count(), 5);
        assert_eq!(Filters::default().limit(), CARDS);
    }
}
