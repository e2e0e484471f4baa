use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use troupe_engine::supervisor::{Grace, StopMode, group_alive, stop_group_blocking};
use troupe_store::{Agent, AgentStatus, Store};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

/// Stop a running agent: SIGINT to its process group, then SIGTERM, then
/// SIGKILL, with the grace periods of `[shutdown] timeout_seconds` or `timeout_ms` (30 s in
/// all by default). `--force` sends SIGKILL at once.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// The agent id.
    pub id: String,
    /// Kill at once (SIGKILL), without a grace period.
    #[arg(long)]
    pub force: bool,
}

/// Whether process `pid` is the agent `id` (its environment says so), so a
/// reused pid is never signalled.
fn is_agent(pid: u32, id: &str) -> bool {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) => env.split(|b| *b == 0).any(|kv| kv == format!("TROUPE_AGENT_ID={id}").as_bytes()),
        // Without /proc, trust the registry.
        Err(_) => !std::path::Path::new("/proc/self").exists(),
    }
}

pub fn run(g: &GlobalArgs, args: StopArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = super::super::board::open_store_in(&project)?;
    let (agent, pid) = running(store.as_ref(), &args.id)?;
    let timeout = crate::project::load_config(&project)?.shutdown.timeout();
    let mode = if args.force { StopMode::Force } else { StopMode::Graceful(Grace::from_total(timeout)) };
    let signal = stop(store.as_ref(), &agent, pid, mode)?;
    if g.json {
        print_json(&json!({"id": agent.id, "pid": pid, "signal": signal, "stopped": true}));
    } else {
        note(&format!("stopped {} (pid {pid}, last signal {})", agent.id, signal.as_deref().unwrap_or("none")));
    }
    Ok(ExitCode::SUCCESS)
}

/// Agent `id` and the process group it runs as, or a user error when it is
/// not running (no pid, a terminal status, a gone or reused process).
pub(crate) fn running(store: &dyn Store, id: &str) -> CliResult<(Agent, u32)> {
    super::check_agent_id(id)?;
    let agent = store.agent(id).map_err(super::super::board::store_error)?;
    let not_running = || {
        CliError::user(format!("agent '{}' is not running (status {})", agent.id, agent.status))
            .with_hint("`troupe agent list --running` shows the agents that are")
    };
    let Some(pid) = agent.pid else { return Err(not_running()) };
    if agent.status.is_terminal() || !group_alive(pid) || !is_agent(pid, &agent.id) {
        return Err(not_running());
    }
    Ok((agent, pid))
}

/// Signal `agent`'s process group `pid` with `mode` until it is gone, and
/// record its end; returns the last signal sent. The one stop path of `agent
/// stop` and `kill`.
pub(crate) fn stop(store: &dyn Store, agent: &Agent, pid: u32, mode: StopMode) -> CliResult<Option<String>> {
    let last = stop_group_blocking(pid, mode).map_err(|e| {
        CliError::internal(format!("cannot signal the process group of agent '{}'", agent.id)).with_source(&e)
    })?;
    // The supervising `troupe agent run` records the outcome when it sees the
    // exit; when it is gone too, nobody will, so record it here.
    std::thread::sleep(Duration::from_millis(300));
    let now = store.agent(&agent.id).map_err(super::super::board::store_error)?;
    if !now.status.is_terminal() {
        store.set_status(&agent.id, AgentStatus::Failed).map_err(super::super::board::store_error)?;
    }
    Ok(last.map(|s| s.as_str().to_string()))
}
