//! `troupe skill …`: skills the gates and the gateway use.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod add;
mod list;
mod templates;
mod use_;

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Print a skill and record it as invoked in this session (for engines without a Skill tool).
    Use(use_::UseArgs),
    /// Create a skill from a template.
    Add(add::AddArgs),
    /// List the skills and what they grant.
    List(list::ListArgs),
    /// List the skill templates.
    Templates(templates::TemplatesArgs),
}

pub fn run(g: &GlobalArgs, cmd: SkillCommand) -> CliResult<ExitCode> {
    match cmd {
        SkillCommand::Use(a) => use_::run(g, a),
        SkillCommand::Add(a) => add::run(g, a),
        SkillCommand::List(a) => list::run(g, a),
        SkillCommand::Templates(a) => templates::run(g, a),
    }
}
