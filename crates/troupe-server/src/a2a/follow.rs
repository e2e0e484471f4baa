//! Following the store's event log: the one source of every stream. A task's
//! stream is its snapshot, then each `a2a_task` event of it after the
//! snapshot's own event, until a terminal state. The log is polled, because
//! other processes (a second server, the Lead inside `troupe run --serve`)
//! write to it too.

use std::collections::VecDeque;
use std::time::Duration;

use a2a::{A2AError, StreamResponse, Task};
use futures::stream::{self, BoxStream, Stream, StreamExt};
use troupe_store::Event;
use troupe_store::a2a::A2A_TASK_EVENT;

use super::tasks::{blocking, state_of};
use crate::state::AppState;

/// The longest a follower sleeps without a wake-up from the server's feed.
const IDLE: Duration = Duration::from_millis(500);
const PAGE: u32 = 512;

struct Follower<K> {
    state: AppState,
    after: i64,
    queue: VecDeque<Event>,
    keep: K,
    ended: bool,
}

/// Events after `after` that `keep` accepts, oldest first, until the server
/// shuts down (the caller stops reading sooner). The server's event feed
/// wakes the follower when the log grows, whichever process wrote it; a store
/// error ends the stream with it.
pub fn events<K: Fn(&Event) -> bool + Send + 'static>(
    state: &AppState,
    after: i64,
    keep: K,
) -> impl Stream<Item = Result<Event, A2AError>> + Send + use<K> {
    let start = Follower { state: state.clone(), after, queue: VecDeque::new(), keep, ended: false };
    stream::unfold(start, |mut f| async move {
        if f.ended {
            return None;
        }
        let mut wake = f.state.events().subscribe();
        loop {
            if let Some(e) = f.queue.pop_front() {
                return Some((Ok(e), f));
            }
            let from = f.after;
            match blocking(f.state.store(), move |s| s.events_since(from, PAGE)).await {
                Ok(page) if page.is_empty() => {
                    let closing = f.state.closing().clone();
                    tokio::select! {
                        _ = closing.cancelled() => return None,
                        _ = wake.changed() => {}
                        _ = tokio::time::sleep(IDLE) => {}
                    }
                }
                Ok(page) => {
                    f.after = page.last().map_or(f.after, |e| e.id);
                    let keep = &f.keep;
                    let kept: Vec<Event> = page.into_iter().filter(|e| keep(e)).collect();
                    f.queue.extend(kept);
                }
                Err(e) => {
                    f.ended = true;
                    return Some((Err(e), f));
                }
            }
        }
    })
}

/// The stream of task `task` from its snapshot taken at event `after`: the
/// task first (§3.1.2, §3.1.6), then its changes, ending after the first
/// change to a terminal state (or at once when the snapshot is terminal).
pub fn task_stream(state: &AppState, task: Task, after: i64) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
    let id = task.id.clone();
    let done_already = task.status.state.is_terminal();
    let first = stream::once(async move { Ok::<_, A2AError>(StreamResponse::Task(task)) });
    if done_already {
        return first.boxed();
    }
    let changes = events(state, after, move |e| e.kind == A2A_TASK_EVENT && e.subject.as_deref() == Some(id.as_str()))
        .map(|item| {
            item.and_then(|e| {
                serde_json::from_value::<StreamResponse>(e.data["update"].clone())
                    .map_err(|err| super::tasks::internal("a stored task event is unreadable", &err))
            })
        });
    // End right after the terminal event (§3.1.2: the stream closes then). A
    // `scan` or `take_while` would only stop on the item after it, and after a
    // terminal state no further event of the task ever comes: the stream would
    // hang open. So the flag is checked before the follower is polled again.
    let changes = stream::unfold((changes.boxed(), false), |(mut changes, ended)| async move {
        if ended {
            return None;
        }
        let item = changes.next().await?;
        let ended = match &item {
            Ok(event) => state_of(event).is_some_and(|s| s.is_terminal()),
            Err(_) => true,
        };
        Some((item, (changes, ended)))
    });
    first.chain(changes).boxed()
}
