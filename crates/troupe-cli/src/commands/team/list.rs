//! `troupe team list`: the team's agents, their panes and processes, and the
//! status troupe's events give them (the registry, kept by the hooks); an
//! agent whose process or pane is gone is `GONE`.

use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use troupe_engine::supervisor::group_alive;

use std::collections::BTreeMap;

use super::members;
use super::tmux::{Pane, Tmux};
use crate::cli::GlobalArgs;
use crate::commands::board::open_store_in;
use crate::error::CliResult;
use crate::output::{escape, note, print_json, print_table};

/// The team's agents: engine, role, pane, process and status.
#[derive(Debug, Args)]
pub struct ListArgs {}

pub fn run(g: &GlobalArgs, _args: ListArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = open_store_in(&project)?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    let members = members(project.layout());
    // The panes of each server the team is on, asked once per server.
    let mut panes: BTreeMap<String, Vec<Pane>> = BTreeMap::new();
    for m in &members {
        panes
            .entry(m.socket.to_string())
            .or_insert_with(|| Tmux::new(m.socket.clone()).panes(None).unwrap_or_default());
    }
    for m in members {
        let pane = panes[&m.socket.to_string()].iter().find(|p| p.id == m.pane).cloned();
        let alive = group_alive(m.pid) && pane.is_some();
        let status = match store.agent(&m.agent) {
            Ok(a) if alive => a.status.as_str().to_string(),
            Ok(_) | Err(_) if !alive => "GONE".to_string(),
            _ => "UNKNOWN".to_string(),
        };
        rows.push(vec![
            escape(&m.agent).into_owned(),
            m.engine.clone(),
            m.role.clone(),
            status.clone(),
            m.pane.clone(),
            m.pid.to_string(),
        ]);
        docs.push(json!({ "member": m, "status": status, "alive": alive, "pane": pane }));
    }
    if g.json {
        print_json(&docs);
    } else if rows.is_empty() {
        note("no team is running; `troupe team start claude gemini codex` starts one");
    } else {
        print_table(&["AGENT", "ENGINE", "ROLE", "STATUS", "PANE", "PID"], &rows, &[5]);
    }
    Ok(ExitCode::SUCCESS)
}
