//! Dressing an [`Answer`] in an engine's hook contract: exit code, stdout JSON,
//! stderr text. Every string stays under the engine's limit (Claude Code keeps
//! 10,000 characters of hook output), and every JSON output that Claude or Codex
//! read from `hookSpecificOutput` carries `hookEventName`.

use serde_json::{Value, json};

use crate::decide::Answer;
use crate::engine::{Engine, Event};

/// The most characters troupe puts in any one output string.
pub const MAX_CHARS: usize = 9_000;

/// What the `troupe hook` process does: exit code, stdout, stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The exit code.
    pub exit_code: u8,
    /// Written to stdout (JSON, or empty).
    pub stdout: String,
    /// Written to stderr.
    pub stderr: String,
}

impl Rendered {
    fn ok(stdout: Value) -> Rendered {
        Rendered { exit_code: 0, stdout: stdout.to_string(), stderr: String::new() }
    }

    fn empty() -> Rendered {
        Rendered { exit_code: 0, stdout: String::new(), stderr: String::new() }
    }

    fn exit2(message: String) -> Rendered {
        Rendered { exit_code: 2, stdout: String::new(), stderr: message }
    }
}

/// How to get unstuck when a hook fails closed.
pub const UNSTUCK: &str = "troupe's hooks fail closed: when a check cannot run, the action is refused. To get unstuck, \
fix the cause above. To turn troupe's hooks off for a while, start the agent with TROUPE_HOOKS=off in its environment \
(or remove them with `troupe init --uninstall-hooks`; Claude Code also honours \"disableAllHooks\": true in \
.claude/settings.local.json).";

/// The text of a fail-closed error.
pub fn error_message(check: &str, detail: &str) -> String {
    format!("troupe hook: the {check} check failed: {detail}\n{UNSTUCK}")
}

/// `text` cut to [`MAX_CHARS`] characters, saying so when cut.
pub fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_CHARS {
        return text.to_string();
    }
    let mut out: String = text.chars().take(MAX_CHARS - 40).collect();
    out.push_str("\n… (troupe cut this message here)");
    out
}

/// Render `answer` to `event` for `engine`.
pub fn render(engine: Engine, event: Event, answer: &Answer) -> Rendered {
    match engine {
        Engine::Claude | Engine::Codex => claude_like(engine, event, answer),
        Engine::Gemini => gemini(engine, event, answer),
        Engine::OpenCode => opencode(answer),
    }
}

fn claude_like(engine: Engine, event: Event, answer: &Answer) -> Rendered {
    let name = event.engine_name(engine);
    match answer {
        Answer::Pass => Rendered::empty(),
        Answer::Deny(reason) if event == Event::PreToolUse => Rendered::ok(json!({
            "hookSpecificOutput": {
                "hookEventName": name,
                "permissionDecision": "deny",
                "permissionDecisionReason": bounded(reason),
            }
        })),
        Answer::Block(reason) if matches!(event, Event::Stop | Event::SubagentStop) => {
            Rendered::ok(json!({ "decision": "block", "reason": bounded(reason) }))
        }
        // TaskCompleted and TeammateIdle take exit 2 with the reason on stderr as "keep working".
        Answer::Deny(reason) | Answer::Block(reason) => Rendered::exit2(bounded(reason)),
        // After a tool call, Claude Code and Codex add the context to the tool's result for the model.
        Answer::Context(text)
            if matches!(event, Event::SessionStart | Event::UserPromptSubmit | Event::PostToolUse) =>
        {
            Rendered::ok(json!({ "hookSpecificOutput": { "hookEventName": name, "additionalContext": bounded(text) } }))
        }
        Answer::Context(text) | Answer::Warn(text) => Rendered::ok(json!({ "systemMessage": bounded(text) })),
        Answer::Error { check, detail } => Rendered::exit2(bounded(&error_message(check, detail))),
    }
}

fn gemini(engine: Engine, event: Event, answer: &Answer) -> Rendered {
    let name = event.engine_name(engine);
    match answer {
        Answer::Pass if event == Event::PreToolUse => Rendered::ok(json!({ "decision": "allow" })),
        Answer::Pass => Rendered::ok(json!({})),
        Answer::Deny(reason) | Answer::Block(reason) => {
            Rendered::ok(json!({ "decision": "deny", "reason": bounded(reason) }))
        }
        // Gemini CLI puts SessionStart context before the first prompt
        // (`<hook_context>…</hook_context>\n\n<prompt>`) and, resuming the
        // session, drops every user message that starts that way: the role
        // prompt and assignment with it. So the reminder is shown, not sent;
        // the prompt and every deny reason tell the model the same.
        Answer::Context(text) if event == Event::SessionStart => {
            Rendered::ok(json!({ "systemMessage": bounded(text) }))
        }
        Answer::Context(text) => Rendered::ok(json!({
            "hookSpecificOutput": { "hookEventName": name, "additionalContext": bounded(text) }
        })),
        Answer::Warn(text) => Rendered::ok(json!({ "systemMessage": bounded(text) })),
        Answer::Error { check, detail } => {
            let message = bounded(&error_message(check, detail));
            // The deny form on stdout, and exit 2 with the reason, which Gemini CLI also reads as a deny.
            Rendered {
                exit_code: 2,
                stdout: json!({ "decision": "deny", "reason": message }).to_string(),
                stderr: message,
            }
        }
    }
}

/// The bridge plugin's contract: `{"decision":"allow"|"deny","reason"?}`; it
/// throws (blocks the tool) on a deny or on any exit code but 0.
fn opencode(answer: &Answer) -> Rendered {
    match answer {
        Answer::Pass | Answer::Context(_) => Rendered::ok(json!({ "decision": "allow" })),
        Answer::Warn(text) => Rendered::ok(json!({ "decision": "allow", "warning": bounded(text) })),
        Answer::Deny(reason) | Answer::Block(reason) => Rendered {
            exit_code: 2,
            stdout: json!({ "decision": "deny", "reason": bounded(reason) }).to_string(),
            stderr: bounded(reason),
        },
        Answer::Error { check, detail } => {
            let message = bounded(&error_message(check, detail));
            Rendered {
                exit_code: 2,
                stdout: json!({ "decision": "deny", "reason": message }).to_string(),
                stderr: message,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_of(r: &Rendered) -> Value {
        serde_json::from_str(&r.stdout).unwrap()
    }

    #[test]
    fn claude_contracts() {
        let deny = render(Engine::Claude, Event::PreToolUse, &Answer::Deny("no".into()));
        assert_eq!(deny.exit_code, 0);
        assert_eq!(
            json_of(&deny),
            json!({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}})
        );
        let block = render(Engine::Claude, Event::Stop, &Answer::Block("verify".into()));
        assert_eq!(json_of(&block), json!({"decision":"block","reason":"verify"}));
        let task = render(Engine::Claude, Event::TaskCompleted, &Answer::Block("tests fail".into()));
        assert_eq!((task.exit_code, task.stderr.as_str()), (2, "tests fail"));
        let ctx = render(Engine::Claude, Event::UserPromptSubmit, &Answer::Context("phase".into()));
        assert_eq!(json_of(&ctx)["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
        for engine in [Engine::Claude, Engine::Codex] {
            let after = render(engine, Event::PostToolUse, &Answer::Context("2 messages".into()));
            assert_eq!(
                json_of(&after),
                json!({"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"2 messages"}}),
                "{engine}"
            );
        }
        let err = render(Engine::Claude, Event::PreToolUse, &Answer::error("session id", "missing"));
        assert_eq!(err.exit_code, 2);
        assert!(err.stderr.contains("the session id check failed: missing") && err.stderr.contains("TROUPE_HOOKS=off"));
        assert_eq!(render(Engine::Claude, Event::PreToolUse, &Answer::Pass), Rendered::empty());
    }

    #[test]
    fn gemini_and_opencode_contracts() {
        assert_eq!(json_of(&render(Engine::Gemini, Event::PreToolUse, &Answer::Pass)), json!({"decision":"allow"}));
        let deny = render(Engine::Gemini, Event::PreToolUse, &Answer::Deny("no".into()));
        assert_eq!(json_of(&deny), json!({"decision":"deny","reason":"no"}));
        let err = render(Engine::Gemini, Event::PreToolUse, &Answer::error("input", "bad"));
        assert_eq!(json_of(&err)["decision"], "deny");
        let ctx = render(Engine::Gemini, Event::UserPromptSubmit, &Answer::Context("x".into()));
        assert_eq!(json_of(&ctx)["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
        let after = render(Engine::Gemini, Event::PostToolUse, &Answer::Context("x".into()));
        assert_eq!(json_of(&after)["hookSpecificOutput"]["hookEventName"], "AfterTool");
        let start = render(Engine::Gemini, Event::SessionStart, &Answer::Context("gates".into()));
        assert_eq!(json_of(&start), json!({"systemMessage": "gates"}), "never before the prompt");
        let oc = render(Engine::OpenCode, Event::PreToolUse, &Answer::Deny("no".into()));
        assert_eq!((oc.exit_code, json_of(&oc)["decision"].as_str()), (2, Some("deny")));
        assert_eq!(json_of(&render(Engine::OpenCode, Event::PreToolUse, &Answer::Pass))["decision"], "allow");
    }

    #[test]
    fn outputs_stay_under_the_limit() {
        let huge = "é".repeat(50_000);
        for engine in Engine::ALL {
            for answer in [Answer::Deny(huge.clone()), Answer::Context(huge.clone()), Answer::error("x", &huge)] {
                let r = render(engine, Event::PreToolUse, &answer);
                assert!(r.stdout.chars().count() < 10_000 && r.stderr.chars().count() < 10_000, "{engine}");
            }
        }
    }
}
