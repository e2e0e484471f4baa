//! The Lead as a sans-IO state machine.
//!
//! [`Lead`] holds one feature's pipeline: a queue of [`Stage`]s (design, then
//! implementation; the review pipeline adds its own). It never reads a file,
//! starts a process or looks at a clock: the driver hands it [`Event`]s and the
//! current time, and carries out the [`Command`]s it emits.
//!
//! Call order, for every input:
//! 1. [`Lead::start`] once, then for each input either [`Lead::handle_event`]
//!    (something happened) or [`Lead::handle_timeout`] (the deadline from
//!    [`Lead::poll_timeout`] passed);
//! 2. then drain [`Lead::poll_command`] until it returns `None`, carrying each
//!    command out (results come back later as events);
//! 3. then ask [`Lead::poll_timeout`] for the next deadline and wait for an event
//!    or that deadline, whichever comes first.
//!
//! The run is over after the driver has drained [`Command::Finish`].

mod budget;
mod command;
mod ctx;
mod design;
mod event;
mod implement;
mod report;
/// The handover's line for a report that arrived while a budget paused the
/// run: not gated, so a resume redoes its tasks unless the board shows them done.
fn paused_report(id: &str, report: &troupe_core::report::Submission) -> String {
    use troupe_core::report::Submission;
    let what = match report {
        Submission::Text(text) => text.trim().replace('\n', " | "),
        Submission::Call(call) => format!(
            "report call: {} ({}; files: {}; tests: {})",
            call.summary,
            if call.blocked { "blocked" } else { "complete" },
            call.files.join(", "),
            call.tests.join("; ")
        ),
    };
    format!(
        "{id} reported while the run was paused (not gated; a resume redoes its tasks unless the board shows them done): {what}"
    )
}

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt;

use jiff::Timestamp;
use troupe_core::gate;
use troupe_core::phase::Phase;
use troupe_core::spec::Spec;

pub use budget::{Breach, Budgets, Raise, Spend};
pub use command::{Command, CommitScope, DecisionKind, GateKind, KnowledgeTag, Outcome, SpawnContext, SpawnRequest};
pub use ctx::{Ctx, LeadConfig, PLAN_POLICY, Pause, TeammateStatus, TeammateView};

/// How the handover's next action begins when a budget paused a run (`troupe
/// status` shows it as the feature's state).
pub const PAUSED_BUDGET: &str = "paused: budget";
/// The same when `on_exceed = "stop"` stopped it.
pub const STOPPED_BUDGET: &str = "stopped: budget";

/// The next action handed over when a run finished with nothing left to do.
pub const NOTHING_PENDING: &str = "nothing pending";
pub use design::DesignStage;
pub use event::{Event, GateVerdict, IncomingMessage, PlanLoad, RunStats};
pub(crate) use implement::gate_unrunnable;
pub use implement::{GroupState, ImplStage, MERGE_TRAILER, merge_trailer};
pub use report::Ending;

/// A teammate's id: unique within a run, never reused (a retry gets a new one).
pub type AgentId = String;

/// Identifies one quality gate run, so its `GateFinished` finds its way back.
pub type GateRunId = u64;

/// What a stage tells the Lead after handling an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Still working.
    Continue,
    /// Finished successfully; the next stage starts.
    Done,
    /// Gave up (after emitting `Escalate`), with nothing of its own still running.
    Escalated,
    /// The phase gate refused before anything was spawned.
    Refused(String),
}

/// One part of a pipeline (design, implementation, a review). Stages share the
/// [`Ctx`] (spec, teammates, command queue) and are driven one at a time.
/// They are plain data (`Sync`), so the driver may hold a `&Lead` across an
/// await.
///
/// Later stages (the review pipeline, roadmap) implement this trait in their own
/// modules and are queued with [`Lead::push_stage`].
pub trait Stage: fmt::Debug + Send + Sync {
    /// A short name for status displays (`design`, `impl`, `review-impl`).
    fn name(&self) -> &'static str;
    /// Begin: check the phase gate and emit the first commands.
    fn start(&mut self, ctx: &mut Ctx) -> Step;
    /// React to an event. Events about teammates this stage did not spawn may be
    /// ignored.
    fn handle_event(&mut self, event: &Event, ctx: &mut Ctx) -> Step;
    /// The stage's own deadline, if it waits for one (hang timers are the Lead's).
    fn poll_timeout(&self) -> Option<Timestamp> {
        None
    }
    /// The stage's deadline passed.
    fn handle_timeout(&mut self, _ctx: &mut Ctx) -> Step {
        Step::Continue
    }
    /// The current wave, for progress displays.
    fn wave(&self) -> Option<u32> {
        None
    }
    /// Whether work already paid for is still on its way to the record (under
    /// worktree isolation a finished Builder's report waits for its gate and
    /// merge: only a merge keeps it). A run paused by a budget lets it finish
    /// before it ends; nothing new starts meanwhile.
    fn settling(&self, _ctx: &Ctx) -> bool {
        false
    }
}

/// What the user asked for (recorded with each run, so `troupe replay` asks for it again).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    /// `troupe design`: the Architect writes design.md and research.md.
    Design,
    /// `troupe impl`: the TaskGenerator writes tasks.yaml, then Builders in waves.
    Impl,
    /// `troupe run`: design, then implementation.
    Run,
    /// `troupe resume`: continue from spec.yaml and the board; never redo
    /// completed tasks.
    Resume,
    /// `troupe review design|impl|dead-code`: one review with its auto-fix loop.
    Review(crate::review::ReviewKind, crate::review::ReviewOptions),
    /// `troupe run` with reviews: design, design review, impl, impl review
    /// (rounds numbered from `first_seq` across both reviews).
    RunReviewed(crate::review::ReviewOptions),
    /// `troupe resume` with the reviews `troupe run` includes: the design
    /// review (unless the last one passed), the rest of implementation, then
    /// the impl review (unless the feature is complete and its last one passed).
    ResumeReviewed {
        /// How the reviews run.
        options: crate::review::ReviewOptions,
        /// The last design review passed (GO or CONDITIONAL).
        design_passed: bool,
        /// The last impl review passed (GO or CONDITIONAL).
        impl_passed: bool,
    },
    /// One feature of `troupe roadmap run`: like `Run` (or `RunReviewed` with
    /// review options), committing as `Wave {wave}: ...`.
    InRoadmap {
        /// The roadmap wave of the feature.
        wave: u32,
        /// Review after design and after implementation with these options.
        reviews: Option<crate::review::ReviewOptions>,
    },
}

/// The Lead for one feature. See the module docs for the call order.
#[derive(Debug)]
pub struct Lead {
    ctx: Ctx,
    current: Option<Box<dyn Stage>>,
    queue: VecDeque<Box<dyn Stage>>,
    finished: bool,
    started: bool,
}

impl Lead {
    /// A Lead for `job` on the feature of `spec` (as loaded from spec.yaml).
    pub fn new(spec: Spec, job: Job, config: LeadConfig, now: Timestamp) -> Lead {
        let mut config = config;
        let job = match job {
            Job::InRoadmap { wave, reviews } => {
                config.roadmap_wave = Some(wave);
                match reviews {
                    Some(options) => Job::RunReviewed(options),
                    None => Job::Run,
                }
            }
            other => other,
        };
        let mut queue: VecDeque<Box<dyn Stage>> = VecDeque::new();
        // A revision interrupted before the Architect revised the design:
        // resuming it starts with the design, as the revision would have.
        let stale_design = spec.in_revision() && !spec.design_is_current();
        match job {
            Job::Design => queue.push_back(Box::new(DesignStage::new())),
            Job::Impl => queue.push_back(Box::new(ImplStage::new(false))),
            Job::Run => {
                queue.push_back(Box::new(DesignStage::new()));
                queue.push_back(Box::new(ImplStage::new(false)));
            }
            Job::Review(kind, options) => queue.push_back(Box::new(crate::review::ReviewStage::new(kind, options))),
            Job::RunReviewed(options) => {
                use crate::review::{ReviewKind, ReviewStage, SeqCounter};
                let seq = SeqCounter::new(options.first_seq);
                queue.push_back(Box::new(DesignStage::new()));
                queue.push_back(Box::new(ReviewStage::with_counter(ReviewKind::Design, options.clone(), seq.clone())));
                queue.push_back(Box::new(ImplStage::new(false)));
                queue.push_back(Box::new(ReviewStage::with_counter(ReviewKind::Impl, options, seq)));
            }
            Job::ResumeReviewed { options, design_passed, impl_passed } => {
                use crate::review::{ReviewKind, ReviewStage, SeqCounter};
                let seq = SeqCounter::new(options.first_seq);
                let review = |kind| -> Box<dyn Stage> {
                    Box::new(ReviewStage::with_counter(kind, options.clone(), seq.clone()))
                };
                match spec.phase {
                    Phase::Initialized => {
                        queue.push_back(Box::new(DesignStage::new()));
                        queue.push_back(review(ReviewKind::Design));
                    }
                    Phase::DesignGenerated if stale_design => {
                        queue.push_back(Box::new(DesignStage::new()));
                        queue.push_back(review(ReviewKind::Design));
                    }
                    Phase::DesignGenerated if !design_passed => queue.push_back(review(ReviewKind::Design)),
                    _ => {}
                }
                queue.push_back(Box::new(ImplStage::new(true)));
                if !(impl_passed && spec.phase == Phase::ImplementationComplete) {
                    queue.push_back(review(ReviewKind::Impl));
                }
            }
            Job::InRoadmap { .. } => unreachable!("resolved above"),
            Job::Resume => match spec.phase {
                Phase::Initialized => {
                    queue.push_back(Box::new(DesignStage::new()));
                    queue.push_back(Box::new(ImplStage::new(true)));
                }
                Phase::DesignGenerated if stale_design => {
                    queue.push_back(Box::new(DesignStage::new()));
                    queue.push_back(Box::new(ImplStage::new(true)));
                }
                // Blocked and unknown phases fall through to a stage whose gate
                // refuses them with the seed's message.
                _ => queue.push_back(Box::new(ImplStage::new(true))),
            },
        }
        Lead::with_stages(spec, config, now, queue)
    }

    /// A Lead that runs exactly these stages, in order.
    pub fn with_stages(spec: Spec, config: LeadConfig, now: Timestamp, stages: VecDeque<Box<dyn Stage>>) -> Lead {
        Lead { ctx: Ctx::new(spec, config, now), current: None, queue: stages, finished: false, started: false }
    }

    /// Queue another stage after the ones already queued.
    pub fn push_stage(&mut self, stage: Box<dyn Stage>) {
        self.queue.push_back(stage);
    }

    /// Begin the first stage.
    pub fn start(&mut self, now: Timestamp) {
        if self.started {
            return;
        }
        self.started = true;
        self.ctx.now = now;
        self.next_stage();
    }

    /// Feed one event in.
    pub fn handle_event(&mut self, event: Event, now: Timestamp) {
        self.ctx.now = now;
        if self.finished {
            return;
        }
        let event = match event {
            Event::TeammateEnded { id, ending, stats } => {
                let role = self.ctx.teammate(&id).map(|t| t.role);
                let report = role.and_then(|role| ending.choose(role, self.ctx.feature()));
                Event::TeammateFinished { id, report, stats }
            }
            other => other,
        };
        // Judged before the event changes the teammates' states (a Builder
        // that reports while stopping is then Stopped).
        let settling = self.ctx.pause.is_some() && self.current.as_ref().is_some_and(|s| s.settling(&self.ctx));
        let Some(event) = self.ctx.observe(&event) else { return self.settle() };
        if let Event::Interrupted = event {
            self.ctx.shut_down_all();
            self.ctx.session_line("interrupted by the user".to_string());
            self.ctx.write_handover(format!("run `troupe resume {}`", self.ctx.spec.feature_name));
            self.finish(Outcome::Interrupted);
            return;
        }
        // Paused by a budget: stages hear nothing more, except one still
        // settling what was paid for (a finished Builder's gate and merge);
        // the run ends once every teammate has stopped and nothing settles.
        // Any other report a teammate finished its turn with is kept in the
        // handover (buffer.md), never dropped: the board holds only what it
        // completed there.
        if self.ctx.pause.is_some() {
            if let Some(stage) = self.current.as_mut()
                && settling
            {
                stage.handle_event(&event, &mut self.ctx);
            } else if let Event::TeammateStopped { id, report: Some(report) }
            | Event::TeammateFinished { id, report: Some(report), .. } = &event
            {
                self.ctx.buffer_item(paused_report(id, report));
            }
            return self.settle();
        }
        if let Event::MessageArrived(m) = &event {
            self.ctx.buffer_item(format!("message from {} ({}): {}", m.from, m.kind, m.body));
        }
        if let Event::PlanSubmitted { from, request, plan } = &event {
            self.ctx.plan_submitted(from, *request, plan);
            return;
        }
        if let Event::PlanDecided { id, request, approved } = &event {
            self.ctx.plan_decided(id, *request, *approved);
            return;
        }
        let step = match self.current.as_mut() {
            Some(stage) => stage.handle_event(&event, &mut self.ctx),
            None => Step::Continue,
        };
        self.after(step);
    }

    /// The deadline from [`Lead::poll_timeout`] passed.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.ctx.now = now;
        if self.finished {
            return;
        }
        // Stops past their deadline are forced; hung teammates are asked to
        // stop (their stage hears of them once their process is gone).
        self.ctx.force_overdue_stops(now);
        for id in self.ctx.hung(now) {
            self.ctx.hang(&id);
        }
        self.ctx.check_budget_time();
        if self.ctx.pause.is_some() {
            return self.settle();
        }
        if let Some(stage) = self.current.as_mut()
            && stage.poll_timeout().is_some_and(|t| t <= now)
        {
            let step = stage.handle_timeout(&mut self.ctx);
            self.after(step);
        }
    }

    /// The next command to carry out.
    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.ctx.commands.pop_front()
    }

    /// When to call [`Lead::handle_timeout`] if no event comes first.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if self.finished {
            return None;
        }
        let stage = self.current.as_ref().and_then(|s| s.poll_timeout());
        [self.ctx.next_hang_deadline(), stage, self.ctx.budget_deadline()].into_iter().flatten().min()
    }

    /// Whether `Finish` has been emitted.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The shared state, for status displays and summaries.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The running stage's name and wave.
    pub fn stage(&self) -> Option<(&'static str, Option<u32>)> {
        self.current.as_ref().map(|s| (s.name(), s.wave()))
    }

    fn after(&mut self, step: Step) {
        if self.ctx.pause.is_some() {
            return self.settle();
        }
        match step {
            Step::Continue => {}
            Step::Done => self.next_stage(),
            Step::Escalated => {
                let next = self.ctx.escalations.first().map(|e| e.1.clone()).unwrap_or_default();
                self.ctx.write_handover(next);
                self.finish(Outcome::Escalated)
            }
            // A refusal changes nothing on disk, not even decisions.md: the user
            // sees the message, and nothing happened worth recording.
            Step::Refused(msg) => self.finish(Outcome::Refused(msg)),
        }
    }

    fn next_stage(&mut self) {
        loop {
            if self.ctx.pause.is_some() {
                return self.settle();
            }
            let Some(mut stage) = self.queue.pop_front() else {
                self.current = None;
                self.ctx.write_handover(NOTHING_PENDING.to_string());
                self.finish(Outcome::Completed);
                return;
            };
            let step = stage.start(&mut self.ctx);
            self.current = Some(stage);
            match step {
                Step::Done => continue,
                other => {
                    self.after(other);
                    return;
                }
            }
        }
    }

    /// A paused run whose teammates have all stopped ends, its handover
    /// saying what was spent and how to go on.
    fn settle(&mut self) {
        let Some(pause) = self.ctx.pause.clone() else { return };
        if self.finished || !self.ctx.settled() || self.current.as_ref().is_some_and(|s| s.settling(&self.ctx)) {
            return;
        }
        let state = if pause.stopped { STOPPED_BUDGET } else { PAUSED_BUDGET };
        let feature = &self.ctx.spec.feature_name;
        self.ctx.write_handover(format!(
            "{state} ({}); continue with `troupe resume {feature} --budget +5` or a raised limit in [budgets]",
            pause.breach
        ));
        self.finish(Outcome::OverBudget { reason: pause.breach.to_string(), stopped: pause.stopped });
    }

    fn finish(&mut self, outcome: Outcome) {
        if !self.finished {
            self.finished = true;
            self.ctx.push(Command::Finish(outcome));
        }
    }
}

/// The phase gate as a [`Step`]: `Some(Refused)` when `op` may not run now.
pub(crate) fn gate_step(ctx: &mut Ctx, op: gate::Operation) -> Option<Step> {
    match gate::check(&ctx.spec, op) {
        Ok(()) => {
            ctx.decide(DecisionKind::Gate, format!("{op} allowed in phase {}", ctx.spec.phase));
            None
        }
        Err(e) => Some(Step::Refused(e.to_string())),
    }
}
