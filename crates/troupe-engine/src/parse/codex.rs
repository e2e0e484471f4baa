//! Codex `exec --json`: `thread.started`, `turn.started`, `item.started` /
//! `item.updated` / `item.completed` (agent_message, reasoning,
//! command_execution, file_change, mcp_tool_call, web_search, todo_list,
//! error), `turn.completed` with usage, `turn.failed`, and top-level `error`
//! events, which are retries while Codex reconnects.
//!
//! Codex prints no cost or duration; `exec` runs one turn, and the result is
//! emitted at `turn.completed` / `turn.failed`.

use serde::Deserialize;
use serde_json::{Value, json};
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, Stats, ToolKind, Usage};

use super::{StreamParser, raw, trimmed};

#[derive(Default)]
pub(crate) struct CodexParser {
    thread_id: Option<String>,
    /// Items whose `item.started` was seen and whose completion is pending.
    open_items: std::collections::HashSet<String>,
    turns: u64,
    last_error: Option<String>,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default, borrow)]
    item: Option<Item<'a>>,
    #[serde(default)]
    usage: Option<CodexUsage>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Default)]
struct CodexUsage {
    /// Every input token, cached ones included.
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    cache_write_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    reasoning_output_tokens: u64,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(default)]
    id: String,
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    aggregated_output: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    changes: Option<Value>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    query: Option<String>,
}

/// Codex says it will retry with messages like "Reconnecting... 2/5".
fn is_retry(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("reconnecting") || m.contains("retrying") || m.contains("re-connecting")
}

impl CodexParser {
    fn item(&mut self, started: bool, completed: bool, item: Item<'_>, line: &[u8], out: &mut Vec<AgentEvent>) {
        let tool = |name: &str, input: Value| AgentEvent::ToolUse {
            id: item.id.clone(),
            name: name.to_string(),
            kind: ToolKind::classify(name),
            input,
        };
        match &*item.ty {
            "agent_message" if completed => out.push(AgentEvent::Text { text: item.text.unwrap_or_default() }),
            "reasoning" if completed => out.push(AgentEvent::Thinking { text: item.text.unwrap_or_default() }),
            "command_execution" => {
                if started {
                    out.push(tool("command_execution", json!({"command": item.command})));
                }
                if completed {
                    let ok = item.exit_code == Some(0) && item.status.as_deref() != Some("failed");
                    out.push(AgentEvent::ToolResult {
                        id: item.id,
                        ok,
                        output: item.aggregated_output.unwrap_or_default(),
                    });
                }
            }
            "file_change" => {
                if started {
                    out.push(tool("file_change", json!({"changes": item.changes})));
                }
                if completed {
                    let ok = item.status.as_deref() == Some("completed");
                    out.push(AgentEvent::ToolResult { id: item.id, ok, output: String::new() });
                }
            }
            "mcp_tool_call" => {
                if started {
                    let name = format!(
                        "mcp__{}__{}",
                        item.server.as_deref().unwrap_or(""),
                        item.tool.as_deref().unwrap_or("")
                    );
                    out.push(tool(&name, item.arguments.clone().unwrap_or(Value::Null)));
                }
                if completed {
                    let ok = item.error.as_ref().is_none_or(Value::is_null) && item.status.as_deref() != Some("failed");
                    let output = match (&item.result, &item.error) {
                        (_, Some(e)) if !e.is_null() => e.to_string(),
                        (Some(r), _) => r.to_string(),
                        _ => String::new(),
                    };
                    out.push(AgentEvent::ToolResult { id: item.id, ok, output });
                }
            }
            "web_search" => {
                if started {
                    out.push(tool("web_search", json!({"query": item.query})));
                }
                if completed {
                    out.push(AgentEvent::ToolResult { id: item.id, ok: true, output: String::new() });
                }
            }
            // Item-level errors are warnings Codex prints and carries on after.
            "error" if completed => {
                out.push(AgentEvent::Error { message: item.message.unwrap_or_default(), retry: true });
            }
            _ if started && !completed => {}
            _ => out.push(raw(line)),
        }
    }
}

impl StreamParser for CodexParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Some(line) = trimmed(line) else { return };
        let Ok(l) = serde_json::from_slice::<Line<'_>>(line) else {
            out.push(raw(line));
            return;
        };
        match &*l.ty {
            "thread.started" => {
                self.thread_id.clone_from(&l.thread_id);
                out.push(AgentEvent::Init { session_id: l.thread_id, model: None });
            }
            "turn.started" => self.turns += 1,
            "item.started" | "item.updated" | "item.completed" => match l.item {
                Some(item) => {
                    let completed = l.ty == "item.completed";
                    // A tool item completed without being started (fast file
                    // changes) still gets its tool-use event first.
                    let started = match &*l.ty {
                        "item.started" => self.open_items.insert(item.id.clone()),
                        "item.completed" => !self.open_items.remove(&item.id),
                        _ => false,
                    };
                    self.item(started, completed, item, line, out);
                }
                None => out.push(raw(line)),
            },
            "turn.completed" => {
                let u = l.usage.unwrap_or_default();
                out.push(AgentEvent::Usage(Usage {
                    input_tokens: u.input_tokens.saturating_sub(u.cached_input_tokens + u.cache_write_input_tokens),
                    output_tokens: u.output_tokens,
                    cached_input_tokens: u.cached_input_tokens,
                    cache_write_tokens: u.cache_write_input_tokens,
                    reasoning_tokens: u.reasoning_output_tokens,
                    ..Usage::default()
                }));
                out.push(AgentEvent::Result { output: self.outcome(ResultType::Success, None) });
            }
            "turn.failed" => {
                let message = l
                    .error
                    .and_then(|e| e.message)
                    .or(self.last_error.take())
                    .unwrap_or_else(|| "codex turn failed".into());
                out.push(AgentEvent::Result { output: self.outcome(ResultType::Error, Some(message)) });
            }
            "error" => {
                let message = l.message.unwrap_or_default();
                let retry = is_retry(&message);
                if !retry {
                    self.last_error = Some(message.clone());
                }
                out.push(AgentEvent::Error { message, retry });
            }
            _ => out.push(raw(line)),
        }
    }
}

impl CodexParser {
    fn outcome(&self, kind: ResultType, error_message: Option<String>) -> ParsedOutput {
        ParsedOutput {
            kind,
            session_id: self.thread_id.clone(),
            stats: Some(Stats { num_turns: self.turns, duration_ms: 0, total_cost_usd: 0.0 }),
            error_message,
            result: None,
        }
    }
}
