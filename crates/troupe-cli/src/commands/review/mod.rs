//! `troupe review design|impl|dead-code <feature>`: the review pipeline
//! (Inspectors + Auditor, recovery protocols, consensus, auto-fix loop) run by
//! the Lead's driver.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use troupe_lead::machine::Job;
use troupe_lead::review::{ReviewKind, ReviewOptions, files};

use crate::cli::GlobalArgs;
use crate::commands::lead::{LeadFlags, drive};
use crate::error::{CliError, CliResult};
use crate::project::find;

#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// Review design.md and research.md: six Inspectors and an Auditor.
    Design(ReviewArgs),
    /// Review the implementation: six Inspectors and an Auditor.
    Impl(ReviewArgs),
    /// Look for unused settings, dead code, stale specs and orphan tests: four Inspectors and an Auditor.
    DeadCode(ReviewArgs),
}

/// Arguments every review takes.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The feature.
    pub feature: String,
    /// Run N review pipelines in parallel (7×N teammates, queued under team.max_concurrent) and aggregate.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub consensus: usize,
    /// How many of the N pipelines must agree on a verdict (default: a majority).
    #[arg(long, value_name = "K")]
    pub threshold: Option<usize>,
    /// On NO-GO or SPEC-UPDATE-NEEDED, stop and report instead of fixing and reviewing again.
    #[arg(long)]
    pub no_fix: bool,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, cmd: ReviewCommand) -> CliResult<ExitCode> {
    let (kind, args) = match cmd {
        ReviewCommand::Design(a) => (ReviewKind::Design, a),
        ReviewCommand::Impl(a) => (ReviewKind::Impl, a),
        ReviewCommand::DeadCode(a) => (ReviewKind::DeadCode, a),
    };
    let project = find(g)?;
    let options = options(&project, &args.feature, args.consensus, args.threshold, !args.no_fix)?;
    drive(g, &project, &args.feature, Job::Review(kind, options), &args.flags)
}

/// Validated review options, numbering from the feature's next free `B{seq}`.
pub fn options(
    project: &troupe_project::Project,
    feature: &str,
    consensus: usize,
    threshold: Option<usize>,
    auto_fix: bool,
) -> CliResult<ReviewOptions> {
    if !troupe_core::layout::is_valid_feature_name(feature) {
        return Err(CliError::user(format!("'{feature}' is not a valid feature name"))
            .with_hint("`troupe spec list` shows the features"));
    }
    let first_seq = files::next_seq(project.layout(), feature)
        .map_err(|e| CliError::internal(format!("cannot read the review archive of {feature}")).with_source(&e))?;
    let options = ReviewOptions { consensus, threshold, first_seq, auto_fix };
    options.validate().map_err(|m| CliError::usage(m).with_hint("for example --consensus 3 --threshold 2"))?;
    Ok(options)
}
