//! The task board's values: tasks, what is needed to create one, filters, and
//! the outcomes of claiming and completing.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Where a task is in its life. A task only moves forward, except `release`,
/// which puts an in-progress task back to `pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started; claimable once unblocked.
    Pending,
    /// Claimed by its assignee.
    InProgress,
    /// Done; its dependents may now be unblocked.
    Completed,
}

impl TaskStatus {
    /// The name used in the database, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task status name that is not one of `pending`, `in_progress`, `completed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown task status `{0}` (expected pending, in_progress or completed)")]
pub struct UnknownTaskStatus(pub String);

impl FromStr for TaskStatus {
    type Err = UnknownTaskStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(TaskStatus::Pending),
            "in_progress" | "in-progress" => Ok(TaskStatus::InProgress),
            "completed" => Ok(TaskStatus::Completed),
            other => Err(UnknownTaskStatus(other.to_string())),
        }
    }
}

/// A task on the board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Stable id: `t<n>` for tasks created by hand, `<feature>/<subtask>` for imported ones.
    pub id: String,
    /// One line saying what to do.
    pub subject: String,
    /// Details; may be empty.
    pub description: String,
    /// Where the task is.
    pub status: TaskStatus,
    /// The agent holding (in progress) or reserved for (pending) the task.
    pub assignee: Option<String>,
    /// Who created the task.
    pub created_by: String,
    /// Tasks that must be completed before this one can be claimed.
    pub blocked_by: Vec<String>,
    /// True while at least one task in `blocked_by` is not completed.
    pub blocked: bool,
    /// The feature (spec) the task belongs to, if any.
    pub feature: Option<String>,
    /// The builder wave, for imported plans.
    pub wave: Option<u32>,
    /// The execution group (one builder's file ownership), for imported plans.
    pub group: Option<String>,
    /// Paths the task's group owns.
    pub files: Vec<String>,
    /// When the task was created.
    pub created_at: Timestamp,
    /// When the task last changed.
    pub updated_at: Timestamp,
    /// When the task was completed.
    pub completed_at: Option<Timestamp>,
}

/// What is needed to create a task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTask {
    /// An explicit id (imports use `<feature>/<subtask>`); `None` generates `t<n>`.
    pub id: Option<String>,
    /// One line saying what to do; must not be empty.
    pub subject: String,
    /// Details.
    pub description: String,
    /// Who creates it.
    pub created_by: String,
    /// Ids of tasks that must be completed first. They must exist already, or be
    /// created in the same batch.
    pub blocked_by: Vec<String>,
    /// The feature it belongs to.
    pub feature: Option<String>,
    /// The builder wave.
    pub wave: Option<u32>,
    /// The execution group.
    pub group: Option<String>,
    /// Paths the group owns.
    pub files: Vec<String>,
}

impl NewTask {
    /// A task with just a subject and its creator.
    pub fn new(subject: impl Into<String>, created_by: impl Into<String>) -> Self {
        NewTask { subject: subject.into(), created_by: created_by.into(), ..NewTask::default() }
    }

    /// The same task, blocked by `ids`.
    pub fn blocked_by<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.blocked_by = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The same task, with an explicit id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// Which tasks `list` returns. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only tasks in this status.
    pub status: Option<TaskStatus>,
    /// Only tasks held by or reserved for this agent.
    pub assignee: Option<String>,
    /// Only tasks of this feature.
    pub feature: Option<String>,
    /// Only tasks of this wave.
    pub wave: Option<u32>,
}

/// Narrows which tasks `available` and `claim_next` consider.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks of this feature.
    pub feature: Option<String>,
    /// Only tasks of this wave.
    pub wave: Option<u32>,
    /// Only tasks of this execution group.
    pub group: Option<String>,
}

/// The outcome of a successful claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// The task, now in progress and held by the claimant.
    pub task: Task,
    /// True when the claimant already held the task (the claim changed nothing).
    pub already_held: bool,
}

/// The outcome of completing a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Completion {
    /// The task, now completed.
    pub task: Task,
    /// Ids of the tasks whose last open blocker this was, in creation order.
    pub unblocked: Vec<String>,
}
