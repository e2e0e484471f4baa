//! `troupe worker …`: teammates run on this host for a Lead elsewhere
//! (issue 20, `[team] executors = "workers"`). `troupe worker` runs a
//! worker; `list` shows the hosts; `stop` drains one.

pub mod list;
pub mod run;
pub mod stop;

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::GlobalArgs;
use crate::error::CliResult;

/// `troupe worker`: run a worker (no subcommand), or list or stop them.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WorkerArgs {
    #[command(subcommand)]
    pub command: Option<WorkerCommand>,
    #[command(flatten)]
    pub run: run::RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// The registered worker hosts: engines, load, teammates, stale leases.
    List(list::ListArgs),
    /// Drain a worker: it finishes its teammates, takes no new job, then exits.
    Stop(stop::StopArgs),
}

pub fn run(g: &GlobalArgs, args: WorkerArgs) -> CliResult<ExitCode> {
    match args.command {
        None => run::run(g, args.run),
        Some(WorkerCommand::List(a)) => list::run(g, a),
        Some(WorkerCommand::Stop(a)) => stop::run(g, a),
    }
}
