use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::find;

/// Show the roadmap: each feature by wave with its run status, phase and blocker.
#[derive(Debug, Args)]
pub struct StatusArgs {}

pub fn run(g: &GlobalArgs, _args: StatusArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let view = troupe_lead::roadmap::status(&project).map_err(super::roadmap_error)?;
    if g.json {
        print_json(&view);
        return Ok(ExitCode::SUCCESS);
    }
    print_line(&format!("{:<5} {:<24} {:<8} {:<24} BLOCKED", "WAVE", "FEATURE", "STATUS", "PHASE"));
    for f in view {
        let blocked = match (&f.blocked_by, &f.blocked_at_phase) {
            (Some(by), Some(at)) => format!("by {by} (was {at})"),
            (Some(by), None) => format!("by {by}"),
            _ => String::new(),
        };
        let line = format!("{:<5} {:<24} {:<8} {:<24} {blocked}", f.wave, f.feature, f.status, f.phase);
        print_line(line.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}
