//! The append-only event log: every change to the board, the mailbox and the
//! registry leaves one event, in the same transaction as the change, so a
//! reader that follows the log (the dashboard) never misses or invents one.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The kinds of event the store itself writes. Other crates may append their own
/// kinds (the Lead's phase changes, for example) with [`crate::EventLog::append_event`].
pub mod kind {
    /// A task was created. Data: `subject`, `blocked_by`.
    pub const TASK_CREATED: &str = "task_created";
    /// A task was claimed. Data: none.
    pub const TASK_CLAIMED: &str = "task_claimed";
    /// A task was assigned. Data: `assignee`, `previous`.
    pub const TASK_ASSIGNED: &str = "task_assigned";
    /// A task was released back to pending. Data: `previous` (the assignee it had).
    pub const TASK_RELEASED: &str = "task_released";
    /// A task was completed. Data: `unblocked`.
    pub const TASK_COMPLETED: &str = "task_completed";
    /// A task's last open blocker was completed. Data: `by` (the completed task).
    pub const TASK_UNBLOCKED: &str = "task_unblocked";
    /// A blocker was added to an existing task. Data: `blocker`.
    pub const TASK_BLOCKER_ADDED: &str = "task_blocker_added";
    /// A message was sent. Data: `to`, `kind`, `priority`, `in_reply_to`.
    pub const MESSAGE_SENT: &str = "message_sent";
    /// An agent was registered. Data: `role`, `engine`, `pid`.
    pub const AGENT_REGISTERED: &str = "agent_registered";
    /// An agent's status changed. Data: `from`, `to`.
    pub const AGENT_STATUS_CHANGED: &str = "agent_status_changed";
    /// An agent was removed from the registry. Data: `status`.
    pub const AGENT_REMOVED: &str = "agent_removed";
    /// A plan was imported onto the board. Data: `feature`, `tasks`, `digest`.
    pub const PLAN_IMPORTED: &str = "plan_imported";
    /// A plan's tasks left the board for a new version of the plan (subject: the feature).
    pub const PLAN_REPLACED: &str = "plan_replaced";
    /// A run reserved agent numbers. Data: `first`, `count`.
    pub const AGENT_NUMBERS_RESERVED: &str = "agent_numbers_reserved";
    /// The gateway refused an agent's call: its budget of gateway calls is
    /// spent (actor: the agent). Data: `made`, `max`, `key`.
    pub const GATEWAY_BUDGET_SPENT: &str = "gateway_budget_spent";
}

/// One entry of the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Increasing id: a reader resumes from the last id it saw.
    pub id: i64,
    /// When it happened.
    pub at: Timestamp,
    /// What happened (see [`kind`]).
    pub kind: String,
    /// The agent (or person) that caused it, when known.
    pub actor: Option<String>,
    /// What it happened to: a task id, a message id, an agent id.
    pub subject: Option<String>,
    /// Details, as a JSON object.
    pub data: serde_json::Value,
}

/// What is needed to append an event.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// What happened.
    pub kind: String,
    /// Who caused it.
    pub actor: Option<String>,
    /// What it happened to.
    pub subject: Option<String>,
    /// Details, as a JSON object.
    pub data: serde_json::Value,
}
