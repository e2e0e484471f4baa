//! `troupe engines …`: the agent CLIs troupe can run.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod list;

#[derive(Debug, Subcommand)]
pub enum EnginesCommand {
    /// List every engine: command, whether it is installed, its version, and which phases use it.
    List(list::ListArgs),
}

pub fn run(g: &GlobalArgs, cmd: EnginesCommand) -> CliResult<ExitCode> {
    match cmd {
        EnginesCommand::List(a) => list::run(g, a),
    }
}

/// `.troupe/config.toml` of the project at or above the start folder, through
/// the one loader: `Ok(None)` outside a project, the defaults without a config
/// file, and the error every command gives (exit 3) when the file cannot be used.
pub(crate) fn load_config(g: &GlobalArgs) -> CliResult<Option<troupe_core::config::Config>> {
    let Ok(start) = crate::project::start_dir(g) else { return Ok(None) };
    let Ok(project) = troupe_project::Project::discover(&start) else { return Ok(None) };
    crate::project::load_config(&project).map(Some)
}
