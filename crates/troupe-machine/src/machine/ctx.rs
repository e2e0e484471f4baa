//! State every stage shares: the spec, the teammates, the command queue, the
//! handover notes. Stages change the world only through the helpers here, so
//! that every spawn, decision and spec change is recorded the same way.

use std::collections::VecDeque;

use jiff::{SignedDuration, Timestamp};
use troupe_core::liveness::{Quiet, QuietLimits};
use troupe_core::role::Role;
use troupe_core::spec::{Spec, TransitionError};

use crate::machine::budget::{Breach, Budgets, RunView};
use crate::machine::{AgentId, Command, CommitScope, DecisionKind, Event, GateRunId, RunStats, SpawnRequest};
use crate::plan::TaskId;

/// Why a Lead teammate's plan is approved without a person.
pub const PLAN_POLICY: &str =
    "the Lead approves its teammates' plans by policy and records them in .troupe/handover/decisions.md; go ahead";

/// The instruction of a teammate whose plans a person decides
/// (`[team] plan_approval = "human"`).
pub const PLAN_FIRST: &str = "Plan first: before you change anything, submit your plan with \
     `{{tool:request_plan_approval}}` and wait for a person's decision. Until it is approved, troupe refuses your \
     file writes and shell commands; if it is rejected, revise it by the reason given and submit it again.";

/// Settings of a run, resolved by the driver from config and flags.
#[derive(Debug, Clone, PartialEq)]
pub struct LeadConfig {
    /// At most this many teammates at once (`team.max_concurrent`, seed 000 Spec 9.4: 24).
    pub max_concurrent: usize,
    /// A running teammate with no activity for this long is unresponsive.
    pub hang_timeout: SignedDuration,
    /// The start-up allowance (`[team] startup_timeout_*`): until its first
    /// output since its process started, a teammate counts as hung only
    /// after the longer of this and `hang_timeout`. A real agent CLI takes
    /// seconds to start on a loaded machine, which a short hang timeout
    /// would otherwise take for a hang.
    pub startup_timeout: SignedDuration,
    /// The tool allowance (`[team] tool_timeout_*`): while a tool call of a
    /// teammate has not returned, it counts as hung only after the longer of
    /// this and `hang_timeout`. A running tool (a test suite) prints nothing
    /// until it ends; the teammate is busy, not hung. Bounded, so that a
    /// tool that never returns is still found.
    pub tool_timeout: SignedDuration,
    /// How long a teammate asked to stop gets to end by itself before it is
    /// stopped by force (`[shutdown] timeout_seconds`, seed 003 B4); `None`
    /// when graceful stops are off (`graceful_enabled = false`): every stop
    /// is forced at once.
    pub shutdown_timeout: Option<SignedDuration>,
    /// How often a Builder is sent back to fix a failing quality gate before its
    /// group counts as failed.
    pub gate_fix_attempts: u32,
    /// Commit after design and after implementation (`--no-commit` turns it off).
    pub commit: bool,
    /// The roadmap wave this feature runs in; commits then say `Wave {N}: ...`.
    pub roadmap_wave: Option<u32>,
    /// The number of this run's first teammate id (`architect-<n>`). The driver
    /// reserves a block of numbers for the run in the store, so ids never
    /// repeat within a project: not across runs, resumes or parallel runs.
    pub first_agent_number: u64,
    /// Each Builder group works in its own git worktree and is merged by the
    /// Lead in wave order (`[team] isolation = "worktree"`).
    pub worktrees: bool,
    /// `[budgets]`, with what the feature spent before this run.
    pub budgets: Budgets,
    /// The roles whose plans a person decides (`[team] plan_approval =
    /// "human"`, seed 003 B3): the Lead leaves them pending, and the teammate
    /// waits without counting as hung. Every other role's plans the Lead
    /// approves by policy.
    pub human_plans: Vec<Role>,
}

impl Default for LeadConfig {
    fn default() -> Self {
        LeadConfig {
            max_concurrent: 24,
            hang_timeout: SignedDuration::from_secs(300),
            startup_timeout: SignedDuration::from_secs(120),
            tool_timeout: SignedDuration::from_secs(600),
            shutdown_timeout: Some(SignedDuration::from_secs(30)),
            gate_fix_attempts: 2,
            commit: true,
            roadmap_wave: None,
            first_agent_number: 1,
            worktrees: false,
            budgets: Budgets::default(),
            human_plans: Vec::new(),
        }
    }
}

/// Where a teammate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeammateStatus {
    /// Spawn asked for, process not seen yet.
    Spawning,
    /// Its process runs.
    Running,
    /// Ended with a result.
    Finished,
    /// Ended without a result, or could not start.
    Failed,
    /// Asked to stop.
    ShuttingDown,
    /// Asked to stop, and its process has ended.
    Stopped,
}

/// One teammate as the Lead sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TeammateView {
    /// Its id.
    pub id: AgentId,
    /// Its role.
    pub role: Role,
    /// Its Builder group, if any.
    pub group: Option<String>,
    /// Its tasks.
    pub tasks: Vec<TaskId>,
    /// Where it stands.
    pub status: TeammateStatus,
    /// When it was spawned.
    pub spawned_at: Timestamp,
    /// When it last did something (spawn, any engine event, resume).
    pub last_activity: Timestamp,
    /// It did something since its process (re)started: from then on the hang
    /// timeout applies, before it the start-up allowance.
    pub output_seen: bool,
    /// Its tool calls that have not returned yet (`TeammateActivity` with a
    /// tool, less `TeammateToolDone`): while one runs, the tool allowance
    /// applies instead of the hang timeout.
    pub tools_running: u32,
    /// The last tool it called.
    pub last_tool: Option<String>,
    /// Turns, time and cost over all its runs (a resume adds up).
    pub stats: RunStats,
    /// Files it reported.
    pub files: Vec<String>,
    /// What it reported about tests.
    pub tests: Option<String>,
    /// While it is asked to stop gracefully: when it is stopped by force.
    pub stop_deadline: Option<Timestamp>,
    /// It went quiet past the hang timeout: its stage hears of it
    /// (`TeammateUnresponsive`) only once its process is gone, so that a
    /// replacement never works beside it on the same files.
    pub hung: bool,
    /// Dollars its booked model turns cost (`TurnSpent`).
    pub spent_usd: f64,
    /// Tokens of its booked model turns.
    pub spent_tokens: u64,
    /// When its process last ended (cleared by a resume).
    pub ended_at: Option<Timestamp>,
    /// When its current (or last) launch started: its spawn, then each resume.
    pub launched_at: Timestamp,
    /// How long its ended launches ran: an agent's minutes count its running
    /// time only, never the idle time between its end and a resume.
    pub ran: SignedDuration,
    /// The plan of its that waits for a person's decision: its hang clock
    /// stands still meanwhile (it is waiting for a person, not hung).
    pub awaiting_plan: Option<i64>,
}

/// A run a budget stopped spawning: why, and whether its teammates were
/// stopped at once (`on_exceed = "stop"`) rather than let finish their turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// The limit reached.
    pub breach: Breach,
    /// `on_exceed = "stop"`.
    pub stopped: bool,
}

/// The shared state of one Lead. See the module docs of [`crate::machine`].
#[derive(Debug)]
pub struct Ctx {
    pub(crate) now: Timestamp,
    pub(crate) spec: Spec,
    pub(crate) config: LeadConfig,
    pub(crate) commands: VecDeque<Command>,
    teammates: Vec<TeammateView>,
    next_agent: u64,
    next_gate: GateRunId,
    /// (reason, hint) of every escalation, in order.
    pub(crate) escalations: Vec<(String, String)>,
    session: Vec<String>,
    buffer: Vec<String>,
    /// When the run started (its minutes count from here).
    started: Timestamp,
    /// Set once a budget was reached: nothing spawns any more.
    pub(crate) pause: Option<Pause>,
}

impl Ctx {
    pub(crate) fn new(spec: Spec, config: LeadConfig, now: Timestamp) -> Ctx {
        Ctx {
            now,
            spec,
            next_agent: config.first_agent_number.saturating_sub(1),
            config,
            commands: VecDeque::new(),
            teammates: Vec::new(),
            next_gate: 0,
            escalations: Vec::new(),
            session: Vec::new(),
            buffer: Vec::new(),
            started: now,
            pause: None,
        }
    }

    /// The current time, as handed in with the last input.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The spec as the Lead last saved it.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The feature.
    pub fn feature(&self) -> &str {
        &self.spec.feature_name
    }

    /// The run's settings.
    pub fn config(&self) -> &LeadConfig {
        &self.config
    }

    /// Every teammate spawned so far, in spawn order.
    pub fn teammates(&self) -> &[TeammateView] {
        &self.teammates
    }

    /// One teammate.
    pub fn teammate(&self, id: &str) -> Option<&TeammateView> {
        self.teammates.iter().find(|t| t.id == id)
    }

    /// One teammate, to record what it reported.
    pub fn teammate_mut(&mut self, id: &str) -> Option<&mut TeammateView> {
        self.teammates.iter_mut().find(|t| t.id == id)
    }

    /// Escalations so far: (what happened, what to do).
    pub fn escalations(&self) -> &[(String, String)] {
        &self.escalations
    }

    /// Open items for `buffer.md`.
    pub fn buffer(&self) -> &[String] {
        &self.buffer
    }

    /// Teammates spawned or running (they count against `max_concurrent`).
    pub fn running_count(&self) -> usize {
        self.teammates.iter().filter(|t| is_live(t.status)).count()
    }

    /// Room for this many more teammates.
    pub fn free_slots(&self) -> usize {
        self.config.max_concurrent.saturating_sub(self.running_count())
    }

    /// A fresh teammate id: `{role}-{label}-{n}` (or `{role}-{n}`), never reused.
    /// In a roadmap the feature follows the role (`builder-pay-g1-3`): the
    /// features of a wave run at the same time, and their teammates share the
    /// registry, the mailboxes and the log folder.
    pub fn new_agent_id(&mut self, role: Role, label: Option<&str>) -> AgentId {
        self.next_agent += 1;
        let role = match self.config.roadmap_wave {
            Some(_) => format!("{}-{}", role.as_str(), self.spec.feature_name),
            None => role.as_str().to_string(),
        };
        match label {
            Some(l) => format!("{role}-{}-{}", l.to_ascii_lowercase(), self.next_agent),
            None => format!("{role}-{}", self.next_agent),
        }
    }

    /// A fresh quality gate run id.
    pub fn new_gate_run(&mut self) -> GateRunId {
        self.next_gate += 1;
        self.next_gate
    }

    /// Queue a command.
    pub fn push(&mut self, command: Command) {
        self.commands.push_back(command);
    }

    /// Spawn a teammate and start tracking it; nothing, once a budget is
    /// reached (checked here, before every spawn).
    pub fn spawn(&mut self, request: SpawnRequest) {
        if self.pause.is_some() {
            return;
        }
        if let Some(breach) = self.budgets().breach(&self.run_view(), Some(request.role.as_str()), None) {
            return self.over_budget(breach);
        }
        let attempt = if request.attempt > 1 { format!(" (attempt {})", request.attempt) } else { String::new() };
        let what = match &request.group {
            Some(g) => format!("{} {} for group {g} [{}]{attempt}", request.role, request.id, request.tasks.join(", ")),
            None => format!("{} {}{attempt}", request.role, request.id),
        };
        self.decide(DecisionKind::Spawn, what);
        self.teammates.push(TeammateView {
            id: request.id.clone(),
            role: request.role,
            group: request.group.clone(),
            tasks: request.tasks.clone(),
            status: TeammateStatus::Spawning,
            spawned_at: self.now,
            last_activity: self.now,
            output_seen: false,
            tools_running: 0,
            last_tool: None,
            stats: RunStats::default(),
            files: Vec::new(),
            tests: None,
            stop_deadline: None,
            hung: false,
            spent_usd: 0.0,
            spent_tokens: 0,
            ended_at: None,
            launched_at: self.now,
            ran: SignedDuration::ZERO,
            awaiting_plan: None,
        });
        let mut request = request;
        if self.config.human_plans.contains(&request.role) {
            // Held by troupe until a person approves: the hooks refuse its
            // writes and commands while its plan is not approved.
            request.context.instructions.push(PLAN_FIRST.to_string());
            self.push(Command::HoldForPlan { id: request.id.clone() });
        }
        self.push(Command::Spawn(Box::new(request)));
    }

    /// Continue a finished teammate's session with `prompt`.
    pub fn resume(&mut self, id: &str, prompt: String) {
        if self.pause.is_some() {
            return;
        }
        let role = self.teammate(id).map(|t| t.role.as_str());
        if let Some(breach) = self.budgets().breach(&self.run_view(), role, Some(id)) {
            return self.over_budget(breach);
        }
        let now = self.now;
        if let Some(t) = self.teammate_mut(id) {
            t.status = TeammateStatus::Spawning;
            t.last_activity = now;
            t.output_seen = false;
            t.tools_running = 0;
            t.ended_at = None;
            t.launched_at = now;
        }
        self.push(Command::Resume { id: id.to_string(), prompt });
    }

    /// Stop a teammate (it stops counting as running): gracefully (a shutdown
    /// request, then signals after the shutdown timeout) or by force (signals
    /// at once). Its exit then reaches the stage as `TeammateStopped`.
    /// The force follows from the machine's own deadline (`shutdown_timeout`),
    /// never from a timer of the driver's.
    pub fn shut_down(&mut self, id: &str, force: bool) {
        let force = force || self.config.shutdown_timeout.is_none();
        let deadline = match self.config.shutdown_timeout {
            Some(timeout) if !force => Some(self.now + timeout),
            _ => None,
        };
        if let Some(t) = self.teammate_mut(id) {
            t.status = TeammateStatus::ShuttingDown;
            t.stop_deadline = deadline;
        }
        self.push(Command::ShutDown { id: id.to_string(), force });
    }

    /// A teammate showed no activity for the hang timeout (or, before its
    /// first output, for the start-up allowance): ask it to stop
    /// (gracefully first, seed 000 Spec 10.2: a hung teammate may still answer
    /// the request). Its stage hears `TeammateUnresponsive` once its process
    /// has ended, by itself or by force at the shutdown deadline.
    pub(crate) fn hang(&mut self, id: &str) {
        let Some(t) = self.teammate(id).filter(|t| is_live(t.status)) else { return };
        let limit = span(self.quiet_limit(t));
        let what = match Quiet::of(t.output_seen, t.tools_running) {
            Quiet::Thinking => format!("showed no activity for {limit}"),
            Quiet::Starting => format!("printed nothing for {limit} since it started"),
            Quiet::InTool => format!("showed no activity for {limit} while its tool call ran"),
        };
        self.hang_because(id, &what);
    }

    /// Treat a live teammate as hung because of `what` (see [`Ctx::hang`]).
    fn hang_because(&mut self, id: &str, what: &str) {
        if self.teammate(id).is_none_or(|t| !is_live(t.status)) {
            return;
        }
        self.decide(DecisionKind::Spawn, format!("{id} {what}; asking it to stop before anything replaces it"));
        self.shut_down(id, false);
        if let Some(t) = self.teammate_mut(id) {
            t.hung = true;
        }
    }

    /// Teammates asked to stop whose shutdown deadline passed at `now` are
    /// stopped by force.
    pub(crate) fn force_overdue_stops(&mut self, now: Timestamp) {
        let overdue: Vec<AgentId> = self
            .teammates
            .iter()
            .filter(|t| t.status == TeammateStatus::ShuttingDown && t.stop_deadline.is_some_and(|d| d <= now))
            .map(|t| t.id.clone())
            .collect();
        for id in overdue {
            if let Some(t) = self.teammate_mut(&id) {
                t.stop_deadline = None;
            }
            self.decide(
                DecisionKind::Spawn,
                format!("{id} did not stop within the shutdown timeout; stopping it by force"),
            );
            self.push(Command::ShutDown { id, force: true });
        }
    }

    /// Stop every live teammate gracefully.
    pub fn shut_down_all(&mut self) {
        let live: Vec<AgentId> = self.teammates.iter().filter(|t| is_live(t.status)).map(|t| t.id.clone()).collect();
        for id in live {
            self.shut_down(&id, false);
        }
    }

    /// Record a decision in decisions.md.
    pub fn decide(&mut self, kind: DecisionKind, summary: String) {
        self.push(Command::RecordDecision { kind, summary });
    }

    /// Answer a teammate's plan by the Lead's policy: approve it at once and
    /// record it in decisions.md, so that a teammate that asks before it acts
    /// never waits for an answer nobody gives.
    pub fn approve_plan(&mut self, from: &str, request: i64, plan: &str) {
        self.decide(DecisionKind::Plan, format!("approved the plan of {from} (message {request}) by policy: {plan}"));
        let decision = troupe_core::approval::PlanDecision {
            request_id: request,
            approved: true,
            decided_by: "lead".into(),
            reason: PLAN_POLICY.into(),
        };
        self.push(Command::SendMessage {
            to: from.to_string(),
            kind: troupe_core::approval::PLAN_DECISION.into(),
            body: decision.body(),
            in_reply_to: Some(request),
        });
    }

    /// A teammate's plan, by who decides it: a person for the roles of
    /// `human_plans` (the teammate then waits, its hang clock stopped), the
    /// Lead's policy for every other.
    pub fn plan_submitted(&mut self, from: &str, request: i64, plan: &str) {
        let human = self.teammate(from).is_some_and(|t| self.config.human_plans.contains(&t.role));
        if !human {
            return self.approve_plan(from, request, plan);
        }
        if let Some(t) = self.teammate_mut(from) {
            t.awaiting_plan = Some(request);
        }
        self.decide(
            DecisionKind::Plan,
            format!(
                "left the plan of {from} (message {request}) to a person ([team] plan_approval = \"human\"): {plan}"
            ),
        );
        self.buffer_item(format!(
            "plan {request} of {from} waits for your decision: `troupe approve {request}` or `troupe reject {request} \"<reason>\"`"
        ));
        self.push(Command::MarkWaiting { id: from.to_string(), waiting: true });
    }

    /// A person decided a plan: its teammate works again, and its hang
    /// clock starts afresh from now.
    pub fn plan_decided(&mut self, id: &str, request: i64, approved: bool) {
        let now = self.now;
        let Some(t) = self.teammate_mut(id).filter(|t| t.awaiting_plan == Some(request)) else { return };
        t.awaiting_plan = None;
        t.last_activity = now;
        let verdict = if approved { "approved" } else { "rejected" };
        self.decide(DecisionKind::Plan, format!("the plan of {id} (message {request}) was {verdict} by a person"));
        self.push(Command::MarkWaiting { id: id.to_string(), waiting: false });
    }

    /// Hand something to the user. The caller then ends its stage with
    /// `Step::Escalated` once nothing of its own still runs.
    pub fn escalate(&mut self, reason: String, hint: String) {
        self.decide(DecisionKind::Escalation, reason.clone());
        self.buffer_item(format!("ESCALATED: {reason} ({hint})"));
        self.escalations.push((reason.clone(), hint.clone()));
        self.push(Command::Escalate { reason, hint });
    }

    /// Apply a spec transition; on success queue `SaveSpec` and record the phase.
    pub fn change_spec(
        &mut self,
        change: impl FnOnce(&mut Spec) -> Result<(), TransitionError>,
    ) -> Result<(), TransitionError> {
        let mut spec = self.spec.clone();
        let before = spec.phase.clone();
        change(&mut spec)?;
        if spec.phase != before {
            self.decide(DecisionKind::Phase, format!("{}: {before} -> {}", spec.feature_name, spec.phase));
        }
        self.spec = spec;
        self.push(Command::SaveSpec(Box::new(self.spec.clone())));
        Ok(())
    }

    /// The commit message for `summary` under this run's convention (Spec 14.9).
    pub fn commit_message(&self, summary: &str) -> String {
        let scope = match self.config.roadmap_wave {
            Some(wave) => CommitScope::RoadmapWave { wave, feature: self.spec.feature_name.clone() },
            None => CommitScope::Standalone { feature: self.spec.feature_name.clone() },
        };
        scope.message(summary)
    }

    /// Add a line to session.md's record of what ran.
    pub fn session_line(&mut self, line: String) {
        self.session.push(line);
    }

    /// Add an open item to buffer.md.
    pub fn buffer_item(&mut self, item: String) {
        if !self.buffer.contains(&item) {
            self.buffer.push(item);
        }
    }

    /// Queue a rewrite of session.md and buffer.md.
    pub fn write_handover(&mut self, next_action: String) {
        self.push(Command::WriteHandover { session: self.session.clone(), next_action, buffer: self.buffer.clone() });
    }

    /// Update teammate bookkeeping from `event`, and return what the stage
    /// should see: the event itself, `TeammateStopped` for the exit of a
    /// teammate that was shutting down, or nothing when the event is stale
    /// (about a teammate already given up on) or of no interest to stages.
    pub(crate) fn observe(&mut self, event: &Event) -> Option<Event> {
        let now = self.now;
        match event {
            Event::TeammateStarted { id } => {
                if let Some(t) = self.teammate_mut(id)
                    && t.status == TeammateStatus::Spawning
                {
                    t.status = TeammateStatus::Running;
                    t.last_activity = now;
                }
                None
            }
            // Its host is taken for lost: hung now, whatever its hang timer
            // says (waiting for a person's plan decision included).
            Event::TeammateLeaseExpired { id } => {
                self.hang_because(id, "lost its lease (no heartbeat reached the store; its host is taken for lost)");
                None
            }
            Event::TeammateActivity { id, tool } => {
                if let Some(t) = self.teammate_mut(id) {
                    t.last_activity = now;
                    t.output_seen = true;
                    if tool.is_some() {
                        t.last_tool = tool.clone();
                        t.tools_running += 1;
                    }
                }
                None
            }
            Event::TeammateToolDone { id } => {
                if let Some(t) = self.teammate_mut(id) {
                    t.last_activity = now;
                    t.output_seen = true;
                    // An engine may report a result without its call (Codex
                    // prints some items only once completed).
                    t.tools_running = t.tools_running.saturating_sub(1);
                }
                None
            }
            Event::TeammateFinished { id, stats, .. } | Event::TeammateExited { id, stats, .. } => {
                let finished = matches!(event, Event::TeammateFinished { .. });
                let t = self.teammate_mut(id)?;
                let stopping = t.status == TeammateStatus::ShuttingDown;
                if !is_live(t.status) && !stopping {
                    return None;
                }
                t.ended_at = Some(now);
                t.ran += now.duration_since(t.launched_at);
                t.stats.num_turns += stats.num_turns;
                t.stats.duration_ms += stats.duration_ms;
                t.stats.total_cost_usd = match (t.stats.total_cost_usd, stats.total_cost_usd) {
                    (Some(a), Some(b)) => Some(a + b),
                    (a, b) => a.or(b),
                };
                if stats.session_id.is_some() {
                    t.stats.session_id = stats.session_id.clone();
                }
                if stopping {
                    t.status = TeammateStatus::Stopped;
                    t.stop_deadline = None;
                    // A hung teammate that still ended with a result did its work:
                    // its stage takes it like any other. Otherwise the stage hears
                    // of the hang now that nothing of it runs.
                    if t.hung {
                        if finished {
                            t.status = TeammateStatus::Finished;
                            return Some(event.clone());
                        }
                        return Some(Event::TeammateUnresponsive { id: id.clone() });
                    }
                    let report = match event {
                        Event::TeammateFinished { report, .. } => report.clone(),
                        _ => None,
                    };
                    return Some(Event::TeammateStopped { id: id.clone(), report });
                }
                t.status = if finished { TeammateStatus::Finished } else { TeammateStatus::Failed };
                Some(event.clone())
            }
            Event::SpawnFailed { id, .. } => {
                let t = self.teammate_mut(id)?;
                t.ended_at = Some(now);
                t.ran += now.duration_since(t.launched_at);
                if t.status == TeammateStatus::ShuttingDown {
                    t.status = TeammateStatus::Stopped;
                    t.stop_deadline = None;
                    if t.hung {
                        return Some(Event::TeammateUnresponsive { id: id.clone() });
                    }
                    return Some(Event::TeammateStopped { id: id.clone(), report: None });
                }
                if !is_live(t.status) {
                    return None;
                }
                t.status = TeammateStatus::Failed;
                Some(event.clone())
            }
            // Stages never see this one from outside: the machine makes it
            // from a hung teammate's exit (see `Ctx::hang`).
            Event::TeammateUnresponsive { .. } => None,
            Event::ShutdownAnswered { id, approve, reason } => {
                if self.teammate(id).is_none_or(|t| t.status != TeammateStatus::ShuttingDown) {
                    return None;
                }
                let said = if reason.trim().is_empty() { String::new() } else { format!(": {}", reason.trim()) };
                if *approve {
                    if let Some(t) = self.teammate_mut(id) {
                        t.stop_deadline = None;
                    }
                    self.decide(
                        DecisionKind::Spawn,
                        format!("{id} approved the shutdown request{said}; stopping its processes"),
                    );
                    self.push(Command::ShutDown { id: id.clone(), force: true });
                } else {
                    self.decide(
                        DecisionKind::Spawn,
                        format!(
                            "{id} refused the shutdown request{said}; it is stopped by force after the shutdown timeout"
                        ),
                    );
                }
                None
            }
            // Stages never see this one from outside: the machine makes it.
            Event::TeammateStopped { .. } => None,
            // Budgets are the machine's: checked after every booked turn.
            Event::TurnSpent { id, cost_usd, tokens } => {
                let t = self.teammate_mut(id)?;
                t.spent_usd += cost_usd;
                t.spent_tokens += tokens;
                let role = t.role.as_str();
                if self.pause.is_none()
                    && let Some(breach) = self.budgets().breach(&self.run_view(), Some(role), Some(id))
                {
                    self.over_budget(breach);
                }
                None
            }
            // The gateway counts the calls and refuses past the budget; the run
            // pauses as on any other breach (a teammate of another run is not ours).
            Event::GatewayBudgetSpent { id, made, max, key } => {
                if self.pause.is_none() && self.teammate(id).is_some() {
                    let scope = format!("agent {id}");
                    let limit = format!("{max} ({key})");
                    self.over_budget(Breach { scope, key: "max_gateway_calls", spent: format!("{made} calls"), limit });
                }
                None
            }
            _ => Some(event.clone()),
        }
    }

    /// How long `t` may stay quiet ([`troupe_core::liveness`], the rule
    /// `troupe agent run` follows too): the hang timeout once it has printed
    /// something, before that the start-up allowance, while a tool call of
    /// its runs the tool allowance, each when longer.
    fn quiet_limit(&self, t: &TeammateView) -> SignedDuration {
        let c = &self.config;
        QuietLimits { hang: c.hang_timeout, startup: c.startup_timeout, tool: c.tool_timeout }
            .limit(Quiet::of(t.output_seen, t.tools_running))
    }

    fn budgets(&self) -> &Budgets {
        &self.config.budgets
    }

    pub(crate) fn run_view(&self) -> RunView<'_> {
        RunView { teammates: &self.teammates, started: self.started, now: self.now }
    }

    /// The next moment a minute limit is reached, while nothing is paused.
    pub(crate) fn budget_deadline(&self) -> Option<Timestamp> {
        if self.pause.is_some() {
            return None;
        }
        self.budgets().deadline(&self.run_view())
    }

    /// A minute limit reached at `now` pauses the run.
    pub(crate) fn check_budget_time(&mut self) {
        if self.pause.is_none()
            && let Some(breach) = self.budgets().breach_in_time(&self.run_view())
        {
            self.over_budget(breach);
        }
    }

    /// A budget was reached: nothing spawns from now on, and every live
    /// teammate is asked to stop (to finish its turn, its session kept), or
    /// stopped at once under `on_exceed = "stop"`. The run ends once none
    /// runs ([`Ctx::settled`]).
    pub(crate) fn over_budget(&mut self, breach: Breach) {
        let stopped = self.budgets().limits.on_exceed == troupe_core::config::OnExceed::Stop;
        let what = if stopped { "stopping every teammate" } else { "pausing: no new teammate starts" };
        self.decide(DecisionKind::Budget, format!("{}: {breach}; {what}", self.spec.feature_name));
        self.session_line(format!("budget reached: {breach}"));
        let live: Vec<AgentId> = self.teammates.iter().filter(|t| is_live(t.status)).map(|t| t.id.clone()).collect();
        self.pause = Some(Pause { breach, stopped });
        for id in live {
            self.shut_down(&id, stopped);
        }
    }

    /// Whether no teammate runs or is still stopping.
    pub(crate) fn settled(&self) -> bool {
        self.teammates.iter().all(|t| !is_live(t.status) && t.status != TeammateStatus::ShuttingDown)
    }

    /// Live teammates whose hang deadline passed at `now`.
    pub(crate) fn hung(&self, now: Timestamp) -> Vec<AgentId> {
        self.teammates
            .iter()
            .filter(|t| is_live(t.status) && t.awaiting_plan.is_none() && t.last_activity + self.quiet_limit(t) <= now)
            .map(|t| t.id.clone())
            .collect()
    }

    /// The earliest hang deadline of a live teammate, or shutdown deadline of
    /// one asked to stop.
    pub(crate) fn next_hang_deadline(&self) -> Option<Timestamp> {
        let hang = self
            .teammates
            .iter()
            .filter(|t| is_live(t.status) && t.awaiting_plan.is_none())
            .map(|t| t.last_activity + self.quiet_limit(t));
        let stop =
            self.teammates.iter().filter(|t| t.status == TeammateStatus::ShuttingDown).filter_map(|t| t.stop_deadline);
        hang.chain(stop).min()
    }
}

/// A timeout as the user configured it: `300 s`, or `250 ms` below a
/// second or off the second.
fn span(d: SignedDuration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 { format!("{} s", ms / 1000) } else { format!("{ms} ms") }
}

fn is_live(status: TeammateStatus) -> bool {
    matches!(status, TeammateStatus::Spawning | TeammateStatus::Running)
}
