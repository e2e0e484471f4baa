use std::process::ExitCode;

use clap::Args;
use troupe_core::gate::{Operation, check};
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Check whether an operation may run on a spec now.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// The feature.
    pub feature: String,
    /// design, impl, review-design, review-impl, review-dead-code or revise.
    pub operation: String,
}

pub fn run(g: &GlobalArgs, args: GateArgs) -> CliResult<ExitCode> {
    let operation: Operation =
        args.operation.parse().map_err(|e: troupe_core::phase::UnknownOperation| CliError::usage(e.to_string()))?;
    let project = find(g)?;
    let spec = Specs::new(&project).load(&args.feature).map_err(spec_error)?;
    match check(&spec, operation) {
        Ok(()) => {
            if g.json {
                print_json(&serde_json::json!({
                    "feature": spec.feature_name, "operation": operation.as_str(),
                    "phase": spec.phase.as_str(), "allowed": true,
                }));
            } else {
                print_line(&format!("{}: {} may run (phase {})", spec.feature_name, operation, spec.phase));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            if g.json {
                print_json(&serde_json::json!({
                    "feature": spec.feature_name, "operation": operation.as_str(),
                    "phase": spec.phase.as_str(), "allowed": false, "message": err.to_string(),
                }));
            }
            eprintln!("error: {err}");
            Ok(ExitCode::FAILURE)
        }
    }
}
