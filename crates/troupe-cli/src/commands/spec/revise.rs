use std::process::ExitCode;

use clap::Args;
use troupe_core::gate::{Operation, check};
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Start a revision of an implemented spec: its phase goes back to
/// design-generated and its version's minor part goes up.
#[derive(Debug, Args)]
pub struct ReviseArgs {
    /// The feature.
    pub feature: String,
    /// What changes (recorded in the changelog).
    #[arg(long, default_value = "revision requested")]
    pub reason: String,
}

pub fn run(g: &GlobalArgs, args: ReviseArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let specs = Specs::new(&project);
    let current = specs.load(&args.feature).map_err(spec_error)?;
    check(&current, Operation::Revise).map_err(|e| CliError::user(e.to_string()))?;
    let now = troupe_project::now();
    let (spec, ()) = specs.update(&args.feature, |s| s.revise(now, &args.reason)).map_err(spec_error)?;
    if g.json {
        print_json(&super::summary(&spec));
    } else {
        print_line(&format!(
            "{} is in revision: phase {}, version {}; next: `troupe design {}`",
            spec.feature_name, spec.phase, spec.version, spec.feature_name
        ));
    }
    Ok(ExitCode::SUCCESS)
}
