//! `troupe worker stop [NAME]`.

use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Drain a worker: it finishes its teammates, takes no new job, then exits.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// The host (default: this machine's host name).
    pub name: Option<String>,
}

pub fn run(g: &GlobalArgs, args: StopArgs) -> CliResult<ExitCode> {
    let store = crate::commands::board::open_store(g)?;
    let name = args.name.unwrap_or_else(troupe_store::lock::host_name);
    let host = store.drain_host(&name).map_err(crate::commands::board::store_error)?;
    if g.json {
        print_json(&host);
    } else {
        print_line(&format!("{name} drains: it finishes its {} teammate(s), then exits", host.running));
    }
    Ok(ExitCode::SUCCESS)
}
