use std::process::ExitCode;

use clap::Args;

use super::{actor, open_store, store_error};
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Reserve a pending task for an agent: it is offered to that agent first and
/// to nobody else.
#[derive(Debug, Args)]
pub struct AssignArgs {
    /// The task.
    pub id: String,
    /// The agent.
    pub agent: String,
}

pub fn run(g: &GlobalArgs, args: AssignArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    let task = store.assign(&args.id, &args.agent, &actor()).map_err(store_error)?;
    if g.json {
        print_json(&task);
    } else {
        print_line(&format!("assigned {} to {}", task.id, args.agent));
    }
    Ok(ExitCode::SUCCESS)
}
