use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_table};
use crate::project::find;

/// Show the roadmap: each feature by wave with its run status, phase and blocker.
#[derive(Debug, Args)]
pub struct StatusArgs {}

pub fn run(g: &GlobalArgs, _args: StatusArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let view = troupe_project::roadmap::status(&project).map_err(super::roadmap_error)?;
    if g.json {
        print_json(&view);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = view
        .into_iter()
        .map(|f| {
            let blocked = match (&f.blocked_by, &f.blocked_at_phase) {
                (Some(by), Some(at)) => format!("by {by} (was {at})"),
                (Some(by), None) => format!("by {by}"),
                _ => String::new(),
            };
            vec![f.wave.to_string(), f.feature, f.status.to_string(), f.phase, blocked]
        })
        .collect();
    print_table(&["WAVE", "FEATURE", "STATUS", "PHASE", "BLOCKED"], &rows, &[0]);
    Ok(ExitCode::SUCCESS)
}
