use std::process::ExitCode;

use clap::Args;
use troupe_store::{BROADCAST, MessageKind, NewMessage};

use super::wake::{Wake, wake};
use crate::cli::GlobalArgs;
use crate::commands::board::{actor, open_store_in, store_error};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line};

/// Send a message. Prints the new message's id (one per recipient for a broadcast).
#[derive(Debug, Args)]
pub struct SendArgs {
    /// The recipient's agent id, or `*` for every registered agent that is not finished.
    pub to: String,
    /// The text.
    pub text: String,
    /// 1 (lowest) to 5 (most urgent).
    #[arg(long, short, default_value_t = troupe_store::message::DEFAULT_PRIORITY,
          value_parser = clap::value_parser!(u8).range(1..=5))]
    pub priority: u8,
    /// The id of the message this answers.
    #[arg(long = "reply-to", value_name = "ID")]
    pub reply_to: Option<i64>,
    /// What the message is: text, shutdown_request, shutdown_response, plan, plan_decision,
    /// recovery_notice, nudge or findings.
    #[arg(long, default_value = "text")]
    pub kind: String,
    /// The sender (defaults to $TROUPE_AGENT_ID, or `user`). An agent with a
    /// gateway token always sends as the agent the store binds it to.
    #[arg(long)]
    pub from: Option<String>,
    /// Plan mode (seed 003 B3): the agent is told to plan only, and troupe refuses its file
    /// writes and shell commands until a plan it submits (request_plan_approval) is approved
    /// (`troupe approve`).
    #[arg(long, conflicts_with = "kind")]
    pub plan_mode: bool,
}

/// Who sends: the agent the store binds this process's gateway token to (a
/// teammate's `troupe msg send`), else `--from`, `$TROUPE_AGENT_ID` or `user`.
/// Never anything in the message's text.
fn sender(store: &dyn troupe_store::Store, from: Option<String>) -> CliResult<String> {
    let from = from.filter(|f| !f.trim().is_empty());
    let Some(token) = std::env::var(troupe_store::token::ENV).ok().filter(|t| !t.is_empty()) else {
        return Ok(from.unwrap_or_else(actor));
    };
    let agent = store.gateway_agent(&troupe_store::token::hash(&token)).map_err(store_error)?.ok_or_else(|| {
        CliError::user(format!("${} is no agent's gateway token", troupe_store::token::ENV))
            .with_hint("unset it to send as a person")
    })?;
    match from {
        Some(f) if f != agent => Err(CliError::user(format!("{agent} cannot send as '{f}'"))
            .with_hint("an agent sends as itself: leave --from out")),
        _ => Ok(agent),
    }
}

pub fn run(g: &GlobalArgs, args: SendArgs) -> CliResult<ExitCode> {
    let kind: MessageKind =
        args.kind.parse().map_err(|e: troupe_store::message::UnknownMessageKind| CliError::usage(e.to_string()))?;
    let project = crate::project::find(g)?;
    let store = open_store_in(&project)?;
    let from = sender(store.as_ref(), args.from)?;
    if args.to != BROADCAST && matches!(store.agent(&args.to), Err(troupe_store::StoreError::AgentNotFound(_))) {
        // Not an error: the Lead may write to a teammate before it starts.
        note(&format!("note: no agent `{}` is registered; the message waits in its inbox", args.to));
    }
    let message = NewMessage {
        from,
        to: args.to.clone(),
        priority: args.priority,
        kind,
        body: args.text,
        in_reply_to: args.reply_to,
    };
    let sent =
        if args.plan_mode { plan_mode(store.as_ref(), message)? } else { store.send(message).map_err(store_error)? };
    let layout = project.layout();
    let woken: Vec<(i64, Option<Wake>)> = sent.iter().map(|m| (m.id, wake(store.as_ref(), layout, m))).collect();
    for (m, (_, w)) in sent.iter().zip(&woken) {
        match w {
            Some(Wake::NotDelivered) => note(&format!(
                "warning: {} did not take the notice after {} tries; the message waits in its inbox",
                m.to,
                1 + super::wake::MAX_RETRIES
            )),
            Some(Wake::Busy) => note(&format!("{} is at work: troupe's hooks hand it the message", m.to)),
            _ => {}
        }
    }
    if g.json {
        let docs: Vec<serde_json::Value> = sent
            .iter()
            .zip(&woken)
            .map(|(m, (_, w))| {
                let mut doc = serde_json::to_value(m).unwrap_or_default();
                if let Some(w) = w {
                    doc["wake"] = serde_json::to_value(w).unwrap_or_default();
                }
                doc
            })
            .collect();
        print_json(&docs);
    } else if sent.is_empty() {
        note("no registered agent to broadcast to; nothing was sent");
    } else {
        let ids: Vec<String> = sent.iter().map(|m| m.id.to_string()).collect();
        print_line(&ids.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

/// A plan-mode message: the text and the plan-only instructions, naming the
/// gateway tool as the recipient's engine names it (Claude Code's naming when
/// it is not registered yet).
fn plan_mode(store: &dyn troupe_store::Store, mut message: NewMessage) -> CliResult<Vec<troupe_store::Message>> {
    let engine = store.agent(&message.to).map(|a| a.engine).unwrap_or_default();
    let naming = troupe_core::tools::McpNaming::of_engine(&engine);
    message.body = format!("{}\n\n{}", message.body, troupe_gate::modes::plan_mode_instructions(naming));
    let sent = store.send_plan_mode(message).map_err(|e| match e {
        e @ troupe_store::StoreError::PlanModeBroadcast => CliError::usage(e.to_string()),
        e => store_error(e),
    })?;
    Ok(vec![sent])
}
