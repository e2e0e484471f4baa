//! The audit log: one record per decided tool call, in the store. Arguments
//! are recorded by shape (keys and types) unless the project opts into values;
//! the thinking signature (seed 004) of the agent's latest model turn is
//! attached when the engine supervisor has recorded one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use troupe_store::Store;
use troupe_store::audit::{AuditRecord, Decision, NewAuditRecord};
use troupe_store::event::NewEvent;

/// The event kind the engine supervisor appends for each thinking block of an
/// agent (actor = the agent id, data = a [`ThinkingSignature`]); the gateway
/// attaches the latest one to that agent's next tool call.
pub const THINKING_EVENT: &str = "agent_thinking";

/// Seed 004's ThinkingSignature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingSignature {
    /// The thinking text.
    pub thinking: String,
    /// The model that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// Thinking tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_tokens: Option<u64>,
    /// When it was captured (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    /// A summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// `extended_thinking`, `chain_of_thought` or `reasoning`.
    #[serde(rename = "type", default = "default_type")]
    pub kind: String,
}

fn default_type() -> String {
    "extended_thinking".to_string()
}

/// Records `signature` as `agent`'s latest thinking (for the engine supervisor).
pub fn record_thinking(store: &dyn Store, agent: &str, signature: &ThinkingSignature) -> troupe_store::Result<()> {
    store.append_event(NewEvent {
        kind: THINKING_EVENT.to_string(),
        actor: Some(agent.to_string()),
        subject: None,
        data: serde_json::to_value(signature).unwrap_or(Value::Null),
    })?;
    Ok(())
}

/// The shape of a JSON value: objects keep their keys, everything else
/// becomes its type name.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("boolean"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(items) => match items.first() {
            Some(first) => json!([shape(first)]),
            None => json!([]),
        },
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
    }
}

/// One decided call, before it is written.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The agent.
    pub agent: String,
    /// Its role at the time.
    pub role: String,
    /// The tool as the client named it.
    pub tool: String,
    /// The decision.
    pub decision: Decision,
    /// Why, when denied or limited, or the backend error.
    pub reason: Option<String>,
    /// Milliseconds the call took.
    pub duration_ms: Option<u64>,
    /// The arguments.
    pub arguments: Option<Map<String, Value>>,
}

/// Writes audit records. The store is optional so that a gateway can run in a
/// folder without a project; then nothing is recorded.
pub struct AuditLog {
    store: Option<Arc<dyn Store>>,
    values: bool,
    thinking: Mutex<ThinkingCursor>,
}

#[derive(Default)]
struct ThinkingCursor {
    after: i64,
    latest: BTreeMap<String, Value>,
}

impl AuditLog {
    /// An audit log writing to `store`; `values` records argument values too.
    pub fn new(store: Option<Arc<dyn Store>>, values: bool) -> AuditLog {
        AuditLog { store, values, thinking: Mutex::new(ThinkingCursor::default()) }
    }

    /// Takes `agent`'s latest thinking not yet attached to a call.
    fn take_thinking(&self, store: &dyn Store, agent: &str) -> Option<Value> {
        let mut cursor = self.thinking.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let events = store.events_since(cursor.after, 500).ok()?;
            let done = events.len() < 500;
            for event in events {
                cursor.after = cursor.after.max(event.id);
                if event.kind == THINKING_EVENT
                    && let Some(actor) = event.actor
                {
                    cursor.latest.insert(actor, event.data);
                }
            }
            if done {
                break;
            }
        }
        cursor.latest.remove(agent)
    }

    /// Records one call. Failures to write are logged, never fatal: the call's
    /// outcome does not depend on the audit log being writable.
    pub fn record(&self, entry: Entry) {
        let Some(store) = &self.store else { return };
        let arguments = entry.arguments.map(Value::Object).unwrap_or(Value::Null);
        let argument_shape = if self.values { arguments } else { shape(&arguments) };
        let thinking_signature = if entry.decision == Decision::Allowed || entry.decision == Decision::Denied {
            self.take_thinking(store.as_ref(), &entry.agent)
        } else {
            None
        };
        let record = NewAuditRecord {
            agent: entry.agent,
            role: entry.role,
            tool: entry.tool,
            decision: entry.decision,
            reason: entry.reason,
            duration_ms: entry.duration_ms,
            argument_shape,
            thinking_signature,
        };
        if let Err(e) = store.append_audit(record) {
            tracing::warn!("cannot write the audit log: {e}");
        }
    }
}

/// `troupe audit stats`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditStats {
    /// Records counted.
    pub total: usize,
    /// Allowed calls.
    pub allowed: usize,
    /// Denied calls.
    pub denied: usize,
    /// Rate-limited calls.
    pub rate_limited: usize,
    /// Denied / total.
    pub denial_rate: f64,
    /// Calls per role.
    pub by_role: BTreeMap<String, usize>,
    /// Calls per tool.
    pub by_tool: BTreeMap<String, usize>,
    /// Calls per agent.
    pub by_agent: BTreeMap<String, usize>,
}

/// Statistics over `records`.
pub fn stats(records: &[AuditRecord]) -> AuditStats {
    let mut s = AuditStats { total: records.len(), ..AuditStats::default() };
    for r in records {
        match r.decision {
            Decision::Allowed => s.allowed += 1,
            Decision::Denied => s.denied += 1,
            Decision::RateLimited => s.rate_limited += 1,
        }
        *s.by_role.entry(r.role.clone()).or_default() += 1;
        *s.by_tool.entry(r.tool.clone()).or_default() += 1;
        *s.by_agent.entry(r.agent.clone()).or_default() += 1;
    }
    s.denial_rate = if s.total == 0 { 0.0 } else { s.denied as f64 / s.total as f64 };
    s
}

/// Seed 004's getThinkingStats.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingStats {
    /// Records with a thinking signature.
    pub entries_with_thinking: usize,
    /// That, over all records.
    pub thinking_coverage_rate: f64,
    /// Sum of thinking tokens.
    pub total_thinking_tokens: u64,
    /// Average thinking tokens per record with thinking.
    pub avg_thinking_tokens: f64,
    /// Records per thinking type.
    pub by_type: BTreeMap<String, usize>,
}

/// Thinking statistics over `records`.
pub fn thinking_stats(records: &[AuditRecord]) -> ThinkingStats {
    let mut s = ThinkingStats::default();
    for sig in records.iter().filter_map(|r| r.thinking_signature.as_ref()) {
        s.entries_with_thinking += 1;
        s.total_thinking_tokens += sig.get("thinkingTokens").and_then(Value::as_u64).unwrap_or(0);
        let kind = sig.get("type").and_then(Value::as_str).unwrap_or("extended_thinking");
        *s.by_type.entry(kind.to_string()).or_default() += 1;
    }
    if !records.is_empty() {
        s.thinking_coverage_rate = s.entries_with_thinking as f64 / records.len() as f64;
    }
    if s.entries_with_thinking > 0 {
        s.avg_thinking_tokens = s.total_thinking_tokens as f64 / s.entries_with_thinking as f64;
    }
    s
}

/// One CSV cell. A cell a spreadsheet would run as a formula (one starting
/// with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a `'` in front,
/// so an agent-chosen name or reason opened in a spreadsheet stays text.
fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        std::borrow::Cow::Owned(format!("'{text}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.into_owned() }
}

/// The records as CSV, with a header line.
pub fn to_csv(records: &[AuditRecord]) -> String {
    let mut out = String::from("id,at,agent,role,tool,decision,reason,duration_ms,argument_shape,thinking\n");
    for r in records {
        let fields = [
            r.id.to_string(),
            r.at.to_string(),
            r.agent.clone(),
            r.role.clone(),
            r.tool.clone(),
            r.decision.to_string(),
            r.reason.clone().unwrap_or_default(),
            r.duration_ms.map(|d| d.to_string()).unwrap_or_default(),
            r.argument_shape.to_string(),
            r.thinking_signature
                .as_ref()
                .and_then(|t| t.get("thinking"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ];
        out.push_str(&fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_hide_values() {
        let v = json!({"path": "/etc/passwd", "n": 3, "deep": {"k": [true]}, "none": null});
        assert_eq!(shape(&v), json!({"path": "string", "n": "number", "deep": {"k": ["boolean"]}, "none": "null"}));
    }

    #[test]
    fn csv_quotes() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        for cell in ["+1", "-1+2", "@SUM(A1)", "\tx"] {
            assert_eq!(csv_field(cell), format!("'{cell}"));
        }
    }
}
