use std::process::ExitCode;

use clap::Args;
use troupe_store::TaskStatus;

use super::{AGENT_ENV, open_store, require_agent, store_error};
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Complete a task you hold, and print the tasks it unblocked.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// The task.
    pub id: String,
    /// The agent completing it (must be the one holding it).
    #[arg(long, env = AGENT_ENV, hide_env_values = true)]
    pub agent: Option<String>,
}

pub fn run(g: &GlobalArgs, args: CompleteArgs) -> CliResult<ExitCode> {
    let agent = require_agent(args.agent, "board complete")?;
    let store = open_store(g)?;
    // Quality gates (seed 003, B2) run here, before the state change, and only for a completion the
    // store would accept (the holder completing a task in progress); the store reports the rest.
    if store.task(&args.id).is_ok_and(|t| t.status == TaskStatus::InProgress && t.assignee.as_deref() == Some(&agent)) {
        super::gate::task_completed(g, &args.id, &agent)?;
    }
    let done = store.complete(&args.id, &agent).map_err(store_error)?;
    if g.json {
        print_json(&done);
    } else if done.unblocked.is_empty() {
        print_line(&format!("completed {}", done.task.id));
    } else {
        print_line(&format!("completed {}; unblocked {}", done.task.id, done.unblocked.join(", ")));
    }
    Ok(ExitCode::SUCCESS)
}
