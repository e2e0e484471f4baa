//! OpenCode `run --format json`: `step_start`, `text`, `reasoning`,
//! `tool_use` (a finished tool part with its state), `step_finish` (reason,
//! tokens, cost), `error`. OpenCode prints no result line: the outcome is
//! decided when the stream ends, from the last step's finish reason.

use serde::Deserialize;
use serde_json::Value;
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, Stats, ToolKind, Usage};

use super::{StreamParser, raw, trimmed};

#[derive(Default)]
pub(crate) struct OpenCodeParser {
    session_id: Option<String>,
    steps: u64,
    cost: f64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    last_reason: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(default)]
    timestamp: Option<u64>,
    #[serde(default, rename = "sessionID")]
    session_id: Option<String>,
    #[serde(default)]
    part: Option<Part>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default, rename = "callID")]
    call_id: Option<String>,
    #[serde(default)]
    state: Option<ToolState>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    tokens: Option<Tokens>,
    #[serde(default)]
    cost: Option<f64>,
    #[serde(default, rename = "messageID")]
    message_id: Option<String>,
}

#[derive(Deserialize)]
struct ToolState {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Tokens {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    reasoning: u64,
    #[serde(default)]
    cache: Option<Cache>,
}

#[derive(Deserialize)]
struct Cache {
    #[serde(default)]
    read: u64,
    #[serde(default)]
    write: u64,
}

/// OpenCode errors look like `{"name":"APIError","data":{"message":...}}`.
fn error_text(e: &Value) -> String {
    e.pointer("/data/message")
        .or_else(|| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| e.get("name").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| e.to_string())
}

impl StreamParser for OpenCodeParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Some(line) = trimmed(line) else { return };
        let Ok(l) = serde_json::from_slice::<Line<'_>>(line) else {
            out.push(raw(line));
            return;
        };
        if let Some(ts) = l.timestamp {
            self.first_ts.get_or_insert(ts);
            self.last_ts = Some(ts);
        }
        if self.session_id.is_none() && l.session_id.is_some() {
            self.session_id.clone_from(&l.session_id);
            out.push(AgentEvent::Init { session_id: l.session_id.clone(), model: None });
        }
        match (&*l.ty, l.part) {
            ("step_start", Some(_)) => self.steps += 1,
            ("text", Some(p)) => out.push(AgentEvent::Text { text: p.text.unwrap_or_default() }),
            ("reasoning", Some(p)) => out.push(AgentEvent::Thinking { text: p.text.unwrap_or_default() }),
            ("tool_use", Some(p)) => {
                let name = p.tool.unwrap_or_default();
                let id = p.call_id.unwrap_or_default();
                let state = p.state.unwrap_or(ToolState { status: None, input: None, output: None, error: None });
                out.push(AgentEvent::ToolUse {
                    id: id.clone(),
                    kind: ToolKind::classify(&name),
                    name,
                    input: state.input.unwrap_or(Value::Null),
                });
                let status = state.status.as_deref().unwrap_or("");
                if matches!(status, "completed" | "error") {
                    let ok = status == "completed";
                    let output = if ok { state.output } else { state.error.or(state.output) };
                    out.push(AgentEvent::ToolResult { id, ok, output: output.unwrap_or_default() });
                }
            }
            ("step_finish", Some(p)) => {
                self.last_reason.clone_from(&p.reason);
                let cost = p.cost.unwrap_or(0.0);
                self.cost += cost;
                if let Some(t) = p.tokens {
                    // A step is one model message; its id deduplicates it.
                    out.push(AgentEvent::Usage(Usage {
                        input_tokens: t.input,
                        output_tokens: t.output,
                        cached_input_tokens: t.cache.as_ref().map(|c| c.read).unwrap_or(0),
                        cache_write_tokens: t.cache.as_ref().map(|c| c.write).unwrap_or(0),
                        reasoning_tokens: t.reasoning,
                        cost_usd: Some(cost),
                        message_id: p.message_id,
                        ..Usage::default()
                    }));
                }
            }
            ("error", _) => {
                let message = l.error.as_ref().map(error_text).unwrap_or_else(|| "opencode reported an error".into());
                self.error = Some(message.clone());
                out.push(AgentEvent::Error { message, retry: false });
            }
            _ => out.push(raw(line)),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        let (kind, error_message) = match (&self.error, self.last_reason.as_deref()) {
            (Some(e), _) => (ResultType::Error, Some(e.clone())),
            (None, Some("stop") | Some("end_turn")) => (ResultType::Success, None),
            (None, Some("length")) => (ResultType::Error, Some("the model hit its output limit".to_string())),
            // No finished step: the stream was cut; let the exit status decide.
            _ => return,
        };
        let duration_ms = match (self.first_ts, self.last_ts) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        out.push(AgentEvent::Result {
            output: ParsedOutput {
                kind,
                session_id: self.session_id.clone(),
                stats: Some(Stats { num_turns: self.steps, duration_ms, total_cost_usd: self.cost }),
                error_message,
                result: None,
            },
        });
    }
}
