use std::process::ExitCode;

use clap::Args;
use troupe_core::phase::Phase;
use troupe_project::specs::Specs;
use troupe_store::pid::pid_alive;
use troupe_store::{AgentStatus, ListFilter, TaskStatus};

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{escape, note, print_json, print_line};
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
    /// What session.md's handover says to do next.
    next_action: Option<String>,
    /// The command to type next, from the phase, the running teammates and the last error.
    next_command: Option<String>,
    /// Why spec.yaml cannot be read (the other features are still shown).
    error: Option<String>,
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
        let spec = match specs.load(&name) {
            Ok(s) => s,
            // One feature asked for: its error is the answer.
            Err(e) if args.feature.is_some() => return Err(spec_error(e)),
            Err(e) => {
                out.push(FeatureStatus {
                    feature: name.clone(),
                    phase: "unreadable".into(),
                    tasks_total: 0,
                    tasks_completed: 0,
                    running: Vec::new(),
                    last_error: None,
                    next_action: None,
                    next_command: Some(format!("fix {} by hand, or `git checkout` it", specs.path(&name).display())),
                    error: Some(e.to_string()),
                });
                continue;
            }
        };
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
                    // A process that is gone is never "running", whatever its last status said.
                    .filter(|a| a.pid.is_some_and(pid_alive))
                    .map(|a| Running { id: a.id, role: a.role, engine: a.engine, status: a.status.to_string() })
                    .collect();
            }
        }
        let next_action = troupe_lead::driver::handover::next_action(&session, &name);
        // The last escalation, while it is current.
        let last_error = decisions
            .lines()
            .rev()
            .find(|l| l.contains(": ESCALATION | ") && l.contains(name.as_str()))
            .and_then(|l| l.split_once(": ESCALATION | ").map(|(_, s)| s.to_string()))
            // Current only until a later run finished with nothing pending.
            .filter(|_| next_action.as_deref() != Some(troupe_lead::machine::NOTHING_PENDING));
        let next_command = next_command(&name, &spec, &running, last_error.is_some());
        out.push(FeatureStatus {
            feature: name,
            phase: spec.phase.to_string(),
            tasks_total: total,
            tasks_completed: completed,
            running,
            last_error,
            next_action,
            next_command,
            error: None,
        });
    }
    if g.json {
        print_json(&out);
        return Ok(ExitCode::SUCCESS);
    }
    if out.is_empty() {
        // Empty states: the hint on stderr, nothing on stdout.
        note("no features yet; start one with `troupe run <feature> \"<description>\"`");
    }
    for s in &out {
        let mut lines = vec![format!("{}: {}", s.feature, s.phase)];
        if let Some(e) = &s.error {
            lines.push(format!("  error:   {e}"));
        }
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
            lines.push(format!("  handover: {n}"));
        }
        if let Some(c) = &s.next_command {
            lines.push(format!("  next:    {c}"));
        }
        // Agent ids, roles and escalation texts are agents' words: one line each, escaped.
        print_line(&lines.iter().map(|l| escape(l)).collect::<Vec<_>>().join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

/// The command that moves `feature` on: watch a running teammate, resume after
/// an error, or the phase's next step.
fn next_command(feature: &str, spec: &troupe_core::spec::Spec, running: &[Running], errored: bool) -> Option<String> {
    if let Some(r) = running.first() {
        return Some(format!("troupe agent logs {} --follow   # a run is in progress", r.id));
    }
    match &spec.phase {
        Phase::Blocked => {
            let by = spec.blocked_info.as_ref().map(|b| b.blocked_by.as_str()).unwrap_or("another feature");
            Some(format!("blocked by {by}: finish it (`troupe status {by}`), or `troupe spec unblock {feature}`"))
        }
        Phase::ImplementationComplete => {
            Some(format!("troupe revise {feature} \"<change>\"   # when it needs to change"))
        }
        _ if errored => Some(format!("troupe resume {feature}   # after fixing the last error")),
        Phase::Initialized => Some(format!("troupe design {feature}")),
        Phase::DesignGenerated => Some(format!("troupe impl {feature}")),
        Phase::Unknown(p) => Some(format!("fix `phase: {p}` in .troupe/specs/{feature}/spec.yaml")),
    }
}
