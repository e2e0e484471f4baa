//! Tasks that clients of troupe's A2A server asked for, and the push
//! notification targets they registered. The store keeps each task's document
//! as opaque JSON: only troupe-server knows the A2A wire shapes. What the store
//! does know is what it must index and order by: the task's id, its context,
//! its state and when it last changed.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The event kind every change of an A2A task appends (subject: the task id).
/// Data: `state`, and `update`, the change as the server streams it.
pub const A2A_TASK_EVENT: &str = "a2a_task";

/// An A2A task as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct A2aTask {
    /// The task id (server-generated).
    pub id: String,
    /// The conversation it belongs to.
    pub context_id: String,
    /// Its state, as the server names it (`TASK_STATE_WORKING`, ...).
    pub state: String,
    /// The whole task document, owned by the server.
    pub body: serde_json::Value,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// Insertion order, the tie-breaker of [`A2aTaskFilter::before`].
    pub seq: i64,
    /// The id of the event its last change appended: a stream resumes after it.
    pub last_event: i64,
}

/// What is written for one change of an A2A task.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aTaskUpdate {
    /// The task id.
    pub id: String,
    /// The conversation it belongs to.
    pub context_id: String,
    /// Its state after the change.
    pub state: String,
    /// The whole task document after the change.
    pub body: serde_json::Value,
    /// The change itself (what a stream shows), recorded in the event log.
    pub event: serde_json::Value,
}

/// Which A2A tasks to list, newest change first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct A2aTaskFilter {
    /// Only this conversation.
    pub context_id: Option<String>,
    /// Only this state.
    pub state: Option<String>,
    /// Only tasks changed after this time.
    pub updated_after: Option<Timestamp>,
    /// Only tasks that sort after this one: its `(updated_at, seq)`, the cursor
    /// of the previous page.
    pub before: Option<(Timestamp, i64)>,
    /// At most this many (0 means none: only the total is wanted).
    pub limit: u32,
}

/// One page of A2A tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aTaskPage {
    /// The tasks, newest change first.
    pub tasks: Vec<A2aTask>,
    /// How many tasks match the filter without the cursor and the limit.
    pub total: u64,
}

/// A push notification target registered for an A2A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct A2aPushConfig {
    /// The task it belongs to.
    pub task_id: String,
    /// Its id, unique per task.
    pub id: String,
    /// The configuration document, owned by the server.
    pub body: serde_json::Value,
}
