//! The review stage: rounds of review pipelines, each followed by what the
//! verdict asks for (see [`policy`](crate::review::policy)), until the pipeline
//! may go on or the user is needed.
//!
//! A round: queue N pipelines (consensus mode when N > 1), start their
//! teammates as the concurrency cap allows (the rest wait in a queue; the cap
//! is never exceeded), collect every pipeline's verdict, aggregate them, write
//! the verdict files, archive `reviews/active/` to `reviews/B{seq}/`, append
//! `verdicts.md`, then act: continue, auto-fix and review again, revise the
//! design (and rebuild) and review again, or escalate.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use troupe_core::consensus::{self, majority};
use troupe_core::cpf::AuditVerdict;
use troupe_core::gate::Operation;
use troupe_core::phase::Phase;
use troupe_core::role::Role;

use crate::machine::gate_unrunnable;
use crate::machine::{
    AgentId, Command, Ctx, DecisionKind, Event, GateKind, GateRunId, GateVerdict, ImplStage, PlanLoad, SpawnRequest,
    Stage, Step, gate_step,
};
use crate::plan::BuildPlan;
use crate::review::fix;
use crate::review::pipeline::{Pipeline, PipelineEnd, shut_down_if_live};
use crate::review::policy::{self, VerdictAction};
use crate::review::record::{self, RoundRecord};
use crate::review::{ReviewCommand, ReviewKind};
use troupe_core::report::{BuilderReport, Outcome};

/// How a review runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReviewOptions {
    /// N: pipelines per round (`--consensus N`); 1 is a plain review.
    pub consensus: usize,
    /// K: how many pipelines must agree; `None` is a majority of N.
    pub threshold: Option<usize>,
    /// The `B{seq}` of the first round (the driver reads the next free one).
    pub first_seq: u32,
    /// Fix and review again on NO-GO, revise on SPEC-UPDATE-NEEDED; `false`
    /// escalates instead (`--no-fix`).
    pub auto_fix: bool,
}

impl Default for ReviewOptions {
    fn default() -> Self {
        ReviewOptions { consensus: 1, threshold: None, first_seq: 1, auto_fix: true }
    }
}

impl ReviewOptions {
    /// K, checked against N.
    pub fn threshold(&self) -> usize {
        self.threshold.unwrap_or_else(|| majority(self.consensus))
    }

    /// Refuse N = 0 and K outside 1..=N, naming the values.
    pub fn validate(&self) -> Result<(), String> {
        if self.consensus == 0 {
            return Err("--consensus must be at least 1".into());
        }
        let k = self.threshold();
        if k == 0 || k > self.consensus {
            return Err(format!("--threshold {k} must be between 1 and --consensus ({})", self.consensus));
        }
        Ok(())
    }
}

/// The next `B{seq}`, shared by the review stages of one run (a design review
/// and the impl review after it number their rounds in one sequence).
#[derive(Debug, Clone)]
pub struct SeqCounter(Arc<AtomicU32>);

impl SeqCounter {
    /// A counter whose first round is `B{first}`.
    pub fn new(first: u32) -> SeqCounter {
        SeqCounter(Arc::new(AtomicU32::new(first)))
    }

    /// Take the next number.
    fn take(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// One concluded round, for status displays and summaries.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundSummary {
    /// `B{seq}`.
    pub seq: u32,
    /// The verdict acted on.
    pub verdict: AuditVerdict,
    /// Whether the Lead derived it.
    pub lead_derived: bool,
    /// What the Lead did next.
    pub action: String,
}

/// A teammate of a fix round and where it stands.
#[derive(Debug)]
struct Fixer {
    id: AgentId,
    /// A Builder's fix passes the quality gate before it counts; an Architect's is a document.
    gated: bool,
    /// How often the gate sent it back.
    gate_fixes: u32,
    /// `None` while it works (or waits for its gate); then `ok` or why it failed.
    result: Option<String>,
}

#[derive(Debug)]
enum State {
    Idle,
    Reviewing,
    /// Waiting for tasks.yaml to map findings to Builder groups.
    LoadingPlan,
    /// Fixers (Architect or Builders) run; then the next round, or a rebuild first.
    Fixing {
        rebuild: bool,
    },
    /// Every fix Builder passed its gate; the gate over the whole tree runs
    /// before the next round, exactly as after the first build.
    FinalGate(GateRunId),
    /// After a spec update of an implemented feature: the implementation is redone.
    Rebuilding(Box<ImplStage>),
    Committing,
    Done,
}

/// The review stage. Queue it on a [`Lead`](crate::machine::Lead) after the
/// stage whose work it reviews, or alone for `troupe review`.
#[derive(Debug)]
pub struct ReviewStage {
    kind: ReviewKind,
    opts: ReviewOptions,
    counter: SeqCounter,
    /// The current (or last) round's number.
    seq: u32,
    state: State,
    pipelines: Vec<Pipeline>,
    queue: VecDeque<SpawnRequest>,
    fixers: Vec<Fixer>,
    /// Fix Builders whose reports wait for the quality gate, in arrival order.
    to_gate: VecDeque<AgentId>,
    /// The fix Builder whose report is being gated (one at a time, as in the build).
    gating: Option<(AgentId, GateRunId)>,
    verdict: Option<AuditVerdict>,
    rounds: Vec<RoundSummary>,
}

impl ReviewStage {
    /// A review of `kind` that has not started. `opts` must be valid ([`ReviewOptions::validate`]).
    pub fn new(kind: ReviewKind, opts: ReviewOptions) -> ReviewStage {
        let counter = SeqCounter::new(opts.first_seq);
        ReviewStage::with_counter(kind, opts, counter)
    }

    /// Like [`ReviewStage::new`], numbering rounds from a counter shared with
    /// other review stages of the same run (`opts.first_seq` is then unused).
    pub fn with_counter(kind: ReviewKind, opts: ReviewOptions, counter: SeqCounter) -> ReviewStage {
        ReviewStage {
            kind,
            opts,
            counter,
            seq: 0,
            state: State::Idle,
            pipelines: Vec::new(),
            queue: VecDeque::new(),
            fixers: Vec::new(),
            to_gate: VecDeque::new(),
            gating: None,
            verdict: None,
            rounds: Vec::new(),
        }
    }

    /// The rounds concluded so far.
    pub fn rounds(&self) -> &[RoundSummary] {
        &self.rounds
    }

    /// Spawn requests waiting for a free slot under the concurrency cap.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    fn operation(&self) -> Operation {
        match self.kind {
            ReviewKind::Design => Operation::ReviewDesign,
            ReviewKind::Impl => Operation::ReviewImpl,
            ReviewKind::DeadCode => Operation::ReviewDeadCode,
        }
    }

    fn review(&self, ctx: &mut Ctx, command: ReviewCommand) {
        ctx.push(Command::Review(command));
    }

    fn begin_round(&mut self, ctx: &mut Ctx) -> Step {
        self.seq = self.counter.take();
        let feature = ctx.feature().to_string();
        self.review(ctx, ReviewCommand::BeginRound { feature, seq: self.seq });
        let n = self.opts.consensus;
        ctx.session_line(format!(
            "{} review B{} started: {} pipeline(s) of {} Inspectors and an Auditor",
            self.kind,
            self.seq,
            n,
            self.kind.perspectives().len()
        ));
        self.pipelines = (1..=n)
            .map(|i| {
                let label = (n > 1).then(|| format!("p{i}"));
                Pipeline::start(self.kind, label, ctx, &mut self.queue)
            })
            .collect();
        self.state = State::Reviewing;
        self.flush(ctx);
        Step::Continue
    }

    /// Start queued teammates while the cap allows; drop requests of pipelines that already ended.
    fn flush(&mut self, ctx: &mut Ctx) {
        if matches!(self.state, State::Reviewing) {
            let pipelines = &self.pipelines;
            self.queue.retain(|r| pipelines.iter().any(|p| p.owns(&r.id) && p.end().is_none()));
        }
        while ctx.free_slots() > 0 {
            let Some(request) = self.queue.pop_front() else { break };
            ctx.spawn(request);
        }
    }

    fn on_reviewing(&mut self, event: &Event, ctx: &mut Ctx) -> Step {
        for p in &mut self.pipelines {
            if p.handle(event, ctx, &mut self.queue) {
                break;
            }
        }
        self.flush(ctx);
        if self.pipelines.iter().all(|p| p.end().is_some()) {
            return self.conclude(ctx);
        }
        Step::Continue
    }

    fn conclude(&mut self, ctx: &mut Ctx) -> Step {
        for p in &self.pipelines {
            for id in p.agent_ids() {
                shut_down_if_live(ctx, &id);
            }
        }
        self.queue.clear();
        let feature = ctx.feature().to_string();
        let mut verdicts = Vec::new();
        let mut any_derived = false;
        let mut failures = Vec::new();
        for p in &self.pipelines {
            match p.end().expect("all ended") {
                PipelineEnd::Verdict(r) => {
                    any_derived |= r.lead_derived;
                    let file = match p.label() {
                        Some(l) => format!("verdict-{l}.cpf"),
                        None => "verdict.cpf".to_string(),
                    };
                    // The Auditor wrote verdict.cpf itself; the Lead's copy fills in when it did not.
                    let overwrite = r.lead_derived || p.label().is_some();
                    let contents = r.verdict.to_string();
                    self.review(
                        ctx,
                        ReviewCommand::WriteActive { feature: feature.clone(), file, contents, overwrite },
                    );
                    verdicts.push(r.verdict.clone());
                }
                PipelineEnd::Failed(why) => failures.push(why.clone()),
            }
        }
        if verdicts.is_empty() {
            let seq = self.seq;
            self.review(ctx, ReviewCommand::Archive { feature: feature.clone(), seq });
            ctx.escalate(
                format!("the {} review of {feature} (B{seq}) produced no verdict: {}", self.kind, failures.join("; ")),
                format!(
                    "see `troupe agent logs` for the Inspectors and the Auditor, then run `troupe review {} {feature}`",
                    self.kind
                ),
            );
            self.state = State::Done;
            return Step::Escalated;
        }
        let runs = verdicts.len();
        let threshold = self.opts.threshold().min(runs);
        let verdict = if self.opts.consensus > 1 {
            let c = consensus::aggregate(&verdicts, threshold).expect("1 <= threshold <= runs");
            let contents = c.audit.to_string();
            self.review(
                ctx,
                ReviewCommand::WriteActive {
                    feature: feature.clone(),
                    file: "verdict.cpf".into(),
                    contents,
                    overwrite: true,
                },
            );
            c.audit
        } else {
            verdicts.pop().expect("one verdict")
        };

        let mut spec = ctx.spec().clone();
        let counters = spec.orchestration.clone();
        let action = policy::decide(&mut spec, self.kind, self.seq, &verdict, self.opts.auto_fix, ctx.now());
        if spec.orchestration != counters {
            ctx.change_spec(|s| {
                *s = spec;
                Ok(())
            })
            .expect("a counter change is always allowed");
        }
        let action_text = match &action {
            VerdictAction::Continue => "continue".to_string(),
            VerdictAction::ContinueWithFindings(_) => "continue; findings to the handover buffer".to_string(),
            VerdictAction::AutoFix { round } => {
                format!("auto-fix round {round}/{}", troupe_core::spec::MAX_RETRY_COUNT)
            }
            VerdictAction::SpecUpdate { round } => {
                format!("spec update {round}/{}: design revision", troupe_core::spec::MAX_SPEC_UPDATE_COUNT)
            }
            VerdictAction::Escalate { .. } => "escalate to the user".to_string(),
        };
        let seq = self.seq;
        self.review(ctx, ReviewCommand::Archive { feature: feature.clone(), seq });
        let entry = record::entry(&RoundRecord {
            seq,
            kind: self.kind,
            at: ctx.now(),
            version: &ctx.spec().version.clone(),
            runs,
            threshold,
            verdict: &verdict,
            action: &action_text,
        });
        self.review(ctx, ReviewCommand::AppendVerdicts { feature: feature.clone(), entry });
        let derived = if any_derived { " (lead-derived: AUDITOR_UNAVAILABLE)" } else { "" };
        ctx.decide(
            DecisionKind::Quality,
            format!(
                "{} review B{seq}: {}{derived} ({}) -> {action_text}",
                self.kind,
                verdict.verdict,
                consensus::record(runs, threshold)
            ),
        );
        ctx.session_line(format!("{} review B{seq}: {}{derived}; {action_text}", self.kind, verdict.verdict));
        self.rounds.push(RoundSummary {
            seq,
            verdict: verdict.clone(),
            lead_derived: any_derived,
            action: action_text,
        });
        self.pipelines.clear();
        self.verdict = Some(verdict);
        self.act(ctx, action)
    }

    fn act(&mut self, ctx: &mut Ctx, action: VerdictAction) -> Step {
        let verdict = self.verdict.clone().expect("set before acting");
        let seq = self.seq;
        match action {
            VerdictAction::Continue => self.finish(ctx),
            VerdictAction::ContinueWithFindings(lines) => {
                for l in lines {
                    ctx.buffer_item(l);
                }
                self.finish(ctx)
            }
            VerdictAction::Escalate { reason, hint } => {
                for f in &verdict.verified {
                    ctx.buffer_item(format!("review {} B{seq} open: {}", self.kind, policy::finding_line(f)));
                }
                ctx.escalate(reason, hint);
                self.state = State::Done;
                Step::Escalated
            }
            VerdictAction::AutoFix { .. } => match self.kind {
                ReviewKind::Design => {
                    let req = fix::architect(ctx, self.kind, seq, &verdict, false);
                    self.start_fixers(ctx, vec![req], false)
                }
                ReviewKind::Impl | ReviewKind::DeadCode => {
                    ctx.push(Command::LoadPlan);
                    self.state = State::LoadingPlan;
                    Step::Continue
                }
            },
            VerdictAction::SpecUpdate { .. } => {
                let implemented = ctx.spec().phase == Phase::ImplementationComplete;
                if implemented {
                    let summary = format!("spec update after {} review B{seq}", self.kind);
                    let now = ctx.now();
                    if let Err(e) = ctx.change_spec(|s| s.revise(now, &summary)) {
                        ctx.escalate(
                            format!("cannot start the revision: {e}"),
                            "fix spec.yaml, then review again".into(),
                        );
                        self.state = State::Done;
                        return Step::Escalated;
                    }
                }
                let req = fix::architect(ctx, self.kind, seq, &verdict, true);
                self.start_fixers(ctx, vec![req], implemented)
            }
        }
    }

    fn start_fixers(&mut self, ctx: &mut Ctx, requests: Vec<SpawnRequest>, rebuild: bool) -> Step {
        self.fixers = requests
            .iter()
            .map(|r| Fixer { id: r.id.clone(), gated: r.role == Role::Builder, gate_fixes: 0, result: None })
            .collect();
        self.to_gate.clear();
        self.gating = None;
        for r in requests {
            ctx.session_line(format!("{} {}: fixing the findings of B{}", r.role, r.id, self.seq));
            self.queue.push_back(r);
        }
        self.state = State::Fixing { rebuild };
        self.flush(ctx);
        Step::Continue
    }

    fn on_plan(&mut self, ctx: &mut Ctx, plan: Option<&BuildPlan>) -> Step {
        let verdict = self.verdict.clone().expect("set before acting");
        let requests = fix::builders(ctx, self.seq, &verdict, plan);
        if requests.is_empty() {
            // NO-GO without verified findings: nothing to hand a Builder.
            ctx.escalate(
                format!("the {} review of {} is NO-GO but lists no verified findings to fix", self.kind, ctx.feature()),
                format!("read reviews/B{}/ and fix by hand, then review again", self.seq),
            );
            self.state = State::Done;
            return Step::Escalated;
        }
        self.start_fixers(ctx, requests, false)
    }

    fn on_fixing(&mut self, event: &Event, ctx: &mut Ctx, rebuild: bool) -> Step {
        if let Event::GateFinished { run, verdict, output } = event {
            if *verdict == GateVerdict::Environment && self.gating.as_ref().is_some_and(|(_, r)| r == run) {
                self.gating = None;
                self.state = State::Done;
                return gate_unrunnable(ctx, output);
            }
            return self.on_fix_gate(ctx, *run, *verdict == GateVerdict::Passed, output, rebuild);
        }
        let (id, outcome) = match event {
            Event::TeammateFinished { id, report, .. } => (id, Ok(report.clone())),
            Event::TeammateExited { id, error, .. } => (id, Err(format!("ended without a result ({error})"))),
            Event::SpawnFailed { id, error } => (id, Err(format!("could not be started ({error})"))),
            Event::TeammateUnresponsive { id } => (id, Err("showed no activity for the hang timeout".into())),
            _ => return Step::Continue,
        };
        let waiting_for_gate = self.to_gate.contains(id) || self.gating.as_ref().is_some_and(|(g, _)| g == id);
        let Some(i) = self.fixers.iter().position(|f| &f.id == id && f.result.is_none()) else {
            return Step::Continue;
        };
        if waiting_for_gate {
            return Step::Continue;
        }
        let marker = if self.fixers[i].gated { "BUILDER" } else { "ARCHITECT" };
        let result = match outcome {
            Ok(Some(report)) if marker == "BUILDER" => match report.builder() {
                Ok(BuilderReport { outcome: Outcome::Complete, .. }) => "ok".to_string(),
                Ok(BuilderReport { outcome: Outcome::Blocked { blocker }, .. }) => format!("blocked: {blocker}"),
                Err(e) => format!("its report was refused: {e}"),
            },
            Ok(Some(report)) => match report.completion(marker) {
                Ok(r) if !r.is_blocked() => "ok".to_string(),
                Ok(r) => format!("blocked: {}", r.field("blocker").unwrap_or("no reason given")),
                Err(e) => format!("ended without a {marker}_COMPLETE report ({e})"),
            },
            Ok(None) => format!("ended without a {marker}_COMPLETE report"),
            Err(why) => why,
        };
        if result == "ok" && self.fixers[i].gated {
            ctx.session_line(format!("fixer {id}: reported; quality gate next"));
            self.to_gate.push_back(id.clone());
            self.pump_gates(ctx);
            return Step::Continue;
        }
        ctx.session_line(format!("fixer {id}: {result}"));
        self.fixers[i].result = Some(result);
        self.flush(ctx);
        self.after_fixers(ctx, rebuild)
    }

    /// Gate the next reported fix Builder, one at a time in arrival order.
    fn pump_gates(&mut self, ctx: &mut Ctx) {
        if self.gating.is_some() {
            return;
        }
        let Some(agent) = self.to_gate.pop_front() else { return };
        let run = ctx.new_gate_run();
        self.gating = Some((agent.clone(), run));
        ctx.push(Command::RunGate { run, kind: GateKind::TaskCompleted { agent, tasks: Vec::new() } });
    }

    fn on_fix_gate(&mut self, ctx: &mut Ctx, run: GateRunId, passed: bool, output: &str, rebuild: bool) -> Step {
        let Some((agent, _)) = self.gating.take_if(|(_, r)| *r == run) else { return Step::Continue };
        let allowed = ctx.config().gate_fix_attempts;
        let Some(i) = self.fixers.iter().position(|f| f.id == agent) else { return Step::Continue };
        if passed {
            ctx.decide(DecisionKind::Quality, format!("fixer {agent} passed the quality gate"));
            ctx.session_line(format!("fixer {agent}: ok"));
            self.fixers[i].result = Some("ok".into());
        } else if self.fixers[i].gate_fixes < allowed {
            self.fixers[i].gate_fixes += 1;
            let n = self.fixers[i].gate_fixes;
            ctx.decide(
                DecisionKind::Quality,
                format!("fixer {agent} failed the quality gate; sent back to fix it (fix {n}/{allowed})"),
            );
            ctx.resume(
                &agent,
                format!(
                    "The quality gate failed after your report. Fix the cause, keeping to your files, run the tests again, and end with a new BUILDER_COMPLETE report.\n\n{output}"
                ),
            );
        } else {
            ctx.decide(DecisionKind::Quality, format!("fixer {agent} still fails the quality gate; nothing committed"));
            self.fixers[i].result = Some(format!("still fails the quality gate after {allowed} fixes:\n{output}"));
        }
        self.pump_gates(ctx);
        self.flush(ctx);
        self.after_fixers(ctx, rebuild)
    }

    /// Once every fixer has a result: escalate a failure, else gate the whole
    /// tree (when Builders changed code), then review again (or rebuild first).
    fn after_fixers(&mut self, ctx: &mut Ctx, rebuild: bool) -> Step {
        if self.fixers.iter().any(|f| f.result.is_none()) {
            return Step::Continue;
        }
        let failed: Vec<String> = self
            .fixers
            .iter()
            .filter(|f| f.result.as_deref() != Some("ok"))
            .map(|f| format!("{} {}", f.id, f.result.as_deref().unwrap_or_default()))
            .collect();
        if !failed.is_empty() {
            ctx.escalate(
                format!(
                    "the auto-fix round after review B{} of {} failed: {}",
                    self.seq,
                    ctx.feature(),
                    failed.join("; ")
                ),
                format!(
                    "see `troupe agent logs`, fix by hand, then run `troupe review {} {}`",
                    self.kind,
                    ctx.feature()
                ),
            );
            self.state = State::Done;
            return Step::Escalated;
        }
        let was_architect = self.fixers.iter().any(|f| !f.gated);
        if was_architect && ctx.spec().phase == Phase::DesignGenerated {
            let summary = format!("design revised after review B{}", self.seq);
            let now = ctx.now();
            if let Err(e) = ctx.change_spec(|s| s.mark_design_generated(now, &summary)) {
                ctx.escalate(
                    format!("cannot record the revised design: {e}"),
                    "fix spec.yaml, then review again".into(),
                );
                self.state = State::Done;
                return Step::Escalated;
            }
        }
        if rebuild {
            let mut stage = Box::new(ImplStage::new(false));
            let step = stage.start(ctx);
            self.state = State::Rebuilding(stage);
            return self.after_rebuild(ctx, step);
        }
        if self.fixers.iter().any(|f| f.gated) {
            let run = ctx.new_gate_run();
            ctx.push(Command::RunGate { run, kind: GateKind::Final });
            self.state = State::FinalGate(run);
            return Step::Continue;
        }
        self.begin_round(ctx)
    }

    fn on_final_gate(&mut self, ctx: &mut Ctx, passed: bool, output: &str) -> Step {
        let f = ctx.feature().to_string();
        if passed {
            ctx.decide(DecisionKind::Quality, format!("final quality gate after the fixes of B{} passed", self.seq));
            return self.begin_round(ctx);
        }
        ctx.decide(DecisionKind::Quality, "final quality gate after the fix round failed; nothing committed".into());
        ctx.escalate(
            format!(
                "the final quality gate of {f} failed after the fixes of review B{} (nothing committed):\n{output}",
                self.seq
            ),
            format!("fix the failing command of .troupe/steering/tech.md, then run `troupe review {} {f}`", self.kind),
        );
        self.state = State::Done;
        Step::Escalated
    }

    fn after_rebuild(&mut self, ctx: &mut Ctx, step: Step) -> Step {
        match step {
            Step::Continue => Step::Continue,
            Step::Done => self.begin_round(ctx),
            other => {
                self.state = State::Done;
                other
            }
        }
    }

    fn finish(&mut self, ctx: &mut Ctx) -> Step {
        if ctx.config().commit {
            let verdict = self.verdict.as_ref().map(|v| v.verdict.as_str()).unwrap_or("done");
            let message = ctx.commit_message(&format!("{} review {verdict} (B{})", self.kind, self.seq));
            ctx.push(Command::Commit { message });
            self.state = State::Committing;
            return Step::Continue;
        }
        self.state = State::Done;
        Step::Done
    }
}

impl Stage for ReviewStage {
    fn name(&self) -> &'static str {
        match self.kind {
            ReviewKind::Design => "review-design",
            ReviewKind::Impl => "review-impl",
            ReviewKind::DeadCode => "review-dead-code",
        }
    }

    fn start(&mut self, ctx: &mut Ctx) -> Step {
        if let Err(e) = self.opts.validate() {
            return Step::Refused(e);
        }
        if let Some(refused) = gate_step(ctx, self.operation()) {
            return refused;
        }
        self.begin_round(ctx)
    }

    fn handle_event(&mut self, event: &Event, ctx: &mut Ctx) -> Step {
        if let Event::CommandFailed { command, error } = event
            && matches!(command.as_str(), "review" | "commit")
            && !matches!(self.state, State::Rebuilding(_))
        {
            ctx.shut_down_all();
            ctx.escalate(
                format!("the {} review of {} could not record its results: {error}", self.kind, ctx.feature()),
                "fix the file or git problem, then run the review again".into(),
            );
            self.state = State::Done;
            return Step::Escalated;
        }
        match &mut self.state {
            State::Reviewing => self.on_reviewing(event, ctx),
            State::LoadingPlan => match event {
                Event::PlanLoaded(PlanLoad::Loaded(plan)) => {
                    let plan = plan.clone();
                    self.on_plan(ctx, Some(&plan))
                }
                Event::PlanLoaded(_) => self.on_plan(ctx, None),
                Event::CommandFailed { command, .. } if command == "load-plan" => self.on_plan(ctx, None),
                _ => Step::Continue,
            },
            State::Fixing { rebuild } => {
                let rebuild = *rebuild;
                self.on_fixing(event, ctx, rebuild)
            }
            State::Rebuilding(stage) => {
                let step = stage.handle_event(event, ctx);
                self.after_rebuild(ctx, step)
            }
            State::FinalGate(run) => match event {
                Event::GateFinished { run: r, verdict, output } if r == run => {
                    let (verdict, output) = (*verdict, output.clone());
                    if verdict == GateVerdict::Environment {
                        self.state = State::Done;
                        return gate_unrunnable(ctx, &output);
                    }
                    self.on_final_gate(ctx, verdict == GateVerdict::Passed, &output)
                }
                _ => Step::Continue,
            },
            State::Committing => match event {
                Event::Committed { .. } => {
                    self.state = State::Done;
                    Step::Done
                }
                _ => Step::Continue,
            },
            State::Idle | State::Done => Step::Continue,
        }
    }

    fn poll_timeout(&self) -> Option<jiff::Timestamp> {
        match &self.state {
            State::Rebuilding(stage) => stage.poll_timeout(),
            _ => None,
        }
    }

    fn handle_timeout(&mut self, ctx: &mut Ctx) -> Step {
        match &mut self.state {
            State::Rebuilding(stage) => {
                let step = stage.handle_timeout(ctx);
                self.after_rebuild(ctx, step)
            }
            _ => Step::Continue,
        }
    }
}
