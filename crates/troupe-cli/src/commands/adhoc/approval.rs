//! Approvals of adhoc mode. In an adhoc session (`TROUPE_APPROVALS` set by
//! `troupe adhoc`), the PreToolUse hook rates every call the gates allowed
//! with `[adhoc]`'s risk rules; a call at or above `approve_from` is held: a
//! `plan` message from the agent to [`APPROVER`] describes it, and the hook
//! waits for the `plan_decision` that answers it (the store's approval
//! records, decided by [`troupe_store::approval::decide_plan`]: the adhoc
//! terminal's `[y/N/always]`, or `troupe approve`/`reject`, or the HTTP API).
//! Every decision goes to the audit log with its risk level.

use std::time::{Duration, Instant};

use serde_json::Value;
use troupe_core::approval::PlanDecision;
use troupe_core::rbac::risk::Assessment;
use troupe_store::audit::NewAuditRecord;
use troupe_store::{MessageKind, NewMessage, Store};

/// The environment variable that turns approvals on for an agent's hooks.
pub const APPROVALS_ENV: &str = "TROUPE_APPROVALS";
/// The longest a held call waits: the engines kill a PreToolUse hook after 30 s
/// (troupe installs it so) and might then run the call; refused before that.
const HOOK_BUDGET: Duration = Duration::from_secs(25);

/// Who held calls are submitted to: the person at the adhoc terminal.
pub const APPROVER: &str = "user";

/// The question a held call asks, as the terminal shows it.
pub fn question(tool: &str, input: &Value) -> String {
    let detail = ["command", "cmd", "file_path", "path", "url"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(|d| format!(" {d:?}"))
        .unwrap_or_default();
    format!("approve {tool}{detail}?")
}

fn rated(a: &Assessment) -> String {
    match a.category {
        Some(c) => format!("risk {}, {}", a.risk.as_str(), c.as_str()),
        None => format!("risk {}", a.risk.as_str()),
    }
}

/// The hook's side: `None` lets the call run, `Some(reason)` refuses it.
/// Called only for a PreToolUse the gates allowed, in an adhoc session.
pub fn hold(root: &std::path::Path, agent: &str, role: &str, tool: &str, input: &Value) -> Option<String> {
    let layout = troupe_core::layout::Layout::new(root);
    let config = match troupe_project::config::load(&layout) {
        Ok(c) => c,
        Err(e) => return Some(format!("troupe adhoc: cannot read the risk rules: {e}")),
    };
    let store = match troupe_store::open(&layout, &config.store) {
        Ok(s) => s,
        Err(e) => return Some(format!("troupe adhoc: cannot open the store for approvals: {e}")),
    };
    let command = input.get("command").or_else(|| input.get("cmd")).and_then(Value::as_str);
    let assessment = config.adhoc.rules().classify(tool, command);
    let audit = |allowed: bool, reason: String| {
        let _ = store.append_audit(NewAuditRecord {
            agent: agent.to_string(),
            role: role.to_string(),
            tool: tool.to_string(),
            decision: if allowed { troupe_store::Decision::Allowed } else { troupe_store::Decision::Denied },
            reason: Some(reason),
            duration_ms: None,
            argument_shape: troupe_gateway::audit::shape(input),
            thinking_signature: None,
        });
    };
    if assessment.risk < config.adhoc.approve_from {
        audit(true, format!("{} (below approve_from {})", rated(&assessment), config.adhoc.approve_from.as_str()));
        return None;
    }
    let question = question(tool, input);
    let timeout = Duration::from_millis(config.adhoc.approval_timeout_ms).min(HOOK_BUDGET);
    let decision = ask(store.as_ref(), agent, &format!("{question} ({})", rated(&assessment)), timeout);
    match decision {
        Ok(d) if d.approved => {
            audit(true, format!("{}: approved by {}", rated(&assessment), d.decided_by));
            None
        }
        Ok(d) => {
            let why = if d.reason.trim().is_empty() { String::new() } else { format!(": {}", d.reason.trim()) };
            let reason = format!("troupe adhoc: {} rejected {question} ({}){why}", d.decided_by, rated(&assessment));
            audit(false, reason.clone());
            Some(reason)
        }
        Err(e) => {
            let reason = format!("troupe adhoc: {question} ({}) was not approved: {e}", rated(&assessment));
            audit(false, reason.clone());
            Some(reason)
        }
    }
}

/// Submit the held call and wait for its decision.
fn ask(store: &dyn Store, agent: &str, body: &str, timeout: Duration) -> Result<PlanDecision, String> {
    let message = NewMessage {
        from: agent.to_string(),
        to: APPROVER.to_string(),
        priority: 5,
        kind: MessageKind::Plan,
        body: body.to_string(),
        in_reply_to: None,
    };
    let sent = store.send(message).map_err(|e| format!("cannot submit it: {}", chain(&e)))?;
    let id = sent.first().map(|m| m.id).ok_or("it was not submitted")?;
    let deadline = Instant::now() + timeout;
    loop {
        let thread = store.thread(id).map_err(|e| format!("cannot read its answer: {}", chain(&e)))?;
        let decision = thread
            .iter()
            .filter(|m| m.kind == MessageKind::PlanDecision && m.in_reply_to == Some(id))
            .find_map(|m| PlanDecision::parse(&m.body));
        if let Some(d) = decision {
            return Ok(d);
        }
        if Instant::now() >= deadline {
            return Err(format!("no answer within {} ms ([adhoc] approval_timeout_ms)", timeout.as_millis()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An error with its causes, for the one line the model is told.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// The terminal's side: answers held calls of `agent` from `answers` (lines:
/// `y`, `n` or `always`) until `done` is set, printing each question on
/// stderr. `always` approves that tool for the rest of the session.
pub fn answer_loop(
    store: &dyn Store,
    agent: &str,
    answers: &mut dyn Iterator<Item = String>,
    done: &std::sync::atomic::AtomicBool,
) {
    let mut always: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        let pending = store.inbox(APPROVER, true).unwrap_or_default();
        for m in pending.into_iter().filter(|m| m.kind == MessageKind::Plan && m.from == agent) {
            if !seen.insert(m.id) {
                continue;
            }
            let _ = store.mark_read(APPROVER, &[m.id]);
            let tool = m.body.split_whitespace().nth(1).unwrap_or_default().to_string();
            let shown = crate::output::escape(&m.body).into_owned();
            let (approved, reason) = if always.contains(&tool) {
                crate::output::note(&format!("{shown} [always]"));
                (true, "approved for the session".to_string())
            } else {
                crate::output::note(&format!("{shown} [y/N/always]"));
                match answers.next().map(|a| a.trim().to_ascii_lowercase()) {
                    Some(a) if a == "y" || a == "yes" => (true, String::new()),
                    Some(a) if a == "always" => {
                        always.push(tool);
                        (true, "approved for the session".to_string())
                    }
                    Some(_) => (false, "the person at the terminal said no".to_string()),
                    // No terminal to answer from: it waits for `troupe approve`/`reject`.
                    None => {
                        crate::output::note(&format!(
                            "  pending: troupe approve {0}, or troupe reject {0} --reason ...",
                            m.id
                        ));
                        continue;
                    }
                }
            };
            if let Err(e) = troupe_store::approval::decide_plan(store, m.id, approved, APPROVER, &reason) {
                crate::output::note(&format!("warning: {e}"));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_name_the_tool_and_what_it_touches() {
        assert_eq!(question("Bash", &serde_json::json!({"command": "rm -rf build"})), "approve Bash \"rm -rf build\"?");
        assert_eq!(question("Write", &serde_json::json!({"file_path": "a.txt"})), "approve Write \"a.txt\"?");
        assert_eq!(question("Task", &serde_json::json!({})), "approve Task?");
    }
}
