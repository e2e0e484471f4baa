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
        /// The stream format of its events ([`StreamFormat::name`](crate::parse::StreamFormat::name)),
        /// which says what its tool calls' names and inputs mean. Absent in
        /// older logs: the built-in engine's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
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
    /// What the files of a tool call whose stream does not carry its change
    /// ([`Change::Untold`](crate::parse::Change::Untold): Codex's
    /// `file_change`, a patch) held once it returned, read by troupe right
    /// after the engine reported it: replay writes them again.
    Wrote {
        /// The tool call's id.
        call: String,
        /// Each file, as the call's path names it.
        files: Vec<WrittenFile>,
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

/// A file as a tool call left it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrittenFile {
    /// The path as the engine gave it.
    pub path: String,
    /// What it holds; `None`: it is not there (deleted).
    pub content: Option<String>,
}
