use std::process::ExitCode;

use clap::Args;

use super::{AGENT_ENV, actor, open_store, store_error};
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Put a task back to pending and unassigned. As an agent (--agent or
/// $TROUPE_AGENT_ID), only a task you hold; without one, any task (recovery).
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The task.
    pub id: String,
    /// The agent giving the task up.
    #[arg(long, env = AGENT_ENV, hide_env_values = true)]
    pub agent: Option<String>,
}

pub fn run(g: &GlobalArgs, args: ReleaseArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    let agent = args.agent.filter(|a| !a.trim().is_empty());
    let by = agent.clone().unwrap_or_else(actor);
    let task = store.release(&args.id, agent.as_deref(), &by).map_err(store_error)?;
    if g.json {
        print_json(&task);
    } else {
        print_line(&format!("released {}", task.id));
    }
    Ok(ExitCode::SUCCESS)
}
