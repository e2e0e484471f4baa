//! The driver of one run: what it holds while the run goes on, one method per
//! [`Command`] that carries it out, and [`Driver::on_report`], which turns
//! what its tasks report into machine events.
//!
//! Nothing here decides: a command is carried out as asked, and every error
//! is handed on: to the machine as `CommandFailed` when the run depends on
//! the command (it escalates), to the user as a note when only bookkeeping
//! failed (the registry, the handover notes).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::sync::mpsc::UnboundedSender;
use troupe_core::config::{CommonCommands, Config, QualityGate};
use troupe_core::layout::Layout;
use troupe_core::spec::Spec;
use troupe_engine::ledger::LaunchLedger;
use troupe_engine::supervisor::StopMode;
use troupe_gate::quality::{GateEnv, run_steps_with};
use troupe_project::specs::Specs;
use troupe_store::{AgentStatus, AgentUpdate, MessageKind, NewMessage, Store};

use super::bookkeeper::Bookkeeper;
use super::handover::Handover;
use super::launch::{self, LaunchEnv};
use super::reported::ToolReports;
use super::teammate::{self, Report};
use super::{Observer, RunOptions, git, plan_io, shutdown};
use crate::machine::{
    AgentId, Command, DecisionKind, Event, GateKind, KnowledgeTag, Lead, Outcome, PlanLoad, SpawnRequest,
};
use crate::review::ReviewCommand;

/// A teammate launched in this run: how to launch it again (a resume).
pub(super) struct Running {
    pub(super) engine: String,
    pub(super) model: Option<String>,
    turn: usize,
    request: SpawnRequest,
}

/// Everything one run holds while it goes on.
pub(super) struct Driver<'a> {
    pub(super) layout: Layout,
    pub(super) root: PathBuf,
    pub(super) specs: Specs<'a>,
    pub(super) opts: RunOptions,
    pub(super) config: Config,
    /// tech.md's Common Commands, for the quality gates.
    pub(super) steering: CommonCommands,
    /// The scripted engine's script.
    pub(super) script: PathBuf,
    pub(super) store: Box<dyn Store>,
    pub(super) books: Bookkeeper,
    pub(super) handover: Handover,
    /// Teammates' `report` tool calls, handed to the machine with their ends.
    pub(super) tool_reports: ToolReports,
    pub(super) tx: UnboundedSender<Report>,
    pub(super) observer: &'a mut dyn Observer,
    /// What this feature's commits may hold.
    pub(super) scope: git::Scope,
    pub(super) running: HashMap<AgentId, Running>,
    /// Each running teammate's process group.
    pub(super) pids: HashMap<AgentId, u32>,
    /// Each running teammate's supervisor, which carries out forced stops.
    pub(super) stoppers: HashMap<AgentId, UnboundedSender<StopMode>>,
    /// Forced stops decided before the teammate's process ran.
    pub(super) pending_stops: HashSet<AgentId>,
    /// Commits made, newest last.
    pub(super) commits: Vec<String>,
    /// The last merge's line before it and its place in [`Self::commits`]:
    /// a merge taken back ([`Command::UndoMerge`]) leaves the report too.
    pub(super) last_merge: Option<(String, usize)>,
    /// Time spent per command (`TROUPE_PROFILE`).
    pub(super) profile: BTreeMap<&'static str, Duration>,
    /// The Builders' worktrees, under `[team] isolation = "worktree"`.
    pub(super) worktrees: Option<super::worktree::Worktrees>,
    /// What launches recorded in `.opencode` folders, put back at the run's end.
    pub(super) opencode_records: Vec<super::opencode_deps::Recorded>,
    /// The remote executor, under `[team] executors = "workers"`: Builder
    /// groups run on workers instead of here.
    pub(super) remote: Option<super::remote::Remote>,
    /// This run's name in the usage ledger.
    pub(super) run_id: String,
    /// What `troupe replay` needs of this run (`None`: not recorded).
    pub(super) recording: Option<super::record::Recording>,
    /// The project's price table, for engines that report tokens only.
    pub(super) prices: std::sync::Arc<troupe_core::usage::PriceTable>,
    /// The run's OpenTelemetry export, under `[telemetry] otlp_endpoint`.
    pub(super) telemetry: Option<super::telemetry::Telemetry>,
}

impl Driver<'_> {
    /// Carry out `cmd`; `Finish` is the caller's (it ends the loop).
    pub(super) async fn execute(&mut self, cmd: Command, lead: &Lead) {
        self.observer.command(&cmd, lead);
        let started = Instant::now();
        let name = cmd.name();
        match cmd {
            Command::Spawn(req) => self.spawn(*req, lead).await,
            Command::Resume { id, prompt } => self.resume(id, &prompt, lead).await,
            Command::ShutDown { id, force } => self.shut_down(id, force),
            Command::SendMessage { to, kind, body, in_reply_to } => self.send_message(to, &kind, body, in_reply_to),
            Command::HoldForPlan { id } => {
                // Before its spawn, and not through the bookkeeper's batch: the
                // hooks must see plan mode from its first tool call.
                let body = "Plan first: a person decides your plan (`troupe approve`). Until it is approved, \
                            troupe refuses your file writes and shell commands.";
                if let Err(e) = self.store.send_plan_mode(NewMessage::text(plan_io::LEAD, id, body)) {
                    self.failed("hold-for-plan", e.to_string());
                }
            }
            Command::MarkWaiting { id, waiting } => {
                let status = if waiting { AgentStatus::Waiting } else { AgentStatus::Processing };
                // Bookkeeping: `troupe status` shows it; the run goes on without it.
                if let Err(e) = self.store.set_status(&id, status) {
                    self.observer.note(&format!("cannot record that {id} is {status}: {e}"));
                }
            }
            Command::SaveSpec(spec) => {
                if let Err(e) = self.save_spec(*spec) {
                    self.failed("save-spec", e.to_string());
                }
            }
            Command::CheckArtifacts { paths } => {
                let missing = plan_io::missing_artifacts(&self.root, &paths);
                self.send(Event::ArtifactsChecked { missing });
            }
            Command::LoadPlan => self.load_plan(lead).await,
            Command::ImportPlan { replace, renew } => self.import_plan(replace, renew),
            Command::MarkTasksDone { tasks } => self.books.mark_done(tasks),
            Command::RecordGroupFiles { group, files } => self.record_group_files(group, files),
            Command::MarkTasksBlocked { tasks, reason } => self.mark_tasks_blocked(&tasks, &reason),
            Command::RunGate { run, kind } => self.run_gate(run, kind).await,
            Command::Commit { message } => self.commit(message, None).await,
            Command::CommitIfChanged { message, paths } => self.commit(message, Some(paths)).await,
            Command::RecordDecision { kind, summary } => self.record_decision(kind, &summary),
            Command::RecordKnowledge { from, entries } => self.record_knowledge(&from, &entries),
            Command::WriteHandover { session, next_action, buffer } => {
                self.write_handover(lead, &session, &next_action, &buffer)
            }
            // The escalation is in the machine's context, which the run's
            // report shows; the handover notes carry it to the next session.
            Command::Escalate { .. } => {}
            Command::Review(review) => self.review(&review),
            Command::OpenWorktree { .. }
            | Command::CommitGroup { .. }
            | Command::MergeGroup { .. }
            | Command::UndoMerge { .. }
            | Command::CloseWorktree { .. }
            | Command::RecoverWorktrees
            | Command::LandLine { .. } => self.worktree(cmd).await,
            Command::Finish(_) => unreachable!("the run's loop ends at Finish"),
        }
        *self.profile.entry(name).or_default() += started.elapsed();
    }

    /// Hand `event` to the machine (through the run's channel, in order with
    /// the reports of running tasks). The receiver lives until the run
    /// returns, so a send fails only once nobody waits for events any more.
    fn send(&self, event: Event) {
        let _ = self.tx.send(Report::Lead(event));
    }

    /// `command` could not be carried out: the machine hears it and escalates.
    fn failed(&self, command: &str, error: String) {
        self.send(Event::CommandFailed { command: command.into(), error });
    }

    fn launch_env(&self, group: Option<&str>) -> LaunchEnv<'_> {
        let workdir = group.and_then(|g| self.worktrees.as_ref()?.workdir(g));
        LaunchEnv { root: &self.root, troupe: &self.opts.troupe, script: &self.script, config: &self.config, workdir }
    }

    /// Where a teammate of `group` works: its worktree, else the project root.
    fn workdir(&self, group: Option<&str>) -> PathBuf {
        self.launch_env(group).workdir.unwrap_or(&self.root).to_path_buf()
    }

    async fn spawn(&mut self, req: SpawnRequest, lead: &Lead) {
        self.scope.own(&req.context.write);
        if let (Some(w), Some(g)) = (self.worktrees.as_mut(), &req.group) {
            w.own(g, &req.context.write);
            // A Builder whose worktree could not be opened never starts in
            // the shared tree instead.
            if w.failed(g) {
                let error = format!("group {g} has no worktree to start in");
                return self.send(Event::SpawnFailed { id: req.id.clone(), error });
            }
        }
        // A teammate in the project's tree sees the line's merges.
        let workdir = self.workdir(req.group.as_deref());
        if let Err(error) = self.sync_line(&workdir).await {
            return self.send(Event::SpawnFailed { id: req.id.clone(), error });
        }
        self.reread_engines();
        let spec = self.with_file_overrides(lead.ctx().spec().clone());
        let engine = launch::resolve_engine(self.opts.engine.as_deref(), &spec, &self.config, &req.engine_phase);
        let render_env =
            crate::roles::RenderEnv { engine: &engine, troupe: &self.opts.troupe, skills: &self.config.gates.skills };
        let prompt = super::read_template(&self.layout.roles_dir(), req.role).map_err(|e| e.to_string()).and_then(
            |(template, source)| crate::roles::render(&template, &source, &req, &render_env).map_err(|e| e.to_string()),
        );
        if self.is_remote(&req) {
            return match prompt {
                Ok(prompt) => self.spawn_remote(req, engine, prompt, 0, None).await,
                Err(error) => self.send(Event::SpawnFailed { id: req.id.clone(), error }),
            };
        }
        let launched = prompt
            .and_then(|prompt| launch::launch(&engine, &req, &prompt, 0, None, &self.launch_env(req.group.as_deref())));
        let mut l = match launched {
            Ok(l) => l,
            Err(error) => return self.send(Event::SpawnFailed { id: req.id.clone(), error }),
        };
        self.opencode_records.extend(l.opencode_record.take());
        if let Err(error) = self.tool_reports.launched(self.store.as_ref(), &req.id) {
            self.failed("spawn", error);
        }
        self.observer.launched(&req.id, &l.engine, l.model.as_deref());
        if let Some(t) = &mut self.telemetry {
            t.launched(&req.id, req.role.as_str(), &l.engine, l.model.as_deref());
        }
        let (r, e, m, lease) = (req.clone(), l.engine.clone(), l.model.clone(), self.config.store.lease());
        self.books.record(format!("cannot register {}", req.id), move |store| register(store, &r, &e, m, lease));
        let log = self.layout.logs_dir().join(format!("{}.jsonl", req.id));
        let id = req.id.clone();
        let cwd = self.workdir(req.group.as_deref());
        let ledger = self.ledger(&req, &l, 0);
        let running = Running { engine: l.engine.clone(), model: l.model.clone(), turn: 0, request: req };
        self.running.insert(id.clone(), running);
        teammate::start(id, l, cwd, log, self.tx.clone(), self.activity_every(), ledger);
    }

    /// Whether `req`'s teammate runs on a worker: a Builder group with its
    /// worktree, when the run has workers. The Architect, the TaskGenerator
    /// and the reviewers write the spec folder the Lead reads, and stay here.
    fn is_remote(&self, req: &SpawnRequest) -> bool {
        self.remote.is_some() && req.group.as_deref().is_some_and(|g| self.launch_env(Some(g)).workdir.is_some())
    }

    /// Queue launch `turn` of `req` for a worker (see [`super::remote`]);
    /// the machine hears of it from the worker's reports, as of a local teammate.
    async fn spawn_remote(
        &mut self,
        req: SpawnRequest,
        engine: String,
        prompt: String,
        turn: usize,
        session: Option<String>,
    ) {
        let workdir = self.workdir(req.group.as_deref());
        let activity = self.activity_every();
        let Some(remote) = self.remote.as_mut() else { return };
        let queue = super::remote::Queue {
            req: &req,
            engine: &engine,
            prompt,
            turn,
            session,
            layout: &self.layout,
            root: &self.root,
            workdir: &workdir,
            script: &self.script,
            run: &self.run_id,
            activity,
        };
        if let Err(error) = remote.queue(self.store.as_ref(), queue).await {
            return self.send(Event::SpawnFailed { id: req.id.clone(), error });
        }
        if let Err(error) = self.tool_reports.launched(self.store.as_ref(), &req.id) {
            self.failed("spawn", error);
        }
        if turn == 0 {
            self.observer.launched(&req.id, &engine, None);
            if let Some(t) = &mut self.telemetry {
                t.launched(&req.id, req.role.as_str(), &engine, None);
            }
            let (r, e, lease) = (req.clone(), engine.clone(), self.config.store.lease());
            self.books.record(format!("cannot register {}", req.id), move |store| register(store, &r, &e, None, lease));
            let running = Running { engine, model: None, turn: 0, request: req.clone() };
            self.running.insert(req.id.clone(), running);
        }
    }

    /// `spec` with spec.yaml's `engine_override` as the file has it now. The
    /// overrides are the user's (the dashboard's feature page, through the
    /// spec writer) and change during a run; the machine's copy of the spec
    /// may be older, so neither a spawn nor a save of the Lead uses its copy.
    fn with_file_overrides(&mut self, mut spec: Spec) -> Spec {
        match self.specs.load(&spec.feature_name) {
            Ok(on_disk) => spec.engine_override = on_disk.engine_override,
            Err(e) => self.observer.note(&format!("engine overrides not re-read, the run's own are kept: {e}")),
        }
        spec
    }

    /// Save the machine's spec, keeping the file's `engine_override`.
    fn save_spec(&mut self, spec: Spec) -> Result<(), troupe_project::specs::SpecFileError> {
        let spec = self.with_file_overrides(spec);
        self.specs.save(&spec)
    }

    /// The engine choice (`[engines]` of config.toml) as it is now, read
    /// through the one loader before every spawn: a change made while the run
    /// goes on (the dashboard's engine settings, `PUT /engines`, an edit)
    /// applies to the next teammate spawned, not only to the next run. A file
    /// that cannot be read at this moment (half written, a typo) keeps the
    /// choice the run had, and says so.
    fn reread_engines(&mut self) {
        match troupe_project::config::load(&self.layout) {
            Ok(config) => self.config.engines = config.engines,
            Err(e) => self.observer.note(&format!("engine settings not re-read, the run's own are kept: {e}")),
        }
    }

    /// Where launch `turn` of `req`'s teammate books its model turns.
    fn ledger(&self, req: &SpawnRequest, l: &launch::Launch, turn: usize) -> LaunchLedger {
        teammate::ledger(req, l, &self.run_id, turn, self.prices.clone())
    }

    /// How often a teammate's events other than tool calls refresh its hang
    /// timer: a quarter of the hang timeout, at most once a second.
    fn activity_every(&self) -> Duration {
        (self.config.team.hang_timeout() / 4).min(Duration::from_secs(1))
    }

    async fn resume(&mut self, id: AgentId, prompt: &str, lead: &Lead) {
        let session = lead.ctx().teammate(&id).and_then(|t| t.stats.session_id.clone());
        let Some(r) = self.running.get_mut(&id) else {
            let error = "cannot resume it: it was never launched in this run".to_string();
            return self.send(Event::SpawnFailed { id, error });
        };
        r.turn += 1;
        let (engine, request, turn) = (r.engine.clone(), r.request.clone(), r.turn);
        let render_env =
            crate::roles::RenderEnv { engine: &engine, troupe: &self.opts.troupe, skills: &self.config.gates.skills };
        let group = request.group.as_deref();
        let filled = crate::roles::fill(prompt, "the resume prompt", &request, &render_env).map_err(|e| e.to_string());
        if self.remote.as_ref().is_some_and(|r| r.runs(&id)) {
            return match filled {
                Ok(prompt) => self.spawn_remote(request, engine, prompt, turn, session).await,
                Err(error) => self.send(Event::SpawnFailed { id, error }),
            };
        }
        let launched = filled.and_then(|prompt| {
            launch::launch(&engine, &request, &prompt, turn, session.as_deref(), &self.launch_env(group))
        });
        let cwd = self.workdir(group);
        match launched {
            Ok(mut l) => {
                self.opencode_records.extend(l.opencode_record.take());
                if let Err(error) = self.tool_reports.launched(self.store.as_ref(), &id) {
                    self.failed("resume", error);
                }
                if let Some(t) = &mut self.telemetry {
                    t.launched(&id, request.role.as_str(), &l.engine, l.model.as_deref());
                }
                let log = self.layout.logs_dir().join(format!("{id}.jsonl"));
                let ledger = self.ledger(&request, &l, turn);
                teammate::start(id, l, cwd, log, self.tx.clone(), self.activity_every(), ledger)
            }
            Err(error) => self.send(Event::SpawnFailed { id, error }),
        }
    }

    fn shut_down(&mut self, id: AgentId, force: bool) {
        if let (true, Some(remote)) = (force, self.remote.as_ref().filter(|r| r.runs(&id))) {
            // Its worker stops the process; the graceful request is the mailbox's, as here.
            match remote.stop(self.store.as_ref(), &id) {
                // Lost with its worker: no process is left to end, so its end is now.
                Ok(true) => {
                    let error = "its worker was lost (its spawn job ended without it)".to_string();
                    self.send(Event::TeammateExited { id: id.clone(), error, stats: Default::default() });
                }
                Ok(false) => {}
                Err(e) => self.observer.note(&format!("cannot ask {id}'s worker to stop it: {e}")),
            }
            return shutdown::shut_down(&self.books, None, id, force);
        }
        let stopper = self.stoppers.get(&id);
        if stopper.is_none() && force {
            // Its spawn is still in flight: the signals follow once it runs.
            self.pending_stops.insert(id.clone());
        }
        shutdown::shut_down(&self.books, stopper, id, force)
    }

    fn send_message(&mut self, to: AgentId, kind: &str, body: String, in_reply_to: Option<i64>) {
        let kind: MessageKind = match kind.parse() {
            Ok(k) => k,
            Err(_) => return self.failed("send-message", format!("the mailbox has no message kind `{kind}`")),
        };
        let msg = NewMessage { kind, in_reply_to, ..NewMessage::text(plan_io::LEAD, to, body) };
        self.books.store("send-message", move |store| store.send(msg).map(drop).map_err(|e| e.to_string()));
    }

    async fn load_plan(&mut self, lead: &Lead) {
        let feature = &self.opts.feature;
        let mut load = plan_io::load(&self.layout.tasks_file(feature));
        if let PlanLoad::Loaded(plan) = &mut load {
            // The plan says how many groups open at once: their spare
            // worktrees are checked out from now on, in the background.
            if let Some(w) = self.worktrees.as_mut() {
                w.prepare(super::worktree::pool_size(plan, lead.ctx().config().max_concurrent)).await;
            }
            // Files reported by groups done in earlier runs count as created.
            self.books.flush().await;
            if let Err(e) = plan_io::add_reported_files(self.store.as_ref(), feature, plan) {
                self.failed("load-plan", e);
            }
            plan_io::fill_unreported_files(&self.root, plan);
        }
        self.send(Event::PlanLoaded(load));
    }

    fn import_plan(&mut self, replace: bool, renew: bool) {
        let feature = &self.opts.feature;
        let tasks = self.layout.tasks_file(feature);
        let event = match plan_io::import(self.store.as_ref(), feature, &tasks, replace, renew) {
            Ok(completed) => Event::PlanImported { completed },
            Err(error) => Event::CommandFailed { command: "import-plan".into(), error },
        };
        self.send(event);
    }

    fn record_group_files(&mut self, group: String, files: Vec<String>) {
        let feature = self.opts.feature.clone();
        self.books
            .store("record-group-files", move |store| plan_io::record_group_files(store, &feature, &group, &files));
    }

    /// The board has no blocked status: a task blocked on a human gets a note
    /// in the Lead's mailbox, and stays pending for `troupe resume`.
    fn mark_tasks_blocked(&mut self, tasks: &[String], reason: &str) {
        let body = format!("tasks {} blocked: {reason}", tasks.join(", "));
        let note = NewMessage::text(plan_io::LEAD, plan_io::LEAD, body);
        self.books
            .record("cannot note the blocked tasks in the mailbox".into(), move |store| store.send(note).map(drop));
    }

    /// The gate runs on a blocking thread; its verdict comes back as `GateFinished`.
    async fn run_gate(&mut self, run: u64, kind: GateKind) {
        let (engine, agent, task) = match &kind {
            GateKind::TaskCompleted { agent, tasks } => {
                (self.running.get(agent).map(|r| r.engine.clone()), Some(agent.clone()), tasks.last().cloned())
            }
            GateKind::Final | GateKind::Merged { .. } => (None, None, None),
        };
        // A Builder's report is gated in its worktree, when it has one: only
        // its own work and what is merged.
        let group = agent.as_ref().and_then(|a| self.running.get(a)?.request.group.clone());
        let root = match (&kind, &self.worktrees) {
            // The merged and final gates run on the feature's line: its own
            // integration branch in a roadmap wave.
            (GateKind::Final | GateKind::Merged { .. }, Some(w)) => w.line_workdir().to_path_buf(),
            _ => self.workdir(group.as_deref()),
        };
        let steps = self.config.gates.steps(QualityGate::OnTaskCompleted, engine.as_deref(), &self.steering);
        // While a merged gate's commands run, a spare moves to the merged line.
        if matches!(kind, GateKind::Merged { .. })
            && !steps.is_empty()
            && let Some(w) = self.worktrees.as_mut()
        {
            w.merged_gate_starts();
        }
        // A gate that runs a command on the line sees its merges; one that
        // runs none leaves the checkout to catch up later, once.
        if !steps.is_empty()
            && let Err(e) = self.sync_line(&root).await
        {
            return self.failed("run-gate", e);
        }
        // Commands in a group's worktree start once its early commit ended.
        let committing = match (&kind, group.as_deref(), self.worktrees.as_mut()) {
            (GateKind::TaskCompleted { .. }, Some(g), Some(w)) if !steps.is_empty() => w.gating(g),
            _ => None,
        };
        self.observer.gate(run, &steps);
        let env = GateEnv {
            agent_id: agent.clone(),
            agent_name: agent,
            last_task_id: task,
            status_from: Some("in_progress".into()),
            status_to: Some("completed".into()),
        };
        let (tx, gate_tx) = (self.tx.clone(), self.tx.clone());
        let timeout = Duration::from_secs(self.config.gates.timeout_seconds);
        tokio::spawn(async move {
            if let Some(commit) = committing {
                let _ = super::worktree::settled(commit).await;
            }
            let ended = tokio::task::spawn_blocking(move || {
                run_steps_with(&steps, &root, &env, timeout, |step| {
                    let _ = gate_tx.send(Report::GateStep(run, step.clone()));
                })
            })
            .await;
            let (verdict, output) = match ended {
                Ok(result) => super::gate_verdict(&result),
                Err(e) => (crate::machine::GateVerdict::Environment, format!("the quality gate did not finish: {e}")),
            };
            let _ = tx.send(Report::Lead(Event::GateFinished { run, verdict, output }));
        });
    }

    /// Under worktree isolation, the line's checkout made to hold the
    /// line's merges when `dir` is that checkout (the project root, or a
    /// roadmap feature's own line): a merge moves only the line's ref.
    async fn sync_line(&mut self, dir: &std::path::Path) -> Result<(), String> {
        match self.worktrees.as_mut() {
            Some(w) if w.line_workdir() == dir => w.sync_line().await,
            _ => Ok(()),
        }
    }

    /// `Commit`, or `CommitIfChanged` (`paths`): the commit carries tasks.yaml
    /// with every task marked so far.
    async fn commit(&mut self, message: String, paths: Option<Vec<String>>) {
        let root = self.root.clone();
        if let Err(e) = self.sync_line(&root).await {
            return self.failed("commit", e);
        }
        self.books.flush().await;
        let due = match &paths {
            Some(paths) => git::any_changed(&self.root, paths).await,
            None => Ok(true),
        };
        let committed = match due {
            Ok(true) => git::commit_scoped(&self.root, &message, &self.scope).await,
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        };
        match committed {
            Ok(sha) => {
                if let Some(s) = &sha {
                    self.commits.push(format!("{s} {message}"));
                    if let Some(w) = self.worktrees.as_mut() {
                        w.line_moved();
                    }
                }
                self.send(Event::Committed { sha });
            }
            Err(error) => self.failed("commit", error),
        }
    }

    /// The git side of worktree isolation ([`super::worktree`]); a failure
    /// escalates like any command the run depends on.
    async fn worktree(&mut self, cmd: Command) {
        let name = cmd.name();
        let Some(w) = self.worktrees.as_mut() else {
            return self.failed(name, "worktree isolation is off for this run".into());
        };
        let (done, event) = match cmd {
            Command::OpenWorktree { group } => (w.open(&group).await.map(drop), None),
            Command::CommitGroup { group, message } => {
                w.commit_early(&group, &message);
                (Ok(()), None)
            }
            Command::MergeGroup { group, message } => match w.merge(&group, &message).await {
                Ok(super::worktree::Merge::Merged { before, after }) => {
                    self.last_merge = Some((before.clone(), self.commits.len()));
                    self.commits.push(format!("{after} {}", message.lines().next().unwrap_or_default()));
                    (Ok(()), Some(Event::GroupMerged { group, before, after }))
                }
                Ok(super::worktree::Merge::Conflict(output)) => (Ok(()), Some(Event::MergeConflict { group, output })),
                Err(e) => (Err(e), None),
            },
            Command::UndoMerge { to } => {
                let undone = w.undo(&to).await;
                if undone.is_ok()
                    && let Some((_, at)) = self.last_merge.take_if(|(before, _)| *before == to)
                {
                    self.commits.truncate(at);
                }
                (undone, None)
            }
            Command::CloseWorktree { group } => (w.close(&group).await, None),
            Command::RecoverWorktrees => match w.recover(crate::machine::MERGE_TRAILER).await {
                Ok(merged) => (Ok(()), Some(Event::WorktreesRecovered { merged })),
                Err(e) => (Err(e), None),
            },
            Command::LandLine { message } => match w.land(&message).await {
                Ok(sha) => {
                    if let Some(s) = &sha {
                        self.commits.push(format!("{s} {}", message.lines().next().unwrap_or_default()));
                    }
                    (Ok(()), Some(Event::LineLanded { sha }))
                }
                Err(e) => (Err(e), None),
            },
            _ => (Ok(()), None),
        };
        // A merged group's branch on the shared remote goes right after its merge.
        if let (Some(Event::GroupMerged { group, .. }), Some(remote)) = (&event, self.remote.as_mut())
            && let Err(e) = remote.merged(&self.root, group).await
        {
            self.observer.note(&e);
        }
        if let Some(event) = event {
            self.send(event);
        }
        if let Err(e) = done {
            self.failed(name, e);
        }
    }

    fn record_decision(&mut self, kind: DecisionKind, summary: &str) {
        if let Err(e) = self.handover.decision(Timestamp::now(), kind, summary) {
            self.observer.note(&format!("cannot record a decision in decisions.md ({summary}): {e}"));
        }
    }

    fn record_knowledge(&mut self, from: &str, entries: &[(KnowledgeTag, String)]) {
        if let Err(e) = self.handover.knowledge(&self.opts.feature, from, entries) {
            self.observer.note(&format!("cannot record what {from} learned in knowledge.md: {e}"));
        }
    }

    fn write_handover(&mut self, lead: &Lead, session: &[String], next_action: &str, buffer: &[String]) {
        let phase = lead.ctx().spec().phase.to_string();
        let written = self.handover.session(Timestamp::now(), &self.opts.feature, &phase, session, next_action, buffer);
        if let Err(e) = written {
            self.observer.note(&format!("cannot write the handover notes (session.md, buffer.md): {e}"));
        }
    }

    fn review(&mut self, review: &ReviewCommand) {
        if let Err(e) = crate::review::files::apply(&self.layout, review) {
            self.failed("review", e.to_string());
        }
    }

    /// What a task reported, handed to the observer and the machine.
    pub(super) fn on_report(&mut self, report: Report, lead: &mut Lead) {
        match report {
            Report::Started(id, pid, stopper) => {
                self.pids.insert(id.clone(), pid);
                if self.pending_stops.remove(&id) {
                    shutdown::force_stop(&stopper);
                }
                self.stoppers.insert(id.clone(), stopper);
                let update = AgentUpdate { pid: Some(Some(pid)), ..Default::default() };
                self.books.record(format!("cannot record the pid of {id}"), move |store| {
                    store.update_agent(&id, update).map(drop)
                });
            }
            Report::Agent(id, e) => {
                // The TaskGenerator's tasks.yaml sizes the worktree pool
                // before its report, so the first wave's spares are ready.
                if let Some(w) = self.worktrees.as_mut()
                    && self.running.get(&id).is_some_and(|r| r.request.role == troupe_core::role::Role::TaskGenerator)
                {
                    w.notice_plan(&self.layout.tasks_file(&self.opts.feature), lead.ctx().config().max_concurrent);
                }
                if let Some(t) = &mut self.telemetry {
                    t.tool(&id, &e);
                }
                self.observer.agent_event(&id, &e)
            }
            Report::Note(text) => self.observer.note(&text),
            Report::Usage(row) => {
                // The machine keeps the budgets: it hears every booked turn.
                let spent =
                    Event::TurnSpent { id: row.context.agent.clone(), cost_usd: row.cost_usd, tokens: row.tokens() };
                if let Some(t) = &mut self.telemetry {
                    let input = row.input_tokens + row.cache_read_tokens + row.cache_write_tokens;
                    t.turn(&row.context.agent, input, row.output_tokens, row.cost_usd);
                }
                let what = format!("cannot book a model turn of {}", row.context.agent);
                self.books.record(what, move |store| store.record_usage(row).map(drop));
                self.observer.event(&spent, lead);
                lead.handle_event(spent, Timestamp::now());
            }
            Report::GateStep(run, step) => self.observer.gate_step(run, &step),
            Report::Lead(event) => {
                let active = crate::review::files::active_dir(&self.layout, &self.opts.feature);
                let (event, unread) = self.tool_reports.apply(self.store.as_ref(), event, &active);
                if let Some(error) = unread {
                    self.failed("read-report", error);
                }
                self.bookkeep(&event);
                self.observer.event(&event, lead);
                lead.handle_event(event, Timestamp::now());
            }
        }
    }

    /// The registry and the run's own records follow a teammate's end.
    fn bookkeep(&mut self, event: &Event) {
        let (id, status) = match event {
            Event::TeammateEnded { id, .. } => (id, AgentStatus::Done),
            Event::TeammateExited { id, .. } | Event::SpawnFailed { id, .. } => (id, AgentStatus::Failed),
            _ => return,
        };
        if let Some(t) = &mut self.telemetry {
            t.ended(id, status == AgentStatus::Done);
        }
        if !matches!(event, Event::SpawnFailed { .. }) {
            // Its process is gone: a later stop waits for the next one (a resume).
            self.pids.remove(id);
            self.stoppers.remove(id);
        }
        let id = id.clone();
        self.books
            .record(format!("cannot record that {id} ended"), move |store| store.set_status(&id, status).map(drop));
    }

    /// The run is over: the handover notes committed (a completed run), every
    /// teammate still running stopped, the registry told, the per-run wiring
    /// removed.
    pub(super) async fn finish(
        mut self,
        lead: &Lead,
        outcome: &Outcome,
        forced: &super::signals::Forced,
    ) -> (Vec<String>, HashMap<AgentId, Running>, HashMap<AgentId, f64>) {
        // The run's own notes (decisions.md, session.md, verdicts.md) were written
        // after its last commit: a completed run commits them too, so that it
        // leaves the work tree as clean as it found it.
        let root = self.root.clone();
        if let Err(e) = self.sync_line(&root).await {
            self.observer.note(&e);
        }
        if self.opts.commit && matches!(outcome, Outcome::Completed) {
            let message = lead.ctx().commit_message("the run's handover notes");
            match git::commit_scoped(&self.root, &message, &self.scope).await {
                Ok(Some(sha)) => self.commits.push(format!("{sha} {message}")),
                Ok(None) => {}
                Err(e) => self.observer.note(&format!("cannot commit the run's handover notes: {e}")),
            }
        }
        if std::env::var_os("TROUPE_PROFILE").is_some() {
            for (name, d) in &self.profile {
                eprintln!("profile: {name:<20} {:>8.1} ms", d.as_secs_f64() * 1e3);
            }
        }
        // Teammates the end of the run cuts short are INTERRUPTED in the registry;
        // their exit is never processed, so nothing else would say so.
        let cut_short: Vec<AgentId> = lead
            .ctx()
            .teammates()
            .iter()
            .filter(|t| {
                use crate::machine::TeammateStatus::{Running, ShuttingDown, Spawning};
                matches!(t.status, Running | Spawning | ShuttingDown)
            })
            .map(|t| t.id.clone())
            .collect();
        // Whatever still runs is stopped through its supervisor: SIGTERM, then
        // SIGKILL after a short grace (at once when the user insists with a
        // second signal); nothing is left running once the run returns.
        let stoppers: Vec<_> = cut_short.iter().filter_map(|id| self.stoppers.get(id)).collect();
        let groups: Vec<u32> = cut_short.iter().filter_map(|id| self.pids.get(id).copied()).collect();
        if shutdown::stop_all(&stoppers, &groups, forced).await {
            self.observer.note("a second signal: every teammate still running was stopped by force");
        }
        for id in &cut_short {
            // A remote teammate is stopped by its worker.
            if let Some(remote) = &self.remote
                && let Err(e) = remote.stop(self.store.as_ref(), id)
            {
                self.observer.note(&format!("cannot ask {id}'s worker to stop it: {e}"));
            }
            if let Err(e) = self.store.set_status(id, AgentStatus::Interrupted) {
                self.observer.note(&format!("cannot record that {id} was interrupted: {e}"));
            }
        }
        // No spawn job or pushed branch outlives its run either.
        if let Some(remote) = self.remote.as_mut() {
            for e in remote.finish(self.store.as_ref(), &self.root).await {
                self.observer.note(&e);
            }
        }
        self.books.close();
        // No worktree outlives its run: unmerged work is redone by a resume.
        if let Some(w) = self.worktrees.as_mut()
            && let Err(e) = w.close_all().await
        {
            self.observer.note(&format!("cannot remove the Builders' worktrees: {e}"));
        }
        // The teammates' per-run engine settings (hooks, gateway) end with the run.
        super::wiring::cleanup(&self.root, self.running.keys());
        // Every teammate has stopped: `.opencode` as the run found it.
        for r in std::mem::take(&mut self.opencode_records) {
            if let Err(e) = r.restore() {
                self.observer.note(&e);
            }
        }
        let costs = Self::costs(self.store.as_ref(), &self.run_id, self.observer);
        // After the bookkeeper closed: the record's board and last event are final.
        if let Some(r) = self.recording.take()
            && let Err(e) = r.finish(self.store.as_ref(), super::outcome_name(outcome))
        {
            self.observer.note(&format!("the end of this run is not recorded for `troupe replay`: {e}"));
        }
        if let Some(t) = self.telemetry.take() {
            let name = super::outcome_name(outcome);
            match tokio::task::spawn_blocking(move || t.export(name)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => self.observer.note(&e),
                Err(e) => self.observer.note(&format!("cannot export telemetry: {e}")),
            }
        }
        (self.commits, self.running, costs)
    }

    /// What each teammate of this run cost, from the usage ledger (written:
    /// the bookkeeper is closed), for the run summary.
    fn costs(store: &dyn Store, run_id: &str, observer: &mut dyn Observer) -> HashMap<AgentId, f64> {
        let filter = troupe_store::UsageFilter { run: Some(run_id.to_string()), ..Default::default() };
        let mut costs = HashMap::new();
        match store.usage(&filter) {
            Ok(rows) => {
                for r in rows {
                    *costs.entry(r.usage.context.agent).or_insert(0.0) += r.usage.cost_usd;
                }
            }
            Err(e) => observer.note(&format!("cannot read the usage ledger: {e}")),
        }
        costs
    }
}

/// Register a teammate, on a lease its heartbeats keep (see [`super::leases`]).
fn register(
    store: &dyn Store,
    req: &SpawnRequest,
    engine: &str,
    model: Option<String>,
    lease: std::time::Duration,
) -> Result<(), troupe_store::StoreError> {
    let mut agent = troupe_store::NewAgent::new(req.id.clone(), req.role.as_str(), engine);
    agent.model = model;
    agent.lease = Some(lease);
    agent.feature = Some(req.context.feature.clone());
    agent.task = req.tasks.first().cloned();
    store.register(agent)?;
    store.set_status(&req.id, AgentStatus::Processing).map(drop)
}
