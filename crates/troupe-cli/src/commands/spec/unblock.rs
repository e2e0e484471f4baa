use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Unblock a spec, restoring the phase it had when it was blocked.
#[derive(Debug, Args)]
pub struct UnblockArgs {
    /// The feature.
    pub feature: String,
}

pub fn run(g: &GlobalArgs, args: UnblockArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let now = troupe_project::now();
    let (spec, ()) =
        Specs::new(&project).update(&args.feature, |s| s.unblock(now, "unblocked by user")).map_err(spec_error)?;
    if g.json {
        print_json(&super::summary(&spec));
    } else {
        print_line(&format!("{} unblocked; back to phase {}", spec.feature_name, spec.phase));
    }
    Ok(ExitCode::SUCCESS)
}
