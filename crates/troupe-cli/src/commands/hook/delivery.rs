//! Messages that reach a live agent (`troupe team`) through its hooks: the
//! store side of `troupe_gate::delivery`. On a submitted prompt and after a
//! tool call the agent's unread messages are added as context; when it wants
//! to stop it is told of them and keeps working; each one delivered is marked read, which is how
//! `troupe msg send` knows a pasted notice arrived. The same two events keep
//! the registry's status, which says whether the agent sits at its prompt
//! (`READY`) or works (`PROCESSING`): troupe's events, never the pane's text.
//!
//! Only for agents started with `TROUPE_LIVE=1` (team panes): the Lead's
//! teammates read their messages through the gateway. Delivery refuses
//! nothing: when the store cannot be read, the answer stays the gates'.

use std::path::Path;

use troupe_gate::answer::{Rendered, render};
use troupe_gate::decide::Answer;
use troupe_gate::delivery::{Pending, deliver};
use troupe_gate::run::{Lookup, project_root};
use troupe_gate::{Engine, Event};
use troupe_store::AgentStatus;

use crate::commands::team::pane::LIVE_ENV;

/// The gates' answer with the agent's messages delivered.
pub(super) fn apply(
    engine: &str,
    event: &str,
    lookup: Lookup<'_>,
    cwd: &Path,
    rendered: Rendered,
    stores: &super::Stores,
) -> Rendered {
    if lookup(LIVE_ENV).as_deref() != Some("1") {
        return rendered;
    }
    let Some(agent) = lookup("TROUPE_AGENT_ID").filter(|a| !a.is_empty()) else { return rendered };
    let Ok(engine) = engine.parse::<Engine>() else { return rendered };
    let Ok(event) = Event::parse(engine, event) else { return rendered };
    if !matches!(event, Event::UserPromptSubmit | Event::PostToolUse | Event::Stop) {
        return rendered;
    }
    let passed = rendered == render(engine, event, &Answer::Pass);
    // A stop (or a tool's result) the gates answered stays theirs; the
    // messages wait for the next event.
    if matches!(event, Event::Stop | Event::PostToolUse) && !passed {
        return rendered;
    }
    let Some(root) = project_root(lookup, cwd) else { return rendered };
    let Some(store) = stores.get(&root, &agent) else { return rendered };
    let pending: Vec<Pending> = store
        .inbox(&agent, true)
        .unwrap_or_default()
        .into_iter()
        .map(|m| Pending {
            id: m.id,
            from: m.from,
            priority: m.priority,
            kind: m.kind.as_str().to_string(),
            body: m.body,
            in_reply_to: m.in_reply_to,
        })
        .collect();
    let answer = deliver(event, &pending);
    let status = if event == Event::Stop && answer.is_none() { AgentStatus::Ready } else { AgentStatus::Processing };
    if store.agent(&agent).is_ok_and(|a| a.status != status && !a.status.is_terminal()) {
        let _ = store.set_status(&agent, status);
    }
    let Some(answer) = answer else { return rendered };
    let ids: Vec<i64> = pending.iter().map(|m| m.id).collect();
    if store.mark_read(&agent, &ids).is_err() {
        return rendered;
    }
    let answer = match (answer, passed) {
        // The gates' own context for this prompt (phase guidance) comes first.
        (Answer::Context(text), false) => match context_of(&rendered) {
            Some(ours) => Answer::Context(format!("{ours}\n\n{text}")),
            None => Answer::Context(text),
        },
        (answer, _) => answer,
    };
    render(engine, event, &answer)
}

/// The `additionalContext` a rendered prompt answer carries.
fn context_of(rendered: &Rendered) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(&rendered.stdout).ok()?;
    v["hookSpecificOutput"]["additionalContext"].as_str().map(str::to_string)
}
