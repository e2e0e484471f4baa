//! The agent registry's values: who is running, as what, and in which state.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// An agent's state, as the seed's registry names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AgentStatus {
    /// Started and waiting for work.
    Ready,
    /// Working on a task.
    Processing,
    /// Blocked on something outside itself (an approval, a message).
    Waiting,
    /// Finished; the process has exited or will.
    Done,
    /// Asked to shut down and winding up.
    ShuttingDown,
    /// Ended in failure.
    Failed,
    /// Cut short from outside (Ctrl-C, its output closed) before it ended.
    Interrupted,
}

impl AgentStatus {
    /// Every status, in declaration order.
    pub const ALL: [AgentStatus; 7] = [
        AgentStatus::Ready,
        AgentStatus::Processing,
        AgentStatus::Waiting,
        AgentStatus::Done,
        AgentStatus::ShuttingDown,
        AgentStatus::Failed,
        AgentStatus::Interrupted,
    ];

    /// The name used in the database, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Ready => "READY",
            AgentStatus::Processing => "PROCESSING",
            AgentStatus::Waiting => "WAITING",
            AgentStatus::Done => "DONE",
            AgentStatus::ShuttingDown => "SHUTTING_DOWN",
            AgentStatus::Failed => "FAILED",
            AgentStatus::Interrupted => "INTERRUPTED",
        }
    }

    /// True for states an agent does not leave (`DONE`, `FAILED`, `INTERRUPTED`).
    pub fn is_terminal(self) -> bool {
        matches!(self, AgentStatus::Done | AgentStatus::Failed | AgentStatus::Interrupted)
    }
}

impl fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An agent status name troupe does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent status `{0}` (expected READY, PROCESSING, WAITING, DONE, SHUTTING_DOWN, FAILED or INTERRUPTED)")]
pub struct UnknownAgentStatus(pub String);

impl FromStr for AgentStatus {
    type Err = UnknownAgentStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.to_ascii_uppercase().replace('-', "_");
        AgentStatus::ALL.into_iter().find(|k| k.as_str() == upper).ok_or_else(|| UnknownAgentStatus(s.to_string()))
    }
}

/// A registered agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    /// Unique id (what `$TROUPE_AGENT_ID` holds in the agent's environment).
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// The role it plays (`builder`, `inspector`, ...).
    pub role: String,
    /// The engine running it (`claude`, `gemini`, ...).
    pub engine: String,
    /// The model, when known.
    pub model: Option<String>,
    /// The feature it works on.
    pub feature: Option<String>,
    /// The task it works on.
    pub task: Option<String>,
    /// Its process id on this machine.
    pub pid: Option<u32>,
    /// Its state.
    pub status: AgentStatus,
    /// The engine's session id, for resuming.
    pub session_id: Option<String>,
    /// When it was registered.
    pub started_at: Timestamp,
    /// When it last reported anything.
    pub last_event_at: Timestamp,
    /// The host it was registered from (its pid means something only there);
    /// `None` for entries from before leases.
    #[serde(default)]
    pub host: Option<String>,
    /// When its lease ends unless its heartbeat renews it (see
    /// [`crate::lease`]); `None` when it holds no lease.
    #[serde(default)]
    pub lease_until: Option<Timestamp>,
}

/// What is needed to register an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAgent {
    /// Unique id.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// The role it plays.
    pub role: String,
    /// The engine running it.
    pub engine: String,
    /// The model.
    pub model: Option<String>,
    /// The feature it works on.
    pub feature: Option<String>,
    /// The task it works on.
    pub task: Option<String>,
    /// Its process id.
    pub pid: Option<u32>,
    /// The engine's session id.
    pub session_id: Option<String>,
    /// A lease of this length, started now and renewed by its heartbeat
    /// (see [`crate::lease`]); `None`: no lease (only its pid can tell it is gone).
    pub lease: Option<std::time::Duration>,
}

impl NewAgent {
    /// An agent with an id (also used as its name), a role and an engine.
    pub fn new(id: impl Into<String>, role: impl Into<String>, engine: impl Into<String>) -> Self {
        let id = id.into();
        NewAgent {
            name: id.clone(),
            id,
            role: role.into(),
            engine: engine.into(),
            model: None,
            feature: None,
            task: None,
            pid: None,
            session_id: None,
            lease: None,
        }
    }
}

/// Changes to an agent's details other than its status. `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentUpdate {
    /// A new task (`Some(None)` clears it).
    pub task: Option<Option<String>>,
    /// A new process id (`Some(None)` clears it).
    pub pid: Option<Option<u32>>,
    /// A new session id (`Some(None)` clears it).
    pub session_id: Option<Option<String>>,
    /// A new model (`Some(None)` clears it).
    pub model: Option<Option<String>>,
    /// The host its pid is on (`lock::host_name`), when that is not the one
    /// that registered it: a teammate a `troupe worker` started for the
    /// Lead. Its pid is believed only there ([`crate::lease::stale`]).
    pub host: Option<String>,
}

/// A registered agent whose process is gone while its status says it is not finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleAgent {
    /// The registry entry.
    pub agent: Agent,
    /// Tasks still held by it (in progress), which nobody will complete.
    pub held_tasks: Vec<String>,
}
