use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use troupe_store::pid::pid_alive;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{note, print_json, print_line};

/// List agents in the registry, oldest first: id, role, engine, model,
/// status, pid, and where its log is. An agent whose status says it is
/// working but whose process is gone is marked stale.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only agents that are not finished.
    #[arg(long, conflicts_with = "stale")]
    pub running: bool,
    /// Only stale agents (working by their status, process gone), with the tasks they still hold.
    #[arg(long)]
    pub stale: bool,
}

pub fn run(g: &GlobalArgs, args: ListArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = super::super::board::open_store_in(&project)?;
    if args.stale {
        return stale(g, store.as_ref());
    }
    let agents = store.agents().map_err(super::super::board::store_error)?;
    let logs = project.layout().logs_dir();
    let rows: Vec<serde_json::Value> = agents
        .iter()
        .filter(|a| !args.running || !a.status.is_terminal())
        .map(|a| {
            let log = logs.join(format!("{}.jsonl", a.id));
            json!({
                "id": a.id,
                "role": a.role,
                "engine": a.engine,
                "model": a.model,
                "status": a.status,
                "feature": a.feature,
                "task": a.task,
                "pid": a.pid,
                "session_id": a.session_id,
                "started_at": a.started_at.to_string(),
                "stale": !a.status.is_terminal() && a.pid.is_some_and(|p| !pid_alive(p)),
                "log": log.exists().then(|| log.display().to_string()),
            })
        })
        .collect();
    if g.json {
        print_json(&rows);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        note("no agents; start one with `troupe agent run --role builder \"<prompt>\"`");
        return Ok(ExitCode::SUCCESS);
    }
    print_line(&format!(
        "{:24}  {:14}  {:9}  {:18}  {:13}  {:8}  STARTED",
        "ID", "ROLE", "ENGINE", "MODEL", "STATUS", "PID"
    ));
    let now = jiff::Timestamp::now();
    for r in &rows {
        let s = |k: &str| r[k].as_str().map(|v| crate::output::escape(v).into_owned()).unwrap_or_else(|| "-".into());
        let status = if r["stale"] == true { format!("{} (stale)", s("status")) } else { s("status") };
        let pid = r["pid"].as_u64().map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        print_line(&format!(
            "{:24}  {:14}  {:9}  {:18}  {:13}  {:8}  {}",
            s("id"),
            s("role"),
            s("engine"),
            s("model"),
            status,
            pid,
            // Human in the table; the full RFC 3339 time is in --json.
            r["started_at"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| crate::output::ago(t, now))
                .unwrap_or_else(|| s("started_at"))
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--stale`: the agents whose process is gone while their status says they work, and what they hold.
fn stale(g: &GlobalArgs, store: &dyn troupe_store::Store) -> CliResult<ExitCode> {
    let stale = store.stale_agents().map_err(super::super::board::store_error)?;
    if g.json {
        print_json(&stale);
    } else if stale.is_empty() {
        note("no stale agents");
    } else {
        for s in &stale {
            let held = if s.held_tasks.is_empty() { "-".to_string() } else { s.held_tasks.join(",") };
            let pid = s.agent.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
            let (id, held) = (crate::output::escape(&s.agent.id), crate::output::escape(&held));
            print_line(&format!("{:<24}  {:<14}  pid {:<8}  holds {held}", id, s.agent.status, pid));
        }
    }
    Ok(ExitCode::SUCCESS)
}
