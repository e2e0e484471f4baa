use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;

use super::LeadFlags;
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::project::find;

/// Design a feature: gate, spawn the Architect (design.md + research.md), set
/// phase design-generated, commit. Creates the spec if it does not exist.
#[derive(Debug, Args)]
pub struct DesignArgs {
    /// The feature.
    pub feature: String,
    /// What the feature is for (used when the spec is created).
    #[arg(long, short)]
    pub description: Option<String>,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: DesignArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    super::preflight(&project, &args.flags)?;
    super::run::ensure_spec(&project, &args.feature, args.description.as_deref())?;
    super::choices::record(&project, &args.feature, &args.flags, None);
    super::drive(g, &project, &args.feature, Job::Design, &args.flags)
}
