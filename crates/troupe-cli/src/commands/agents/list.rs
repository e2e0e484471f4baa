use std::process::ExitCode;

use clap::Args;
use troupe_store::pid::pid_alive;

use crate::cli::GlobalArgs;
use crate::commands::board::{open_store, store_error};
use crate::error::CliResult;
use crate::output::{note, print_json, print_line};

/// List registered agents, oldest first. An agent is `stale` when its status
/// says it is still working but its process is gone.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only stale agents, with the tasks they still hold.
    #[arg(long)]
    pub stale: bool,
}

pub fn run(g: &GlobalArgs, args: ListArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    if args.stale {
        let stale = store.stale_agents().map_err(store_error)?;
        if g.json {
            print_json(&stale);
        } else if stale.is_empty() {
            note("no stale agents");
        } else {
            let lines: Vec<String> = stale
                .iter()
                .map(|s| {
                    let held = if s.held_tasks.is_empty() { "-".to_string() } else { s.held_tasks.join(",") };
                    format!("{:<20} {:<14} pid {:<8} holds {held}", s.agent.id, s.agent.status, pid_text(s.agent.pid))
                })
                .collect();
            print_line(&lines.join("\n"));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let agents = store.agents().map_err(store_error)?;
    let is_stale = |a: &troupe_store::Agent| !a.status.is_terminal() && a.pid.is_some_and(|p| !pid_alive(p));
    if g.json {
        let rows: Vec<serde_json::Value> = agents
            .iter()
            .map(|a| {
                let mut v = serde_json::to_value(a).unwrap_or_default();
                v["stale"] = serde_json::Value::Bool(is_stale(a));
                v
            })
            .collect();
        print_json(&rows);
    } else if agents.is_empty() {
        note("no agents are registered");
    } else {
        let lines: Vec<String> = agents
            .iter()
            .map(|a| {
                let stale = if is_stale(a) { "  (stale: process gone)" } else { "" };
                format!(
                    "{:<20} {:<10} {:<8} {:<14} {:<10} pid {:<8}{stale}",
                    a.id,
                    a.role,
                    a.engine,
                    a.status,
                    a.task.as_deref().unwrap_or("-"),
                    pid_text(a.pid)
                )
            })
            .collect();
        print_line(&lines.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

fn pid_text(pid: Option<u32>) -> String {
    pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into())
}
