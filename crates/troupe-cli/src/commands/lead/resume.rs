use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;

use super::LeadFlags;
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::project::find;

/// Continue an interrupted or escalated feature from spec.yaml, tasks.yaml and
/// the board. Completed tasks are never redone. troupe never resumes by itself.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The feature.
    pub feature: String,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: ResumeArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    super::drive(g, &project, &args.feature, Job::Resume, &args.flags)
}
