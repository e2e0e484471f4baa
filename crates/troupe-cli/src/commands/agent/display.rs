//! One concise line per agent log record, for `agent run` progress and `agent logs`.

use troupe_core::event::{AgentEvent, ResultType};
use troupe_engine::supervisor::{Body, Record};

use crate::output::{escape, paint};

/// How much to show.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// Tool calls, failures, errors, lifecycle (live progress).
    Progress,
    /// Also assistant text and thinking (logs).
    Full,
}

/// The first non-blank line of agent text, at most `max` characters, escaped.
fn clip(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    if line.chars().count() > max {
        format!("{}…", escape(&line.chars().take(max).collect::<String>()))
    } else {
        escape(line).into_owned()
    }
}

/// What a tool call is about: a path, a command, a pattern.
fn tool_target(input: &serde_json::Value) -> String {
    for key in ["file_path", "filePath", "path", "command", "cmd", "pattern", "query", "url", "changes"] {
        if let Some(v) = input.get(key) {
            return match v {
                serde_json::Value::String(s) => clip(s, 80),
                serde_json::Value::Array(a) => clip(
                    &a.iter().filter_map(|c| c.get("path").and_then(|p| p.as_str())).collect::<Vec<_>>().join(", "),
                    80,
                ),
                other => clip(&other.to_string(), 80),
            };
        }
    }
    String::new()
}

/// The line for `record` (the caller puts the time before it); `None` to show nothing.
pub(crate) fn line(record: &Record, detail: Detail) -> Option<String> {
    let text = match &record.body {
        Body::Spawned { engine, model, pid, .. } => format!(
            "started {} on {engine}{} (pid {pid})",
            record.agent,
            model.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
        ),
        Body::Event { event } => match event {
            AgentEvent::Init { session_id, model } => match (detail, session_id) {
                (Detail::Full, _) | (_, Some(_)) => format!(
                    "session {}{}",
                    session_id.as_deref().unwrap_or("-"),
                    model.as_deref().map(|m| format!(", model {m}")).unwrap_or_default()
                ),
                _ => return None,
            },
            AgentEvent::ToolUse { name, input, .. } => {
                format!("{} {} {}", paint("→", "36"), escape(name), tool_target(input))
            }
            AgentEvent::ToolResult { ok: false, output, .. } => format!("{} {}", paint("✗", "31"), clip(output, 100)),
            AgentEvent::ToolResult { ok: true, output, .. } if detail == Detail::Full => {
                format!("{} {}", paint("✓", "32"), clip(output, 100))
            }
            AgentEvent::Text { text } if detail == Detail::Full && !text.trim().is_empty() => clip(text, 120),
            AgentEvent::Thinking { text } if detail == Detail::Full => format!("(thinking) {}", clip(text, 100)),
            AgentEvent::Error { message, retry: true } => {
                format!("{} retrying: {}", paint("!", "33"), clip(message, 100))
            }
            AgentEvent::Error { message, retry: false } => format!("{} {}", paint("!", "31"), clip(message, 100)),
            _ => return None,
        },
        // What a file change left, logged for replay: the change itself was shown.
        Body::Wrote { files, .. } if detail == Detail::Full => {
            let names: Vec<String> = files.iter().map(|f| escape(&f.path).into_owned()).collect();
            format!("  (recorded {})", names.join(", "))
        }
        Body::Wrote { .. } => return None,
        Body::Unresponsive { silent_ms } => {
            format!("{} no output for {:.0}s: the agent may be hung", paint("?", "33"), *silent_ms as f64 / 1000.0)
        }
        Body::Stopping { signal } => format!("stopping: {signal} to the process group"),
        Body::Exited { outcome, exit_code, signal } => {
            let how = match (exit_code, signal) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "ended".to_string(),
            };
            let colour = if outcome.kind == ResultType::Success { "32" } else { "31" };
            let stats = outcome
                .stats
                .map(|s| {
                    format!(", {} turns, {:.1}s, ${:.4}", s.num_turns, s.duration_ms as f64 / 1000.0, s.total_cost_usd)
                })
                .unwrap_or_default();
            let err = outcome.error_message.as_deref().map(|m| format!(": {}", clip(m, 120))).unwrap_or_default();
            format!("{} ({how}{stats}){err}", paint(outcome.kind.as_str(), colour))
        }
    };
    Some(text)
}
