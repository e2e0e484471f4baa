//! `troupe worker [--engines …] [--max N] [--labels …] [--name N] [--dir D]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use troupe_lead::driver::worker::{WorkerOptions, run as run_worker};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

/// Run teammates on this host for the project's Lead: register the host,
/// take the spawn jobs it can run, push each teammate's branch to the
/// shared remote (`[workers] remote`). SIGINT/SIGTERM (or `troupe worker
/// stop`) drains it; a second signal stops its teammates at once.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Engines this host runs, comma-separated (default: any).
    #[arg(long, value_delimiter = ',', value_name = "ENGINES")]
    pub engines: Vec<String>,
    /// At most this many teammates at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub max: u32,
    /// Labels this host offers, comma-separated (a job that asks for labels needs them all).
    #[arg(long, value_delimiter = ',', value_name = "LABELS")]
    pub labels: Vec<String>,
    /// The host's name in the store (default: the machine's host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Where the worker keeps its clone of the shared remote and its jobs'
    /// worktrees (default: `.troupe/state/worker/<name>`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let name = args.name.unwrap_or_else(troupe_store::lock::host_name);
    let dir = args.dir.unwrap_or_else(|| project.layout().state_dir().join("worker").join(&name));
    let troupe =
        std::env::current_exe().map_err(|e| CliError::internal("cannot find the troupe executable").with_source(&e))?;
    let opts = WorkerOptions { name, engines: args.engines, labels: args.labels, max: args.max, dir, troupe };
    let runtime = crate::commands::lead::runtime()?;
    let json = g.json;
    let mut say = |text: &str| {
        if !json {
            note(text);
        }
    };
    let summary = runtime.block_on(run_worker(&project, opts, &mut say)).map_err(|e| {
        CliError::user(format!("the worker stopped: {e}"))
            .with_hint("check [workers] remote and [store] in .troupe/config.toml (or TROUPE_DATABASE_URL)")
    })?;
    if json {
        print_json(&summary);
    }
    Ok(ExitCode::SUCCESS)
}
