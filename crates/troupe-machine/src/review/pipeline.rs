//! One review pipeline: the Inspectors of a [`ReviewKind`] and one Auditor,
//! spawned at once (seed 000 Spec 7), with both recovery protocols.
//!
//! Inspector recovery (Spec 10): an Inspector that exits without findings,
//! crashes, cannot start or goes quiet past the hang timeout is shut down
//! (gracefully, then by force) and set aside until every other Inspector has
//! reported or failed itself (Spec 10.1: the Lead checks the others first).
//! Then it is replaced once by a new Inspector of the same perspective under a
//! new id. If the replacement fails too, the Auditor gets a `recovery_notice`:
//! `Inspector {name} unavailable after retry. Proceed with {N-1}/{N} results.`
//!
//! Auditor recovery (Spec 11): an Auditor that ends without a verdict is
//! nudged once by resuming its session with [`NUDGE`]. One that went quiet
//! past the hang timeout is heard of only once the Lead's hang handling has
//! stopped its process, so it is nudged the same way. One without a session to resume (it never started, or its engine
//! never named one) cannot be nudged: that is recorded, and it goes straight
//! to the next step. If the nudge ends without a verdict too, it is shut down
//! and a new Auditor is spawned in RECOVERY MODE with every Inspector's CPF in
//! its spawn context (once all Inspectors have settled). If that one fails as
//! well, the Lead derives a conservative verdict from the Critical/High counts
//! with the note `AUDITOR_UNAVAILABLE|lead-derived verdict`.
//!
//! The pipeline never spawns directly: it queues [`SpawnRequest`]s, and the
//! stage starts them as the concurrency cap allows.

use std::collections::VecDeque;

use troupe_core::cpf::{AuditVerdict, InspectorReport, lead_derived_verdict};
use troupe_core::layout::Layout;
use troupe_core::report::Submission;
use troupe_core::role::Role;
use troupe_core::tools;

use crate::machine::{AgentId, Command, Ctx, DecisionKind, Event, SpawnContext, SpawnRequest, TeammateStatus};
use crate::review::perspectives::{Perspective, ReviewKind};

/// The nudge an idle Auditor gets (seed 000 Spec 11.1), verbatim.
pub const NUDGE: &str =
    "Output your verdict now with findings verified so far. Use NOTES: PARTIAL_VERIFICATION if incomplete.";

/// The instruction a recovery Auditor gets (seed 000 Spec 11.3), verbatim.
pub const RECOVERY_MODE: &str =
    "RECOVERY MODE: Inspector results in spawn context. Skip SendMessage wait. Prioritize verdict output.";

/// The recovery notice to the Auditor (seed 000 Spec 10.4), verbatim.
pub fn recovery_notice(inspector: &str, available: usize, total: usize) -> String {
    format!("Inspector {inspector} unavailable after retry. Proceed with {available}/{total} results.")
}

#[derive(Debug, Clone, PartialEq)]
enum SlotState {
    Working,
    /// The first attempt failed (why); its retry waits until no other first
    /// attempt is still working.
    Silent(String),
    Reported(InspectorReport),
    Unavailable,
}

#[derive(Debug, Clone)]
struct Slot {
    perspective: Perspective,
    /// The first Inspector's id: the name the Auditor knows this perspective by.
    first: AgentId,
    /// The id of the current attempt.
    current: AgentId,
    attempt: u32,
    state: SlotState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuditorPhase {
    /// Spawned, waiting for findings or writing the verdict.
    Working,
    /// Its session was resumed with the nudge.
    Nudged,
    /// The nudge did not help; a RECOVERY MODE Auditor is spawned once every Inspector settled.
    RecoveryDue,
    /// The RECOVERY MODE Auditor runs.
    Recovery,
    /// A verdict exists (its own or the Lead's).
    Done,
}

/// How an Auditor's run without a verdict ended: what decides whether its
/// session can be resumed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuditorEnd {
    /// Its process ended (by itself, or after the Lead stopped it, a hung
    /// one included).
    Ended,
    /// Its process never started.
    NeverStarted,
}

/// What a finished pipeline produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineResult {
    /// The verdict: the Auditor's, or derived by the Lead.
    pub verdict: AuditVerdict,
    /// True when the Lead derived it (`AUDITOR_UNAVAILABLE`).
    pub lead_derived: bool,
    /// The Inspectors' reports that arrived, by agent id.
    pub reports: Vec<(AgentId, InspectorReport)>,
    /// The first ids of Inspectors without results: unavailable after their
    /// retry, or still waiting for it when the verdict came.
    pub unavailable: Vec<AgentId>,
}

/// The end of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum PipelineEnd {
    /// A verdict.
    Verdict(Box<PipelineResult>),
    /// Neither an Auditor nor a single Inspector produced anything to judge by.
    Failed(String),
}

/// One pipeline of Inspectors and an Auditor.
#[derive(Debug)]
pub struct Pipeline {
    kind: ReviewKind,
    /// `p2` in consensus mode, so that ids say which pipeline they belong to.
    label: Option<String>,
    slots: Vec<Slot>,
    auditor: AgentId,
    auditor_phase: AuditorPhase,
    end: Option<PipelineEnd>,
}

/// Ask a teammate that still runs to stop, gracefully; one that ended or is
/// already stopping is left alone.
pub(crate) fn shut_down_if_live(ctx: &mut Ctx, id: &str) {
    if ctx.teammate(id).is_some_and(|t| matches!(t.status, TeammateStatus::Spawning | TeammateStatus::Running)) {
        ctx.shut_down(id, false);
    }
}

fn display(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Pipeline {
    /// Queue every Inspector and the Auditor of a new pipeline.
    pub fn start(
        kind: ReviewKind,
        label: Option<String>,
        ctx: &mut Ctx,
        queue: &mut VecDeque<SpawnRequest>,
    ) -> Pipeline {
        let tag = |name: &str| match &label {
            Some(l) => format!("{l}-{name}"),
            None => name.to_string(),
        };
        let slots: Vec<Slot> = kind
            .perspectives()
            .iter()
            .map(|p| {
                let id = ctx.new_agent_id(Role::Inspector, Some(&tag(p.name)));
                Slot { perspective: *p, first: id.clone(), current: id, attempt: 1, state: SlotState::Working }
            })
            .collect();
        let auditor = match &label {
            Some(l) => ctx.new_agent_id(Role::Auditor, Some(l)),
            None => ctx.new_agent_id(Role::Auditor, None),
        };
        let p = Pipeline { kind, label, slots, auditor, auditor_phase: AuditorPhase::Working, end: None };
        for i in 0..p.slots.len() {
            let req = p.inspector_request(ctx, i, None);
            queue.push_back(req);
        }
        let req = p.auditor_request(ctx, false);
        queue.push_back(req);
        p
    }

    /// Whether `id` is one of this pipeline's teammates (any attempt).
    pub fn owns(&self, id: &str) -> bool {
        self.auditor == id || self.slots.iter().any(|s| s.current == id || s.first == id)
    }

    /// The pipeline's label (`p2`), if it runs in consensus mode.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The result, once there is one.
    pub fn end(&self) -> Option<&PipelineEnd> {
        self.end.as_ref()
    }

    /// Every agent id this pipeline used, for shutting down what still runs.
    pub fn agent_ids(&self) -> Vec<AgentId> {
        let mut ids: Vec<AgentId> = self.slots.iter().map(|s| s.current.clone()).collect();
        ids.push(self.auditor.clone());
        ids
    }

    fn read_list(&self, ctx: &Ctx) -> Vec<String> {
        let l = Layout::new("");
        let f = ctx.feature();
        let mut read: Vec<String> =
            ["product.md", "tech.md", "structure.md"].iter().map(|s| display(&l.steering_dir().join(s))).collect();
        read.push(display(&l.spec_file(f)));
        match self.kind {
            ReviewKind::Design => {
                read.push(display(&l.design_file(f)));
                read.push(display(&l.research_file(f)));
            }
            ReviewKind::Impl => {
                read.push(display(&l.design_file(f)));
                read.push(display(&l.tasks_file(f)));
                read.extend(ctx.spec().implementation.files_created.iter().cloned());
            }
            ReviewKind::DeadCode => {}
        }
        read
    }

    fn what_to_review(&self, feature: &str) -> String {
        match self.kind {
            ReviewKind::Design => {
                format!(
                    "Review the design of {feature} (design.md and research.md) against its spec and the steering files."
                )
            }
            ReviewKind::Impl => format!(
                "Review the implementation of {feature} (the files in spec.yaml's implementation.files_created and their tests) against design.md and tasks.yaml."
            ),
            ReviewKind::DeadCode => {
                "Review the whole repository for what is no longer used: settings, code, specs and tests.".to_string()
            }
        }
    }

    fn engine_phase(&self) -> String {
        match self.kind {
            ReviewKind::Design => "document-review".into(),
            ReviewKind::Impl | ReviewKind::DeadCode => "inspection".into(),
        }
    }

    fn findings_path(ctx: &Ctx, id: &str) -> String {
        display(&Layout::new("").reviews_dir(ctx.feature()).join("active").join(format!("{id}.cpf")))
    }

    fn inspector_request(&self, ctx: &Ctx, i: usize, replaces: Option<(&str, &str)>) -> SpawnRequest {
        let slot = &self.slots[i];
        let f = ctx.feature().to_string();
        let p = slot.perspective;
        let findings = Self::findings_path(ctx, &slot.current);
        let mut read = vec![p.template_path()];
        read.extend(self.read_list(ctx));
        let mut instructions = vec![
            format!(
                "Read your perspective's template {} first and review from that perspective only.",
                p.template_path()
            ),
            self.what_to_review(&f),
            format!(
                "Write your findings in CPF to {findings}: VERDICT:GO|CONDITIONAL|NO-GO, SCOPE:{f}, ISSUES: rows sev|category|location|description (sev C, H, M or L), NOTES:."
            ),
            format!(
                "Send the same CPF text to the Auditor {} with `{{{{tool:{}}}}}`, kind `findings`.",
                self.auditor,
                tools::SEND_MESSAGE
            ),
            "End with the CPF text as your final answer.".to_string(),
        ];
        if let Some((first, why)) = replaces {
            instructions.insert(
                0,
                format!("You replace Inspector {first} of the same perspective, which {why}. The Auditor expects these findings."),
            );
        }
        SpawnRequest {
            id: slot.current.clone(),
            role: Role::Inspector,
            engine_phase: self.engine_phase(),
            // The perspective, so that engines keyed by group (the scripted
            // engine's `inspector/<perspective>`) can tell Inspectors apart.
            group: Some(p.name.to_string()),
            tasks: Vec::new(),
            context: SpawnContext {
                feature: f.clone(),
                read,
                write: vec![findings],
                scope: format!("Inspector ({}) of the {} review of {f}: {}.", p.name, self.kind, p.focus),
                instructions,
            },
            attempt: slot.attempt,
        }
    }

    fn auditor_request(&self, ctx: &Ctx, recovery: bool) -> SpawnRequest {
        let f = ctx.feature().to_string();
        let l = Layout::new("");
        let verdict = display(&l.reviews_dir(&f).join("active").join("verdict.cpf"));
        let roster =
            self.slots.iter().map(|s| format!("{} ({})", s.first, s.perspective.name)).collect::<Vec<_>>().join(", ");
        let mut instructions = Vec::new();
        if recovery {
            instructions.push(RECOVERY_MODE.to_string());
            for s in &self.slots {
                match &s.state {
                    SlotState::Reported(r) => {
                        instructions.push(format!("Inspector {} ({}) findings:\n{r}", s.current, s.perspective.name))
                    }
                    _ => instructions.push(format!(
                        "Inspector {} ({}) is unavailable: proceed without it and record it in NOTES.",
                        s.first, s.perspective.name
                    )),
                }
            }
        } else {
            instructions.push(format!(
                "Wait for one message of kind `findings` from each of the {} Inspectors: {roster}. Read them with `{{{{tool:{}}}}}` (`wait_for`: how many you still miss, `wait_seconds`: 20), which returns when they are there (or after 20 s: then call it again), rather than polling it. A retried Inspector has a new id and the same perspective. If the Lead sends a recovery_notice that an Inspector is unavailable, proceed without it and record it in NOTES.",
                self.slots.len(),
                tools::READ_MESSAGES
            ));
        }
        instructions.extend([
            "Merge the findings: the same location and category count once, with the agents joined by `+`. Remove false positives with a reason (REMOVED: agent|reason|original issue) and settle conflicts (RESOLVED:).".to_string(),
            format!("Check the Product Intent against {}.", display(&l.steering_dir().join("product.md"))),
            format!(
                "Write {verdict} in CPF: VERDICT:GO|CONDITIONAL|NO-GO|SPEC-UPDATE-NEEDED, SCOPE:{f}, VERIFIED: rows agents|sev|category|location|description, REMOVED:, RESOLVED:, SPEC_FEEDBACK: rows phase|spec|description, STEERING:, NOTES:."
            ),
            "NO-GO when a verified finding is Critical; SPEC-UPDATE-NEEDED when the spec itself is wrong (say why in SPEC_FEEDBACK); CONDITIONAL when one is High; GO otherwise.".to_string(),
            "End with the verdict CPF text as your final answer.".to_string(),
        ]);
        SpawnRequest {
            id: self.auditor.clone(),
            role: Role::Auditor,
            engine_phase: self.engine_phase(),
            group: None,
            tasks: Vec::new(),
            context: SpawnContext {
                feature: f.clone(),
                read: self.read_list(ctx),
                write: vec![verdict],
                scope: format!(
                    "Auditor of the {} review of {f}: merge the Inspectors' findings into one verdict.",
                    self.kind
                ),
                instructions,
            },
            attempt: if recovery { 2 } else { 1 },
        }
    }

    /// React to `event`. Returns true when the event was about this pipeline.
    pub fn handle(&mut self, event: &Event, ctx: &mut Ctx, queue: &mut VecDeque<SpawnRequest>) -> bool {
        if self.end.is_some() {
            return false;
        }
        let (id, outcome) = match event {
            Event::TeammateFinished { id, report, .. } => (id, Ok(report.clone())),
            Event::TeammateExited { id, error, .. } => (id, Err(format!("ended without a result ({error})"))),
            Event::SpawnFailed { id, error } => (id, Err(format!("could not be started ({error})"))),
            Event::TeammateUnresponsive { id } => {
                (id, Err("showed no activity for the hang timeout and was shut down".to_string()))
            }
            _ => return false,
        };
        if *id == self.auditor {
            let end = match event {
                Event::SpawnFailed { .. } => AuditorEnd::NeverStarted,
                _ => AuditorEnd::Ended,
            };
            self.on_auditor(ctx, queue, outcome, end);
            return true;
        }
        let Some(i) = self.slots.iter().position(|s| s.current == *id && s.state == SlotState::Working) else {
            return false;
        };
        let report = match outcome {
            Ok(Some(report)) => {
                report.text().parse::<InspectorReport>().map_err(|e| format!("ended without findings ({e})"))
            }
            Ok(None) => Err("ended without findings".to_string()),
            Err(why) => Err(why),
        };
        match report {
            Ok(r) => self.slots[i].state = SlotState::Reported(r),
            Err(why) => self.inspector_failed(ctx, i, why),
        }
        self.retry_silent(ctx, queue);
        self.after_inspector(ctx, queue);
        true
    }

    fn reported(&self) -> usize {
        self.slots.iter().filter(|s| matches!(s.state, SlotState::Reported(_))).count()
    }

    fn inspector_failed(&mut self, ctx: &mut Ctx, i: usize, why: String) {
        let total = self.slots.len();
        let slot = &self.slots[i];
        let (first, current) = (slot.first.clone(), slot.current.clone());
        // Graceful first (a hung one has already been stopped by the Lead's hang handling).
        shut_down_if_live(ctx, &current);
        if slot.attempt == 1 {
            ctx.session_line(format!("Inspector {current}: {why}"));
            self.slots[i].state = SlotState::Silent(why);
            return;
        }
        self.slots[i].state = SlotState::Unavailable;
        let unavailable = self.slots.iter().filter(|s| s.state == SlotState::Unavailable).count();
        let notice = recovery_notice(&first, total - unavailable, total);
        ctx.decide(DecisionKind::Escalation, format!("Inspector {first} unavailable after retry ({why})"));
        ctx.session_line(format!("Inspector {first}: unavailable after retry ({why})"));
        if matches!(self.auditor_phase, AuditorPhase::Working | AuditorPhase::Nudged) {
            ctx.push(Command::SendMessage {
                to: self.auditor.clone(),
                kind: "recovery_notice".into(),
                body: notice,
                in_reply_to: None,
            });
        }
    }

    /// Retry every silent Inspector once no other first attempt still works:
    /// by then the others have reported, or failed themselves (Spec 10.1).
    fn retry_silent(&mut self, ctx: &mut Ctx, queue: &mut VecDeque<SpawnRequest>) {
        if self.slots.iter().any(|s| s.attempt == 1 && s.state == SlotState::Working) {
            return;
        }
        let total = self.slots.len();
        let reported = self.reported();
        for i in 0..self.slots.len() {
            let SlotState::Silent(why) = self.slots[i].state.clone() else { continue };
            let slot = &self.slots[i];
            let (first, current) = (slot.first.clone(), slot.current.clone());
            ctx.decide(
                DecisionKind::Spawn,
                format!(
                    "Inspector {current} {why}; {reported}/{total} Inspectors reported; retrying its perspective once"
                ),
            );
            ctx.session_line(format!("Inspector {current}: retried"));
            let label = match &self.label {
                Some(l) => format!("{l}-{}", slot.perspective.name),
                None => slot.perspective.name.to_string(),
            };
            let new_id = ctx.new_agent_id(Role::Inspector, Some(&label));
            let slot = &mut self.slots[i];
            slot.current = new_id;
            slot.attempt = 2;
            slot.state = SlotState::Working;
            let req = self.inspector_request(ctx, i, Some((&first, &why)));
            queue.push_back(req);
        }
    }

    fn inspectors_settled(&self) -> bool {
        self.slots.iter().all(|s| matches!(s.state, SlotState::Reported(_) | SlotState::Unavailable))
    }

    /// A deferred RECOVERY MODE spawn may go once every Inspector settled.
    fn after_inspector(&mut self, ctx: &mut Ctx, queue: &mut VecDeque<SpawnRequest>) {
        if self.auditor_phase == AuditorPhase::RecoveryDue && self.inspectors_settled() {
            self.spawn_recovery_auditor(ctx, queue);
        }
    }

    fn spawn_recovery_auditor(&mut self, ctx: &mut Ctx, queue: &mut VecDeque<SpawnRequest>) {
        if self.reported() == 0 {
            // Nothing to embed: a recovery Auditor would have nothing to judge.
            self.derive(ctx);
            return;
        }
        let label = self.label.clone();
        self.auditor = ctx.new_agent_id(Role::Auditor, label.as_deref());
        self.auditor_phase = AuditorPhase::Recovery;
        ctx.decide(DecisionKind::Spawn, format!("Auditor {} in RECOVERY MODE", self.auditor));
        let req = self.auditor_request(ctx, true);
        queue.push_back(req);
    }

    fn on_auditor(
        &mut self,
        ctx: &mut Ctx,
        queue: &mut VecDeque<SpawnRequest>,
        outcome: Result<Option<Submission>, String>,
        end: AuditorEnd,
    ) {
        let verdict = match outcome {
            Ok(Some(report)) => {
                report.text().parse::<AuditVerdict>().map_err(|e| format!("ended without a verdict ({e})"))
            }
            Ok(None) => Err("ended without a verdict".to_string()),
            Err(why) => Err(why),
        };
        let id = self.auditor.clone();
        let why = match verdict {
            Ok(v) => {
                ctx.session_line(format!("Auditor {id}: {}", v.verdict));
                self.finish(ctx, v, false);
                return;
            }
            Err(why) => why,
        };
        match (self.auditor_phase, end) {
            (AuditorPhase::Working, AuditorEnd::Ended) => {
                match ctx.teammate(&id).and_then(|t| t.stats.session_id.clone()) {
                    Some(_) => {
                        ctx.decide(DecisionKind::Spawn, format!("Auditor {id} {why}; nudging it"));
                        ctx.session_line(format!("Auditor {id}: {why}; nudged"));
                        self.auditor_phase = AuditorPhase::Nudged;
                        ctx.resume(&id, NUDGE.to_string());
                    }
                    None => self.replace_auditor(
                        ctx,
                        queue,
                        format!("{why}; it has no session to resume, so it cannot be nudged"),
                    ),
                }
            }
            (AuditorPhase::Working, AuditorEnd::NeverStarted) => {
                self.replace_auditor(ctx, queue, format!("{why}; there is no session to nudge"))
            }
            (AuditorPhase::Nudged, _) => self.replace_auditor(ctx, queue, format!("{why} after the nudge")),
            (AuditorPhase::Recovery, _) => {
                ctx.session_line(format!("Auditor {id} (RECOVERY MODE): {why}"));
                shut_down_if_live(ctx, &id);
                self.derive(ctx);
            }
            (AuditorPhase::RecoveryDue | AuditorPhase::Done, _) => {}
        }
    }

    /// Spec 11.3: shut the Auditor down and spawn one in RECOVERY MODE once every Inspector settled.
    fn replace_auditor(&mut self, ctx: &mut Ctx, queue: &mut VecDeque<SpawnRequest>, why: String) {
        let id = self.auditor.clone();
        ctx.decide(DecisionKind::Spawn, format!("Auditor {id} {why}; respawning in RECOVERY MODE"));
        ctx.session_line(format!("Auditor {id}: {why}; replaced"));
        shut_down_if_live(ctx, &id);
        self.auditor_phase = AuditorPhase::RecoveryDue;
        if self.inspectors_settled() {
            self.spawn_recovery_auditor(ctx, queue);
        }
    }

    /// The Lead's own verdict from the Inspectors' results (Spec 11.4).
    fn derive(&mut self, ctx: &mut Ctx) {
        let reports: Vec<(&str, &InspectorReport)> = self
            .slots
            .iter()
            .filter_map(|s| match &s.state {
                SlotState::Reported(r) => Some((s.current.as_str(), r)),
                _ => None,
            })
            .collect();
        if reports.is_empty() {
            self.auditor_phase = AuditorPhase::Done;
            self.end = Some(PipelineEnd::Failed(format!(
                "no Auditor produced a verdict and no Inspector of the {} review produced findings",
                self.kind
            )));
            return;
        }
        let mut v = lead_derived_verdict(ctx.feature(), &reports);
        for s in self.slots.iter().filter(|s| s.state != SlotState::Working) {
            if s.state == SlotState::Unavailable {
                v.notes.push(format!("INSPECTOR_UNAVAILABLE|{}|{}", s.first, s.perspective.name));
            }
        }
        ctx.decide(DecisionKind::Escalation, format!("Auditor unavailable; lead-derived verdict {}", v.verdict));
        ctx.session_line(format!("Lead-derived verdict: {} (AUDITOR_UNAVAILABLE)", v.verdict));
        self.finish(ctx, v, true);
    }

    fn finish(&mut self, ctx: &mut Ctx, verdict: AuditVerdict, lead_derived: bool) {
        self.auditor_phase = AuditorPhase::Done;
        // Inspectors still working are no longer needed.
        for s in &self.slots {
            if matches!(s.state, SlotState::Working | SlotState::Silent(_)) {
                shut_down_if_live(ctx, &s.current);
            }
        }
        let reports = self
            .slots
            .iter()
            .filter_map(|s| match &s.state {
                SlotState::Reported(r) => Some((s.current.clone(), r.clone())),
                _ => None,
            })
            .collect();
        let unavailable = self
            .slots
            .iter()
            .filter(|s| matches!(s.state, SlotState::Unavailable | SlotState::Silent(_)))
            .map(|s| s.first.clone())
            .collect();
        self.end = Some(PipelineEnd::Verdict(Box::new(PipelineResult { verdict, lead_derived, reports, unavailable })));
    }
}
