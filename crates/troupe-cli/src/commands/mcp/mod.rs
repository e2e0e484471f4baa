//! `troupe mcp …`: the MCP gateway every teammate talks through.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use troupe_gateway::{Gateway, Setup, SetupError};
use troupe_project::Project;
use troupe_store::Store;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};

mod daemon;
pub(crate) mod serve;
mod start;
mod status;
mod stop;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the gateway over stdio (or Streamable HTTP with --http) for one agent.
    Serve(serve::ServeArgs),
    /// Show the backend MCP servers, their tools and their health.
    Status(status::StatusArgs),
    /// Start a long-running gateway over Streamable HTTP (`--background` detaches it).
    Start(start::StartArgs),
    /// Stop the gateway `mcp start` started, and its backend servers.
    Stop(stop::StopArgs),
}

pub fn run(g: &GlobalArgs, cmd: McpCommand) -> CliResult<ExitCode> {
    match cmd {
        McpCommand::Serve(a) => serve::run(g, a),
        McpCommand::Status(a) => status::run(g, a),
        McpCommand::Start(a) => start::run(g, a),
        McpCommand::Stop(a) => stop::run(g, a),
    }
}

/// The gateway setup of the project, with errors that say which file to fix.
pub fn load_setup(project: &Project) -> CliResult<Setup> {
    Setup::load(project.layout()).map_err(|e| match &e {
        SetupError::Io { .. } => CliError::internal(e.to_string()).with_source(&e),
        SetupError::Skill { .. } => CliError::config(e.to_string())
            .with_hint("fix the SKILL.md front matter; `troupe skill list` checks every skill"),
        SetupError::Config { path, message } => crate::project::config_error(path, message),
        _ => CliError::config(e.to_string()),
    })
}

/// The project's store.
pub fn open_store(project: &Project) -> CliResult<Arc<dyn Store>> {
    // Through `[store] backend`, like every other caller.
    Ok(Arc::from(super::board::open_store_in(project)?))
}

/// A tokio runtime for the commands that need one.
pub fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::internal("cannot start the async runtime").with_source(&e))
}

/// A gateway for the project.
pub fn gateway(project: &Project, with_store: bool) -> CliResult<(Arc<Gateway>, Vec<String>)> {
    let setup = load_setup(project)?;
    let warnings = setup.warnings.clone();
    let store = if with_store { Some(open_store(project)?) } else { None };
    Ok((Arc::new(Gateway::from_setup(setup, store)), warnings))
}
