//! What the supervisor tells subscribers and writes to
//! `.troupe/state/logs/<agent>.jsonl`: one [`Record`] per line.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use troupe_core::event::{AgentEvent, ParsedOutput};

/// One line of an agent's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in this agent's log, from 0.
    pub seq: u64,
    /// When troupe saw it.
    pub ts: Timestamp,
    /// The agent.
    pub agent: String,
    /// What happened.
    #[serde(flatten)]
    pub body: Body,
}

/// What a record says: a normalised engine event or a supervisor notice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// The process started (seed 7.4: which engine and model).
    Spawned {
        /// Engine id.
        engine: String,
        /// Model, when one was chosen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Process id (also the process group id).
        pid: u32,
        /// The command line.
        command: Vec<String>,
    },
    /// An event from the engine's stream.
    Event {
        /// The event.
        event: AgentEvent,
    },
    /// No output for longer than the hang timeout.
    Unresponsive {
        /// Milliseconds since the last output.
        silent_ms: u64,
    },
    /// troupe is stopping the agent.
    Stopping {
        /// The signal sent to the process group.
        signal: String,
    },
    /// The process ended.
    Exited {
        /// Exit code, when it exited normally.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Signal that killed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// The outcome.
        outcome: ParsedOutput,
    },
}
