//! The normalised agent event: one engine-neutral shape for what every engine
//! (Claude Code, Gemini CLI, Codex, OpenCode, custom) prints while it runs,
//! and the seed's `ParsedOutput` for how a run ended.
//!
//! Only `troupe-engine` knows each CLI's wire format; it converts lines into
//! [`AgentEvent`]s. [`RunSummary`] folds events into the final [`ParsedOutput`],
//! including the case of a stream that ended without a result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One normalised event from an agent's output stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The session started.
    Init {
        /// The engine's session id (used to resume).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        /// The model the engine says it uses.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Assistant text (a whole message or a delta).
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning the engine chose to show.
    Thinking {
        /// The text.
        text: String,
    },
    /// The agent called a tool.
    ToolUse {
        /// The call's id, matching the [`AgentEvent::ToolResult`].
        id: String,
        /// The tool's name as the engine calls it.
        name: String,
        /// What kind of action it is.
        kind: ToolKind,
        /// The tool's arguments.
        input: Value,
    },
    /// A tool call finished.
    ToolResult {
        /// The call's id.
        id: String,
        /// Whether the tool succeeded (a denied call is not ok).
        ok: bool,
        /// Output or error text, possibly truncated by the engine.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output: String,
    },
    /// Token usage reported by the engine (per step or per turn).
    Usage(Usage),
    /// An error the engine reported.
    Error {
        /// The message.
        message: String,
        /// True when the engine says it will retry (not fatal).
        retry: bool,
    },
    /// The run's final result.
    Result {
        /// The outcome.
        output: ParsedOutput,
    },
    /// Anything not understood: unknown event types, or a line that is not JSON
    /// (kept as a JSON string). Never an error.
    Raw {
        /// The original line, as JSON when it parsed.
        data: Value,
    },
}

/// What kind of action a tool call is, for progress display and audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Writes or edits a file.
    FileEdit,
    /// Reads a file or lists a directory.
    FileRead,
    /// Runs a shell command.
    Command,
    /// Searches files (grep, glob).
    Search,
    /// Fetches or searches the web.
    Web,
    /// A tool served over MCP.
    Mcp,
    /// Anything else.
    Other,
}

impl ToolKind {
    /// Classifies a tool by name, across the engines' vocabularies.
    pub fn classify(name: &str) -> ToolKind {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("mcp__") || lower.contains("mcp_tool") {
            return ToolKind::Mcp;
        }
        match lower.as_str() {
            "write" | "edit" | "multiedit" | "notebookedit" | "write_file" | "replace" | "apply_patch" | "patch"
            | "file_change" | "edit_file" => ToolKind::FileEdit,
            "read" | "read_file" | "read_many_files" | "list_directory" | "ls" | "list" => ToolKind::FileRead,
            "bash" | "shell" | "run_shell_command" | "exec_command" | "command_execution" | "local_shell" => {
                ToolKind::Command
            }
            "grep" | "glob" | "grep_search" | "search_file_content" | "codesearch" => ToolKind::Search,
            "webfetch" | "websearch" | "web_fetch" | "google_web_search" | "web_search" => ToolKind::Web,
            _ => ToolKind::Other,
        }
    }
}

/// Token counts of one model turn (and cost, when the engine reports it).
///
/// Parsers emit usage so that the sum of a launch's `Usage` events equals what
/// its engine reports for the whole launch: per turn where the stream shows
/// turns, and the rest (if any) when the launch's totals arrive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Fresh input tokens: not read from a cache, not written to one.
    pub input_tokens: u64,
    /// Output tokens (reasoning included, as every provider bills them).
    pub output_tokens: u64,
    /// Input tokens served from a cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Input tokens written to a cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of the output tokens, those spent reasoning (shown, not billed twice).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Cost of this usage in USD, when the engine reports it per turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The engine's reported cost of the whole launch so far (Claude Code's
    /// `total_cost_usd`): the ledger books the difference to what it booked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_cost_usd: Option<f64>,
    /// The engine's id of the model turn, which deduplicates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The model of the turn, when the stream names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Every token of the turn.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cached_input_tokens + self.cache_write_tokens
    }
}

/// How a run ended (seed 002 `ParsedOutput.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultType {
    /// The agent finished its work.
    Success,
    /// The engine or the model failed.
    Error,
    /// The engine stopped at its turn limit.
    MaxTurns,
    /// The stream ended without a result (killed, crashed, cancelled).
    Interrupted,
}

impl ResultType {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultType::Success => "success",
            ResultType::Error => "error",
            ResultType::MaxTurns => "max_turns",
            ResultType::Interrupted => "interrupted",
        }
    }
}

/// Run statistics (seed 002 `ParsedOutput.stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Model turns taken.
    pub num_turns: u64,
    /// Wall time of the run in milliseconds.
    pub duration_ms: u64,
    /// Cost in USD (0 when the engine does not report it).
    pub total_cost_usd: f64,
}

/// The parsed outcome of a run (seed 002 `ParsedOutput`), plus the final text,
/// which is the teammate's completion report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedOutput {
    /// How it ended.
    #[serde(rename = "type")]
    pub kind: ResultType,
    /// The engine session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Statistics, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
    /// What went wrong, for `error`, `max_turns` and `interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The final assistant text (the completion report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

impl ParsedOutput {
    /// An outcome of the given kind with nothing else known.
    pub fn new(kind: ResultType) -> Self {
        ParsedOutput { kind, session_id: None, stats: None, error_message: None, result: None }
    }
}

/// Folds a run's events into its [`ParsedOutput`]: remembers the session id,
/// the last assistant text, usage and the result event, and decides what a
/// stream that ended without a result means.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    session_id: Option<String>,
    model: Option<String>,
    last_text: Option<String>,
    result: Option<ParsedOutput>,
    last_fatal: Option<String>,
    tool_calls: u64,
    usage: Usage,
}

impl RunSummary {
    /// A summary of nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The assistant text since the last tool call, if any.
    pub fn final_text(&self) -> Option<&str> {
        self.last_text.as_deref()
    }

    /// Takes one event into account.
    pub fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Init { session_id, model } => {
                if session_id.is_some() {
                    self.session_id.clone_from(session_id);
                }
                if model.is_some() {
                    self.model.clone_from(model);
                }
            }
            AgentEvent::Text { text } => match &mut self.last_text {
                Some(t) if !text.is_empty() => t.push_str(text),
                _ => self.last_text = Some(text.clone()),
            },
            AgentEvent::ToolUse { .. } => {
                self.tool_calls += 1;
                // Text before a tool call is narration, not the final report.
                self.last_text = None;
            }
            AgentEvent::Usage(u) => {
                self.usage.input_tokens += u.input_tokens;
                self.usage.output_tokens += u.output_tokens;
                self.usage.cached_input_tokens += u.cached_input_tokens;
                self.usage.cache_write_tokens += u.cache_write_tokens;
                self.usage.reasoning_tokens += u.reasoning_tokens;
                if let Some(c) = u.cost_usd {
                    *self.usage.cost_usd.get_or_insert(0.0) += c;
                }
                // The engine's own running total outranks any sum of ours.
                if u.launch_cost_usd.is_some() {
                    self.usage.cost_usd = u.launch_cost_usd;
                }
            }
            AgentEvent::Error { message, retry: false } => self.last_fatal = Some(message.clone()),
            AgentEvent::Result { output } => self.result = Some(output.clone()),
            AgentEvent::Thinking { .. } | AgentEvent::ToolResult { .. } | AgentEvent::Error { .. } => {}
            AgentEvent::Raw { .. } => {}
        }
    }

    /// The session id seen so far.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The model the engine reported.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Tool calls seen.
    pub fn tool_calls(&self) -> u64 {
        self.tool_calls
    }

    /// Usage summed over the run.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// Whether a result event was seen.
    pub fn has_result(&self) -> bool {
        self.result.is_some()
    }

    /// The outcome, given how the process ended: `exit_code` is `None` when it
    /// was killed by a signal, `cancelled` when troupe stopped it, and
    /// `elapsed_ms` fills `duration_ms` when the engine did not report it.
    pub fn finish(&self, exit_code: Option<i32>, cancelled: bool, elapsed_ms: u64) -> ParsedOutput {
        let mut out = match &self.result {
            Some(r) => r.clone(),
            None if cancelled || exit_code.is_none() => {
                let mut o = ParsedOutput::new(ResultType::Interrupted);
                o.error_message = Some(match (cancelled, exit_code) {
                    (true, _) => "stopped by troupe before the agent finished".to_string(),
                    _ => "the agent was killed by a signal before it reported a result".to_string(),
                });
                o
            }
            None if exit_code == Some(0) => {
                let mut o = ParsedOutput::new(ResultType::Interrupted);
                o.error_message = Some("the agent exited without reporting a result".to_string());
                o
            }
            None => {
                let mut o = ParsedOutput::new(ResultType::Error);
                let code = exit_code.unwrap_or(-1);
                o.error_message = Some(match &self.last_fatal {
                    Some(m) => format!("{m} (exit status {code})"),
                    None => format!("the agent exited with status {code} without reporting a result"),
                });
                o
            }
        };
        if out.session_id.is_none() {
            out.session_id.clone_from(&self.session_id);
        }
        if out.result.is_none() && out.kind == ResultType::Success {
            out.result.clone_from(&self.last_text);
        }
        let stats = out.stats.get_or_insert(Stats::default());
        if stats.duration_ms == 0 {
            stats.duration_ms = elapsed_ms;
        }
        if stats.total_cost_usd == 0.0 {
            stats.total_cost_usd = self.usage.cost_usd.unwrap_or(0.0);
        }
        // A success reported by the engine with an exit failure stays what the
        // engine said; troupe trusts the result line over the exit status.
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(kind: ResultType) -> AgentEvent {
        AgentEvent::Result { output: ParsedOutput::new(kind) }
    }

    #[test]
    fn serialises_with_a_type_tag() {
        let e =
            AgentEvent::ToolUse { id: "t1".into(), name: "Write".into(), kind: ToolKind::FileEdit, input: json!({}) };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type": "tool_use", "id": "t1", "name": "Write", "kind": "file_edit", "input": {}})
        );
        let r = result(ResultType::MaxTurns);
        assert_eq!(serde_json::to_value(&r).unwrap(), json!({"type": "result", "output": {"type": "max_turns"}}));
        let back: AgentEvent = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn no_result_means_interrupted_or_error_by_exit_status() {
        let mut s = RunSummary::new();
        s.observe(&AgentEvent::Init { session_id: Some("s1".into()), model: None });
        assert_eq!(s.finish(Some(0), false, 5).kind, ResultType::Interrupted);
        assert_eq!(s.finish(None, false, 5).kind, ResultType::Interrupted);
        assert_eq!(s.finish(Some(1), true, 5).kind, ResultType::Interrupted);
        let e = s.finish(Some(3), false, 5);
        assert_eq!(e.kind, ResultType::Error);
        assert_eq!(e.session_id.as_deref(), Some("s1"));
        assert!(e.error_message.unwrap().contains("status 3"));
        assert_eq!(e.stats.unwrap().duration_ms, 5);
    }

    #[test]
    fn fatal_error_message_is_kept_retries_are_not() {
        let mut s = RunSummary::new();
        s.observe(&AgentEvent::Error { message: "retrying 1/5".into(), retry: true });
        s.observe(&AgentEvent::Error { message: "quota exceeded".into(), retry: false });
        assert!(s.finish(Some(1), false, 0).error_message.unwrap().starts_with("quota exceeded"));
    }

    #[test]
    fn final_text_is_the_report_and_result_wins() {
        let mut s = RunSummary::new();
        s.observe(&AgentEvent::Text { text: "Let me write it.".into() });
        s.observe(&AgentEvent::ToolUse {
            id: "1".into(),
            name: "Write".into(),
            kind: ToolKind::FileEdit,
            input: json!({}),
        });
        s.observe(&AgentEvent::Text { text: "Done.".into() });
        s.observe(&AgentEvent::Text { text: " All good.".into() });
        s.observe(&result(ResultType::Success));
        let out = s.finish(Some(1), false, 9);
        assert_eq!(out.kind, ResultType::Success);
        assert_eq!(out.result.as_deref(), Some("Done. All good."));
        assert_eq!(s.tool_calls(), 1);
    }

    #[test]
    fn classifies_tools_of_every_engine() {
        for (n, k) in [
            ("Write", ToolKind::FileEdit),
            ("write_file", ToolKind::FileEdit),
            ("apply_patch", ToolKind::FileEdit),
            ("Bash", ToolKind::Command),
            ("run_shell_command", ToolKind::Command),
            ("exec_command", ToolKind::Command),
            ("mcp__troupe__send_message", ToolKind::Mcp),
            ("glob", ToolKind::Search),
            ("Read", ToolKind::FileRead),
            ("Frobnicate", ToolKind::Other),
        ] {
            assert_eq!(ToolKind::classify(n), k, "{n}");
        }
    }
}
