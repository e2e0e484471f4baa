//! `troupe agents …`: the agent registry.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod list;

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List registered agents with their status; flags those whose process is gone.
    List(list::ListArgs),
}

pub fn run(g: &GlobalArgs, cmd: AgentsCommand) -> CliResult<ExitCode> {
    match cmd {
        AgentsCommand::List(a) => list::run(g, a),
    }
}
