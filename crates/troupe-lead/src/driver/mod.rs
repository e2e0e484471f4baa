//! The async driver: it carries out the machine's commands with real processes,
//! files, the store and git, and feeds the results back as events. It makes no
//! decisions: every "what next" is the machine's.
//!
//! One loop: drain [`Lead::poll_command`], executing each command (quick ones
//! inline, teammates and quality gates as tasks that report back through a
//! channel); then wait for the next report or [`Lead::poll_timeout`].

mod bookkeeper;
pub mod claude_credentials;
mod exec;
pub mod git;
pub mod handover;
mod heartbeat;
pub mod launch;
mod leases;
mod opencode_deps;
pub mod plan_io;
pub mod record;
mod remote;
mod reported;
pub mod sandbox;
mod shutdown;
mod signals;
pub(crate) mod teammate;
mod telemetry;
mod watch;
pub(crate) mod wiring;
pub mod worker;
pub mod worktree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::mpsc;
use troupe_core::config::{Config, parse_common_commands};
use troupe_core::event::AgentEvent;
use troupe_core::role::Role;
use troupe_project::Project;
use troupe_project::specs::Specs;
use troupe_store::{AgentStatus, Store};

use crate::machine::{AgentId, Command, Event, GateVerdict, Job, Lead, LeadConfig, Outcome, PlanLoad};
use handover::Handover;
use teammate::Report;
use troupe_gate::quality::{GateResult, GateRun};

/// What a run needs besides the project.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The feature.
    pub feature: String,
    /// What to do.
    pub job: Job,
    /// Run every teammate on this engine, whatever the config says.
    pub engine: Option<String>,
    /// Commit (`--no-commit` turns it off).
    pub commit: bool,
    /// The `troupe` executable (the scripted engine, hooks and the gateway run through it).
    pub troupe: PathBuf,
    /// The scripted engine's script (`.troupe/scripted.yaml` when unset).
    pub script: Option<PathBuf>,
    /// `--budget`: dollars more (`+N`) or a run limit (`N`) over `[budgets]`.
    pub budget: Option<crate::machine::Raise>,
}

/// What the caller sees while a run goes on (progress displays).
pub trait Observer: Send {
    /// A command is about to be carried out.
    fn command(&mut self, _command: &Command, _lead: &Lead) {}
    /// A teammate was launched on `engine` with `model`.
    fn launched(&mut self, _id: &str, _engine: &str, _model: Option<&str>) {}
    /// A teammate printed a normalised event.
    fn agent_event(&mut self, _id: &str, _event: &AgentEvent) {}
    /// A quality gate's commands, just before they run (`Test`, `Lint` or a `[gates]` key each).
    fn gate(&mut self, _run: u64, _steps: &[troupe_core::config::GateStep]) {}
    /// One command of quality gate `run` starts now.
    fn gate_step(&mut self, _run: u64, _step: &troupe_core::config::GateStep) {}
    /// An event is about to be handed to the machine.
    fn event(&mut self, _event: &Event, _lead: &Lead) {}
    /// Something the user should know that is not an event (a dirty work tree).
    fn note(&mut self, _text: &str) {}
}

/// An observer that shows nothing.
#[derive(Debug, Default)]
pub struct Quiet;
impl Observer for Quiet {}

/// A teammate as the run summary shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TeammateSummary {
    /// Its id.
    pub id: String,
    /// Its role.
    pub role: String,
    /// The engine it ran on.
    pub engine: String,
    /// The model, when known.
    pub model: Option<String>,
    /// How it ended.
    pub status: String,
    /// Model turns.
    pub turns: u64,
    /// Cost in USD, when reported.
    pub cost_usd: Option<f64>,
    /// Files it reported.
    pub files: Vec<String>,
    /// What it said about tests.
    pub tests: Option<String>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

/// How a run ended, for the final summary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport {
    /// The feature.
    pub feature: String,
    /// `completed`, `escalated`, `refused`, `interrupted`, or `paused` /
    /// `stopped` by a budget.
    pub outcome: String,
    /// The refusal message, when refused.
    pub refused: Option<String>,
    /// The budget reached and what was spent, when a budget paused or stopped the run.
    pub budget: Option<String>,
    /// The phase at the end.
    pub phase: String,
    /// Escalations: (what happened, what to do).
    pub escalations: Vec<(String, String)>,
    /// Commits made, newest last.
    pub commits: Vec<String>,
    /// Every teammate.
    pub teammates: Vec<TeammateSummary>,
    /// Files created or changed by the implementation.
    pub files: Vec<String>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// spec.yaml could not be read.
    #[error(transparent)]
    Spec(#[from] troupe_project::specs::SpecFileError),
    /// config.toml cannot be used.
    #[error(transparent)]
    Config(#[from] troupe_project::config::ConfigFileError),
    /// The store could not be opened.
    #[error("cannot open the store")]
    Store(#[source] troupe_store::StoreError),
    /// Commits are on but the project is not a git repository.
    #[error("{} is not a git repository, and troupe commits after each step", .0.display())]
    NotARepo(PathBuf),
    /// A file or folder could not be created.
    #[error("cannot write {}", .0.display())]
    Io(PathBuf, #[source] std::io::Error),
    /// git could not tell what the work tree holds.
    #[error("cannot read the work tree's state: {0}")]
    Git(String),
    /// A file the run needs could not be read.
    #[error("cannot read {}", .0.display())]
    Read(PathBuf, #[source] std::io::Error),
    /// The store's event log could not be read.
    #[error("cannot read the store's event log: {0}")]
    Events(String),
    /// Ctrl-C or SIGTERM could not be made an event of the run.
    #[error("cannot handle Ctrl-C and SIGTERM")]
    Signal(#[source] std::io::Error),
    /// An engine is unknown or not installed (checked before any spawn).
    #[error(transparent)]
    Engine(#[from] launch::EngineError),
}

/// Load `.troupe/config.toml` through the one loader (absent means defaults;
/// unreadable, not UTF-8 or invalid is an error, never the defaults).
pub fn load_config(project: &Project) -> Result<Config, DriverError> {
    Ok(troupe_project::config::load(project.layout())?)
}

/// How a run shares the project with runs of other features in the same
/// process (the features of one roadmap wave, run at the same time).
#[derive(Debug, Clone, Default)]
pub struct Sharing {
    /// This run's share of `team.max_concurrent` (`None`: the whole cap).
    pub max_concurrent: Option<usize>,
}

/// Run `opts.job` on `opts.feature` to the end.
pub async fn run(project: &Project, opts: RunOptions, observer: &mut dyn Observer) -> Result<RunReport, DriverError> {
    run_shared(project, opts, Sharing::default(), observer).await
}

/// [`run`], sharing the project with other runs as `sharing` says.
///
/// The loop of the module docs: drain the machine's commands, carrying each
/// out (`exec::Driver::execute`), then wait for the next report of a task
/// (`exec::Driver::on_report`) or the machine's deadline.
pub async fn run_shared(
    project: &Project,
    opts: RunOptions,
    sharing: Sharing,
    observer: &mut dyn Observer,
) -> Result<RunReport, DriverError> {
    let (mut driver, mut lead, mut rx) = prepare(project, opts, sharing, observer).await?;
    // SIGINT and SIGTERM become an event like any other. The handlers are
    // installed here, before any teammate starts, so a signal can never kill
    // troupe itself.
    let signals = signals::Signals::install(driver.tx.clone())?;
    let watcher = watch::start(
        driver.layout.clone(),
        driver.config.store.clone(),
        driver.opts.feature.clone(),
        driver.tx.clone(),
        Duration::from_millis(200),
    );
    // Remote teammates' reports, from the store (`[team] executors = "workers"`).
    let remote_watcher = driver.remote.as_ref().map(|r| {
        r.watch(driver.layout.clone(), driver.config.store.clone(), driver.tx.clone(), Duration::from_millis(200))
    });
    // The first group's worktree is checked out while the Lead designs and
    // plans, not when its Builder is due (issue 18: under 200 ms per group);
    // a resume, whose plan is known, starts that plan's whole pool. From
    // here on the run ends in `finish`, which removes them.
    if let Some(w) = driver.worktrees.as_mut() {
        let resumed = matches!(driver.opts.job, Job::Resume | Job::ResumeReviewed { .. });
        let plan = match plan_io::load(&driver.layout.tasks_file(&driver.opts.feature)) {
            PlanLoad::Loaded(plan) if resumed => worktree::pool_size(&plan, lead.ctx().config().max_concurrent),
            _ => 0,
        };
        w.prepare(plan.max(1)).await;
    }
    lead.start(Timestamp::now());
    let outcome = 'run: loop {
        while let Some(cmd) = lead.poll_command() {
            if let Command::Finish(outcome) = &cmd {
                driver.observer.command(&cmd, &lead);
                break 'run outcome.clone();
            }
            driver.execute(cmd, &lead).await;
        }
        let sleep = async {
            match lead.poll_timeout() {
                Some(t) => {
                    let ms = t.duration_since(Timestamp::now()).as_millis().max(0) as u64;
                    tokio::time::sleep(Duration::from_millis(ms)).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            // The driver holds a sender: the channel never closes while it runs.
            Some(report) = rx.recv() => {
                driver.on_report(report, &mut lead);
                if let Some(w) = driver.worktrees.as_mut() {
                    w.grow().await;
                }
            }
            _ = sleep => lead.handle_timeout(Timestamp::now()),
        }
    };
    watcher.abort();
    if let Some(w) = remote_watcher {
        w.abort();
    }
    let forced = signals.forced(matches!(outcome, Outcome::Interrupted));
    let (commits, running, costs) = driver.finish(&lead, &outcome, &forced).await;
    drop(signals);
    Ok(summarize(&lead, outcome, commits, &running, &costs))
}

/// Everything a run checks and opens before the machine starts: spec.yaml,
/// the config, the engines, the store (every page), the work tree's baseline.
async fn prepare<'a>(
    project: &'a Project,
    opts: RunOptions,
    sharing: Sharing,
    observer: &'a mut dyn Observer,
) -> Result<(exec::Driver<'a>, Lead, mpsc::UnboundedReceiver<Report>), DriverError> {
    let layout = project.layout().clone();
    let root = project.root().to_path_buf();
    let specs = Specs::new(project);
    let spec = specs.load(&opts.feature)?;
    let config = load_config(project)?;
    if opts.commit && !git::is_repo(&root).await {
        return Err(DriverError::NotARepo(root));
    }
    launch::preflight(opts.engine.as_deref(), &spec, &config, &opts.troupe)?;
    // A run writes for a long time: damaged pages are refused before it starts.
    let store = troupe_store::open_checked(&layout, &config.store).map_err(DriverError::Store)?;
    stop_leftovers(store.as_ref(), &root, &opts.feature, observer).await;
    let logs = layout.logs_dir();
    std::fs::create_dir_all(&logs).map_err(|e| DriverError::Io(logs.clone(), e))?;
    let handover = Handover::open(&layout).map_err(|e| DriverError::Io(layout.handover_dir(), e))?;
    let script = opts.script.clone().unwrap_or_else(|| layout.troupe_dir().join("scripted.yaml"));
    let tech_md = layout.steering_dir().join("tech.md");
    let tech = match std::fs::read_to_string(&tech_md) {
        Ok(text) => text,
        // No tech.md: no Common Commands, so the gates have nothing of steering's to run.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(DriverError::Read(tech_md, e)),
    };
    // Worktrees merge through commits: a run that does not commit shares the tree.
    let isolated = opts.commit && config.team.isolation == troupe_core::config::Isolation::Worktree;
    let worktrees = match isolated {
        true => Some(
            // In a roadmap wave each feature integrates on its own line.
            worktree::Worktrees::new(
                layout.clone(),
                root.clone(),
                opts.feature.clone(),
                matches!(opts.job, crate::machine::Job::InRoadmap { .. }),
            )
            .await
            .map_err(DriverError::Git)?,
        ),
        false => None,
    };
    // Builders on workers need their worktree branches (to push) and a shared remote.
    let remote = match (isolated, config.team.executors) {
        (true, troupe_core::config::Executors::Workers) => remote::Remote::new(&config.workers, opts.feature.clone()),
        _ => None,
    };
    let mut budgets = crate::machine::Budgets {
        limits: config.budgets.clone(),
        feature_before: feature_spend(store.as_ref(), &opts.feature).map_err(DriverError::Store)?,
    };
    if let Some(raise) = opts.budget {
        budgets.raise(raise);
    }
    // The ledger's run: this feature, from this moment (a resume is a run of its own).
    let run_id = format!("{}@{}", opts.feature, Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ"));
    // What `troupe replay` needs, taken before the run changes anything.
    let mut recording = troupe_store::place(&layout, &config.store)
        .map_err(|e| e.to_string())
        .and_then(|place| {
            let start = record::Start { run: &run_id, opts: &opts, root: &root, store_place: &place };
            record::start(&layout, start)
        })
        .map_err(|e| observer.note(&format!("this run is not recorded for `troupe replay`: {e}")))
        .ok();
    let reserved = store.reserve_agent_numbers(AGENT_NUMBERS_PER_RUN).map_err(DriverError::Store)?;
    // A roadmap's replay: the recorded block, whichever sibling reserved first.
    let first_agent_number = record::pinned_agent_numbers(&opts.feature).unwrap_or(reserved);
    if let Some(r) = &mut recording
        && let Err(e) = r.numbered(first_agent_number, AGENT_NUMBERS_PER_RUN)
    {
        observer.note(&format!("this run is not recorded for `troupe replay`: {e}"));
        recording = None;
    }
    let lead_config = LeadConfig {
        max_concurrent: sharing.max_concurrent.unwrap_or(config.team.max_concurrent as usize),
        hang_timeout: signed(config.team.hang_timeout()),
        startup_timeout: signed(config.team.startup_timeout()),
        tool_timeout: signed(config.team.tool_timeout()),
        shutdown_timeout: config.shutdown.graceful_enabled.then(|| signed(config.shutdown.timeout())),
        commit: opts.commit,
        first_agent_number,
        worktrees: isolated,
        budgets,
        human_plans: config.team.human_plans(),
        ..LeadConfig::default()
    };
    let lead = Lead::new(spec, opts.job.clone(), lead_config, Timestamp::now());
    // What this feature's commits may hold: what its teammates produce, never the
    // user's own changes (reported here) nor a sibling feature's files.
    let mut scope = git::Scope::new(&opts.feature);
    git::sweep_dead_writes(&[layout.spec_dir(&opts.feature), layout.handover_dir()]);
    if opts.commit {
        scope.keep_out(git::Baseline::capture(&root).await.map_err(DriverError::Git)?);
        // An interrupted run's Builders may have left their files uncommitted:
        // they are the feature's, and this run's commits finish them.
        if let PlanLoad::Loaded(plan) = plan_io::load(&layout.tasks_file(&opts.feature)) {
            let files: Vec<String> = plan.groups.iter().flat_map(|g| g.files.iter().cloned()).collect();
            scope.claim(&files);
        }
        let dirty = scope.kept_out();
        if !dirty.is_empty() {
            let shown: Vec<&str> = dirty.iter().take(5).copied().collect();
            let more = dirty.len().saturating_sub(shown.len());
            observer.note(&format!(
                "the work tree has uncommitted changes ({}{}); troupe's commits leave them out unless a teammate changes them",
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ));
        }
    }
    let tool_reports = reported::ToolReports::start(store.as_ref()).map_err(DriverError::Events)?;
    let (tx, rx) = mpsc::unbounded_channel::<Report>();
    let books = bookkeeper::Bookkeeper::start(layout.clone(), config.store.clone(), opts.feature.clone(), tx.clone());
    let prices = std::sync::Arc::new(troupe_core::usage::PriceTable::with_overrides(&config.prices));
    let telemetry = config
        .telemetry
        .otlp_endpoint
        .as_deref()
        .map(|e| telemetry::Telemetry::new(e, &config.telemetry.service_name, &opts.feature));
    let driver = exec::Driver {
        steering: parse_common_commands(&tech),
        layout,
        root,
        specs,
        opts,
        config,
        script,
        store,
        books,
        handover,
        tool_reports,
        tx,
        observer,
        scope,
        running: HashMap::new(),
        pids: HashMap::new(),
        stoppers: HashMap::new(),
        pending_stops: Default::default(),
        commits: Vec::new(),
        last_merge: None,
        profile: Default::default(),
        worktrees,
        opencode_records: Vec::new(),
        remote,
        run_id,
        recording,
        prices,
        telemetry,
    };
    Ok((driver, lead, rx))
}

/// What the usage ledger holds for `feature` from earlier runs, for its
/// budget: cost, tokens, and each run's minutes from its first booked turn
/// to its last.
fn feature_spend(store: &dyn Store, feature: &str) -> Result<crate::machine::Spend, troupe_store::StoreError> {
    let filter = troupe_store::UsageFilter { feature: Some(feature.to_string()), ..Default::default() };
    let rows = store.usage(&filter)?;
    let (runs, total) = troupe_store::usage::summarise(&rows, troupe_store::usage::GroupBy::Run);
    let minutes = runs.iter().filter_map(|r| Some(r.last?.duration_since(r.first?).as_secs_f64() / 60.0)).sum();
    Ok(crate::machine::Spend { cost_usd: total.cost_usd, tokens: total.total_tokens, minutes })
}

fn signed(d: Duration) -> jiff::SignedDuration {
    jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX)
}

/// The role's template and where it came from (for errors): the project's
/// `.troupe/roles/<role>.md`, or the built-in one when that is missing or
/// empty. A file that exists but cannot be read (not UTF-8, a folder, no
/// permission) is an error naming it, never silently the built-in template:
/// the user edited it to be used.
pub fn read_template(roles: &Path, role: Role) -> Result<(String, String), TemplateError> {
    let path = roles.join(format!("{}.md", role.as_str()));
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok((text, path.display().to_string())),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(TemplateError { path, source: e }),
        _ => Ok((
            crate::roles::builtin(role).unwrap_or_default().to_string(),
            format!("the built-in {} template", role.as_str()),
        )),
    }
}

/// A role template that exists but cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the role template {}: {source}", path.display())]
pub struct TemplateError {
    /// The template file.
    pub path: PathBuf,
    /// Why it cannot be read.
    #[source]
    pub source: std::io::Error,
}

/// Stop every teammate of `feature` that an earlier run left running (its
/// Lead was killed, and so was the guardian that would have stopped it), before
/// this run spawns a replacement beside it: a registered agent that is not
/// finished, whose recorded pid is still that agent's process (its environment
/// names the agent and this project, so a recycled pid is never hit).
async fn stop_leftovers(store: &dyn Store, root: &Path, feature: &str, observer: &mut dyn Observer) {
    use troupe_engine::supervisor::{Grace, StopMode, is_agent_process, stop_group_blocking};
    let agents = match store.agents() {
        Ok(agents) => agents,
        Err(e) => return observer.note(&format!("cannot look for teammates an earlier run left running: {e}")),
    };
    for agent in agents {
        let Some(pid) = agent.pid else { continue };
        if agent.feature.as_deref() != Some(feature)
            || agent.status.is_terminal()
            || !is_agent_process(pid, &agent.id, root)
        {
            continue;
        }
        tracing::warn!(agent = %agent.id, pid, "stopping a teammate an earlier run left running");
        let mode = StopMode::Graceful(Grace::from_total(Duration::from_secs(3)));
        if let Err(e) = tokio::task::spawn_blocking(move || stop_group_blocking(pid, mode)).await {
            observer.note(&format!("cannot stop {} (pid {pid}), which an earlier run left running: {e}", agent.id));
        }
        if let Err(e) = store.set_status(&agent.id, AgentStatus::Failed) {
            observer.note(&format!("cannot record that {} was stopped: {e}", agent.id));
        }
    }
}

/// Agent numbers reserved per run: more teammates than any run spawns, few
/// enough that ids stay short (`builder-g1-1042`).
const AGENT_NUMBERS_PER_RUN: u64 = 1000;

/// A quality gate's result (troupe-gate's one runner and rule) as the machine
/// reads it, with the output for the teammate (failed) or the user (could not
/// run; a `[gates]` command's warning).
fn gate_verdict(result: &GateResult) -> (GateVerdict, String) {
    let said = |r: &GateRun, what: &str| {
        format!("$ {}\n{} `{}` {what} ({}):\n{}", r.command, r.label, r.command, r.detail, r.tail)
    };
    match result {
        GateResult::Passed => (GateVerdict::Passed, String::new()),
        GateResult::Errored(r) => (GateVerdict::Passed, said(r, "could not decide, allowed with a warning")),
        GateResult::Failed(r) => (GateVerdict::Failed, said(r, "failed")),
        GateResult::Unrunnable(r) => (GateVerdict::Environment, said(r, "could not run")),
    }
}

/// How a run ended, as its report and its telemetry name it.
fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::Escalated => "escalated",
        Outcome::Refused(_) => "refused",
        Outcome::Interrupted => "interrupted",
        Outcome::OverBudget { stopped: false, .. } => "paused",
        Outcome::OverBudget { stopped: true, .. } => "stopped",
    }
}

fn summarize(
    lead: &Lead,
    outcome: Outcome,
    commits: Vec<String>,
    running: &HashMap<AgentId, exec::Running>,
    costs: &HashMap<AgentId, f64>,
) -> RunReport {
    let ctx = lead.ctx();
    let name = outcome_name(&outcome);
    let (refused, budget) = match outcome {
        Outcome::Refused(m) => (Some(m), None),
        Outcome::OverBudget { reason, .. } => (None, Some(reason)),
        _ => (None, None),
    };
    RunReport {
        feature: ctx.feature().to_string(),
        outcome: name.into(),
        refused,
        budget,
        phase: ctx.spec().phase.to_string(),
        escalations: ctx.escalations().to_vec(),
        commits,
        files: ctx.spec().implementation.files_created.clone(),
        teammates: ctx
            .teammates()
            .iter()
            .map(|t| TeammateSummary {
                id: t.id.clone(),
                role: t.role.title().into(),
                engine: running.get(&t.id).map(|r| r.engine.clone()).unwrap_or_default(),
                model: running.get(&t.id).and_then(|r| r.model.clone()),
                status: format!("{:?}", t.status).to_lowercase(),
                turns: t.stats.num_turns,
                // The ledger's booking; an engine's own total when nothing was booked.
                cost_usd: costs.get(&t.id).copied().or(t.stats.total_cost_usd),
                files: t.files.clone(),
                tests: t.tests.clone(),
                duration_ms: t.stats.duration_ms,
            })
            .collect(),
    }
}
