use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Block a spec on another feature. Gates then refuse every operation with
/// `<feature> is blocked by <other>` until it is unblocked.
#[derive(Debug, Args)]
pub struct BlockArgs {
    /// The feature to block.
    pub feature: String,
    /// The feature it waits for (must have a spec).
    #[arg(long = "by", value_name = "FEATURE")]
    pub by: String,
    /// Why (recorded in blocked_info.reason).
    #[arg(long, default_value = "blocked by user")]
    pub reason: String,
}

pub fn run(g: &GlobalArgs, args: BlockArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let specs = Specs::new(&project);
    specs.load(&args.by).map_err(spec_error)?;
    let now = troupe_project::now();
    let (spec, ()) = specs.update(&args.feature, |s| s.block(now, &args.by, &args.reason)).map_err(spec_error)?;
    if g.json {
        print_json(&super::summary(&spec));
    } else {
        print_line(&format!("{} is blocked by {}", spec.feature_name, args.by));
    }
    Ok(ExitCode::SUCCESS)
}
