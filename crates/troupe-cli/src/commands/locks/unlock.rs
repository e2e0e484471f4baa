use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::commands::board::{actor, open_store_in, store_error};
use crate::error::CliResult;
use crate::output::{note, print_json};

/// Release a file lock. Only its holder may, unless `--force`.
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The file (relative to the current folder, or absolute), inside the project.
    pub path: PathBuf,
    /// The holder releasing it (defaults to $TROUPE_AGENT_ID, or `user`).
    #[arg(long)]
    pub agent: Option<String>,
    /// Release it whoever holds it.
    #[arg(long, short)]
    pub force: bool,
}

pub fn run(g: &GlobalArgs, args: UnlockArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let path = super::key(g, &project, &args.path)?;
    let store = open_store_in(&project)?;
    let agent = (!args.force).then(|| args.agent.filter(|a| !a.trim().is_empty()).unwrap_or_else(actor));
    let released = store.unlock_file(&path, agent.as_deref()).map_err(store_error)?;
    if g.json {
        print_json(&serde_json::json!({"path": path, "released": released}));
    } else if released.is_none() {
        note(&format!("{path} was not locked"));
    }
    Ok(ExitCode::SUCCESS)
}
