//! post-task: a task on the board, followed there. Board and A2A states map
//! one way: pending → SUBMITTED, in_progress → WORKING, completed → COMPLETED,
//! and a task the board refuses → REJECTED.

use std::collections::HashMap;
use std::sync::Weak;

use a2a::*;
use serde_json::{Value, json};
use troupe_store::event::kind;
use troupe_store::{Event, NewTask, TaskStatus as BoardStatus};

use super::{keys, meta, meta_str, task_meta, text_of};
use crate::a2a::A2a;
use crate::a2a::follow::events;
use crate::a2a::tasks::{blocking, set_artifact, set_status};
use crate::state::AppState;
use futures::StreamExt;

/// Who the board says created the tasks A2A clients post.
pub const CREATED_BY: &str = "a2a";

/// A post-task request.
pub struct Args {
    subject: String,
    description: String,
    feature: Option<String>,
    blocked_by: Vec<String>,
}

impl Args {
    /// The first line of the text is the subject, the rest the description.
    pub fn parse(message: &Message, request: Option<&HashMap<String, Value>>) -> Result<Args, A2AError> {
        let text = text_of(message);
        let text = text.trim();
        let (subject, description) = text.split_once('\n').unwrap_or((text, ""));
        if subject.trim().is_empty() {
            return Err(A2AError::invalid_params("post-task needs a text part: its first line is the task's subject"));
        }
        let blocked_by = match meta(message, request, keys::BLOCKED_BY) {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => {
                ids.iter().filter_map(Value::as_str).map(str::to_string).collect()
            }
            Some(_) => {
                return Err(A2AError::invalid_params(format!("`{}` is a list of board task ids", keys::BLOCKED_BY)));
            }
        };
        Ok(Args {
            subject: subject.trim().to_string(),
            description: description.trim().to_string(),
            feature: meta_str(message, request, keys::FEATURE),
            blocked_by,
        })
    }

    /// Record the request on the task.
    pub fn describe(&self, task: &mut Task) {
        if let Some(f) = &self.feature {
            task.metadata.get_or_insert_with(HashMap::new).insert(keys::FEATURE.into(), json!(f));
        }
    }
}

/// The A2A state of a board status.
pub fn state_of(status: BoardStatus) -> TaskState {
    match status {
        BoardStatus::Pending => TaskState::Submitted,
        BoardStatus::InProgress => TaskState::Working,
        BoardStatus::Completed => TaskState::Completed,
    }
}

impl A2a {
    /// Create the board task; the A2A task follows it from then on.
    pub async fn start_board(&self, task: Task, args: Args, after: i64) -> Result<Task, A2AError> {
        let new = NewTask {
            description: args.description,
            feature: args.feature,
            blocked_by: args.blocked_by,
            ..NewTask::new(args.subject, CREATED_BY)
        };
        let created = blocking(&self.store, move |s| Ok(s.create_task(new))).await?;
        let board = match created {
            Ok(board) => board,
            Err(refusal) if refusal.is_refusal() => {
                let why = format!("the board refused the task: {refusal}");
                return self.change(&task.id, |t| vec![set_status(t, TaskState::Rejected, why)]).await;
            }
            Err(e) => return Err(crate::a2a::tasks::store_error(e)),
        };
        let record = json!({"id": board.id, "subject": board.subject, "status": board.status.to_string(), "feature": board.feature});
        let board_id = board.id.clone();
        let task = self
            .change(&task.id, move |t| {
                t.metadata.get_or_insert_with(HashMap::new).insert(keys::BOARD_TASK.into(), json!(board_id));
                vec![set_artifact(t, "board-task", "The task on troupe's board", vec![Part::data(record)])]
            })
            .await?;
        self.watch_board(task.clone(), after);
        Ok(task)
    }

    /// Follow the board task of `task` in the event log from event `after`.
    /// Every post-task task of this server is followed by one watcher (one
    /// reader of the log, whatever the number of open tasks): a follower per
    /// task read the log once per task at every change, which made each new
    /// task slower than the last (SendMessage p50 ≈ 100 ms after a few
    /// hundred tasks, BENCHMARKS.md).
    pub fn watch_board(&self, task: Task, after: i64) {
        let Some(board_id) = task_meta(&task, keys::BOARD_TASK) else { return };
        let watch = self.board_watch.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(watch_all(self.this.clone(), self.state.clone(), rx));
            tx
        });
        let _ = watch.send((board_id, Watched { task: task.id, after }));
    }
}

/// An A2A task following a board task, from the log position of its snapshot.
pub struct Watched {
    task: String,
    after: i64,
}

/// What the board watcher is told: a board task id and who follows it.
pub type Watch = (String, Watched);

fn board_change(e: &Event) -> bool {
    matches!(e.kind.as_str(), kind::TASK_CLAIMED | kind::TASK_RELEASED | kind::TASK_COMPLETED)
}

/// The one follower of the log's board changes for every watched task.
/// A task registered after the follower read past its snapshot first gets
/// what it missed (a read of that range for its board task alone).
async fn watch_all(a2a: Weak<A2a>, state: AppState, mut new: tokio::sync::mpsc::UnboundedReceiver<Watch>) {
    let Some((board, first)) = new.recv().await else { return };
    let mut seen = first.after;
    let mut watched = HashMap::from([(board, first)]);
    let mut changes = Box::pin(events(&state, seen, board_change));
    loop {
        tokio::select! {
            biased;
            next = new.recv() => {
                let Some((board, w)) = next else { return };
                let missed = if w.after < seen { missed(&state, &board, w.after, seen).await } else { Vec::new() };
                watched.insert(board, w);
                for e in missed {
                    apply(&a2a, &mut watched, e).await;
                }
            }
            next = changes.next() => {
                let Some(Ok(e)) = next else { return };
                seen = e.id;
                apply(&a2a, &mut watched, e).await;
            }
        }
    }
}

/// The board changes of `board` in the log after `after`, up to `upto`.
async fn missed(state: &AppState, board: &str, mut after: i64, upto: i64) -> Vec<Event> {
    const PAGE: u32 = 512;
    let mut out = Vec::new();
    while after < upto {
        let Ok(page) = blocking(state.store(), move |s| s.events_since(after, PAGE)).await else { break };
        let Some(last) = page.last().map(|e| e.id) else { break };
        after = last;
        out.extend(page.into_iter().filter(|e| e.id <= upto && e.subject.as_deref() == Some(board) && board_change(e)));
    }
    out
}

/// Move the A2A task that follows `e`'s board task, if any; a task that
/// reached a terminal state (or cannot be changed) is followed no more.
async fn apply(a2a: &Weak<A2a>, watched: &mut HashMap<String, Watched>, e: Event) {
    let Some(board_id) = e.subject.clone() else { return };
    let Some(w) = watched.get(&board_id).filter(|w| e.id > w.after) else { return };
    let Some(a2a) = a2a.upgrade() else { return };
    let by = e.actor.clone().unwrap_or_else(|| "someone".into());
    let (status, verb) = match e.kind.as_str() {
        kind::TASK_CLAIMED => (BoardStatus::InProgress, "claimed"),
        kind::TASK_RELEASED => (BoardStatus::Pending, "released"),
        _ => (BoardStatus::Completed, "completed"),
    };
    let state = state_of(status);
    let note = format!("board task {board_id} {verb} by {by}");
    let done = state.is_terminal();
    let changed = a2a
        .change(&w.task, move |t| {
            if t.status.state.is_terminal() {
                return vec![];
            }
            vec![set_status(t, state, note)]
        })
        .await;
    if done || changed.is_err() || changed.is_ok_and(|t| t.status.state.is_terminal()) {
        watched.remove(&board_id);
    }
}
