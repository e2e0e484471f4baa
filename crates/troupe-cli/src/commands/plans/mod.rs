//! `troupe approve` and `troupe reject` (seed 003 B3): a person decides a
//! teammate's plan (the `plan` message its `request_plan_approval` sent).
//! The decision goes through `troupe_store::approval::decide_plan`, the one
//! writer the REST endpoints and the A2A skill use too, so the teammate
//! receives it as a `plan_decision` message whichever way it was decided.

use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use troupe_store::Store;
use troupe_store::approval::{DecideError, decide_plan};

use crate::cli::GlobalArgs;
use crate::commands::board::{actor, open_store, store_error};
use crate::error::{CliError, CliResult};
use crate::output::{ago, escape, note, print_json, print_table};

/// Approve a teammate's plan (the id of its `plan` message): it may go ahead.
/// `--list` shows the plans waiting for a decision.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The plan message's id.
    #[arg(required_unless_present = "list")]
    pub id: Option<i64>,
    /// List the plans waiting for a decision instead.
    #[arg(long, conflicts_with = "id")]
    pub list: bool,
    /// Who decides (defaults to $TROUPE_AGENT_ID, or `user`).
    #[arg(long)]
    pub by: Option<String>,
}

/// Reject a teammate's plan with the reason it should revise it by.
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The plan message's id.
    pub id: i64,
    /// What the teammate should change.
    pub reason: String,
    /// Who decides (defaults to $TROUPE_AGENT_ID, or `user`).
    #[arg(long)]
    pub by: Option<String>,
}

pub fn approve(g: &GlobalArgs, args: ApproveArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    match args.id {
        Some(id) if !args.list => decide(g, store.as_ref(), id, true, args.by, ""),
        _ => list(g, store.as_ref()),
    }
}

pub fn reject(g: &GlobalArgs, args: RejectArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    decide(g, store.as_ref(), args.id, false, args.by, &args.reason)
}

fn decide(
    g: &GlobalArgs,
    store: &dyn Store,
    id: i64,
    approved: bool,
    by: Option<String>,
    reason: &str,
) -> CliResult<ExitCode> {
    let by = by.filter(|b| !b.trim().is_empty()).unwrap_or_else(actor);
    let sent = decide_plan(store, id, approved, &by, reason).map_err(|e| match e {
        DecideError::Store(e) => store_error(e),
        e @ DecideError::NoReason => CliError::usage(e.to_string()),
        e @ (DecideError::NotAPlan(_) | DecideError::AlreadyDecided { .. }) => {
            CliError::user(e.to_string()).with_hint("`troupe approve --list` shows the plans waiting for a decision")
        }
    })?;
    if g.json {
        print_json(&json!({"request_id": id, "decision_id": sent.id, "to": sent.to, "approved": approved}));
    } else {
        note(&format!("{} plan {id} of {}", if approved { "approved" } else { "rejected" }, escape(&sent.to)));
    }
    Ok(ExitCode::SUCCESS)
}

/// Plans no decision answers yet, oldest first (the store's
/// `pending_plans`, as the REST API and the dashboard list them).
fn list(g: &GlobalArgs, store: &dyn Store) -> CliResult<ExitCode> {
    let pending = store.pending_plans().map_err(store_error)?;
    if g.json {
        print_json(&pending);
        return Ok(ExitCode::SUCCESS);
    }
    if pending.is_empty() {
        note("no plans are waiting for a decision");
        return Ok(ExitCode::SUCCESS);
    }
    let now = jiff::Timestamp::now();
    let rows: Vec<Vec<String>> = pending
        .iter()
        .map(|m| {
            let first = m.body.lines().next().unwrap_or_default();
            vec![
                m.id.to_string(),
                escape(&m.from).into_owned(),
                escape(&m.to).into_owned(),
                ago(m.created_at, now),
                escape(first).into_owned(),
            ]
        })
        .collect();
    print_table(&["ID", "FROM", "TO", "SENT", "PLAN"], &rows, &[0]);
    Ok(ExitCode::SUCCESS)
}
