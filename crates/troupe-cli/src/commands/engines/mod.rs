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

/// `.troupe/config.toml` of the project at or above the start folder, if
/// there is one: `Ok(None)` outside a project or without a config file,
/// `Err` with the problem when the file cannot be used.
pub(crate) fn load_config(
    g: &GlobalArgs,
) -> Result<Option<(troupe_project::Project, troupe_core::config::Config)>, troupe_core::config::ConfigError> {
    let Ok(start) = crate::project::start_dir(g) else { return Ok(None) };
    let Ok(project) = troupe_project::Project::discover(&start) else { return Ok(None) };
    let path = project.layout().config_file();
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let config = troupe_core::config::Config::from_toml(&text).map_err(|mut e| {
                e.message = format!("{}: {}", path.display(), e.message);
                e
            })?;
            Ok(Some((project, config)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some((project, Default::default()))),
        Err(e) => Err(troupe_core::config::ConfigError {
            message: format!("cannot read {}: {e}", path.display()),
            location: None,
        }),
    }
}
