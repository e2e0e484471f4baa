use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;

use super::LeadFlags;
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::project::find;

/// Implement a designed feature: the TaskGenerator writes tasks.yaml, then
/// Builders run in waves (test first), each report passes the quality gate,
/// then phase implementation-complete and a commit.
#[derive(Debug, Args)]
pub struct ImplArgs {
    /// The feature (its phase must be design-generated).
    pub feature: String,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: ImplArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    super::choices::record(&project, &args.feature, &args.flags, None);
    super::drive(g, &project, &args.feature, Job::Impl, &args.flags)
}
