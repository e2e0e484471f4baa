//! The async driver: it carries out the machine's commands with real processes,
//! files, the store and git, and feeds the results back as events. It makes no
//! decisions: every "what next" is the machine's.
//!
//! One loop: drain [`Lead::poll_command`], executing each command (quick ones
//! inline, teammates and quality gates as tasks that report back through a
//! channel); then wait for the next report or [`Lead::poll_timeout`].

mod bookkeeper;
pub mod git;
pub mod handover;
mod heartbeat;
pub mod launch;
pub mod plan_io;
mod reported;
pub mod sandbox;
mod shutdown;
pub(crate) mod teammate;
mod watch;
pub(crate) mod wiring;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::mpsc;
use troupe_core::config::{Config, QualityGate, parse_common_commands};
use troupe_core::event::AgentEvent;
use troupe_core::role::Role;
use troupe_project::Project;
use troupe_project::specs::Specs;
use troupe_store::{AgentStatus, NewAgent, Registry, SqliteStore};

use crate::machine::{AgentId, Command, Event, GateKind, GateVerdict, Job, Lead, LeadConfig, Outcome, PlanLoad};
use handover::Handover;
use launch::LaunchEnv;
use teammate::Report;
use troupe_gate::quality::{GateEnv, GateResult, GateRun, run_steps};

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
    /// `completed`, `escalated`, `refused` or `interrupted`.
    pub outcome: String,
    /// The refusal message, when refused.
    pub refused: Option<String>,
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
    /// An engine is unknown or not installed (checked before any spawn).
    #[error(transparent)]
    Engine(#[from] launch::EngineError),
}

/// Load `.troupe/config.toml` through the one loader (absent means defaults;
/// unreadable, not UTF-8 or invalid is an error, never the defaults).
pub fn load_config(project: &Project) -> Result<Config, DriverError> {
    Ok(troupe_project::config::load(project.layout())?)
}

struct Running {
    engine: String,
    model: Option<String>,
    turn: usize,
    request: crate::machine::SpawnRequest,
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
pub async fn run_shared(
    project: &Project,
    opts: RunOptions,
    sharing: Sharing,
    observer: &mut dyn Observer,
) -> Result<RunReport, DriverError> {
    let layout = project.layout().clone();
    let root = project.root().to_path_buf();
    let specs = Specs::new(project);
    let spec = specs.load(&opts.feature)?;
    let config = load_config(project)?;
    if opts.commit && !git::is_repo(&root).await {
        return Err(DriverError::NotARepo(root));
    }
    launch::preflight(opts.engine.as_deref(), &spec, &config, &opts.troupe)?;
    let store = SqliteStore::open_project(&layout).map_err(DriverError::Store)?;
    // A run writes for a long time: damaged pages are refused before it starts.
    store.quick_check().map_err(DriverError::Store)?;
    stop_leftovers(&store, &root, &opts.feature).await;
    let logs = layout.logs_dir();
    std::fs::create_dir_all(&logs).map_err(|e| DriverError::Io(logs.clone(), e))?;
    let mut handover = Handover::open(&layout).map_err(|e| DriverError::Io(layout.handover_dir(), e))?;
    let script = opts.script.clone().unwrap_or_else(|| layout.troupe_dir().join("scripted.yaml"));
    let tech = std::fs::read_to_string(layout.steering_dir().join("tech.md")).unwrap_or_default();
    let steering = parse_common_commands(&tech);

    let lead_config = LeadConfig {
        max_concurrent: sharing.max_concurrent.unwrap_or(config.team.max_concurrent as usize),
        hang_timeout: jiff::SignedDuration::from_secs(config.team.hang_timeout_seconds as i64),
        shutdown_timeout: config
            .shutdown
            .graceful_enabled
            .then(|| jiff::SignedDuration::from_secs(config.shutdown.timeout_seconds as i64)),
        commit: opts.commit,
        first_agent_number: store.reserve_agent_numbers(AGENT_NUMBERS_PER_RUN).map_err(DriverError::Store)?,
        ..LeadConfig::default()
    };
    let mut lead = Lead::new(spec, opts.job.clone(), lead_config, Timestamp::now());
    let (tx, mut rx) = mpsc::unbounded_channel::<Report>();
    let mut pids: HashMap<AgentId, u32> = HashMap::new();
    // Each running teammate's supervisor, which carries out forced stops.
    let mut stoppers: HashMap<AgentId, mpsc::UnboundedSender<troupe_engine::supervisor::StopMode>> = HashMap::new();
    // Forced stops decided before the teammate's process ran.
    let mut pending_stops: std::collections::HashSet<AgentId> = std::collections::HashSet::new();
    let mut running: HashMap<AgentId, Running> = HashMap::new();
    let mut commits = Vec::new();
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
    let env = LaunchEnv { root: &root, troupe: &opts.troupe, script: &script, config: &config };
    // Teammates' `report` tool calls, which stand in for their final text.
    let mut tool_reports = reported::ToolReports::start(&store, &opts.feature);

    // Ctrl-C becomes an event like any other. The handler is installed here,
    // before any teammate starts, so a Ctrl-C can never kill troupe itself.
    let interrupt = {
        let tx = tx.clone();
        let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        tokio::spawn(async move {
            if let Ok(mut sigint) = sigint
                && sigint.recv().await.is_some()
            {
                let _ = tx.send(Report::Lead(Event::Interrupted));
            }
        })
    };
    let watcher = watch::start(layout.clone(), opts.feature.clone(), tx.clone(), Duration::from_millis(200));
    let books = bookkeeper::Bookkeeper::start(layout.clone(), opts.feature.clone(), tx.clone());
    let mut profile: std::collections::BTreeMap<&'static str, Duration> = Default::default();
    lead.start(Timestamp::now());
    let outcome = 'run: loop {
        while let Some(cmd) = lead.poll_command() {
            observer.command(&cmd, &lead);
            if let Command::Spawn(req) = &cmd {
                scope.own(&req.context.write);
            }
            let started_cmd = std::time::Instant::now();
            let cmd_name = cmd.name();
            let now = Timestamp::now();
            let feature = opts.feature.clone();
            match cmd {
                Command::Finish(outcome) => break 'run outcome,
                Command::Spawn(req) => {
                    let engine =
                        launch::resolve_engine(opts.engine.as_deref(), lead.ctx().spec(), &config, &req.engine_phase);
                    let (template, source) = read_template(&layout.roles_dir(), req.role);
                    let render_env =
                        crate::roles::RenderEnv { engine: &engine, troupe: &opts.troupe, skills: &config.gates.skills };
                    let launched = crate::roles::render(&template, &source, &req, &render_env)
                        .map_err(|e| e.to_string())
                        .and_then(|prompt| launch::launch(&engine, &req, &prompt, 0, None, &env));
                    match launched {
                        Ok(l) => {
                            tool_reports.launched(&store, &req.id);
                            observer.launched(&req.id, &l.engine, l.model.as_deref());
                            let (r, e, m) = ((*req).clone(), l.engine.clone(), l.model.clone());
                            books.store(move |store| register(store, &r, &e, m));
                            running.insert(
                                req.id.clone(),
                                Running {
                                    engine: l.engine.clone(),
                                    model: l.model.clone(),
                                    turn: 0,
                                    request: (*req).clone(),
                                },
                            );
                            teammate::start(
                                req.id.clone(),
                                l,
                                root.clone(),
                                logs.join(format!("{}.jsonl", req.id)),
                                tx.clone(),
                            );
                        }
                        Err(error) => {
                            let _ = tx.send(Report::Lead(Event::SpawnFailed { id: req.id.clone(), error }));
                        }
                    }
                }
                Command::Resume { id, prompt } => {
                    let session = lead.ctx().teammate(&id).and_then(|t| t.stats.session_id.clone());
                    let Some(r) = running.get_mut(&id) else { continue };
                    r.turn += 1;
                    let render_env = crate::roles::RenderEnv {
                        engine: &r.engine,
                        troupe: &opts.troupe,
                        skills: &config.gates.skills,
                    };
                    let launched = crate::roles::fill(&prompt, "the resume prompt", &r.request, &render_env)
                        .map_err(|e| e.to_string())
                        .and_then(|prompt| {
                            launch::launch(&r.engine, &r.request, &prompt, r.turn, session.as_deref(), &env)
                        });
                    match launched {
                        Ok(l) => {
                            tool_reports.launched(&store, &id);
                            teammate::start(id.clone(), l, root.clone(), logs.join(format!("{id}.jsonl")), tx.clone())
                        }
                        Err(error) => {
                            let _ = tx.send(Report::Lead(Event::SpawnFailed { id, error }));
                        }
                    }
                }
                Command::ShutDown { id, force } => {
                    let stopper = stoppers.get(&id);
                    if stopper.is_none() && force {
                        // Its spawn is still in flight: the signals follow once it runs.
                        pending_stops.insert(id.clone());
                    }
                    shutdown::shut_down(&books, stopper, id, force)
                }
                Command::SendMessage { to, kind, body, in_reply_to } => {
                    let msg = troupe_store::NewMessage {
                        kind: kind.parse().unwrap_or(troupe_store::MessageKind::Text),
                        in_reply_to,
                        ..troupe_store::NewMessage::text(plan_io::LEAD, to, body)
                    };
                    let tx = tx.clone();
                    books.store(move |store| {
                        if let Err(e) = troupe_store::Mailbox::send(store, msg) {
                            feed(&tx, "send-message", e.to_string());
                        }
                    });
                }
                Command::SaveSpec(spec) => {
                    if let Err(e) = specs.save(&spec) {
                        feed(&tx, "save-spec", e.to_string());
                    }
                }
                Command::CheckArtifacts { paths } => {
                    let missing = plan_io::missing_artifacts(&root, &paths);
                    let _ = tx.send(Report::Lead(Event::ArtifactsChecked { missing }));
                }
                Command::LoadPlan => {
                    let mut load = plan_io::load(&layout.tasks_file(&feature));
                    if let PlanLoad::Loaded(plan) = &mut load {
                        // Files reported by groups done in earlier runs count as created.
                        books.flush().await;
                        if let Err(e) = plan_io::add_reported_files(&store, &feature, plan) {
                            feed(&tx, "load-plan", e);
                        }
                        plan_io::fill_unreported_files(&root, plan);
                    }
                    let _ = tx.send(Report::Lead(Event::PlanLoaded(load)));
                }
                Command::ImportPlan { replace, renew } => {
                    let event = match plan_io::import(&store, &feature, &layout.tasks_file(&feature), replace, renew) {
                        Ok(completed) => Event::PlanImported { completed },
                        Err(error) => Event::CommandFailed { command: "import-plan".into(), error },
                    };
                    let _ = tx.send(Report::Lead(event));
                }
                Command::MarkTasksDone { tasks } => books.mark_done(tasks),
                Command::RecordGroupFiles { group, files } => {
                    let tx = tx.clone();
                    books.store(move |store| {
                        if let Err(e) = plan_io::record_group_files(store, &feature, &group, &files) {
                            feed(&tx, "record-group-files", e);
                        }
                    });
                }
                Command::MarkTasksBlocked { tasks, reason } => {
                    // The board has no blocked status: a task blocked on a human gets a
                    // note in the mailbox of the Lead, and stays pending for `troupe resume`.
                    let body = format!("tasks {} blocked: {reason}", tasks.join(", "));
                    books.store(move |store| {
                        let _ = troupe_store::Mailbox::send(
                            store,
                            troupe_store::NewMessage::text(plan_io::LEAD, plan_io::LEAD, body),
                        );
                    });
                }
                Command::RunGate { run, kind } => {
                    let (engine, agent, task) = match &kind {
                        GateKind::TaskCompleted { agent, tasks } => {
                            (running.get(agent).map(|r| r.engine.clone()), Some(agent.clone()), tasks.last().cloned())
                        }
                        GateKind::Final => (None, None, None),
                    };
                    let steps = config.gates.steps(QualityGate::OnTaskCompleted, engine.as_deref(), &steering);
                    observer.gate(run, &steps);
                    let env = GateEnv {
                        agent_id: agent.clone(),
                        agent_name: agent,
                        last_task_id: task,
                        status_from: Some("in_progress".into()),
                        status_to: Some("completed".into()),
                    };
                    let tx = tx.clone();
                    let root = root.clone();
                    let timeout = Duration::from_secs(config.gates.timeout_seconds);
                    tokio::spawn(async move {
                        let ended = tokio::task::spawn_blocking(move || run_steps(&steps, &root, &env, timeout)).await;
                        let (verdict, output) = match ended {
                            Ok(result) => gate_verdict(&result),
                            Err(e) => (GateVerdict::Environment, format!("the quality gate did not finish: {e}")),
                        };
                        let _ = tx.send(Report::Lead(Event::GateFinished { run, verdict, output }));
                    });
                }
                Command::Commit { .. } | Command::CommitIfChanged { .. } => {
                    // The commit carries tasks.yaml with every task marked so far.
                    books.flush().await;
                    let (message, due) = match cmd {
                        Command::CommitIfChanged { message, paths } => {
                            let due = git::any_changed(&root, &paths).await;
                            (message, due)
                        }
                        Command::Commit { message } => (message, Ok(true)),
                        _ => unreachable!("matched above"),
                    };
                    let committed = match due {
                        Ok(true) => git::commit_scoped(&root, &message, &scope).await,
                        Ok(false) => Ok(None),
                        Err(e) => Err(e),
                    };
                    let event = match committed {
                        Ok(sha) => {
                            if let Some(s) = &sha {
                                commits.push(format!("{s} {message}"));
                            }
                            Event::Committed { sha }
                        }
                        Err(error) => Event::CommandFailed { command: "commit".into(), error },
                    };
                    let _ = tx.send(Report::Lead(event));
                }
                Command::RecordDecision { kind, summary } => {
                    let _ = handover.decision(now, kind, &summary);
                }
                Command::RecordKnowledge { from, entries } => {
                    let _ = handover.knowledge(&feature, &from, &entries);
                }
                Command::WriteHandover { session, next_action, buffer } => {
                    let phase = lead.ctx().spec().phase.to_string();
                    let _ = handover.session(now, &feature, &phase, &session, &next_action, &buffer);
                }
                Command::Escalate { .. } => {}
                Command::Review(review) => {
                    if let Err(e) = crate::review::files::apply(&layout, &review) {
                        feed(&tx, "review", e.to_string());
                    }
                }
            }
            *profile.entry(cmd_name).or_default() += started_cmd.elapsed();
        }
        let deadline = lead.poll_timeout();
        let sleep = async {
            match deadline {
                Some(t) => {
                    let ms = t.duration_since(Timestamp::now()).as_millis().max(0) as u64;
                    tokio::time::sleep(Duration::from_millis(ms)).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            report = rx.recv() => {
                let Some(report) = report else { continue };
                match report {
                    Report::Started(id, pid, stopper) => {
                        pids.insert(id.clone(), pid);
                        if pending_stops.remove(&id) {
                            shutdown::force_stop(&stopper);
                        }
                        stoppers.insert(id.clone(), stopper);
                        books.store(move |store| {
                            let _ = store.update_agent(&id, troupe_store::AgentUpdate { pid: Some(Some(pid)), ..Default::default() });
                        });
                    }
                    Report::Agent(id, e) => observer.agent_event(&id, &e),
                    Report::Lead(event) => {
                        let role = match &event {
                            Event::TeammateFinished { id, .. } => running.get(id).map(|r| r.request.role),
                            _ => None,
                        };
                        let event = tool_reports.apply(&store, event, role, &crate::review::files::active_dir(&layout, &opts.feature));
                        if let Event::TeammateFinished { id, .. } | Event::TeammateExited { id, .. } = &event {
                            // Its process is gone: a later stop waits for the next one (a resume).
                            pids.remove(id);
                            stoppers.remove(id);
                        }
                        match &event {
                            Event::TeammateFinished { id, .. } => {
                                let id = id.clone();
                                books.store(move |store| { let _ = store.set_status(&id, AgentStatus::Done); });
                            }
                            Event::TeammateExited { id, .. } | Event::SpawnFailed { id, .. } => {
                                let id = id.clone();
                                books.store(move |store| { let _ = store.set_status(&id, AgentStatus::Failed); });
                            }
                            _ => {}
                        }
                        observer.event(&event, &lead);
                        lead.handle_event(event, Timestamp::now());
                    }
                }
            }
            _ = sleep => lead.handle_timeout(Timestamp::now()),
        }
    };
    interrupt.abort();
    watcher.abort();
    books.close();
    // The run's own notes (decisions.md, session.md, verdicts.md) were written
    // after its last commit: a completed run commits them too, so that it
    // leaves the work tree as clean as it found it.
    if opts.commit && matches!(outcome, Outcome::Completed) {
        let message = lead.ctx().commit_message("the run's handover notes");
        match git::commit_scoped(&root, &message, &scope).await {
            Ok(Some(sha)) => commits.push(format!("{sha} {message}")),
            Ok(None) => {}
            Err(e) => observer.note(&format!("cannot commit the run's handover notes: {e}")),
        }
    }
    if std::env::var_os("TROUPE_PROFILE").is_some() {
        for (name, d) in &profile {
            eprintln!("profile: {name:<20} {:>8.1} ms", d.as_secs_f64() * 1e3);
        }
    }
    // Whatever still runs gets SIGTERM and a short grace, then SIGKILL: nothing
    // is left running once the run returns.
    let left: Vec<u32> = pids
        .iter()
        .filter(|(id, _)| {
            lead.ctx().teammate(id).is_some_and(|t| {
                matches!(
                    t.status,
                    crate::machine::TeammateStatus::Running
                        | crate::machine::TeammateStatus::Spawning
                        | crate::machine::TeammateStatus::ShuttingDown
                )
            })
        })
        .map(|(_, pid)| *pid)
        .collect();
    // Teammates the end of the run cuts short are INTERRUPTED in the registry;
    // their exit is never processed, so nothing else would say so.
    let cut_short: Vec<AgentId> = lead
        .ctx()
        .teammates()
        .iter()
        .filter(|t| {
            matches!(
                t.status,
                crate::machine::TeammateStatus::Running
                    | crate::machine::TeammateStatus::Spawning
                    | crate::machine::TeammateStatus::ShuttingDown
            )
        })
        .map(|t| t.id.clone())
        .collect();
    shutdown::stop_all(&left).await;
    for id in &cut_short {
        let _ = store.set_status(id, AgentStatus::Interrupted);
    }
    // The teammates' per-run engine settings (hooks, gateway) end with the run.
    wiring::cleanup(&root, running.keys());
    Ok(summarize(&lead, outcome, commits, &running))
}

fn feed(tx: &mpsc::UnboundedSender<Report>, command: &str, error: String) {
    let _ = tx.send(Report::Lead(Event::CommandFailed { command: command.into(), error }));
}

fn register(store: &SqliteStore, req: &crate::machine::SpawnRequest, engine: &str, model: Option<String>) {
    let mut agent = NewAgent::new(req.id.clone(), req.role.as_str(), engine);
    agent.model = model;
    agent.feature = Some(req.context.feature.clone());
    agent.task = req.tasks.first().cloned();
    if store.register(agent).is_ok() {
        let _ = store.set_status(&req.id, AgentStatus::Processing);
    }
}

/// The role's template and where it came from (for errors): the project's
/// `.troupe/roles/<role>.md`, or the built-in one when that is missing or empty.
pub fn read_template(roles: &Path, role: Role) -> (String, String) {
    let path = roles.join(format!("{}.md", role.as_str()));
    match std::fs::read_to_string(&path).ok().filter(|t| !t.trim().is_empty()) {
        Some(text) => (text, path.display().to_string()),
        None => (
            crate::roles::builtin(role).unwrap_or_default().to_string(),
            format!("the built-in {} template", role.as_str()),
        ),
    }
}

/// Stop every teammate of `feature` that an earlier run left running (its
/// Lead was killed, and so was the guardian that would have stopped it), before
/// this run spawns a replacement beside it: a registered agent that is not
/// finished, whose recorded pid is still that agent's process (its environment
/// names the agent and this project, so a recycled pid is never hit).
async fn stop_leftovers(store: &SqliteStore, root: &Path, feature: &str) {
    use troupe_engine::supervisor::{Grace, StopMode, is_agent_process, stop_group_blocking};
    let Ok(agents) = store.agents() else { return };
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
        let _ = tokio::task::spawn_blocking(move || stop_group_blocking(pid, mode)).await;
        let _ = store.set_status(&agent.id, AgentStatus::Failed);
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

fn summarize(lead: &Lead, outcome: Outcome, commits: Vec<String>, running: &HashMap<AgentId, Running>) -> RunReport {
    let ctx = lead.ctx();
    let (outcome, refused) = match outcome {
        Outcome::Completed => ("completed", None),
        Outcome::Escalated => ("escalated", None),
        Outcome::Refused(m) => ("refused", Some(m)),
        Outcome::Interrupted => ("interrupted", None),
    };
    RunReport {
        feature: ctx.feature().to_string(),
        outcome: outcome.into(),
        refused,
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
                cost_usd: t.stats.total_cost_usd,
                files: t.files.clone(),
                tests: t.tests.clone(),
                duration_ms: t.stats.duration_ms,
            })
            .collect(),
    }
}
