//! Where the supervisor reports an agent's lifecycle besides its log: the
//! store's agent registry in troupe, nothing at all in tests.

use std::time::Duration;

use troupe_core::event::{AgentEvent, ParsedOutput};

/// What a starting agent is.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    /// Agent id.
    pub id: String,
    /// Role.
    pub role: String,
    /// Engine id.
    pub engine: String,
    /// Model.
    pub model: Option<String>,
    /// Feature.
    pub feature: Option<String>,
    /// Task.
    pub task: Option<String>,
    /// Process id.
    pub pid: u32,
}

/// Receives lifecycle changes. Implementations must not block for long:
/// they are called from the supervisor's tasks. Failures are theirs to log.
pub trait AgentSink: Send + Sync {
    /// The process is running (status PROCESSING).
    fn started(&self, info: &AgentInfo);
    /// The engine reported its session id.
    fn session(&self, _agent: &str, _session_id: &str) {}
    /// Nothing was heard for `silent`.
    fn unresponsive(&self, _agent: &str, _silent: Duration) {}
    /// The agent produced a thinking (reasoning) block, by `model` when known.
    fn thinking(&self, _agent: &str, _text: &str, _model: Option<&str>) {}
    /// The engine named its model or reported usage (`Init` and `Usage`
    /// events only), for the usage ledger.
    fn usage(&self, _agent: &str, _event: &AgentEvent) {}
    /// The process ended with `outcome` (status DONE or FAILED).
    fn finished(&self, agent: &str, outcome: &ParsedOutput);
}

/// A sink that records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSink;

impl AgentSink for NoSink {
    fn started(&self, _: &AgentInfo) {}
    fn finished(&self, _: &str, _: &ParsedOutput) {}
}
