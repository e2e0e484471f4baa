use std::process::ExitCode;

use clap::Args;
use troupe_core::roadmap::Unblock;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

/// Go on without the failed feature: it is marked skipped, and every feature
/// it blocked is unblocked (back to the phase it was blocked at).
#[derive(Debug, Args)]
pub struct SkipArgs {
    /// The failed (or a blocked) feature.
    pub feature: String,
}

pub fn run(g: &GlobalArgs, args: SkipArgs) -> CliResult<ExitCode> {
    super::fix::apply(g, &args.feature, Unblock::Skip)
}
