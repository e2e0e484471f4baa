//! Claude Code `stream-json`: `system` (init, hooks, ...), `assistant` and
//! `user` messages with content blocks, `result`.
//!
//! Quirks handled: error results have no `result` field (their messages are
//! in `errors`); `is_error: true` occurs with `subtype: "success"` (an API
//! error surfaced as text); `error_max_turns` is its own outcome.

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::Value;
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, Stats, ToolKind, Usage};

use super::{FlatText, StreamParser, raw, trimmed};

/// Claude Code prints an assistant line per content block, each carrying its
/// message's usage as it stood when the message started: the parser books a
/// message once, and the result line's totals settle the rest.
#[derive(Default)]
pub(crate) struct ClaudeParser {
    /// Message ids whose usage was emitted.
    seen: std::collections::HashSet<String>,
    /// The tokens emitted so far.
    emitted: Usage,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default)]
    num_turns: Option<u64>,
    #[serde(default)]
    duration_ms: Option<u64>,
    #[serde(default)]
    total_cost_usd: Option<f64>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    errors: Option<Vec<Value>>,
    #[serde(default)]
    usage: Option<ClaudeUsage>,
    #[serde(default)]
    uuid: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<ClaudeUsage>,
    #[serde(default)]
    content: Blocks,
}

#[derive(Deserialize, Default)]
struct ClaudeUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
}

impl ClaudeUsage {
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_creation_input_tokens,
            ..Usage::default()
        }
    }
}

/// One content block; a flat struct rather than a tagged enum so serde never
/// buffers the block (this is the hot path).
#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    content: Option<FlatText>,
    #[serde(default)]
    is_error: Option<bool>,
}

/// `message.content`: a string (plain user prompt) or an array of blocks.
#[derive(Default)]
struct Blocks(Vec<Block>);

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Blocks;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Blocks, E> {
                Ok(Blocks(vec![Block {
                    ty: "text".into(),
                    text: Some(v.to_string()),
                    thinking: None,
                    id: None,
                    name: None,
                    input: None,
                    tool_use_id: None,
                    content: None,
                    is_error: None,
                }]))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Blocks, E> {
                Ok(Blocks::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks, A::Error> {
                let mut v = Vec::new();
                while let Some(b) = seq.next_element()? {
                    v.push(b);
                }
                Ok(Blocks(v))
            }
        }
        d.deserialize_any(V)
    }
}

impl StreamParser for ClaudeParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Some(line) = trimmed(line) else { return };
        let Ok(l) = serde_json::from_slice::<Line<'_>>(line) else {
            out.push(raw(line));
            return;
        };
        match &*l.ty {
            "system" if l.subtype.as_deref() == Some("init") => {
                out.push(AgentEvent::Init { session_id: l.session_id, model: l.model });
            }
            "system" if l.subtype.as_deref() == Some("api_retry") => {
                let v: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
                let attempt = v.get("attempt").and_then(Value::as_u64).unwrap_or(0);
                let max = v.get("max_retries").and_then(Value::as_u64).unwrap_or(0);
                let status = v.get("error_status").map(Value::to_string).unwrap_or_default();
                let error = v.get("error").and_then(Value::as_str).unwrap_or("API error");
                out.push(AgentEvent::Error {
                    message: format!("API error {status} ({error}), retry {attempt}/{max}"),
                    retry: true,
                });
            }
            "assistant" => {
                let Some(m) = l.message else { return };
                if let (Some(id), Some(u)) = (&m.id, &m.usage)
                    && self.seen.insert(id.clone())
                {
                    let usage = Usage { message_id: Some(id.clone()), model: m.model.clone(), ..u.usage() };
                    self.add(&usage);
                    out.push(AgentEvent::Usage(usage));
                }
                for b in m.content.0 {
                    match b.ty.as_str() {
                        "text" => out.push(AgentEvent::Text { text: b.text.unwrap_or_default() }),
                        "thinking" => out.push(AgentEvent::Thinking { text: b.thinking.unwrap_or_default() }),
                        "tool_use" | "server_tool_use" => {
                            let name = b.name.unwrap_or_default();
                            out.push(AgentEvent::ToolUse {
                                id: b.id.unwrap_or_default(),
                                kind: ToolKind::classify(&name),
                                name,
                                input: b.input.unwrap_or(Value::Null),
                            });
                        }
                        _ => out.push(raw(line)),
                    }
                }
            }
            "user" => {
                for b in l.message.map(|m| m.content.0).unwrap_or_default() {
                    if b.ty == "tool_result" {
                        out.push(AgentEvent::ToolResult {
                            id: b.tool_use_id.unwrap_or_default(),
                            ok: !b.is_error.unwrap_or(false),
                            output: b.content.map(|c| c.0).unwrap_or_default(),
                        });
                    }
                }
            }
            "result" => {
                if l.usage.is_some() || l.total_cost_usd.is_some() {
                    out.push(AgentEvent::Usage(self.settle(&l)));
                }
                out.push(AgentEvent::Result { output: result(l) });
            }
            _ => out.push(raw(line)),
        }
    }
}

impl ClaudeParser {
    fn add(&mut self, u: &Usage) {
        self.emitted.input_tokens += u.input_tokens;
        self.emitted.output_tokens += u.output_tokens;
        self.emitted.cached_input_tokens += u.cached_input_tokens;
        self.emitted.cache_write_tokens += u.cache_write_tokens;
    }

    /// The result's totals less what the messages showed (their usage is
    /// the one at message start), with the engine's cost of the launch.
    fn settle(&mut self, l: &Line<'_>) -> Usage {
        let total = l.usage.as_ref().map(ClaudeUsage::usage).unwrap_or_default();
        let e = &self.emitted;
        let rest = Usage {
            input_tokens: total.input_tokens.saturating_sub(e.input_tokens),
            output_tokens: total.output_tokens.saturating_sub(e.output_tokens),
            cached_input_tokens: total.cached_input_tokens.saturating_sub(e.cached_input_tokens),
            cache_write_tokens: total.cache_write_tokens.saturating_sub(e.cache_write_tokens),
            launch_cost_usd: l.total_cost_usd,
            message_id: Some(match (&l.uuid, &l.session_id) {
                (Some(u), _) => u.clone(),
                (None, s) => format!("result:{}:{}", s.as_deref().unwrap_or(""), self.seen.len()),
            }),
            ..Usage::default()
        };
        self.add(&rest);
        rest
    }
}

fn result(l: Line<'_>) -> ParsedOutput {
    let subtype = l.subtype.as_deref().unwrap_or("success");
    let is_error = l.is_error.unwrap_or(false);
    let kind = match subtype {
        "error_max_turns" => ResultType::MaxTurns,
        "success" if !is_error => ResultType::Success,
        _ => ResultType::Error,
    };
    let errors: Vec<String> = l
        .errors
        .unwrap_or_default()
        .into_iter()
        .map(|e| match e {
            Value::String(s) => s,
            other => other.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or(other.to_string()),
        })
        .collect();
    let error_message = match kind {
        ResultType::Success => None,
        _ if !errors.is_empty() => Some(errors.join("; ")),
        // `is_error` with `subtype: success`: the API error is the result text.
        _ => Some(l.result.clone().unwrap_or_else(|| subtype.replace('_', " "))),
    };
    ParsedOutput {
        kind,
        session_id: l.session_id,
        stats: Some(Stats {
            num_turns: l.num_turns.unwrap_or(0),
            duration_ms: l.duration_ms.unwrap_or(0),
            total_cost_usd: l.total_cost_usd.unwrap_or(0.0),
        }),
        error_message,
        result: if kind == ResultType::Success { l.result } else { None },
    }
}
