//! `troupe policy …`: who may do what.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod check;
mod ownership;
mod roles;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the artifact ownership matrix (seed 000 Spec 4).
    Ownership(ownership::OwnershipArgs),
    /// What a role may use: servers, tools, memory, inheritance (from the skills).
    Check(check::CheckArgs),
    /// Every role derived from the skills.
    Roles(roles::RolesArgs),
}

pub fn run(g: &GlobalArgs, cmd: PolicyCommand) -> CliResult<ExitCode> {
    match cmd {
        PolicyCommand::Ownership(a) => ownership::run(g, a),
        PolicyCommand::Check(a) => check::run(g, a),
        PolicyCommand::Roles(a) => roles::run(g, a),
    }
}
