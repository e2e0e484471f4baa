//! The JSON shapes of the REST API. They mirror the store's values but are
//! the server's own, so that the HTTP contract (and its OpenAPI schema) is
//! decided here and a change inside the store cannot change it unseen.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started; claimable once unblocked.
    Pending,
    /// Claimed by its assignee.
    InProgress,
    /// Done.
    Completed,
}

impl From<troupe_store::TaskStatus> for TaskStatus {
    fn from(s: troupe_store::TaskStatus) -> Self {
        match s {
            troupe_store::TaskStatus::Pending => TaskStatus::Pending,
            troupe_store::TaskStatus::InProgress => TaskStatus::InProgress,
            troupe_store::TaskStatus::Completed => TaskStatus::Completed,
        }
    }
}

impl From<TaskStatus> for troupe_store::TaskStatus {
    fn from(s: TaskStatus) -> Self {
        match s {
            TaskStatus::Pending => troupe_store::TaskStatus::Pending,
            TaskStatus::InProgress => troupe_store::TaskStatus::InProgress,
            TaskStatus::Completed => troupe_store::TaskStatus::Completed,
        }
    }
}

/// A task on the board (seed 003 B1's data model, with troupe's plan fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    /// `t<n>` for tasks created by hand, `<feature>/<subtask>` for a plan's
    /// (percent-encode the `/` in a path: `login%2F1.1`).
    pub id: String,
    /// One line saying what to do.
    pub subject: String,
    /// Details; may be empty.
    pub description: String,
    /// Where the task is.
    pub status: TaskStatus,
    /// The agent holding (in progress) or reserved for (pending) the task.
    pub assignee: Option<String>,
    /// Who created it.
    pub created_by: String,
    /// Tasks that must be completed first.
    pub blocked_by: Vec<String>,
    /// True while a task in `blocked_by` is not completed.
    pub blocked: bool,
    /// The feature (spec) it belongs to.
    pub feature: Option<String>,
    /// The builder wave, for a plan's tasks.
    pub wave: Option<u32>,
    /// The execution group, for a plan's tasks.
    pub group: Option<String>,
    /// Paths the task's group owns.
    pub files: Vec<String>,
    /// RFC 3339.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// RFC 3339.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// RFC 3339, once completed.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub completed_at: Option<Timestamp>,
}

impl From<troupe_store::Task> for Task {
    fn from(t: troupe_store::Task) -> Self {
        Task {
            id: t.id,
            subject: t.subject,
            description: t.description,
            status: t.status.into(),
            assignee: t.assignee,
            created_by: t.created_by,
            blocked_by: t.blocked_by,
            blocked: t.blocked,
            feature: t.feature,
            wave: t.wave,
            group: t.group,
            files: t.files,
            created_at: t.created_at,
            updated_at: t.updated_at,
            completed_at: t.completed_at,
        }
    }
}

/// Tasks, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskList {
    /// The tasks.
    pub tasks: Vec<Task>,
}

impl TaskList {
    pub(crate) fn of(tasks: Vec<troupe_store::Task>) -> Self {
        TaskList { tasks: tasks.into_iter().map(Task::from).collect() }
    }
}

/// The answer to a claim.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Claimed {
    /// The task, now in progress and held by the claimant.
    pub task: Task,
    /// True when the claimant already held it (nothing changed).
    pub already_held: bool,
}

/// The answer to a completion.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Completed {
    /// The task, now completed.
    pub task: Task,
    /// Tasks whose last open blocker this was, in creation order.
    pub unblocked: Vec<String>,
    /// The `on_task_completed` gate could not decide and let it through: what the user should know.
    pub warning: Option<String>,
}
