//! `troupe roadmap …`: several features in dependency waves (seed 000 Spec 5).

use std::process::ExitCode;

use clap::Subcommand;
use troupe_core::roadmap::BlockOutcome;
use troupe_project::roadmap::RoadmapFileError;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};

mod create;
mod fix;
pub(crate) mod record;
pub(crate) mod run;
mod skip;
mod status;

#[derive(Debug, Subcommand)]
pub enum RoadmapCommand {
    /// Create a roadmap: features (specs are created when missing) and their dependencies, in waves.
    Create(create::CreateArgs),
    /// Show every feature by wave: run status, phase, what blocks it.
    Status(status::StatusArgs),
    /// Run the roadmap wave by wave, the features of a wave at the same time; a failure blocks everything downstream.
    Run(run::RunArgs),
    /// After fixing a failed feature: unblock its dependents (restoring their phases) and run it again next time.
    Fix(fix::FixArgs),
    /// Go on without a failed feature: unblock its dependents (restoring their phases) and skip it.
    Skip(skip::SkipArgs),
}

pub fn run(g: &GlobalArgs, cmd: RoadmapCommand) -> CliResult<ExitCode> {
    match cmd {
        RoadmapCommand::Create(a) => create::run(g, a),
        RoadmapCommand::Status(a) => status::run(g, a),
        RoadmapCommand::Run(a) => run::run(g, a),
        RoadmapCommand::Fix(a) => fix::run(g, a),
        RoadmapCommand::Skip(a) => skip::run(g, a),
    }
}

/// A roadmap error as the user sees it.
pub(crate) fn roadmap_error(e: RoadmapFileError) -> CliError {
    match e {
        RoadmapFileError::NoRoadmap(_) => CliError::user(e.to_string())
            .with_hint("create one with `troupe roadmap create <feature>... [--depends a:b]`"),
        RoadmapFileError::Exists(_) => CliError::user(e.to_string())
            .with_hint("finish it with `troupe roadmap run`, or see where it stands with `troupe roadmap status`"),
        RoadmapFileError::Roadmap(_) => CliError::user(e.to_string()),
        RoadmapFileError::Malformed { .. } => {
            CliError::config(e.to_string()).with_hint("fix .troupe/roadmap.yaml by hand, or restore it from git")
        }
        RoadmapFileError::Spec(s) => crate::project::spec_error(s),
        RoadmapFileError::Io { .. } => CliError::internal(e.to_string()).with_source(&e),
    }
}

/// Block/unblock outcomes as JSON and as lines.
pub(crate) fn outcomes_json(out: &[BlockOutcome]) -> serde_json::Value {
    serde_json::Value::Array(
        out.iter()
            .map(|o| match o {
                BlockOutcome::Changed { feature, phase } => {
                    serde_json::json!({"feature": feature, "changed": true, "phase": phase.as_str()})
                }
                BlockOutcome::Unchanged { feature, reason } => {
                    serde_json::json!({"feature": feature, "changed": false, "reason": reason})
                }
            })
            .collect(),
    )
}

pub(crate) fn outcome_line(o: &BlockOutcome) -> String {
    match o {
        BlockOutcome::Changed { feature, phase } => format!("{feature}: now {phase}"),
        BlockOutcome::Unchanged { feature, reason } => format!("{feature}: unchanged ({reason})"),
    }
}
