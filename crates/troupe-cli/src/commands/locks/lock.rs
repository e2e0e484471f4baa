use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use troupe_store::{LockOutcome, NewLock};

use crate::cli::GlobalArgs;
use crate::commands::board::{actor, open_store_in, store_error};
use crate::error::{CliError, CliResult};
use crate::output::{ago, escape, print_json};

/// Lock a file for an agent: the hooks then deny every other agent's write to
/// it (on every engine), until it is unlocked, its lease ends, or its holder's
/// process is gone. The Lead is never blocked.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// The file (relative to the current folder, or absolute), inside the project.
    pub path: PathBuf,
    /// The holder (defaults to $TROUPE_AGENT_ID, or `user`).
    #[arg(long)]
    pub agent: Option<String>,
    /// How long the lease lasts (30s, 10m, 2h); locking again renews it.
    #[arg(long, default_value = super::DEFAULT_TTL, value_parser = super::parse_ttl)]
    pub ttl: u64,
}

pub fn run(g: &GlobalArgs, args: LockArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let path = super::key(g, &project, &args.path)?;
    let store = open_store_in(&project)?;
    let agent = args.agent.filter(|a| !a.trim().is_empty()).unwrap_or_else(actor);
    let lock = NewLock {
        path: path.clone(),
        agent,
        pid: None,
        task: std::env::var(troupe_gate::teammate::env::TASK_ID).ok().filter(|t| !t.is_empty()),
        ttl_seconds: args.ttl,
    };
    match store.lock_file(lock).map_err(store_error)? {
        LockOutcome::Acquired { lock } => {
            if g.json {
                print_json(&lock);
            }
            Ok(ExitCode::SUCCESS)
        }
        LockOutcome::Held { lock } => Err(CliError::user(format!(
            "{path} is locked by {} since {} ({})",
            escape(&lock.agent),
            lock.since.strftime("%Y-%m-%d %H:%M:%S UTC"),
            ago(lock.since, jiff::Timestamp::now())
        ))
        .with_hint("wait until it is unlocked, or ask its holder; `troupe unlock <path> --force` breaks it")),
    }
}
