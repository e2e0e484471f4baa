//! Gemini CLI `stream-json`: `init`, `message` (user/assistant, possibly
//! deltas), `tool_use`, `tool_result`, `error`, `result` with `status` and
//! `stats`. Gemini reports no turn count: a turn is counted each time the
//! model starts speaking or calling tools after a tool result (or at start).

use serde::Deserialize;
use serde_json::Value;
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, Stats, ToolKind, Usage};

use super::{FlatText, StreamParser, raw, trimmed};

#[derive(Default)]
pub(crate) struct GeminiParser {
    session_id: Option<String>,
    turns: u64,
    in_model_turn: bool,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<FlatText>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Option<FlatText>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    stats: Option<GeminiStats>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Default)]
struct GeminiStats {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cached: u64,
    /// Input not served from the cache (`input_tokens` counts both).
    #[serde(default)]
    input: Option<u64>,
    #[serde(default)]
    duration_ms: u64,
    /// The same counts per model.
    #[serde(default)]
    models: std::collections::BTreeMap<String, GeminiStats>,
}

impl GeminiStats {
    fn usage(&self, model: Option<&str>) -> Usage {
        Usage {
            input_tokens: self.input.unwrap_or(self.input_tokens.saturating_sub(self.cached)),
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cached,
            model: model.map(str::to_string),
            ..Usage::default()
        }
    }
}

impl GeminiParser {
    fn model_speaks(&mut self) {
        if !self.in_model_turn {
            self.in_model_turn = true;
            self.turns += 1;
        }
    }
}

impl StreamParser for GeminiParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Some(line) = trimmed(line) else { return };
        let Ok(l) = serde_json::from_slice::<Line<'_>>(line) else {
            out.push(raw(line));
            return;
        };
        match &*l.ty {
            "init" => {
                self.session_id.clone_from(&l.session_id);
                out.push(AgentEvent::Init { session_id: l.session_id, model: l.model });
            }
            "message" if l.role.as_deref() == Some("assistant") => {
                self.model_speaks();
                out.push(AgentEvent::Text { text: l.content.map(|c| c.0).unwrap_or_default() });
            }
            "message" => out.push(raw(line)),
            "tool_use" => {
                self.model_speaks();
                let name = l.tool_name.unwrap_or_default();
                out.push(AgentEvent::ToolUse {
                    id: l.tool_id.unwrap_or_default(),
                    kind: ToolKind::classify(&name),
                    name,
                    input: l.parameters.unwrap_or(Value::Null),
                });
            }
            "tool_result" => {
                self.in_model_turn = false;
                let ok = l.status.as_deref() != Some("error");
                let output = match (l.output, l.error) {
                    (Some(o), _) if !o.0.is_empty() => o.0,
                    (_, Some(e)) => e.message.unwrap_or_default(),
                    _ => String::new(),
                };
                out.push(AgentEvent::ToolResult { id: l.tool_id.unwrap_or_default(), ok, output });
            }
            "error" => {
                let fatal = l.severity.as_deref() == Some("error");
                out.push(AgentEvent::Error { message: l.message.unwrap_or_default(), retry: !fatal });
            }
            "result" => {
                let stats = l.stats.unwrap_or_default();
                // Gemini prints totals only, per model when it used several.
                if stats.models.is_empty() {
                    out.push(AgentEvent::Usage(stats.usage(None)));
                }
                for (model, s) in &stats.models {
                    out.push(AgentEvent::Usage(s.usage(Some(model))));
                }
                let (kind, error_message) = match (l.status.as_deref(), l.error) {
                    (Some("success"), _) => (ResultType::Success, None),
                    (_, Some(e)) => {
                        let turn_limit = e.ty.as_deref().is_some_and(|t| t.contains("turn"));
                        let kind = if turn_limit { ResultType::MaxTurns } else { ResultType::Error };
                        (kind, Some(e.message.or(e.ty).unwrap_or_else(|| "gemini reported an error".into())))
                    }
                    (s, None) => (ResultType::Error, Some(format!("gemini result status {}", s.unwrap_or("missing")))),
                };
                out.push(AgentEvent::Result {
                    output: ParsedOutput {
                        kind,
                        session_id: self.session_id.clone(),
                        stats: Some(Stats {
                            num_turns: self.turns,
                            duration_ms: stats.duration_ms,
                            total_cost_usd: 0.0,
                        }),
                        error_message,
                        result: None,
                    },
                });
            }
            _ => out.push(raw(line)),
        }
    }
}
