use std::process::ExitCode;

use clap::Args;
use troupe_core::phase::Phase;
use troupe_project::specs::Specs;
use troupe_store::pid::pid_alive;
use troupe_store::{AgentStatus, ListFilter, TaskStatus};

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use troupe_lead::review::record::{Round, rounds};

use crate::output::{ago, count, escape, note, print_json, print_line};
use crate::project::{find, spec_error};

/// Where features stand: phase, board progress, running teammates, the last
/// review verdict with its open findings, the last error, cost so far, the
/// roadmap's waves and what runs next, and the command to type next. Changes nothing.
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
    /// The last review round of `verdicts.md`, with its verified findings by severity.
    last_verdict: Option<Round>,
    /// Where the open findings are listed, when there are any.
    findings_in: Option<String>,
    /// What the feature's teammates cost so far, when their engines report it.
    cost_usd: Option<f64>,
    /// Its place in `.troupe/roadmap.yaml`, when it has one.
    roadmap: Option<Place>,
    last_error: Option<String>,
    /// What session.md's handover says to do next.
    next_action: Option<String>,
    /// `paused: budget (…)` or `stopped: budget (…)`: the last run ended on a
    /// budget, with what was spent (from the handover's next action).
    paused: Option<String>,
    /// The command to type next, from the phase, the running teammates and the last error.
    next_command: Option<String>,
    /// Why spec.yaml cannot be read (the other features are still shown).
    error: Option<String>,
    /// Under `[team] isolation = "worktree"`: each Builder group's branch and merge state.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<troupe_lead::driver::worktree::GroupBranch>,
    /// Under `[team] executors = "workers"`: the store's worker hosts, as
    /// `troupe worker list --json` shows them (the same on every feature).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    workers: Vec<crate::commands::worker::list::Listed>,
    /// This feature's spawn jobs that wait for a worker, with who can take them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    waiting_jobs: Vec<Waiting>,
}

/// A queued spawn job and the live hosts that can take it.
#[derive(Debug, Clone, serde::Serialize)]
struct Waiting {
    job: String,
    agent: String,
    engine: String,
    labels: Vec<String>,
    /// Live hosts offering its engine and labels (busy ones take it when they have room).
    takers: Vec<String>,
    /// When none can: what to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct Running {
    id: String,
    role: String,
    engine: String,
    status: String,
    /// The plan of its that waits for a person's decision (`[team]
    /// plan_approval = "human"`): the id `troupe approve` and `troupe reject` take.
    #[serde(skip_serializing_if = "Option::is_none")]
    awaiting_plan: Option<i64>,
    /// RFC 3339.
    started_at: String,
}

#[derive(Debug, Clone, serde::Serialize)]
struct Place {
    wave: u32,
    /// pending, done, failed or skipped.
    status: String,
    /// Whether `troupe roadmap run` starts it next (a pending feature of the first unfinished wave).
    runs_next: bool,
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
    // PostgreSQL has no file: a project configured for it opens it.
    let on_postgres = troupe_project::config::load(layout)
        .ok()
        .and_then(|c| troupe_store::location(layout, &c.store).ok())
        .is_some_and(|(backend, _)| backend == "postgres");
    let store = if layout.database_file().exists() || on_postgres {
        super::super::board::open_store_in(&project).ok()
    } else {
        None
    };
    let decisions = std::fs::read_to_string(layout.handover_dir().join("decisions.md")).unwrap_or_default();
    let session = std::fs::read_to_string(layout.handover_dir().join("session.md")).unwrap_or_default();
    // A broken roadmap.yaml hides no feature: it only loses the roadmap lines.
    let places = roadmap_places(&project);
    let isolated = troupe_project::config::load(layout)
        .is_ok_and(|c| c.team.isolation == troupe_core::config::Isolation::Worktree);
    // The workers of `[team] executors = "workers"`, as `troupe worker list` shows them.
    let (hosts, jobs) = match &store {
        Some(store) => (store.hosts().unwrap_or_default(), store.jobs(None).unwrap_or_default()),
        None => Default::default(),
    };
    let waiting = waiting_jobs(&hosts, &jobs);
    let workers = crate::commands::worker::list::listed(hosts, &jobs);
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
                    last_verdict: None,
                    findings_in: None,
                    cost_usd: None,
                    roadmap: places.get(&name).cloned(),
                    last_error: None,
                    next_action: None,
                    paused: None,
                    next_command: Some(format!("fix {} by hand, or `git checkout` it", specs.path(&name).display())),
                    error: Some(e.to_string()),
                    groups: Vec::new(),
                    workers: workers.clone(),
                    waiting_jobs: Vec::new(),
                });
                continue;
            }
        };
        let (mut total, mut completed, mut running, mut cost) = (0, 0, Vec::new(), None);
        if let Some(store) = &store {
            if let Ok(tasks) = store.list(&ListFilter { feature: Some(name.clone()), ..ListFilter::default() }) {
                total = tasks.len();
                completed = tasks.iter().filter(|t| t.status == TaskStatus::Completed).count();
            }
            cost = cost_so_far(store.as_ref(), &name);
            let pending = store.pending_plans().unwrap_or_default();
            if let Ok(agents) = store.agents() {
                running = agents
                    .into_iter()
                    .filter(|a| a.feature.as_deref() == Some(name.as_str()))
                    .filter(|a| {
                        matches!(a.status, AgentStatus::Processing | AgentStatus::ShuttingDown | AgentStatus::Waiting)
                    })
                    // A process that is gone is never "running", whatever its last status said.
                    .filter(|a| a.pid.is_some_and(pid_alive))
                    .map(|a| Running {
                        awaiting_plan: pending.iter().rev().find(|m| m.from == a.id).map(|m| m.id),
                        id: a.id,
                        role: a.role,
                        engine: a.engine,
                        status: a.status.to_string(),
                        started_at: a.started_at.to_string(),
                    })
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
        let paused = next_action
            .as_deref()
            .filter(|n| {
                n.starts_with(troupe_lead::machine::PAUSED_BUDGET)
                    || n.starts_with(troupe_lead::machine::STOPPED_BUDGET)
            })
            .and_then(|n| n.split_once("; ").map_or(Some(n), |(state, _)| Some(state)))
            .map(str::to_string);
        let mut next_command = next_command(&name, &spec, &running, last_error.is_some());
        if paused.is_some() && running.is_empty() {
            next_command = Some(format!("troupe resume {name} --budget +5   # or raise the limit in [budgets]"));
        }
        let verdicts = std::fs::read_to_string(layout.spec_dir(&name).join("verdicts.md")).unwrap_or_default();
        let last_verdict = rounds(&verdicts).pop();
        let groups = match troupe_lead::driver::plan_io::load(&layout.tasks_file(&name)) {
            troupe_lead::machine::PlanLoad::Loaded(plan) if isolated => {
                let ids: Vec<String> = plan.groups.iter().map(|g| g.id.clone()).collect();
                troupe_lead::driver::worktree::group_branches(project.root(), layout, &spec, &ids)
            }
            _ => Vec::new(),
        };
        let open = last_verdict.as_ref().is_some_and(|r| {
            let f = r.findings;
            f.critical + f.high + f.medium + f.low > 0
        });
        let waiting_jobs = waiting.iter().filter(|(f, _)| *f == name).map(|(_, w)| w.clone()).collect();
        out.push(FeatureStatus {
            roadmap: places.get(&name).cloned(),
            feature: name,
            phase: spec.phase.to_string(),
            tasks_total: total,
            tasks_completed: completed,
            running,
            last_verdict,
            findings_in: open.then(|| ".troupe/handover/buffer.md".to_string()),
            cost_usd: cost,
            last_error,
            next_action,
            paused,
            next_command,
            error: None,
            groups,
            workers: workers.clone(),
            waiting_jobs,
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
    let now = jiff::Timestamp::now();
    for s in &out {
        let mut lines = vec![format!("{}: {}", s.feature, s.phase)];
        if let Some(p) = &s.paused {
            lines.push(format!("  state:   {p}"));
        }
        if let Some(e) = &s.error {
            lines.push(format!("  error:   {e}"));
        }
        if let Some(p) = &s.roadmap {
            let next = if p.runs_next { ", runs next" } else { "" };
            lines.push(format!("  roadmap: wave {}, {}{next}", p.wave, p.status));
        }
        if s.tasks_total > 0 {
            lines.push(format!("  board:   {}/{} completed", s.tasks_completed, count(s.tasks_total as u64, "task")));
        }
        for r in &s.running {
            let since = r.started_at.parse::<jiff::Timestamp>().map(|t| format!(", started {}", ago(t, now)));
            let plan = r.awaiting_plan.map(|p| format!(", plan {p} waits for your decision")).unwrap_or_default();
            lines.push(format!(
                "  running: {} ({}, {}, {}{plan}{})",
                r.id,
                r.role,
                r.engine,
                r.status,
                since.unwrap_or_default()
            ));
        }
        for g in &s.groups {
            lines.push(format!("  group:   {} on {}: {}", g.group, g.branch, g.state));
        }
        for w in &s.waiting_jobs {
            lines.push(match &w.problem {
                Some(p) => format!("  waiting: {p}"),
                None => format!("  waiting: job {} ({}) for {}", w.job, w.agent, w.takers.join(", ")),
            });
        }
        if let Some(v) = &s.last_verdict {
            lines.push(format!("  review:  B{} {} {}{}", v.seq, v.kind, v.verdict, findings(s)));
        }
        if let Some(c) = s.cost_usd {
            lines.push(format!("  cost:    ${c:.2} so far"));
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
    // The workers of `[team] executors = "workers"`, as `troupe worker list` shows them.
    if !workers.is_empty() {
        print_line("workers:");
        crate::output::print_table(
            &crate::commands::worker::list::HEADER,
            &crate::commands::worker::list::rows(&workers),
            &[2, 3],
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Every queued spawn job, by feature, with the live hosts that can take it.
fn waiting_jobs(hosts: &[troupe_store::worker::Host], jobs: &[troupe_store::worker::Job]) -> Vec<(String, Waiting)> {
    let now = jiff::Timestamp::now();
    jobs.iter()
        .filter(|j| j.state == troupe_store::worker::JobState::Queued)
        .map(|j| {
            let takers: Vec<String> = hosts
                .iter()
                .filter(|h| h.can_take(&j.queued.engine, &j.queued.labels, now))
                .map(|h| h.name.clone())
                .collect();
            let problem = takers
                .is_empty()
                .then(|| troupe_store::worker::unplaceable(&j.queued.id, &j.queued.engine, &j.queued.labels));
            let w = Waiting {
                job: j.queued.id.clone(),
                agent: j.queued.agent.clone(),
                engine: j.queued.engine.clone(),
                labels: j.queued.labels.clone(),
                takers,
                problem,
            };
            (j.queued.feature.clone(), w)
        })
        .collect()
}

/// The command that moves `feature` on: watch a running teammate, resume after
/// an error, or the phase's next step.
fn next_command(feature: &str, spec: &troupe_core::spec::Spec, running: &[Running], errored: bool) -> Option<String> {
    if let Some(plan) = running.iter().find_map(|r| r.awaiting_plan) {
        return Some(format!("troupe approve {plan}   # or: troupe reject {plan} \"<reason>\""));
    }
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

/// `, open findings: 1 critical, 2 high (in .troupe/handover/buffer.md)`, or nothing.
fn findings(s: &FeatureStatus) -> String {
    let (Some(v), Some(file)) = (&s.last_verdict, &s.findings_in) else { return String::new() };
    let f = v.findings;
    let parts: Vec<String> = [(f.critical, "critical"), (f.high, "high"), (f.medium, "medium"), (f.low, "low")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    format!(", open findings: {} (in {file})", parts.join(", "))
}

/// Each roadmap feature's wave and status, and whether it runs next: the
/// pending features of the first wave that is not finished. Read from
/// roadmap.yaml alone, so a broken spec.yaml hides no other feature's place.
fn roadmap_places(project: &troupe_project::Project) -> std::collections::HashMap<String, Place> {
    let Ok(Some(roadmap)) = troupe_project::roadmap::load(project) else { return Default::default() };
    let status = |name: &str| roadmap.features.iter().find(|f| f.name == name).map(|f| f.status.as_str());
    let waves = roadmap.waves();
    let next_wave = waves.iter().position(|w| w.iter().any(|f| status(f) == Some("pending")));
    let mut places = std::collections::HashMap::new();
    for (i, wave) in waves.iter().enumerate() {
        for name in wave {
            let s = status(name).unwrap_or("pending");
            let place =
                Place { wave: i as u32 + 1, status: s.to_string(), runs_next: next_wave == Some(i) && s == "pending" };
            places.insert(name.to_string(), place);
        }
    }
    places
}

/// What `feature`'s teammates cost so far, from the usage ledger; `None`
/// when none of their turns was booked.
fn cost_so_far(store: &dyn troupe_store::Store, feature: &str) -> Option<f64> {
    let filter = troupe_store::UsageFilter { feature: Some(feature.to_string()), ..Default::default() };
    let rows = store.usage(&filter).ok()?;
    (!rows.is_empty()).then(|| rows.iter().map(|r| r.usage.cost_usd).sum())
}
