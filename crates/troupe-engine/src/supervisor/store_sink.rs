//! The store's agent registry as an [`AgentSink`]: register on start
//! (PROCESSING), remember the session id, log unresponsiveness, and record
//! the outcome (DONE or FAILED) with the completion report as an event, and
//! each thinking block as an `agent_thinking` event, which the MCP gateway
//! attaches to that agent's next tool call as its thinking signature (seed 004),
//! and each model turn in the usage ledger.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType};
use troupe_core::usage::PriceTable;
use troupe_store::{AgentStatus, AgentUpdate, NewAgent, NewEvent, Store, UsageContext};

use crate::ledger::LaunchLedger;

use super::{AgentInfo, AgentSink};

/// The event kind of a thinking block. Its data is seed 004's ThinkingSignature
/// in camelCase (`thinking`, `modelId`, `capturedAt`, `type`), the shape
/// `troupe_gateway::audit` reads back.
pub const THINKING_EVENT: &str = "agent_thinking";

/// Reports to a [`Store`]. Store failures are logged, never fatal to the run.
pub struct StoreSink {
    store: Arc<dyn Store>,
    run: String,
    prices: Arc<PriceTable>,
    ledgers: Mutex<HashMap<String, LaunchLedger>>,
}

impl StoreSink {
    /// A sink writing to `store`; usage is booked under the run `run`, priced
    /// by the built-in table.
    pub fn new(store: Arc<dyn Store>, run: impl Into<String>) -> Self {
        StoreSink { store, run: run.into(), prices: Arc::default(), ledgers: Mutex::default() }
    }

    /// Prices usage by `prices` (the project's table) instead of the built-in one.
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = Arc::new(prices);
        self
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
        let context = UsageContext {
            run: self.run.clone(),
            feature: info.feature.clone(),
            phase: None,
            task: info.task.clone(),
            agent: info.id.clone(),
            role: info.role.clone(),
            engine: info.engine.clone(),
        };
        let ledger = LaunchLedger::new(context, &info.pid.to_string(), info.model.clone(), self.prices.clone());
        self.ledgers.lock().unwrap_or_else(|p| p.into_inner()).insert(info.id.clone(), ledger);
    }

    fn usage(&self, agent: &str, event: &AgentEvent) {
        let row = self.ledgers.lock().unwrap_or_else(|p| p.into_inner()).get_mut(agent).and_then(|l| l.observe(event));
        if let Some(warning) = row.as_ref().and_then(crate::ledger::unknown_price_warning) {
            tracing::warn!(agent, "{warning}");
        }
        if let Some(row) = row
            && let Err(err) = self.store.record_usage(row)
        {
            tracing::warn!(agent, "cannot book a model turn in the usage ledger: {err}");
        }
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

    fn thinking(&self, agent: &str, text: &str, model: Option<&str>) {
        let e = NewEvent {
            kind: THINKING_EVENT.to_string(),
            actor: Some(agent.to_string()),
            subject: None,
            data: thinking_signature(text, model, &jiff::Timestamp::now().to_string()),
        };
        if let Err(err) = self.store.append_event(e) {
            tracing::warn!(agent, "cannot record a thinking block in the store: {err}");
        }
    }

    fn finished(&self, agent: &str, outcome: &ParsedOutput) {
        let status = match outcome.kind {
            ResultType::Success => AgentStatus::Done,
            ResultType::Interrupted => AgentStatus::Interrupted,
            _ => AgentStatus::Failed,
        };
        if let Err(err) = self.store.set_status(agent, status) {
            tracing::warn!(agent, "cannot record the agent's status in the store: {err}");
        }
        self.event("agent.finished", agent, serde_json::to_value(outcome).unwrap_or_default());
    }
}

/// Seed 004's ThinkingSignature for one thinking block.
fn thinking_signature(text: &str, model: Option<&str>, captured_at: &str) -> serde_json::Value {
    let mut v = json!({ "thinking": text, "capturedAt": captured_at, "type": "extended_thinking" });
    if let Some(m) = model {
        v["modelId"] = json!(m);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_signature_has_the_seed_shape() {
        let v = thinking_signature("I should read the file first", Some("claude-opus"), "2026-01-01T00:00:00Z");
        assert_eq!(
            v,
            json!({"thinking": "I should read the file first", "modelId": "claude-opus",
                   "capturedAt": "2026-01-01T00:00:00Z", "type": "extended_thinking"})
        );
        assert!(thinking_signature("x", None, "t").get("modelId").is_none());
    }
}
