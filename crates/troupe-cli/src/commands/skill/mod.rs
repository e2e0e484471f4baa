//! `troupe skill …`: skills the gates and the gateway use.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod use_;

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Print a skill and record it as invoked in this session (for engines without a Skill tool).
    Use(use_::UseArgs),
}

pub fn run(g: &GlobalArgs, cmd: SkillCommand) -> CliResult<ExitCode> {
    match cmd {
        SkillCommand::Use(a) => use_::run(g, a),
    }
}
