//! `troupe agent …`: run one teammate, list agents, read their logs, stop them.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};

mod display;
pub(crate) mod kill;
pub(crate) mod launch;
mod list;
mod logs;
pub(crate) mod role;
mod run;
mod stop;
pub(crate) mod turn;

// Parsed once per process: the size of the `run` variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Run one teammate to completion with live progress; exit status reflects its result.
    Run(run::RunArgs),
    /// List agents in the registry with their status, engine and model.
    List(list::ListArgs),
    /// Show an agent's normalised event log (`--follow` to keep reading).
    Logs(logs::LogsArgs),
    /// Stop a running agent: SIGINT, then SIGTERM, then SIGKILL to its process group.
    Stop(stop::StopArgs),
}

pub fn run(g: &GlobalArgs, cmd: AgentCommand) -> CliResult<ExitCode> {
    match cmd {
        AgentCommand::Run(a) => run::run(g, a),
        AgentCommand::List(a) => list::run(g, a),
        AgentCommand::Logs(a) => logs::run(g, a),
        AgentCommand::Stop(a) => stop::run(g, a),
    }
}

/// Agent ids become file names: letters, digits, `.`, `_` and `-` only.
pub(crate) fn check_agent_id(id: &str) -> CliResult<()> {
    if troupe_core::layout::is_valid_agent_id(id) {
        Ok(())
    } else {
        Err(CliError::usage(format!("invalid agent id '{id}'"))
            .with_hint("agent ids use letters, digits, '.', '_' and '-' (for example builder-1)"))
    }
}
