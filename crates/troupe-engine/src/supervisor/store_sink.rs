//! The store's agent registry as an [`AgentSink`]: register on start
//! (PROCESSING), remember the session id, log unresponsiveness, and record
//! the outcome (DONE or FAILED) with the completion report as an event.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe_core::event::{ParsedOutput, ResultType};
use troupe_store::{AgentStatus, AgentUpdate, NewAgent, NewEvent, Store};

use super::{AgentInfo, AgentSink};

/// Reports to a [`Store`]. Store failures are logged, never fatal to the run.
pub struct StoreSink {
    store: Arc<dyn Store>,
}

impl StoreSink {
    /// A sink writing to `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        StoreSink { store }
    }

    fn event(&self, kind: &str, agent: &str, data: serde_json::Value) {
        let e =
            NewEvent { kind: kind.to_string(), actor: Some(agent.to_string()), subject: Some(agent.to_string()), data };
        if let Err(err) = self.store.append_event(e) {
            tracing::warn!(agent, "cannot record {kind} in the store: {err}");
        }
    }
}

impl AgentSink for StoreSink {
    fn started(&self, info: &AgentInfo) {
        let mut a = NewAgent::new(&info.id, &info.role, &info.engine);
        a.model.clone_from(&info.model);
        a.feature.clone_from(&info.feature);
        a.task.clone_from(&info.task);
        a.pid = Some(info.pid);
        let result = self.store.register(a).and_then(|_| self.store.set_status(&info.id, AgentStatus::Processing));
        if let Err(err) = result {
            tracing::warn!(agent = %info.id, "cannot register the agent in the store: {err}");
        }
        self.event("agent.started", &info.id, json!({"engine": info.engine, "model": info.model, "pid": info.pid}));
    }

    fn session(&self, agent: &str, session_id: &str) {
        let update = AgentUpdate { session_id: Some(Some(session_id.to_string())), ..AgentUpdate::default() };
        if let Err(err) = self.store.update_agent(agent, update) {
            tracing::warn!(agent, "cannot record the session id in the store: {err}");
        }
    }

    fn unresponsive(&self, agent: &str, silent: Duration) {
        self.event("agent.unresponsive", agent, json!({"silent_ms": silent.as_millis() as u64}));
    }

    fn finished(&self, agent: &str, outcome: &ParsedOutput) {
        let status = if outcome.kind == ResultType::Success { AgentStatus::Done } else { AgentStatus::Failed };
        if let Err(err) = self.store.set_status(agent, status) {
            tracing::warn!(agent, "cannot record the agent's status in the store: {err}");
        }
        self.event("agent.finished", agent, serde_json::to_value(outcome).unwrap_or_default());
    }
}
