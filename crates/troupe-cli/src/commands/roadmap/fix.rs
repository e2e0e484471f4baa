use std::process::ExitCode;

use clap::Args;
use troupe_core::roadmap::Unblock;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::find;

/// The failed feature was fixed: unblock every feature it blocked (each goes
/// back to the phase it was blocked at) and run it again on the next
/// `troupe roadmap run`. Naming a blocked feature unblocks just that one.
#[derive(Debug, Args)]
pub struct FixArgs {
    /// The failed (or a blocked) feature.
    pub feature: String,
}

pub fn run(g: &GlobalArgs, args: FixArgs) -> CliResult<ExitCode> {
    apply(g, &args.feature, Unblock::Fix)
}

/// Shared by `fix` and `skip`.
pub(super) fn apply(g: &GlobalArgs, feature: &str, how: Unblock) -> CliResult<ExitCode> {
    let project = find(g)?;
    let out = troupe_project::roadmap::unblock(&project, feature, how, troupe_project::now())
        .map_err(super::roadmap_error)?;
    if g.json {
        print_json(&super::outcomes_json(&out));
    } else if out.is_empty() {
        print_line(&format!("nothing was blocked by {feature}"));
    } else {
        for o in &out {
            print_line(&super::outcome_line(o));
        }
    }
    Ok(ExitCode::SUCCESS)
}
