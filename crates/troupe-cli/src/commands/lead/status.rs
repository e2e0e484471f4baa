use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;
use troupe_store::{AgentStatus, ListFilter, TaskStatus};

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};
use crate::project::{find, spec_error};

/// Where features stand: phase, board progress, running teammates, last error
/// and the next action. Changes nothing.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One feature (default: every feature).
    pub feature: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct FeatureStatus {
    feature: String,
    phase: String,
    tasks_total: usize,
    tasks_completed: usize,
    running: Vec<Running>,
    last_error: Option<String>,
    next_action: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct Running {
    id: String,
    role: String,
    engine: String,
    status: String,
}

pub fn run(g: &GlobalArgs, args: StatusArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let layout = project.layout();
    let specs = Specs::new(&project);
    let names = match &args.feature {
        Some(f) => vec![f.clone()],
        None => specs.names().map_err(spec_error)?,
    };
    // Read-only: a project that never ran anything has no database, and status does not create one.
    let store = if layout.database_file().exists() { super::super::board::open_store_in(&project).ok() } else { None };
    let decisions = std::fs::read_to_string(layout.handover_dir().join("decisions.md")).unwrap_or_default();
    let session = std::fs::read_to_string(layout.handover_dir().join("session.md")).unwrap_or_default();
    let mut out = Vec::new();
    for name in names {
        let spec = specs.load(&name).map_err(spec_error)?;
        let (mut total, mut completed, mut running) = (0, 0, Vec::new());
        if let Some(store) = &store {
            if let Ok(tasks) = store.list(&ListFilter { feature: Some(name.clone()), ..ListFilter::default() }) {
                total = tasks.len();
                completed = tasks.iter().filter(|t| t.status == TaskStatus::Completed).count();
            }
            if let Ok(agents) = store.agents() {
                running = agents
                    .into_iter()
                    .filter(|a| a.feature.as_deref() == Some(name.as_str()))
                    .filter(|a| {
                        matches!(a.status, AgentStatus::Processing | AgentStatus::ShuttingDown | AgentStatus::Waiting)
                    })
                    .map(|a| Running { id: a.id, role: a.role, engine: a.engine, status: a.status.to_string() })
                    .collect();
            }
        }
        let last_error = decisions
            .lines()
            .rev()
            .find(|l| l.contains(": ESCALATION | ") && l.contains(name.as_str()))
            .and_then(|l| l.split_once(": ESCALATION | ").map(|(_, s)| s.to_string()));
        let next_action = troupe_lead::driver::handover::next_action(&session, &name);
        out.push(FeatureStatus {
            feature: name,
            phase: spec.phase.to_string(),
            tasks_total: total,
            tasks_completed: completed,
            running,
            last_error,
            next_action,
        });
    }
    if g.json {
        print_json(&out);
        return Ok(ExitCode::SUCCESS);
    }
    if out.is_empty() {
        print_line("no features yet; start one with `troupe run <feature> \"<description>\"`");
    }
    for s in &out {
        let mut lines = vec![format!("{}: {}", s.feature, s.phase)];
        if s.tasks_total > 0 {
            lines.push(format!("  board:   {}/{} tasks completed", s.tasks_completed, s.tasks_total));
        }
        for r in &s.running {
            lines.push(format!("  running: {} ({}, {}, {})", r.id, r.role, r.engine, r.status));
        }
        if let Some(e) = &s.last_error {
            lines.push(format!("  last error: {e}"));
        }
        if let Some(n) = &s.next_action {
            lines.push(format!("  next: {n}"));
        }
        print_line(&lines.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}
