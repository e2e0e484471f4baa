//! `troupe policy …`: who may do what.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod ownership;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the artifact ownership matrix (seed 000 Spec 4).
    Ownership(ownership::OwnershipArgs),
}

pub fn run(g: &GlobalArgs, cmd: PolicyCommand) -> CliResult<ExitCode> {
    match cmd {
        PolicyCommand::Ownership(a) => ownership::run(g, a),
    }
}
