//! `GET /events`: the store's persistent event log as server-sent events.
//!
//! Every event is sent with its store id as the SSE `id`, read from the log
//! itself (never from memory), so a client that reconnects with
//! `Last-Event-ID` (or `?after=`) gets exactly the events after that id:
//! across a dropped connection, and across a server killed and restarted.
//! New events are noticed through [`crate::feed::EventFeed`], which sees the
//! commits of every process writing the store.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiQuery, ApiResult, ErrorBody};
use crate::state::AppState;

/// How many events one read of the log takes.
const PAGE: u32 = 500;

/// The events route.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(events))
}

/// Which events a stream carries, and where it starts.
#[derive(Debug, Default, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// Start after this event id (what `Last-Event-ID` says; the header wins).
    /// Neither: the whole log from its first event.
    pub after: Option<i64>,
    /// Only events of this feature (a task `<feature>/…`, or `feature` in the data).
    pub feature: Option<String>,
    /// Only events caused by or about this agent (actor, subject, `to` or `assignee`).
    pub agent: Option<String>,
    /// Only events of these kinds, comma-separated (`task_claimed,task_completed`).
    pub kind: Option<String>,
}

/// One event of the log, as the `data` of an SSE message (whose `id` is `id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// The store's id: increasing, never reused.
    pub id: i64,
    /// RFC 3339.
    #[schema(value_type = String, format = DateTime)]
    pub at: jiff::Timestamp,
    /// What happened (`task_claimed`, `message_sent`, …).
    pub kind: String,
    /// Who caused it.
    pub actor: Option<String>,
    /// What it happened to (a task id, a message id, an agent id).
    pub subject: Option<String>,
    /// Details.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

impl From<troupe_store::Event> for EventView {
    fn from(e: troupe_store::Event) -> Self {
        EventView { id: e.id, at: e.at, kind: e.kind, actor: e.actor, subject: e.subject, data: e.data }
    }
}

/// What a stream keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    feature: Option<String>,
    agent: Option<String>,
    kinds: Vec<String>,
}

impl Filter {
    fn of(q: &EventQuery) -> Self {
        let kinds = q
            .kind
            .as_deref()
            .map(|k| k.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        Filter { feature: q.feature.clone(), agent: q.agent.clone(), kinds }
    }

    fn keeps(&self, e: &troupe_store::Event) -> bool {
        let data_is = |key: &str, want: &str| e.data.get(key).and_then(|v| v.as_str()) == Some(want);
        if !self.kinds.is_empty() && !self.kinds.contains(&e.kind) {
            return false;
        }
        if let Some(f) = &self.feature {
            let subject = e.subject.as_deref().unwrap_or_default();
            let of_feature = data_is("feature", f)
                || subject == f
                || subject.strip_prefix(f.as_str()).is_some_and(|rest| rest.starts_with('/'));
            if !of_feature {
                return false;
            }
        }
        if let Some(a) = &self.agent {
            let about = e.actor.as_deref() == Some(a)
                || e.subject.as_deref() == Some(a)
                || data_is("to", a)
                || data_is("assignee", a);
            if !about {
                return false;
            }
        }
        true
    }
}

/// The event log as server-sent events, oldest first, then live. Each SSE
/// message has the store id as `id` and an [`EventView`] as JSON `data`.
/// Reconnect with `Last-Event-ID` to receive exactly what was missed.
#[utoipa::path(get, path = "/events", tag = "events", params(EventQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id")),
    responses((status = 200, description = "An endless stream of events", content_type = "text/event-stream", body = EventView),
        (status = 400, body = ErrorBody)))]
async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let after = resume_point(&headers, q.after)?;
    Ok(stream(&state, after, Filter::of(&q), None))
}

/// How a task event's current card is rendered (the dashboard's), for a
/// stream that carries it along (`/ui/events`).
pub(crate) type RenderCard = fn(&troupe_store::Task) -> String;

/// The resume point a client asked for: `Last-Event-ID` wins over `?after=`.
pub(crate) fn resume_point(headers: &HeaderMap, after: Option<i64>) -> ApiResult<i64> {
    match headers.get("last-event-id") {
        Some(v) => v.to_str().ok().and_then(|s| s.trim().parse::<i64>().ok()).ok_or_else(|| {
            ApiError::bad_request("`Last-Event-ID` is not an event id")
                .with_hint("send the `id` of the last event received")
        }),
        None => Ok(after.unwrap_or(0)),
    }
}

/// The log after `after` as server-sent events. With `cards`, every task
/// event also carries its task's card as rendered now (`card`: HTML, or null
/// when the task is gone), read in the same store call as the event: the
/// dashboard then moves a card as the event arrives, with no request of its own.
pub(crate) fn stream(
    state: &AppState,
    after: i64,
    filter: Filter,
    cards: Option<RenderCard>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>> {
    let cursor = Cursor {
        state: state.clone(),
        after,
        wake: state.events().subscribe(),
        closing: state.closing().clone(),
        pending: VecDeque::new(),
        filter,
        cards,
    };
    Sse::new(follow(cursor)).keep_alive(KeepAlive::default())
}

/// A stream's position in the log.
struct Cursor {
    state: AppState,
    /// The last event id read from the log (kept or filtered out).
    after: i64,
    wake: watch::Receiver<i64>,
    closing: CancellationToken,
    /// Events read and kept.
    pending: VecDeque<WithCard>,
    filter: Filter,
    cards: Option<RenderCard>,
}

/// Events after the cursor, read page by page, then as the log grows; ends
/// when the server shuts down.
fn follow(cursor: Cursor) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(cursor, |mut c| async move {
        loop {
            if let Some((e, card)) = c.pending.pop_front() {
                return Some((Ok(to_sse(e, card)), c));
            }
            // Marked seen before reading, so a commit during the read wakes
            // the wait below at once.
            c.wake.borrow_and_update();
            let (after, filter, cards) = (c.after, c.filter.clone(), c.cards);
            let page = c.state.with_store(move |store| read_page(store, after, &filter, cards)).await;
            match page {
                Ok((last, events)) if last > c.after => {
                    c.after = last;
                    c.pending.extend(events);
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read the event log for a stream"),
            }
            tokio::select! {
                changed = c.wake.changed() => if changed.is_err() { return None },
                () = c.closing.cancelled() => return None,
            }
        }
    })
}

/// An event and, when the stream carries cards and it is a task event, its
/// task's card (`Some(None)`: the task is gone).
type WithCard = (troupe_store::Event, Option<Option<String>>);

/// The next page of the log after `after`: the last id read, and the events
/// `filter` keeps, each with its task's card when `cards` renders them.
fn read_page(
    store: &dyn troupe_store::Store,
    after: i64,
    filter: &Filter,
    cards: Option<RenderCard>,
) -> ApiResult<(i64, Vec<WithCard>)> {
    let events = store.events_since(after, PAGE)?;
    let last = events.last().map_or(after, |e| e.id);
    let mut kept = Vec::with_capacity(events.len());
    for e in events.into_iter().filter(|e| filter.keeps(e)) {
        let card = match (cards, e.kind.starts_with("task_"), e.subject.as_deref()) {
            (Some(render), true, Some(task)) => Some(match store.task(task) {
                Ok(t) => Some(render(&t)),
                Err(troupe_store::StoreError::TaskNotFound(_)) => None,
                Err(err) => return Err(err.into()),
            }),
            _ => None,
        };
        kept.push((e, card));
    }
    Ok((last, kept))
}

/// An event as an SSE message; `card`, when the stream carries cards, is
/// added to the JSON data beside the [`EventView`]'s fields.
fn to_sse(e: troupe_store::Event, card: Option<Option<String>>) -> SseEvent {
    let id = e.id.to_string();
    let view = EventView::from(e);
    let data = match card {
        None => serde_json::to_string(&view),
        Some(card) => serde_json::to_value(&view).and_then(|mut v| {
            v["card"] = card.map_or(serde_json::Value::Null, serde_json::Value::String);
            serde_json::to_string(&v)
        }),
    };
    SseEvent::default().id(id).data(data.unwrap_or_else(|_| "{}".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, actor: Option<&str>, subject: Option<&str>, data: serde_json::Value) -> troupe_store::Event {
        troupe_store::Event {
            id: 1,
            at: jiff::Timestamp::UNIX_EPOCH,
            kind: kind.into(),
            actor: actor.map(Into::into),
            subject: subject.map(Into::into),
            data,
        }
    }

    #[test]
    fn filters_keep_what_they_name() {
        let claimed = event("task_claimed", Some("builder-1"), Some("login/1.1"), serde_json::json!({}));
        let sent = event("message_sent", Some("lead"), Some("7"), serde_json::json!({"to": "builder-1"}));
        let q = |f: Option<&str>, a: Option<&str>, k: Option<&str>| {
            Filter::of(&EventQuery {
                after: None,
                feature: f.map(Into::into),
                agent: a.map(Into::into),
                kind: k.map(Into::into),
            })
        };
        assert!(q(Some("login"), None, None).keeps(&claimed));
        assert!(!q(Some("log"), None, None).keeps(&claimed), "a prefix of a feature is another feature");
        assert!(q(None, Some("builder-1"), None).keeps(&sent), "messages to the agent are about it");
        assert!(!q(None, Some("builder-2"), None).keeps(&sent));
        assert!(q(None, None, Some("task_completed, task_claimed")).keeps(&claimed));
        assert!(!q(None, None, Some("task_completed")).keeps(&claimed));
    }
}
