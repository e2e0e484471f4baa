//! Unit tests of the review stage: every recovery path, consensus and the
//! auto-fix loop, with virtual time.

use jiff::{SignedDuration, Timestamp};
use troupe_core::phase::Phase;
use troupe_core::role::Role;
use troupe_core::spec::Spec;

use crate::machine::{
    Command, Event, GateKind, GateRunId, GateVerdict, Lead, LeadConfig, Outcome, PlanLoad, RunStats, SpawnRequest,
    Stage,
};
use crate::plan::{BuildPlan, PlanGroup};
use crate::review::{NUDGE, RECOVERY_MODE, ReviewCommand, ReviewKind, ReviewOptions, ReviewStage};

struct H {
    lead: Lead,
    now: Timestamp,
    all: Vec<Command>,
    cap: usize,
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn spec(phase: Phase) -> Spec {
    let mut s = Spec::new("login", t0());
    s.mark_design_generated(t0(), "d").unwrap();
    if phase == Phase::ImplementationComplete {
        s.mark_implementation_complete(t0(), &["src/a.rs".into()], "i").unwrap();
    }
    s
}

const INSPECTOR_OK: &str = "VERDICT:GO\nSCOPE:login\nISSUES:\nH|security|src/a.rs:3|token logged\n";
const GO: &str = "Done.\nVERDICT:GO\nSCOPE:login\n";
const NO_GO: &str = "VERDICT:NO-GO\nSCOPE:login\nVERIFIED:\ninspector-rules-1|C|security|src/a.rs:3|token logged\n";

impl H {
    fn new(spec: Spec, kind: ReviewKind, opts: ReviewOptions, config: LeadConfig) -> (H, Vec<Command>) {
        let cap = config.max_concurrent;
        let stage: Box<dyn Stage> = Box::new(ReviewStage::new(kind, opts));
        let mut h = H { lead: Lead::with_stages(spec, config, t0(), [stage].into()), now: t0(), all: Vec::new(), cap };
        h.lead.start(h.now);
        let out = h.drain();
        (h, out)
    }

    fn plain(spec: Spec, kind: ReviewKind) -> (H, Vec<Command>) {
        H::new(spec, kind, ReviewOptions::default(), LeadConfig { commit: false, ..LeadConfig::default() })
    }

    fn drain(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        while let Some(c) = self.lead.poll_command() {
            out.push(c);
        }
        assert!(
            self.lead.ctx().running_count() <= self.cap,
            "{} teammates run, over the cap of {}",
            self.lead.ctx().running_count(),
            self.cap
        );
        self.all.extend(out.iter().cloned());
        out
    }

    fn ev(&mut self, e: Event) -> Vec<Command> {
        self.now += SignedDuration::from_millis(10);
        self.lead.handle_event(e, self.now);
        self.drain()
    }

    fn advance(&mut self, secs: i64) -> Vec<Command> {
        self.now += SignedDuration::from_secs(secs);
        if self.lead.poll_timeout().is_some_and(|t| t <= self.now) {
            self.lead.handle_timeout(self.now);
        }
        self.drain()
    }

    fn finish(&mut self, id: &str, report: Option<&str>) -> Vec<Command> {
        self.ev(Event::TeammateFinished { id: id.into(), report: report.map(Into::into), stats: session(id) })
    }

    fn exit(&mut self, id: &str, stats: RunStats) -> Vec<Command> {
        self.ev(Event::TeammateExited { id: id.into(), error: "terminated".into(), stats })
    }

    fn active(&mut self, id: &str) -> Vec<Command> {
        self.ev(Event::TeammateActivity { id: id.into(), tool: None })
    }
}

/// Stats of a run whose engine named its session (every real engine does).
fn session(id: &str) -> RunStats {
    RunStats { session_id: Some(format!("session-{id}")), ..RunStats::default() }
}

fn decisions(cmds: &[Command]) -> Vec<String> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::RecordDecision { summary, .. } => Some(summary.clone()),
            _ => None,
        })
        .collect()
}

fn spawns(cmds: &[Command]) -> Vec<SpawnRequest> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Spawn(r) => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

fn of_role(cmds: &[Command], role: Role) -> Vec<SpawnRequest> {
    spawns(cmds).into_iter().filter(|s| s.role == role).collect()
}

fn finish_of(cmds: &[Command]) -> Option<Outcome> {
    cmds.iter().find_map(|c| match c {
        Command::Finish(o) => Some(o.clone()),
        _ => None,
    })
}

fn reviews(cmds: &[Command]) -> Vec<ReviewCommand> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Review(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn messages(cmds: &[Command]) -> Vec<(String, String, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::SendMessage { to, kind, body, .. } => Some((to.clone(), kind.clone(), body.clone())),
            _ => None,
        })
        .collect()
}

fn verdicts_entry(cmds: &[Command]) -> String {
    reviews(cmds)
        .into_iter()
        .find_map(|r| match r {
            ReviewCommand::AppendVerdicts { entry, .. } => Some(entry),
            _ => None,
        })
        .expect("a verdicts.md entry")
}

fn written(cmds: &[Command], name: &str) -> Option<(String, bool)> {
    reviews(cmds).into_iter().find_map(|r| match r {
        ReviewCommand::WriteActive { file, contents, overwrite, .. } if file == name => Some((contents, overwrite)),
        _ => None,
    })
}

/// Start a plain review and let every Inspector report; returns (inspectors, auditor).
fn all_inspectors_report(h: &mut H, out: &[Command]) -> (Vec<SpawnRequest>, SpawnRequest) {
    let inspectors = of_role(out, Role::Inspector);
    let auditor = of_role(out, Role::Auditor).remove(0);
    for i in &inspectors {
        h.finish(&i.id, Some(INSPECTOR_OK));
    }
    (inspectors, auditor)
}

// ---------------- the plain pipeline ----------------

#[test]
fn design_review_spawns_six_inspectors_and_the_auditor_at_once_and_goes_on_after_go() {
    let (mut h, out) =
        H::new(spec(Phase::DesignGenerated), ReviewKind::Design, ReviewOptions::default(), LeadConfig::default());
    assert_eq!(reviews(&out)[0], ReviewCommand::BeginRound { feature: "login".into(), seq: 1 });
    let inspectors = of_role(&out, Role::Inspector);
    assert_eq!(inspectors.len(), 6);
    let names: Vec<&str> = inspectors.iter().map(|i| i.id.as_str()).collect();
    assert!(names[0].starts_with("inspector-rules-"), "{names:?}");
    assert_eq!(inspectors[0].context.read[0], ".troupe/roles/inspectors/rules.md");
    assert_eq!(inspectors[0].context.write, vec![format!(".troupe/specs/login/reviews/active/{}.cpf", names[0])]);
    assert_eq!(inspectors[0].engine_phase, "document-review");
    let auditor = of_role(&out, Role::Auditor).remove(0);
    assert!(auditor.context.instructions[0].contains(names[5]), "the Auditor knows whom to wait for");
    assert!(inspectors[0].context.instructions.iter().any(|i| i.contains(&auditor.id) && i.contains("send_message")));
    // What the review stage tells each teammate is what troupe accepts (issue 11).
    inspectors.iter().chain([&auditor]).for_each(crate::roles::assert_contract);

    for i in &inspectors {
        h.finish(&i.id, Some(INSPECTOR_OK));
    }
    let out = h.finish(&auditor.id, Some(GO));
    assert_eq!(written(&out, "verdict.cpf").map(|w| w.1), Some(false), "the Auditor's own file wins");
    assert!(reviews(&out).contains(&ReviewCommand::Archive { feature: "login".into(), seq: 1 }));
    let entry = verdicts_entry(&out);
    assert!(entry.starts_with("## [B1] design | 2026-01-01T00:00:00.07Z | v1.0 | runs:1 | threshold:1/1\n"), "{entry}");
    assert!(entry.contains("- verdict: GO\n- verified: C:0 H:0 M:0 L:0"), "{entry}");
    assert!(out.contains(&Command::Commit { message: "login: design review GO (B1)".into() }));
    let out = h.ev(Event::Committed { sha: Some("abc".into()) });
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn dead_code_review_has_four_inspectors() {
    let (_, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::DeadCode);
    let names: Vec<String> = of_role(&out, Role::Inspector).iter().map(|i| i.id.clone()).collect();
    assert_eq!(names.len(), 4);
    for (n, p) in names.iter().zip(["unused-settings", "dead-code", "stale-specs", "orphan-tests"]) {
        assert!(n.starts_with(&format!("inspector-{p}-")), "{n}");
    }
}

#[test]
fn the_phase_gate_refuses_before_anything_is_spawned() {
    let (_, out) = H::plain(spec(Phase::DesignGenerated), ReviewKind::Impl);
    assert!(spawns(&out).is_empty());
    assert!(matches!(finish_of(&out), Some(Outcome::Refused(m)) if m.contains("review-impl of login needs phase")));
    let mut blocked = Spec::new("login", t0());
    blocked.block(t0(), "payments", "upstream_failure").unwrap();
    let (_, out) = H::plain(blocked, ReviewKind::Design);
    assert_eq!(finish_of(&out), Some(Outcome::Refused("login is blocked by payments".into())));
}

#[test]
fn conditional_goes_on_with_the_findings_in_the_handover_buffer() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let text = "VERDICT:CONDITIONAL\nSCOPE:login\nVERIFIED:\ni1+i2|H|security|src/a.rs:3|token logged\n";
    let out = h.finish(&auditor.id, Some(text));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    assert!(
        h.lead.ctx().buffer().contains(&"review impl B1 CONDITIONAL: H|security|src/a.rs:3|token logged".to_string()),
        "{:?}",
        h.lead.ctx().buffer()
    );
}

// ---------------- Inspector recovery (Spec 10) ----------------

#[test]
fn a_hung_inspector_is_replaced_once_then_the_auditor_is_told_to_proceed_with_n_minus_1() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let inspectors = of_role(&out, Role::Inspector);
    let auditor = of_role(&out, Role::Auditor).remove(0);
    let hung = inspectors[1].clone();
    for i in inspectors.iter().filter(|i| i.id != hung.id) {
        h.finish(&i.id, Some(INSPECTOR_OK));
    }
    h.advance(200);
    h.active(&auditor.id);
    let out = h.advance(101);
    assert!(out.contains(&Command::ShutDown { id: hung.id.clone(), force: false }), "graceful: {out:#?}");
    assert!(of_role(&out, Role::Inspector).is_empty(), "no replacement while it may still run: {out:#?}");
    h.active(&auditor.id);
    let out = h.exit(&hung.id, RunStats::default());
    let retry = of_role(&out, Role::Inspector);
    assert_eq!(retry.len(), 1, "the others all reported: the retry goes at once");
    assert_ne!(retry[0].id, hung.id, "a new name");
    assert!(retry[0].id.starts_with("inspector-testability-"), "the same perspective: {}", retry[0].id);
    assert_eq!(retry[0].attempt, 2);
    assert!(retry[0].context.instructions[0].contains(&hung.id));
    assert!(messages(&out).is_empty(), "no notice before the retry failed");

    h.active(&auditor.id);
    let out =
        h.ev(Event::TeammateExited { id: retry[0].id.clone(), error: "exit 1".into(), stats: RunStats::default() });
    assert_eq!(
        messages(&out),
        vec![(
            auditor.id.clone(),
            "recovery_notice".into(),
            format!("Inspector {} unavailable after retry. Proceed with 5/6 results.", hung.id)
        )]
    );
    assert!(of_role(&out, Role::Inspector).is_empty(), "only one retry");
    let out = h.finish(&auditor.id, Some("VERDICT:GO\nSCOPE:login\nNOTES:\nmissing inspector-testability\n"));
    assert!(verdicts_entry(&out).contains("- verdict: GO"));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn an_inspector_that_ends_without_findings_or_with_garbage_is_retried_and_the_retry_can_succeed() {
    for report in [None, Some("I looked around and everything seems fine!"), Some("VERDICT:MAYBE\n")] {
        let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
        let inspectors = of_role(&out, Role::Inspector);
        let auditor = of_role(&out, Role::Auditor).remove(0);
        let out = h.finish(&inspectors[0].id, report);
        assert!(!out.iter().any(|c| matches!(c, Command::ShutDown { .. })), "it already ended: {out:#?}");
        assert!(spawns(&out).is_empty(), "the others have not reported yet");
        let mut out = Vec::new();
        for i in &inspectors[1..] {
            out = h.finish(&i.id, Some(INSPECTOR_OK));
        }
        let retry = of_role(&out, Role::Inspector).remove(0);
        assert!(retry.id.starts_with("inspector-rules-"));
        assert!(decisions(&out).iter().any(|d| d.contains("5/6 Inspectors reported; retrying")), "{out:#?}");
        h.finish(&retry.id, Some(INSPECTOR_OK));
        let out = h.finish(&auditor.id, Some(GO));
        assert!(messages(&h.all).is_empty(), "no recovery notice when the retry worked");
        assert_eq!(finish_of(&out), Some(Outcome::Completed));
    }
}

#[test]
fn a_crashed_or_unstartable_inspector_is_retried() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let inspectors = of_role(&out, Role::Inspector);
    let out = h.ev(Event::SpawnFailed { id: inspectors[2].id.clone(), error: "no such engine".into() });
    assert!(of_role(&out, Role::Inspector).is_empty());
    let out = h.exit(&inspectors[3].id, RunStats::default());
    assert!(of_role(&out, Role::Inspector).is_empty());
    let mut out = Vec::new();
    for i in [0, 1, 4, 5] {
        out = h.finish(&inspectors[i].id, Some(INSPECTOR_OK));
    }
    let retries: Vec<String> = of_role(&out, Role::Inspector).into_iter().map(|r| r.id).collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries[0].starts_with("inspector-architecture-") && retries[1].starts_with("inspector-consistency-"));
}

#[test]
fn a_silent_inspector_waits_for_the_others_then_is_retried() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let inspectors = of_role(&out, Role::Inspector);
    let auditor = of_role(&out, Role::Auditor).remove(0);
    let hung = inspectors[0].clone();
    h.advance(200);
    for i in inspectors[1..].iter().map(|i| &i.id).chain([&auditor.id]) {
        h.active(i);
    }
    let out = h.advance(101);
    assert!(out.contains(&Command::ShutDown { id: hung.id.clone(), force: false }), "{out:#?}");
    assert!(spawns(&out).is_empty(), "five Inspectors still work: no retry yet");
    assert!(messages(&out).is_empty());
    // Its process ends after the shutdown: nothing more to do about it yet.
    assert!(spawns(&h.exit(&hung.id, RunStats::default())).is_empty());
    for i in &inspectors[1..5] {
        assert!(spawns(&h.finish(&i.id, Some(INSPECTOR_OK))).is_empty());
    }
    let out = h.finish(&inspectors[5].id, Some(INSPECTOR_OK));
    let retry = of_role(&out, Role::Inspector);
    assert_eq!(retry.len(), 1, "the last other Inspector reported: now the retry");
    assert!(retry[0].id.starts_with("inspector-rules-") && retry[0].id != hung.id);
    let d = decisions(&out);
    assert!(
        d.iter().any(|d| d.starts_with(&format!("Inspector {} showed no activity", hung.id))
            && d.contains("5/6 Inspectors reported; retrying its perspective once")),
        "{d:#?}"
    );
    let out = h.exit(&retry[0].id, RunStats::default());
    assert_eq!(
        messages(&out),
        vec![(
            auditor.id.clone(),
            "recovery_notice".into(),
            format!("Inspector {} unavailable after retry. Proceed with 5/6 results.", hung.id)
        )]
    );
}

#[test]
fn two_silent_inspectors_are_retried_together_and_count_down_to_4_of_6() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let inspectors = of_role(&out, Role::Inspector);
    let auditor = of_role(&out, Role::Auditor).remove(0);
    assert!(spawns(&h.finish(&inspectors[0].id, None)).is_empty());
    h.finish(&inspectors[2].id, Some(INSPECTOR_OK));
    assert!(spawns(&h.exit(&inspectors[1].id, RunStats::default())).is_empty());
    let mut out = Vec::new();
    for i in &inspectors[3..] {
        out = h.finish(&i.id, Some(INSPECTOR_OK));
    }
    let retries = of_role(&out, Role::Inspector);
    assert_eq!(retries.len(), 2, "both retried once the other four reported");
    assert!(retries[0].id.starts_with("inspector-rules-") && retries[1].id.starts_with("inspector-testability-"));
    let mut notices = Vec::new();
    for r in &retries {
        notices.extend(messages(&h.finish(&r.id, None)).into_iter().map(|m| m.2));
    }
    assert_eq!(
        notices,
        vec![
            format!("Inspector {} unavailable after retry. Proceed with 5/6 results.", inspectors[0].id),
            format!("Inspector {} unavailable after retry. Proceed with 4/6 results.", inspectors[1].id),
        ]
    );
    let out = h.finish(&auditor.id, Some(GO));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn when_every_inspector_fails_they_are_all_retried() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::DeadCode);
    let inspectors = of_role(&out, Role::Inspector);
    let mut out = Vec::new();
    for i in &inspectors {
        out = h.finish(&i.id, None);
    }
    assert_eq!(of_role(&out, Role::Inspector).len(), 4, "no one reported, no one works: retry all");
    assert!(decisions(&out).iter().all(|d| !d.contains("retrying") || d.contains("0/4 Inspectors reported")));
}

// ---------------- Auditor recovery (Spec 11) ----------------

#[test]
fn an_idle_auditor_is_nudged_and_its_verdict_is_then_taken() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some("I merged the findings."));
    assert_eq!(out.iter().filter(|c| matches!(c, Command::Resume { .. })).count(), 1);
    assert!(out.contains(&Command::Resume { id: auditor.id.clone(), prompt: NUDGE.into() }));
    assert_eq!(
        NUDGE,
        "Output your verdict now with findings verified so far. Use NOTES: PARTIAL_VERIFICATION if incomplete."
    );
    let out = h.finish(&auditor.id, Some("VERDICT:GO\nSCOPE:login\nNOTES:\nPARTIAL_VERIFICATION\n"));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    assert!(spawns(&out).is_empty());
}

#[test]
fn a_hung_auditor_is_shut_down_gracefully_then_nudged() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.advance(301);
    assert!(out.contains(&Command::ShutDown { id: auditor.id.clone(), force: false }), "graceful: {out:#?}");
    assert!(!out.iter().any(|c| matches!(c, Command::Resume { .. })), "not while its process may run: {out:#?}");
    assert!(spawns(&out).is_empty());
    assert!(decisions(&out).iter().any(|d| d.contains("asking it to stop before anything replaces it")), "{out:#?}");
    // The process ends (it approved, or was forced after the shutdown timeout).
    let out = h.exit(&auditor.id, session(&auditor.id));
    assert_eq!(out.iter().filter(|c| matches!(c, Command::Resume { .. })).count(), 1);
    assert!(out.contains(&Command::Resume { id: auditor.id.clone(), prompt: NUDGE.into() }), "{out:#?}");
    let out = h.finish(&auditor.id, Some("VERDICT:GO\nSCOPE:login\nNOTES:\nPARTIAL_VERIFICATION\n"));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    assert!(of_role(&h.all, Role::Auditor).len() == 1, "nudged, never replaced");
}

#[test]
fn a_hung_auditor_without_a_session_cannot_be_nudged_and_is_replaced_in_recovery_mode() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    h.advance(301);
    let out = h.exit(&auditor.id, RunStats::default());
    assert!(!out.iter().any(|c| matches!(c, Command::Resume { .. })), "{out:#?}");
    assert!(
        decisions(&out).iter().any(|d| d.contains("no session to resume, so it cannot be nudged")
            && d.ends_with("respawning in RECOVERY MODE")),
        "{out:#?}"
    );
    assert_eq!(of_role(&out, Role::Auditor)[0].context.instructions[0], RECOVERY_MODE);
}

#[test]
fn a_hung_auditor_that_ends_with_its_verdict_while_stopping_is_taken() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    h.advance(301);
    let out = h.finish(&auditor.id, Some(GO));
    assert!(verdicts_entry(&out).contains("- verdict: GO"));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn an_auditor_that_ends_without_a_session_is_not_nudged() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.ev(Event::TeammateFinished { id: auditor.id.clone(), report: None, stats: RunStats::default() });
    assert!(!out.iter().any(|c| matches!(c, Command::Resume { .. })));
    assert_eq!(of_role(&out, Role::Auditor)[0].context.instructions[0], RECOVERY_MODE);
}

#[test]
fn a_hung_auditor_that_stays_hung_after_the_nudge_is_replaced() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    h.advance(301);
    h.exit(&auditor.id, session(&auditor.id));
    let out = h.advance(301);
    assert!(out.contains(&Command::ShutDown { id: auditor.id.clone(), force: false }));
    assert!(of_role(&out, Role::Auditor).is_empty(), "not beside the hung one: {out:#?}");
    let out = h.exit(&auditor.id, session(&auditor.id));
    assert_eq!(of_role(&out, Role::Auditor)[0].context.instructions[0], RECOVERY_MODE);
}

#[test]
fn a_nudged_auditor_without_verdict_is_replaced_in_recovery_mode_with_the_cpf_in_context() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (inspectors, auditor) = all_inspectors_report(&mut h, &out);
    h.finish(&auditor.id, None);
    let out = h.finish(&auditor.id, Some("still thinking"));
    let second = of_role(&out, Role::Auditor);
    assert_eq!(second.len(), 1);
    let second = &second[0];
    assert_ne!(second.id, auditor.id);
    assert_eq!(second.attempt, 2);
    assert_eq!(
        second.context.instructions[0],
        "RECOVERY MODE: Inspector results in spawn context. Skip SendMessage wait. Prioritize verdict output."
    );
    assert_eq!(second.context.instructions[0], RECOVERY_MODE);
    for i in &inspectors {
        assert!(
            second
                .context
                .instructions
                .iter()
                .any(|x| x.contains(&i.id) && x.contains("H|security|src/a.rs:3|token logged")),
            "CPF of {} embedded",
            i.id
        );
    }
    let out = h.finish(&second.id, Some(GO));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn when_the_recovery_auditor_fails_too_the_lead_derives_a_conservative_verdict() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    h.exit(&auditor.id, session(&auditor.id));
    let out = h.finish(&auditor.id, None);
    let second = of_role(&out, Role::Auditor).remove(0);
    h.active(&second.id);
    let out = h.advance(301);
    assert!(written(&out, "verdict.cpf").is_none(), "not while it may still write: {out:#?}");
    let out = h.exit(&second.id, RunStats::default());
    let (text, overwrite) = written(&out, "verdict.cpf").expect("the Lead writes verdict.cpf");
    assert!(overwrite);
    assert!(text.starts_with("VERDICT:CONDITIONAL\n"), "High findings only: {text}");
    assert!(text.contains("NOTES:\nAUDITOR_UNAVAILABLE|lead-derived verdict"), "{text}");
    let entry = verdicts_entry(&out);
    assert!(entry.contains("- note: AUDITOR_UNAVAILABLE|lead-derived verdict"), "{entry}");
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn a_recovery_auditor_waits_until_every_inspector_settled() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let inspectors = of_role(&out, Role::Inspector);
    let auditor = of_role(&out, Role::Auditor).remove(0);
    for i in &inspectors[1..] {
        h.finish(&i.id, Some(INSPECTOR_OK));
    }
    h.finish(&auditor.id, None);
    let out = h.finish(&auditor.id, None);
    assert!(of_role(&out, Role::Auditor).is_empty(), "inspector 0 still works");
    let out = h.finish(&inspectors[0].id, Some(INSPECTOR_OK));
    assert_eq!(of_role(&out, Role::Auditor).len(), 1);
}

#[test]
fn an_auditor_that_cannot_start_goes_straight_to_recovery_mode() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.ev(Event::SpawnFailed { id: auditor.id.clone(), error: "no engine".into() });
    assert!(!out.iter().any(|c| matches!(c, Command::Resume { .. })));
    assert_eq!(of_role(&out, Role::Auditor)[0].context.instructions[0], RECOVERY_MODE);
}

#[test]
fn with_no_findings_and_no_auditor_the_review_escalates() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::DeadCode);
    let inspectors = of_role(&out, Role::Inspector);
    let auditor = of_role(&out, Role::Auditor).remove(0);
    let mut out = Vec::new();
    for i in &inspectors {
        out = h.finish(&i.id, None);
    }
    for r in of_role(&out, Role::Inspector) {
        h.finish(&r.id, None);
    }
    h.finish(&auditor.id, None);
    let out = h.finish(&auditor.id, None);
    assert!(of_role(&out, Role::Auditor).is_empty(), "nothing to embed");
    assert!(reviews(&out).contains(&ReviewCommand::Archive { feature: "login".into(), seq: 1 }));
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert!(h.lead.ctx().escalations()[0].0.contains("produced no verdict"));
}

// ---------------- verdicts and the auto-fix loop ----------------

#[test]
fn design_no_go_respawns_the_architect_with_the_findings_then_reviews_again() {
    let (mut h, out) = H::plain(spec(Phase::DesignGenerated), ReviewKind::Design);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(NO_GO));
    assert!(verdicts_entry(&out).contains("- action: auto-fix round 1/5"));
    let saved = out.iter().find_map(|c| match c {
        Command::SaveSpec(s) => Some(s.clone()),
        _ => None,
    });
    assert_eq!(saved.unwrap().orchestration.retry_count, 1);
    let arch = of_role(&out, Role::Architect).remove(0);
    assert!(arch.context.instructions.iter().any(|i| i.contains("C|security|src/a.rs:3|token logged")));
    assert!(arch.context.write.contains(&".troupe/specs/login/design.md".to_string()));
    let out = h.finish(&arch.id, Some("ARCHITECT_COMPLETE\nFeature: login\n"));
    assert!(reviews(&out).contains(&ReviewCommand::BeginRound { feature: "login".into(), seq: 2 }));
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(GO));
    assert!(verdicts_entry(&out).starts_with("## [B2] design"));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    assert_eq!(h.lead.ctx().spec().orchestration.retry_count, 1);
}

#[test]
fn no_go_after_five_rounds_escalates_with_the_open_findings() {
    let mut s = spec(Phase::DesignGenerated);
    s.orchestration.retry_count = 5;
    let (mut h, out) = H::plain(s, ReviewKind::Design);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(NO_GO));
    assert!(spawns(&out).is_empty());
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    let (reason, _) = &h.lead.ctx().escalations()[0];
    assert!(reason.contains("after 5 auto-fix rounds") && reason.contains("src/a.rs:3"), "{reason}");
}

#[test]
fn impl_no_go_respawns_the_builders_of_the_affected_groups() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let text = "VERDICT:NO-GO\nSCOPE:login\nVERIFIED:\ni1|C|security|src/a.rs:3|token logged\ni2|H|naming|src/c.rs|bad\ni3|M|docs|README.md|stale\n";
    let out = h.finish(&auditor.id, Some(text));
    assert!(out.iter().any(|c| c.name() == "load-plan"));
    let plan = BuildPlan {
        tasks: vec![],
        groups: vec![
            PlanGroup {
                id: "G1".into(),
                wave: 1,
                tasks: vec![],
                files: vec!["src/a.rs".into(), "tests/a.rs".into()],
                reported_files: vec![],
            },
            PlanGroup {
                id: "G2".into(),
                wave: 1,
                tasks: vec![],
                files: vec!["src/b.rs".into()],
                reported_files: vec![],
            },
            PlanGroup {
                id: "G3".into(),
                wave: 2,
                tasks: vec![],
                files: vec!["src/c*.rs".into()],
                reported_files: vec![],
            },
        ],
    };
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(plan)));
    let b = of_role(&out, Role::Builder);
    assert_eq!(b.len(), 3, "{b:#?}");
    b.iter().for_each(crate::roles::assert_contract);
    assert_eq!(b[0].group.as_deref(), Some("G1"));
    assert_eq!(b[0].context.write, vec!["src/a.rs", "tests/a.rs"]);
    assert!(b[0].context.instructions[0].contains("src/a.rs:3"));
    assert!(!b[0].context.instructions[0].contains("src/c.rs"));
    assert_eq!(b[1].group.as_deref(), Some("G3"));
    assert_eq!(b[2].group, None);
    assert_eq!(b[2].context.write, vec!["README.md"]);
    // Each fix passes the quality gate, one at a time in arrival order, then the
    // whole tree is gated once more, and only then is the feature reviewed again.
    let mut gates = Vec::new();
    for builder in &b {
        let out = h.finish(&builder.id, Some(FIX_OK));
        assert!(reviews(&out).is_empty(), "no new round before the gates");
        gates.extend(gate_runs(&out));
    }
    assert_eq!(gates.len(), 1, "one gate at a time: {gates:?}");
    let mut out = Vec::new();
    for _ in 0..3 {
        let (run, kind) = gates.pop().expect("the next fixer's gate");
        assert!(matches!(kind, GateKind::TaskCompleted { .. }), "{kind:?}");
        out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: "ok".into() });
        gates.extend(gate_runs(&out));
    }
    let (run, kind) = gates.pop().expect("the final gate");
    assert_eq!(kind, GateKind::Final);
    assert!(reviews(&out).is_empty(), "no new round before the final gate");
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: "ok".into() });
    assert!(reviews(&out).contains(&ReviewCommand::BeginRound { feature: "login".into(), seq: 2 }));
}

const FIX_OK: &str =
    "BUILDER_COMPLETE\nFeature: login\nTasks completed: none\nFiles: src/a.rs\nTests: 3 passed\nStatus: done\n";

fn gate_runs(cmds: &[Command]) -> Vec<(GateRunId, GateKind)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::RunGate { run, kind } => Some((*run, kind.clone())),
            _ => None,
        })
        .collect()
}

/// An impl NO-GO whose one fix Builder (group G1) has just been spawned.
fn impl_fix_round(config: LeadConfig) -> (H, SpawnRequest) {
    let (mut h, out) = H::new(spec(Phase::ImplementationComplete), ReviewKind::Impl, ReviewOptions::default(), config);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    h.finish(&auditor.id, Some(NO_GO));
    let plan = BuildPlan {
        tasks: vec![],
        groups: vec![PlanGroup {
            id: "G1".into(),
            wave: 1,
            tasks: vec![],
            files: vec!["src/a.rs".into()],
            reported_files: vec![],
        }],
    };
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(plan)));
    let fixer = of_role(&out, Role::Builder).remove(0);
    (h, fixer)
}

fn commits(cmds: &[Command]) -> usize {
    cmds.iter().filter(|c| matches!(c, Command::Commit { .. })).count()
}

#[test]
fn a_fix_that_breaks_the_tests_is_sent_back_then_escalated_never_reviewed_or_committed() {
    let config = LeadConfig { gate_fix_attempts: 1, ..LeadConfig::default() };
    let (mut h, fixer) = impl_fix_round(config);
    let out = h.finish(&fixer.id, Some(FIX_OK));
    let (run, _) = gate_runs(&out).pop().expect("the fix is gated");
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "$ sh check.sh\n1 failed".into() });
    let resumed = out.iter().find_map(|c| match c {
        Command::Resume { id, prompt } => Some((id.clone(), prompt.clone())),
        _ => None,
    });
    let (id, prompt) = resumed.expect("the fixer is sent back with the gate output");
    assert_eq!(id, fixer.id);
    assert!(prompt.contains("1 failed"), "{prompt}");
    let out = h.finish(&fixer.id, Some(FIX_OK));
    let (run, _) = gate_runs(&out).pop().expect("the second try is gated too");
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "$ sh check.sh\n1 failed".into() });
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert_eq!(commits(&h.all), 0, "a red fix is never committed");
    assert!(!reviews(&h.all).contains(&ReviewCommand::BeginRound { feature: "login".into(), seq: 2 }));
    let (reason, _) = &h.lead.ctx().escalations()[0];
    assert!(reason.contains("still fails the quality gate") && reason.contains("1 failed"), "{reason}");
}

#[test]
fn a_red_tree_after_the_fixes_escalates_before_the_next_round_and_commits_nothing() {
    let (mut h, fixer) = impl_fix_round(LeadConfig::default());
    let out = h.finish(&fixer.id, Some(FIX_OK));
    let (run, _) = gate_runs(&out).pop().unwrap();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: "ok".into() });
    let (run, kind) = gate_runs(&out).pop().expect("the final gate");
    assert_eq!(kind, GateKind::Final);
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "$ sh check.sh\n2 failed".into() });
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert_eq!(commits(&h.all), 0);
    assert!(h.lead.ctx().escalations()[0].0.contains("2 failed"));
}

#[test]
fn a_failed_fixer_escalates() {
    let (mut h, out) = H::plain(spec(Phase::DesignGenerated), ReviewKind::Design);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(NO_GO));
    let arch = of_role(&out, Role::Architect).remove(0);
    let out = h.finish(&arch.id, Some("ARCHITECT_BLOCKED\nBlocker: the spec contradicts itself\n"));
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert!(h.lead.ctx().escalations()[0].0.contains("the spec contradicts itself"));
}

#[test]
fn spec_update_on_a_design_review_revises_the_design_with_the_feedback() {
    let (mut h, out) = H::plain(spec(Phase::DesignGenerated), ReviewKind::Design);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let text = "VERDICT:SPEC-UPDATE-NEEDED\nSCOPE:login\nSPEC_FEEDBACK:\ndesign|login|session length is undefined\n";
    let out = h.finish(&auditor.id, Some(text));
    assert_eq!(h.lead.ctx().spec().orchestration.spec_update_count, 1);
    let arch = of_role(&out, Role::Architect).remove(0);
    assert!(arch.context.instructions.iter().any(|i| i.contains("session length is undefined")));
    let out = h.finish(&arch.id, Some("ARCHITECT_COMPLETE\n"));
    assert!(reviews(&out).contains(&ReviewCommand::BeginRound { feature: "login".into(), seq: 2 }));
}

#[test]
fn spec_update_on_an_impl_review_goes_back_through_design_revision_and_implementation() {
    let (mut h, out) = H::plain(spec(Phase::ImplementationComplete), ReviewKind::Impl);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some("VERDICT:SPEC-UPDATE-NEEDED\nSCOPE:login\n"));
    let s = h.lead.ctx().spec();
    assert_eq!(s.phase, Phase::DesignGenerated);
    assert_eq!(s.version, "1.1");
    let arch = of_role(&out, Role::Architect).remove(0);
    let out = h.finish(&arch.id, Some("ARCHITECT_COMPLETE\n"));
    assert_eq!(h.lead.ctx().spec().version_refs.design.as_deref(), Some("1.1"));
    assert_eq!(of_role(&out, Role::TaskGenerator).len(), 1, "the implementation is redone: {out:#?}");
}

#[test]
fn spec_update_past_two_escalates() {
    let mut s = spec(Phase::DesignGenerated);
    s.orchestration.spec_update_count = 2;
    let (mut h, out) = H::plain(s, ReviewKind::Design);
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some("VERDICT:SPEC-UPDATE-NEEDED\nSCOPE:login\n"));
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
}

#[test]
fn no_fix_escalates_a_no_go_without_counting() {
    let opts = ReviewOptions { auto_fix: false, ..ReviewOptions::default() };
    let (mut h, out) = H::new(
        spec(Phase::DesignGenerated),
        ReviewKind::Design,
        opts,
        LeadConfig { commit: false, ..LeadConfig::default() },
    );
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(NO_GO));
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert_eq!(h.lead.ctx().spec().orchestration.retry_count, 0);
    assert!(h.lead.ctx().buffer().iter().any(|b| b.contains("open: C|security|src/a.rs:3")));
}

// ---------------- consensus (Spec 9.5) ----------------

#[test]
fn consensus_of_three_queues_over_the_cap_and_aggregates_by_majority() {
    let opts = ReviewOptions { consensus: 3, ..ReviewOptions::default() };
    let config = LeadConfig { max_concurrent: 10, commit: false, ..LeadConfig::default() };
    let (mut h, out) = H::new(spec(Phase::ImplementationComplete), ReviewKind::Impl, opts, config);
    assert_eq!(spawns(&out).len(), 10, "21 teammates, 10 at a time");
    let mut started: Vec<SpawnRequest> = spawns(&out);
    let mut done = 0;
    // Finish whatever runs, in spawn order, until every pipeline's teammates ran.
    while done < started.len() {
        let s = started[done].clone();
        done += 1;
        let report = match s.role {
            Role::Inspector => INSPECTOR_OK,
            _ if s.id.contains("-p3") => NO_GO,
            _ => GO,
        };
        let out = h.finish(&s.id, Some(report));
        started.extend(spawns(&out));
        if finish_of(&out).is_some() {
            break;
        }
    }
    assert_eq!(started.len(), 21);
    assert!(started.iter().any(|s| s.id.starts_with("inspector-p3-holistic-")), "ids name the pipeline");
    let all = h.all.clone();
    for p in ["p1", "p2", "p3"] {
        assert!(written(&all, &format!("verdict-{p}.cpf")).is_some(), "{p}");
    }
    let (aggregate, overwrite) = written(&all, "verdict.cpf").unwrap();
    assert!(overwrite);
    assert!(aggregate.starts_with("VERDICT:GO\n"), "{aggregate}");
    assert!(aggregate.contains("CONSENSUS|runs:3 | threshold:2/3|GO=2 NO-GO=1"), "{aggregate}");
    assert!(verdicts_entry(&all).starts_with("## [B1] impl | "));
    assert!(verdicts_entry(&all).contains("| runs:3 | threshold:2/3\n"));
    assert_eq!(finish_of(&all), Some(Outcome::Completed));
}

#[test]
fn consensus_threshold_is_validated() {
    let opts = ReviewOptions { consensus: 2, threshold: Some(3), ..ReviewOptions::default() };
    let (_, out) = H::new(spec(Phase::ImplementationComplete), ReviewKind::Impl, opts, LeadConfig::default());
    assert!(matches!(finish_of(&out), Some(Outcome::Refused(m)) if m.contains("--threshold 3")));
    assert!(spawns(&out).is_empty());
}

// ---------------- in `troupe run` ----------------

#[test]
fn run_with_reviews_reviews_the_design_before_implementing_and_numbers_rounds_across_reviews() {
    let opts = ReviewOptions { first_seq: 4, ..ReviewOptions::default() };
    let config = LeadConfig { commit: false, ..LeadConfig::default() };
    let mut lead = Lead::new(Spec::new("login", t0()), crate::machine::Job::RunReviewed(opts), config, t0());
    lead.start(t0());
    let mut h = H { lead, now: t0(), all: Vec::new(), cap: 24 };
    let out = h.drain();
    let arch = of_role(&out, Role::Architect).remove(0);
    h.finish(&arch.id, Some("ARCHITECT_COMPLETE\nFeature: login\nSummary: d\n"));
    let out = h.ev(Event::ArtifactsChecked { missing: vec![] });
    assert!(reviews(&out).contains(&ReviewCommand::BeginRound { feature: "login".into(), seq: 4 }), "{out:#?}");
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(NO_GO));
    let fixer = of_role(&out, Role::Architect).remove(0);
    let out = h.finish(&fixer.id, Some("ARCHITECT_COMPLETE\n"));
    assert!(reviews(&out).contains(&ReviewCommand::BeginRound { feature: "login".into(), seq: 5 }));
    let (_, auditor) = all_inspectors_report(&mut h, &out);
    let out = h.finish(&auditor.id, Some(GO));
    assert_eq!(of_role(&out, Role::TaskGenerator).len(), 1, "implementation starts after the design review: {out:#?}");
}

#[test]
fn a_roadmap_feature_commits_as_its_wave() {
    let job = crate::machine::Job::InRoadmap { wave: 2, reviews: None };
    let mut lead = Lead::new(Spec::new("login", t0()), job, LeadConfig::default(), t0());
    lead.start(t0());
    let mut h = H { lead, now: t0(), all: Vec::new(), cap: 24 };
    let out = h.drain();
    let arch = of_role(&out, Role::Architect).remove(0);
    h.finish(&arch.id, Some("ARCHITECT_COMPLETE\nFeature: login\nSummary: d\n"));
    let out = h.ev(Event::ArtifactsChecked { missing: vec![] });
    let commit = out.iter().find_map(|c| match c {
        Command::Commit { message } => Some(message.clone()),
        _ => None,
    });
    assert!(commit.as_deref().is_some_and(|m| m.starts_with("Wave 2: ")), "{commit:?}");
}

#[test]
fn a_fix_rounds_gate_that_cannot_run_is_escalated_never_sent_back() {
    let (mut h, fixer) = impl_fix_round(LeadConfig::default());
    let out = h.finish(&fixer.id, Some(FIX_OK));
    let (run, _) = gate_runs(&out).pop().unwrap();
    let output = "Test `pytest` could not run (exit 127):\nsh: pytest: not found".to_string();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Environment, output });
    assert!(!out.iter().any(|c| matches!(c, Command::Resume { .. })), "nobody is asked to fix the environment");
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert_eq!(commits(&h.all), 0);
    assert!(h.lead.ctx().escalations()[0].0.contains("could not run"));
}
