use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Create a spec in phase `initialized`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The feature's name: lowercase letters, digits, '-', '_' or '.'.
    pub feature: String,
    /// What the feature is for.
    #[arg(long, short, default_value = "")]
    pub description: String,
}

pub fn run(g: &GlobalArgs, args: NewArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let specs = Specs::new(&project);
    let spec = specs.create(&args.feature, &args.description, troupe_project::now()).map_err(spec_error)?;
    if g.json {
        print_json(&spec);
    } else {
        print_line(&format!(
            "created spec {} (phase {}) at {}",
            spec.feature_name,
            spec.phase,
            specs.path(&spec.feature_name).display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
