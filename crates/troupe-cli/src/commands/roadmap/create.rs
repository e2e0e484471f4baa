use std::process::ExitCode;

use clap::Args;
use troupe_core::roadmap::Dependency;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};
use crate::project::find;

/// Create a roadmap. `--depends checkout:payments` means checkout waits for
/// payments. Specs that do not exist are created; each spec records its wave
/// and dependencies. Refused (changing nothing) on a cycle, an unknown
/// feature, or while an unfinished roadmap exists.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The features, in order.
    #[arg(required = true)]
    pub features: Vec<String>,
    /// FEATURE:DEPENDS_ON (repeatable).
    #[arg(long = "depends", value_name = "A:B")]
    pub depends: Vec<String>,
}

pub fn run(g: &GlobalArgs, args: CreateArgs) -> CliResult<ExitCode> {
    let deps = args
        .depends
        .iter()
        .map(|d| d.parse::<Dependency>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::usage(e.to_string()))?;
    let project = find(g)?;
    let (roadmap, created) = troupe_project::roadmap::create(&project, &args.features, &deps, troupe_project::now())
        .map_err(super::roadmap_error)?;
    let waves = roadmap.waves();
    if g.json {
        print_json(&serde_json::json!({ "waves": waves, "created": created }));
    } else {
        for (i, w) in waves.iter().enumerate() {
            print_line(&format!("Wave {}: {}", i + 1, w.join(", ")));
        }
    }
    Ok(ExitCode::SUCCESS)
}
