//! Plan mode in the hooks (seed 003 B3): after troupe's gates let a file
//! write or a shell command through, an agent that was sent a message in plan
//! mode is still refused it until a plan it submitted since is approved. The
//! state is the store's ([`troupe_store::PlanApprovals::plan_gate`]); which
//! calls are held and what the agent is told is `troupe_gate::modes`.

use std::path::{Path, PathBuf};

use troupe_gate::answer::{Rendered, render};
use troupe_gate::decide::Answer;
use troupe_gate::run::{Denial, Lookup, project_root};
use troupe_gate::teammate::env;
use troupe_gate::tools::{ToolCall, classify};
use troupe_gate::{Engine, Event, input, modes};
use troupe_store::approval::PlanState;

/// A call plan mode checks: a teammate's PreToolUse that writes a file or
/// runs a command, in a project. Found before the gates decide, so that the
/// store it needs can be opened meanwhile ([`super::Stores::open_ahead`]).
pub(super) struct Candidate {
    engine: Engine,
    event: Event,
    /// `TROUPE_AGENT_ID`.
    pub(super) agent: String,
    /// The project whose store holds the agent's plan gate.
    pub(super) root: PathBuf,
    tool: String,
    call: ToolCall,
    tool_input: serde_json::Value,
}

/// The call plan mode checks, or `None` when it cannot hold it (hooks off,
/// another event, no agent, not a write or a command, no project).
pub(super) fn candidate(engine: &str, event: &str, stdin: &[u8], lookup: Lookup<'_>, cwd: &Path) -> Option<Candidate> {
    if lookup(env::HOOKS).is_some_and(|v| v.eq_ignore_ascii_case("off")) {
        return None;
    }
    let engine: Engine = engine.parse().ok()?;
    let event = Event::parse(engine, event).ok()?;
    if event != Event::PreToolUse {
        return None;
    }
    let agent = lookup(env::AGENT_ID).filter(|a| !a.trim().is_empty())?;
    let hook = input::parse(engine, event, stdin).ok()?;
    let tool = hook.tool_name.clone()?;
    let call = classify(engine, &tool, &hook.tool_input).ok()?;
    if !modes::holds(&call) {
        return None;
    }
    let root = project_root(lookup, hook.cwd.as_deref().unwrap_or(cwd))?;
    Some(Candidate { engine, event, agent, root, tool, call, tool_input: hook.tool_input })
}

/// The refusal for a held call of an agent whose plan is not approved, or
/// `None` when plan mode does not hold it (no [`Candidate`], no database, no
/// plan-mode message, an approved plan).
pub(super) fn apply(
    candidate: Option<Candidate>,
    lookup: Lookup<'_>,
    stores: &super::Stores,
) -> Option<(Rendered, Option<Denial>)> {
    let Candidate { engine, event, agent, root, tool, call, tool_input } = candidate?;
    let store = stores.get(&root, &agent)?;
    let answer = match store.plan_gate(&agent) {
        Ok(None) => return None,
        Ok(Some(gate)) => match gate.state() {
            PlanState::Approved { .. } => return None,
            PlanState::Planning => modes::plan_mode(
                &call,
                &tool,
                &format!(
                    "message {} from {} asked for a plan first, and none was submitted",
                    gate.request.id, gate.request.from
                ),
            ),
            PlanState::Submitted { plan } => {
                modes::plan_mode(&call, &tool, &format!("plan {plan} waits for {}'s decision", gate.request.from))
            }
            PlanState::Rejected { plan, decision } => modes::plan_mode(
                &call,
                &tool,
                &format!(
                    "plan {plan} was rejected by {}: {}; revise it and submit it again",
                    decision.decided_by, decision.reason
                ),
            ),
        },
        // Fail closed: a gate that cannot be read holds the call.
        Err(e) => Answer::error("plan mode", e),
    };
    let reason = match &answer {
        Answer::Deny(r) => r.clone(),
        Answer::Error { .. } => format!("{PLAN}: the plan gate could not be read", PLAN = modes::PLAN_MODE_REASON),
        _ => return None,
    };
    troupe_gate::denials::record(&root, &troupe_gate::denials::Denial::now(&agent, &tool, &reason));
    let denial = Denial {
        root,
        agent,
        role: lookup(env::ROLE).filter(|r| !r.trim().is_empty()).unwrap_or_else(|| "user".to_string()),
        tool,
        reason,
        tool_input,
    };
    Some((render(engine, event, &answer), Some(denial)))
}
