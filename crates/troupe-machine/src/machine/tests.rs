//! Unit tests of the machine: every branch of the build path, with virtual time.

use jiff::{SignedDuration, Timestamp};
use troupe_core::phase::Phase;
use troupe_core::role::Role;
use troupe_core::spec::{REASON_UPSTREAM_FAILURE, Spec};

use super::*;
use crate::plan::{BuildPlan, PlanGroup, PlanTask};

struct H {
    lead: Lead,
    now: Timestamp,
    /// Everything emitted so far.
    all: Vec<Command>,
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn design_generated(feature: &str) -> Spec {
    let mut s = Spec::new(feature, t0());
    s.mark_design_generated(t0(), "d").unwrap();
    s
}

impl H {
    fn new(spec: Spec, job: Job, config: LeadConfig) -> (H, Vec<Command>) {
        let mut h = H { lead: Lead::new(spec, job, config, t0()), now: t0(), all: Vec::new() };
        h.lead.start(h.now);
        let out = h.drain();
        (h, out)
    }

    fn drain(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        while let Some(c) = self.lead.poll_command() {
            out.push(c);
        }
        self.all.extend(out.iter().cloned());
        out
    }

    fn ev(&mut self, e: Event) -> Vec<Command> {
        self.now += SignedDuration::from_millis(10);
        self.lead.handle_event(e, self.now);
        self.drain()
    }

    /// Advance virtual time by `secs`, firing the timeout if it is due.
    fn advance(&mut self, secs: i64) -> Vec<Command> {
        self.now += SignedDuration::from_secs(secs);
        if self.lead.poll_timeout().is_some_and(|t| t <= self.now) {
            self.lead.handle_timeout(self.now);
        }
        self.drain()
    }

    fn finish(&mut self, id: &str, report: &str) -> Vec<Command> {
        self.ev(Event::TeammateFinished { id: id.into(), report: Some(report.into()), stats: RunStats::default() })
    }
}

/// `id`'s process started and printed something: from now on its hang
/// timeout applies (before, the start-up allowance).
fn spoke(h: &mut H, id: &str) {
    h.ev(Event::TeammateStarted { id: id.into() });
    h.ev(Event::TeammateActivity { id: id.into(), tool: None });
}

fn spawns(cmds: &[Command]) -> Vec<SpawnRequest> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Spawn(r) => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

fn one_spawn(cmds: &[Command], role: Role) -> SpawnRequest {
    let s = spawns(cmds);
    assert_eq!(s.len(), 1, "expected one spawn in {cmds:#?}");
    assert_eq!(s[0].role, role);
    s[0].clone()
}

fn gate_run(cmds: &[Command]) -> Option<(GateRunId, GateKind)> {
    cmds.iter().find_map(|c| match c {
        Command::RunGate { run, kind } => Some((*run, kind.clone())),
        _ => None,
    })
}

fn finish_of(cmds: &[Command]) -> Option<Outcome> {
    cmds.iter().find_map(|c| match c {
        Command::Finish(o) => Some(o.clone()),
        _ => None,
    })
}

fn saved_spec(cmds: &[Command]) -> Option<Spec> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SaveSpec(s) => Some((**s).clone()),
        _ => None,
    })
}

fn has(cmds: &[Command], name: &str) -> bool {
    cmds.iter().any(|c| c.name() == name)
}

const ARCH_OK: &str =
    "ARCHITECT_COMPLETE\nFeature: login\nArtifacts: design.md, research.md\nSummary: login with sessions\n";
const TG_OK: &str = "TASKGEN_COMPLETE\nFeature: login\nTasks: 3\nWaves: 2\n";

fn builder_ok(tasks: &str, files: &str) -> String {
    format!(
        "BUILDER_COMPLETE\nFeature: login\nTasks completed: {tasks}\nFiles: {files}\nTests: 2 passed\nStatus: done\n[PATTERN] small modules\n"
    )
}

fn task(id: &str, depends: &[&str]) -> PlanTask {
    PlanTask {
        id: id.into(),
        summary: format!("task {id}"),
        depends: depends.iter().map(|s| s.to_string()).collect(),
        done: false,
    }
}

fn group(id: &str, wave: u32, tasks: &[&str], files: &[&str]) -> PlanGroup {
    PlanGroup {
        id: id.into(),
        wave,
        tasks: tasks.iter().map(|s| s.to_string()).collect(),
        files: files.iter().map(|s| s.to_string()).collect(),
        reported_files: Vec::new(),
    }
}

/// Two waves: G1 (1.1) and G2 (1.2) in parallel, G3 (2.1, needs 1.1) after.
fn two_wave_plan() -> BuildPlan {
    BuildPlan {
        tasks: vec![task("1.1", &[]), task("1.2", &[]), task("2.1", &["1.1"])],
        groups: vec![
            group("G1", 1, &["1.1"], &["src/a.rs"]),
            group("G2", 1, &["1.2"], &["src/b.rs"]),
            group("G3", 2, &["2.1"], &["src/c.rs"]),
        ],
    }
}

/// Run an impl job up to the point where the plan is imported; returns the builders spawned.
fn impl_until_builders(plan: BuildPlan, config: LeadConfig) -> (H, Vec<SpawnRequest>) {
    let (mut h, out) = H::new(design_generated("login"), Job::Impl, config);
    let tg = one_spawn(&out, Role::TaskGenerator);
    assert_eq!(tg.engine_phase, "tasks");
    crate::roles::assert_contract(&tg);
    let out = h.finish(&tg.id, TG_OK);
    assert!(has(&out, "load-plan"));
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(plan)));
    assert!(has(&out, "import-plan"));
    let out = h.ev(Event::PlanImported { completed: vec![] });
    let b = spawns(&out);
    // What the machine tells each Builder is what troupe accepts (issue 11).
    b.iter().for_each(crate::roles::assert_contract);
    (h, b)
}

/// Report, gate pass: the usual way a Builder's group finishes.
fn complete_group(h: &mut H, id: &str, tasks: &str, files: &str) -> Vec<Command> {
    let out = h.finish(id, &builder_ok(tasks, files));
    let (run, kind) = gate_run(&out).expect("a gate runs on the report");
    assert!(matches!(kind, GateKind::TaskCompleted { .. }));
    h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() })
}

// ---------------- design ----------------

#[test]
fn design_happy_path() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    let a = one_spawn(&out, Role::Architect);
    assert_eq!(a.engine_phase, "design");
    crate::roles::assert_contract(&a);
    assert_eq!(a.context.write, vec![".troupe/specs/login/design.md", ".troupe/specs/login/research.md"]);
    let out = h.finish(&a.id, ARCH_OK);
    assert_eq!(
        out,
        vec![Command::CheckArtifacts {
            paths: vec![".troupe/specs/login/design.md".into(), ".troupe/specs/login/research.md".into()]
        }]
    );
    let out = h.ev(Event::ArtifactsChecked { missing: vec![] });
    let spec = saved_spec(&out).unwrap();
    assert_eq!(spec.phase, Phase::DesignGenerated);
    assert_eq!(spec.version_refs.design.as_deref(), Some("1.0"));
    assert!(out.contains(&Command::Commit { message: "login: design (login with sessions)".into() }));
    let out = h.ev(Event::Committed { sha: Some("abc123".into()) });
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    assert!(h.lead.is_finished());
    assert_eq!(h.lead.poll_timeout(), None);
}

#[test]
fn design_refused_by_the_gate_spawns_nothing() {
    let mut s = design_generated("login");
    s.mark_implementation_complete(t0(), &[], "x").unwrap();
    let (_, out) = H::new(s, Job::Design, LeadConfig::default());
    assert!(spawns(&out).is_empty());
    assert!(matches!(finish_of(&out), Some(Outcome::Refused(m)) if m.contains("design of login needs phase")));
}

#[test]
fn blocked_and_unknown_phases_use_the_seeds_messages() {
    let mut s = Spec::new("checkout", t0());
    s.block(t0(), "payments", REASON_UPSTREAM_FAILURE).unwrap();
    for job in [Job::Design, Job::Impl, Job::Run, Job::Resume] {
        let (_, out) = H::new(s.clone(), job, LeadConfig::default());
        assert_eq!(finish_of(&out), Some(Outcome::Refused("checkout is blocked by payments".into())));
        assert!(spawns(&out).is_empty());
    }
    let mut s = Spec::new("x", t0());
    s.phase = Phase::from("designing");
    let (_, out) = H::new(s, Job::Impl, LeadConfig::default());
    assert_eq!(finish_of(&out), Some(Outcome::Refused("Unknown phase 'designing'".into())));
}

#[test]
fn architect_without_report_is_retried_once_then_escalated() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    let a1 = one_spawn(&out, Role::Architect);
    let out = h.finish(&a1.id, "I wrote a lovely design.");
    let a2 = one_spawn(&out, Role::Architect);
    assert_ne!(a1.id, a2.id, "a retry gets a new name");
    assert_eq!(a2.attempt, 2);
    assert!(a2.context.instructions[0].contains("without an ARCHITECT_COMPLETE report"));
    let out = h.ev(Event::TeammateFinished { id: a2.id.clone(), report: None, stats: RunStats::default() });
    assert!(spawns(&out).is_empty());
    assert!(out.iter().any(|c| matches!(c, Command::Escalate { reason, .. } if reason.contains("failed twice"))));
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert!(saved_spec(&h.all).is_none(), "spec.yaml untouched");
}

#[test]
fn missing_artifacts_count_as_a_failed_attempt() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    let a1 = one_spawn(&out, Role::Architect);
    h.finish(&a1.id, ARCH_OK);
    let out = h.ev(Event::ArtifactsChecked { missing: vec![".troupe/specs/login/research.md".into()] });
    let a2 = one_spawn(&out, Role::Architect);
    assert!(a2.context.instructions[0].contains("research.md"));
    assert!(saved_spec(&out).is_none());
}

#[test]
fn architect_blocked_escalates_without_retry() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    let a = one_spawn(&out, Role::Architect);
    let out = h.finish(&a.id, "ARCHITECT_BLOCKED\nBlocker: which identity provider?\n");
    assert!(spawns(&out).is_empty());
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::Escalate { reason, .. } if reason.contains("which identity provider?")))
    );
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
}

#[test]
fn hung_architect_is_shut_down_and_respawned_only_once_its_process_ended() {
    let config = LeadConfig { hang_timeout: SignedDuration::from_secs(60), ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    assert!(h.advance(30).is_empty());
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: Some("Write".into()) });
    assert_eq!(h.lead.ctx().teammate(&a1.id).unwrap().last_tool.as_deref(), Some("Write"));
    // The write returned; its model turn is what hangs.
    h.ev(Event::TeammateToolDone { id: a1.id.clone() });
    assert!(h.advance(59).is_empty(), "activity reset the hang timer");
    let out = h.advance(2);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "graceful first: {out:#?}");
    assert!(spawns(&out).is_empty(), "no replacement while the hung one may still write: {out:#?}");
    // Its process ends (it read the request): now the retry.
    let out = h.ev(Event::TeammateExited { id: a1.id.clone(), error: "terminated".into(), stats: RunStats::default() });
    let a2 = one_spawn(&out, Role::Architect);
    assert_eq!(a2.attempt, 2);
    h.finish(&a2.id, ARCH_OK);
    let out = h.ev(Event::ArtifactsChecked { missing: vec![] });
    assert!(saved_spec(&out).is_some());
}

#[test]
fn a_hung_teammate_that_ignores_the_request_is_forced_at_the_machines_shutdown_deadline() {
    let config = LeadConfig {
        hang_timeout: SignedDuration::from_secs(60),
        shutdown_timeout: Some(SignedDuration::from_secs(30)),
        ..LeadConfig::default()
    };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    spoke(&mut h, &a1.id);
    let out = h.advance(61);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "{out:#?}");
    // Its late activity does not revive it: it was asked to stop.
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: None });
    assert!(h.lead.poll_timeout().is_some(), "the shutdown deadline is the machine's");
    let out = h.advance(29);
    assert!(!out.iter().any(|c| matches!(c, Command::ShutDown { .. })) && spawns(&out).is_empty(), "{out:#?}");
    let out = h.advance(2);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: true }), "forced at the deadline: {out:#?}");
    assert!(spawns(&out).is_empty(), "still not before its process is gone: {out:#?}");
    assert!(out.iter().any(|c| matches!(c, Command::RecordDecision { summary, .. }
        if summary.contains("did not stop within the shutdown timeout"))));
    // Forced once: the deadline does not fire again.
    assert!(h.advance(60).iter().all(|c| !matches!(c, Command::ShutDown { .. })));
    let out = h.ev(Event::TeammateExited { id: a1.id.clone(), error: "killed".into(), stats: RunStats::default() });
    let a2 = one_spawn(&out, Role::Architect);
    assert_ne!(a2.id, a1.id);
}

#[test]
fn with_graceful_stops_off_a_hung_teammate_is_forced_at_once() {
    let config =
        LeadConfig { hang_timeout: SignedDuration::from_secs(60), shutdown_timeout: None, ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    spoke(&mut h, &a1.id);
    let out = h.advance(61);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: true }), "{out:#?}");
    assert!(spawns(&out).is_empty());
    let out = h.ev(Event::SpawnFailed { id: a1.id.clone(), error: "killed before it ran".into() });
    one_spawn(&out, Role::Architect);
}

#[test]
fn a_hung_teammate_that_still_ends_with_its_report_is_taken() {
    let config = LeadConfig { hang_timeout: SignedDuration::from_secs(60), ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    h.advance(61);
    let out = h.finish(&a1.id, ARCH_OK);
    assert!(spawns(&out).is_empty(), "{out:#?}");
    assert!(has(&out, "check-artifacts"), "its report counts: {out:#?}");
}

#[test]
fn a_hung_teammate_that_approves_the_shutdown_request_is_stopped_at_once() {
    let config = LeadConfig { hang_timeout: SignedDuration::from_secs(60), ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    spoke(&mut h, &a1.id);
    let out = h.advance(61);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "graceful first: {out:#?}");
    let out = h.ev(Event::ShutdownAnswered { id: a1.id.clone(), approve: true, reason: String::new() });
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: true }), "{out:#?}");
    assert!(out.iter().any(|c| matches!(c, Command::RecordDecision { summary, .. }
        if summary == &format!("{} approved the shutdown request; stopping its processes", a1.id))));
    assert_eq!(h.lead.ctx().teammate(&a1.id).unwrap().status, TeammateStatus::ShuttingDown);
    h.ev(Event::TeammateExited { id: a1.id.clone(), error: "terminated".into(), stats: RunStats::default() });
    assert_eq!(h.lead.ctx().teammate(&a1.id).unwrap().status, TeammateStatus::Stopped);
    // A late answer about a teammate that is gone changes nothing.
    assert!(h.ev(Event::ShutdownAnswered { id: a1.id.clone(), approve: true, reason: String::new() }).is_empty());
}

#[test]
fn a_hung_builder_is_replaced_only_after_its_process_has_ended() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    h.ev(Event::TeammateActivity { id: b[1].id.clone(), tool: None });
    h.now += SignedDuration::from_secs(250);
    h.ev(Event::TeammateActivity { id: b[1].id.clone(), tool: None });
    let out = h.advance(60);
    assert!(out.contains(&Command::ShutDown { id: b[0].id.clone(), force: false }), "graceful: {out:#?}");
    assert!(!out.iter().any(|c| matches!(c, Command::ShutDown { id, .. } if id == &b[1].id)), "b1 is active");
    assert!(spawns(&out).is_empty(), "no second Builder on its files while it may still run: {out:#?}");
    let out = h.advance(31);
    assert!(out.contains(&Command::ShutDown { id: b[0].id.clone(), force: true }), "{out:#?}");
    assert!(spawns(&out).is_empty(), "{out:#?}");
    let stats = RunStats { session_id: Some("s".into()), ..RunStats::default() };
    let out = h.ev(Event::TeammateExited { id: b[0].id.clone(), error: "killed".into(), stats });
    let retry = spawns(&out);
    assert_eq!(retry.len(), 1, "{out:#?}");
    assert_eq!((retry[0].group.as_ref(), retry[0].attempt), (b[0].group.as_ref(), 2));
    assert_ne!(retry[0].id, b[0].id);
    assert_eq!(h.lead.ctx().teammate(&b[0].id).unwrap().status, TeammateStatus::Stopped);
}

#[test]
fn a_builder_whose_lease_passed_is_hung_at_once_and_replaced_once_stopped() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    h.ev(Event::TeammateActivity { id: b[0].id.clone(), tool: None });
    h.ev(Event::TeammateActivity { id: b[1].id.clone(), tool: None });
    // Seconds after its last activity, far inside the hang timeout: its
    // host stopped heartbeating, and the store says so.
    h.now += SignedDuration::from_secs(5);
    let out = h.ev(Event::TeammateLeaseExpired { id: b[0].id.clone() });
    assert!(out.contains(&Command::ShutDown { id: b[0].id.clone(), force: false }), "graceful first: {out:#?}");
    assert!(
        out.iter().any(|c| matches!(c, Command::RecordDecision { summary, .. } if summary.contains("lost its lease")))
    );
    assert!(!out.iter().any(|c| matches!(c, Command::ShutDown { id, .. } if id == &b[1].id)), "b1 holds its lease");
    assert!(spawns(&out).is_empty(), "nothing replaces it while it may still run: {out:#?}");
    // A second expiry of the same teammate changes nothing.
    assert!(h.ev(Event::TeammateLeaseExpired { id: b[0].id.clone() }).is_empty());
    // Nothing answers from a lost host: forced at the machine's shutdown deadline.
    let out = h.advance(31);
    assert!(out.contains(&Command::ShutDown { id: b[0].id.clone(), force: true }), "{out:#?}");
    let out = h.ev(Event::TeammateExited { id: b[0].id.clone(), error: "killed".into(), stats: RunStats::default() });
    let retry = spawns(&out);
    assert_eq!(retry.len(), 1, "{out:#?}");
    assert_eq!((retry[0].group.as_ref(), retry[0].attempt), (b[0].group.as_ref(), 2));
    assert_eq!(h.lead.ctx().teammate(&b[0].id).unwrap().status, TeammateStatus::Stopped);
    // An expiry of a teammate no longer running is nothing.
    assert!(h.ev(Event::TeammateLeaseExpired { id: b[0].id.clone() }).is_empty());
}

#[test]
fn a_refused_shutdown_request_is_recorded_with_its_reason_and_forced_at_the_deadline() {
    let config = LeadConfig { hang_timeout: SignedDuration::from_secs(60), ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    spoke(&mut h, &a1.id);
    h.advance(61);
    let out = h.ev(Event::ShutdownAnswered { id: a1.id.clone(), approve: false, reason: "still writing".into() });
    assert!(!out.iter().any(|c| matches!(c, Command::ShutDown { .. })), "{out:#?}");
    assert!(out.iter().any(|c| matches!(c, Command::RecordDecision { summary, .. }
        if summary.contains("refused the shutdown request: still writing")
            && summary.contains("stopped by force after the shutdown timeout"))));
    let out = h.advance(31);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: true }), "{out:#?}");
    let out = h.ev(Event::TeammateExited { id: a1.id.clone(), error: "killed".into(), stats: RunStats::default() });
    let a2 = one_spawn(&out, Role::Architect);
    // An answer from a teammate nobody asked to stop is not a decision.
    assert!(h.ev(Event::ShutdownAnswered { id: a2.id.clone(), approve: true, reason: String::new() }).is_empty());
}

#[test]
fn the_exit_of_a_teammate_shutting_down_reaches_the_stage_as_stopped_with_its_session() {
    let (mut h, _) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    let id = h.lead.ctx().teammates()[0].id.clone();
    h.lead.ctx.shut_down(&id, false);
    let stats = RunStats { session_id: Some("s1".into()), num_turns: 3, ..RunStats::default() };
    let seen = h.lead.ctx.observe(&Event::TeammateFinished { id: id.clone(), report: Some("bye".into()), stats });
    assert_eq!(seen, Some(Event::TeammateStopped { id: id.clone(), report: Some("bye".into()) }));
    let t = h.lead.ctx().teammate(&id).unwrap();
    assert_eq!((t.status, t.stats.session_id.as_deref(), t.stats.num_turns), (TeammateStatus::Stopped, Some("s1"), 3));
}

#[test]
fn no_commit_when_commits_are_off() {
    let config = LeadConfig { commit: false, ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a = one_spawn(&out, Role::Architect);
    h.finish(&a.id, ARCH_OK);
    let out = h.ev(Event::ArtifactsChecked { missing: vec![] });
    assert!(!has(&out, "commit"));
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

// ---------------- impl ----------------

#[test]
fn impl_two_waves_end_to_end() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    assert_eq!(b.len(), 2, "both wave-1 groups start in parallel");
    assert_eq!(b[0].group.as_deref(), Some("G1"));
    assert_eq!(b[0].context.write, vec!["src/a.rs"]);
    assert!(b[0].context.instructions.iter().any(|i| i.contains("RED")));
    assert_eq!(h.lead.stage(), Some(("impl", Some(1))));

    // G1 finishes first; G3 depends only on 1.1, so it starts while G2 still runs.
    let out = complete_group(&mut h, &b[0].id, "1.1", "src/a.rs");
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.1".into()] }));
    let g3 = one_spawn(&out, Role::Builder);
    assert_eq!(g3.group.as_deref(), Some("G3"));
    assert!(
        h.all
            .iter()
            .any(|c| matches!(c, Command::RecordKnowledge { entries, .. } if entries[0].0 == KnowledgeTag::Pattern))
    );

    complete_group(&mut h, &b[1].id, "1.2", "src/b.rs");
    let out = complete_group(&mut h, &g3.id, "2.1", "src/c.rs");
    let (run, kind) = gate_run(&out).expect("final gate");
    assert_eq!(kind, GateKind::Final);
    assert!(saved_spec(&h.all).is_none(), "spec.yaml changes only after every Builder (Spec 8.4)");
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() });
    let spec = saved_spec(&out).unwrap();
    assert_eq!(spec.phase, Phase::ImplementationComplete);
    assert_eq!(spec.implementation.files_created, vec!["src/a.rs", "src/b.rs", "src/c.rs"]);
    assert_eq!(spec.version_refs.implementation.as_deref(), Some("1.0"));
    let commit = out.iter().find_map(|c| match c {
        Command::Commit { message } => Some(message.clone()),
        _ => None,
    });
    assert_eq!(commit.as_deref(), Some("login: implement 3 tasks in 3 groups, 3 files"));
    let out = h.ev(Event::Committed { sha: Some("abc".into()) });
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
}

#[test]
fn reports_are_processed_one_at_a_time_in_arrival_order() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    // G2 reports first, then G1 while G2's gate still runs.
    let out = h.finish(&b[1].id, &builder_ok("1.2", "src/b.rs"));
    let (run2, kind) = gate_run(&out).unwrap();
    assert!(matches!(kind, GateKind::TaskCompleted { agent, .. } if agent == b[1].id));
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    assert!(gate_run(&out).is_none(), "G1's report waits for G2's gate");
    let out = h.ev(Event::GateFinished { run: run2, verdict: GateVerdict::Passed, output: String::new() });
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.2".into()] }));
    let (_, kind) = gate_run(&out).expect("now G1's gate runs");
    assert!(matches!(kind, GateKind::TaskCompleted { agent, .. } if agent == b[0].id));
}

#[test]
fn concurrency_is_capped() {
    let plan = BuildPlan {
        tasks: vec![task("1", &[]), task("2", &[]), task("3", &[])],
        groups: vec![group("A", 1, &["1"], &["a"]), group("B", 1, &["2"], &["b"]), group("C", 1, &["3"], &["c"])],
    };
    let config = LeadConfig { max_concurrent: 2, ..LeadConfig::default() };
    let (mut h, b) = impl_until_builders(plan, config);
    assert_eq!(b.len(), 2);
    // The slot frees when the Builder's process ends, before its gate.
    let out = h.finish(&b[0].id, &builder_ok("1", "a"));
    let c = one_spawn(&out, Role::Builder);
    assert_eq!(c.group.as_deref(), Some("C"));
    assert_eq!(h.lead.ctx().running_count(), 2);
}

#[test]
fn a_group_waits_while_a_running_group_owns_one_of_its_files() {
    let plan = BuildPlan {
        tasks: vec![task("1", &[]), task("2", &[]), task("3", &["2"])],
        groups: vec![
            group("A", 1, &["1"], &["src/shared.rs"]),
            group("B", 1, &["2"], &["src/b.rs"]),
            group("C", 2, &["3"], &["src/shared.rs"]),
        ],
    };
    let (mut h, b) = impl_until_builders(plan, LeadConfig::default());
    let out = complete_group(&mut h, &b[1].id, "2", "src/b.rs");
    assert!(spawns(&out).is_empty(), "C is unblocked but A still owns src/shared.rs");
    let out = complete_group(&mut h, &b[0].id, "1", "src/shared.rs");
    assert_eq!(one_spawn(&out, Role::Builder).group.as_deref(), Some("C"));
}

#[test]
fn board_completion_unblocks_successors_before_the_report() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let out = h.ev(Event::TasksUnblocked { completed: vec!["1.1".into()], unblocked: vec!["2.1".into()] });
    assert_eq!(one_spawn(&out, Role::Builder).group.as_deref(), Some("G3"));
    assert_eq!(b.len(), 2);
}

#[test]
fn tasks_completed_on_the_board_are_still_marked_in_tasks_yaml() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    h.ev(Event::TasksUnblocked { completed: vec!["1.1".into()], unblocked: vec!["2.1".into()] });
    let out = complete_group(&mut h, &b[0].id, "1.1", "src/a.rs");
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.1".into()] }), "{out:#?}");
}

#[test]
fn resume_marks_board_completions_in_tasks_yaml() {
    let (mut h, _) = H::new(design_generated("login"), Job::Resume, LeadConfig::default());
    h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    let out = h.ev(Event::PlanImported { completed: vec!["1.2".into()] });
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.2".into()] }));
}

#[test]
fn failed_quality_gate_sends_the_builder_back_then_passes() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    let (run, _) = gate_run(&out).unwrap();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "test a::adds ... FAILED".into() });
    let resume = out.iter().find_map(|c| match c {
        Command::Resume { id, prompt } => Some((id.clone(), prompt.clone())),
        _ => None,
    });
    let (id, prompt) = resume.expect("the Builder is resumed");
    assert_eq!(id, b[0].id);
    assert!(prompt.contains("test a::adds ... FAILED"));
    assert!(!has(&out, "mark-tasks-done"));
    assert!(spawns(&out).is_empty(), "G3 must wait: 1.1 is not done");
    let out = complete_group(&mut h, &b[0].id, "1.1", "src/a.rs");
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.1".into()] }));
    assert_eq!(one_spawn(&out, Role::Builder).group.as_deref(), Some("G3"));
}

#[test]
fn gate_that_is_never_fixed_fails_the_group_and_nothing_is_committed() {
    let config = LeadConfig { gate_fix_attempts: 1, ..LeadConfig::default() };
    let plan = BuildPlan { tasks: vec![task("1", &[])], groups: vec![group("A", 1, &["1"], &["a"])] };
    let (mut h, b) = impl_until_builders(plan, config);
    for _ in 0..2 {
        let out = h.finish(&b[0].id, &builder_ok("1", "a"));
        let (run, _) = gate_run(&out).unwrap();
        h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "boom".into() });
    }
    assert!(
        h.all
            .iter()
            .any(|c| matches!(c, Command::Escalate { reason, .. } if reason.contains("still fails the quality gate")))
    );
    assert_eq!(finish_of(&h.all), Some(Outcome::Escalated));
    assert!(!has(&h.all, "commit"));
    assert!(saved_spec(&h.all).is_none());
}

#[test]
fn builder_blocked_lets_independent_work_finish_then_escalates() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let out = h.finish(
        &b[0].id,
        "BUILDER_BLOCKED\nFeature: login\nStatus: blocked\nBlocker: the session store API is undecided\n",
    );
    assert!(out.contains(&Command::MarkTasksBlocked {
        tasks: vec!["1.1".into()],
        reason: "the session store API is undecided".into()
    }));
    assert!(finish_of(&out).is_none(), "G2 still runs");
    let out = complete_group(&mut h, &b[1].id, "1.2", "src/b.rs");
    assert!(spawns(&out).is_empty(), "G3 depends on the blocked task");
    let esc = out.iter().find_map(|c| match c {
        Command::Escalate { reason, hint } => Some((reason.clone(), hint.clone())),
        _ => None,
    });
    let (reason, hint) = esc.expect("escalation at the end");
    assert!(reason.contains("G1 (blocked)") && reason.contains("G3 (waiting on them)"), "{reason}");
    assert!(hint.contains("troupe resume login"));
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
    assert!(h.lead.ctx().buffer().iter().any(|b| b.contains("session store API")));
    assert!(!has(&h.all, "commit"));
}

/// README: "a Builder report without `Tests:` is refused". The Lead's own
/// looser parser used to accept it and gate the group as done.
#[test]
fn a_builder_report_without_tests_is_refused_and_the_group_retried() {
    let plan = BuildPlan { tasks: vec![task("1", &[])], groups: vec![group("A", 1, &["1"], &["a"])] };
    let (mut h, b) = impl_until_builders(plan, LeadConfig::default());
    let out = h.finish(&b[0].id, "BUILDER_COMPLETE\nFeature: login\nTasks completed: 1\nFiles: a\nStatus: done\n");
    assert!(!out.iter().any(|c| matches!(c, Command::RunGate { .. })), "no gate for a refused report: {out:?}");
    let retry = one_spawn(&out, Role::Builder);
    assert_eq!(retry.attempt, 2);
    assert!(retry.context.instructions[0].contains("has no Tests: line"), "{:?}", retry.context.instructions);
}

#[test]
fn builder_without_report_is_retried_once_with_a_new_name() {
    let plan = BuildPlan { tasks: vec![task("1", &[])], groups: vec![group("A", 1, &["1"], &["a"])] };
    let (mut h, b) = impl_until_builders(plan, LeadConfig::default());
    let out = h.finish(&b[0].id, "all done!");
    let retry = one_spawn(&out, Role::Builder);
    assert_ne!(retry.id, b[0].id);
    assert_eq!(retry.attempt, 2);
    assert!(retry.context.instructions[0].contains("BUILDER_COMPLETE"));
    let out = h.ev(Event::TeammateExited { id: retry.id.clone(), error: "exit 1".into(), stats: RunStats::default() });
    assert!(spawns(&out).is_empty());
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
}

#[test]
fn invalid_tasks_yaml_respawns_the_taskgenerator_once_with_the_messages() {
    let (mut h, out) = H::new(design_generated("login"), Job::Impl, LeadConfig::default());
    let tg1 = one_spawn(&out, Role::TaskGenerator);
    h.finish(&tg1.id, TG_OK);
    let msgs = vec!["dependency cycle: 1.1 -> 1.2 -> 1.1".to_string()];
    let out = h.ev(Event::PlanLoaded(PlanLoad::Invalid(msgs)));
    let tg2 = one_spawn(&out, Role::TaskGenerator);
    assert!(tg2.context.instructions[0].contains("dependency cycle: 1.1 -> 1.2 -> 1.1"));
    h.finish(&tg2.id, TG_OK);
    let out = h.ev(Event::PlanLoaded(PlanLoad::Missing));
    assert!(spawns(&out).is_empty());
    assert!(
        out.iter().any(|c| matches!(c, Command::Escalate { hint, .. } if hint.contains("troupe tasks validate login")))
    );
    assert_eq!(finish_of(&out), Some(Outcome::Escalated));
}

#[test]
fn a_taskgenerator_whose_engine_fails_points_at_its_log_not_at_tasks_yaml() {
    let (mut h, out) = H::new(design_generated("login"), Job::Impl, LeadConfig::default());
    let tg1 = one_spawn(&out, Role::TaskGenerator);
    let api = "API Error: 529 overloaded";
    let out = h.ev(Event::TeammateExited { id: tg1.id.clone(), error: api.into(), stats: RunStats::default() });
    let tg2 = one_spawn(&out, Role::TaskGenerator);
    let out = h.ev(Event::TeammateExited { id: tg2.id.clone(), error: api.into(), stats: RunStats::default() });
    let hint = out.iter().find_map(|c| match c {
        Command::Escalate { hint, .. } => Some(hint.clone()),
        _ => None,
    });
    let hint = hint.expect("escalated");
    assert!(hint.contains(&format!("troupe agent logs {}", tg2.id)) && !hint.contains("tasks.yaml"), "{hint}");
}

#[test]
fn resume_never_redoes_completed_tasks() {
    let mut plan = two_wave_plan();
    plan.tasks[0].done = true; // 1.1 done in tasks.yaml
    let (mut h, out) = H::new(design_generated("login"), Job::Resume, LeadConfig::default());
    assert!(spawns(&out).is_empty());
    assert!(has(&out, "load-plan"), "resume reads the existing plan first");
    h.ev(Event::PlanLoaded(PlanLoad::Loaded(plan)));
    let out = h.ev(Event::PlanImported { completed: vec!["1.2".into()] });
    let b = one_spawn(&out, Role::Builder);
    assert_eq!(b.group.as_deref(), Some("G3"), "G1 and G2 are done; only G3 runs");
    let out = complete_group(&mut h, &b.id, "2.1", "src/c.rs");
    assert_eq!(gate_run(&out).unwrap().1, GateKind::Final);
}

#[test]
fn files_of_groups_done_in_an_earlier_run_are_kept_in_files_created() {
    let mut plan = two_wave_plan();
    plan.tasks[0].done = true;
    plan.tasks[1].done = true;
    plan.groups[0].reported_files = vec!["src/a.rs".into()];
    plan.groups[1].reported_files = vec!["src/b.rs".into()];
    let (mut h, _) = H::new(design_generated("login"), Job::Resume, LeadConfig::default());
    h.ev(Event::PlanLoaded(PlanLoad::Loaded(plan)));
    let out = h.ev(Event::PlanImported { completed: vec![] });
    let b = one_spawn(&out, Role::Builder);
    let out = complete_group(&mut h, &b.id, "2.1", "src/c.rs");
    let (run, _) = gate_run(&out).unwrap();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() });
    let saved = out.iter().find_map(|c| match c {
        Command::SaveSpec(s) => Some(s.implementation.files_created.clone()),
        _ => None,
    });
    let mut files = saved.expect("the implementation is recorded");
    files.sort();
    assert_eq!(files, ["src/a.rs", "src/b.rs", "src/c.rs"], "files built before the interruption count too");
}

#[test]
fn resume_without_a_plan_runs_the_taskgenerator() {
    let (mut h, _) = H::new(design_generated("login"), Job::Resume, LeadConfig::default());
    let out = h.ev(Event::PlanLoaded(PlanLoad::Missing));
    one_spawn(&out, Role::TaskGenerator);
}

#[test]
fn resume_of_an_initialized_spec_runs_the_design_first() {
    let (_, out) = H::new(Spec::new("login", t0()), Job::Resume, LeadConfig::default());
    one_spawn(&out, Role::Architect);
}

#[test]
fn a_gate_that_cannot_run_is_escalated_never_sent_back_to_the_builder() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    let (run, _) = gate_run(&out).unwrap();
    let output = "Test `pytest -q` could not run (exit 127):\nsh: 1: pytest: not found";
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Environment, output: output.into() });
    assert!(!out.iter().any(|c| matches!(c, Command::Resume { .. })), "nobody is asked to fix it: {out:#?}");
    assert!(!has(&out, "mark-tasks-done") && !has(&out, "commit"));
    let escalation = out
        .iter()
        .find_map(|c| match c {
            Command::Escalate { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("the user is told");
    assert!(
        escalation.contains("problem of the environment") && escalation.contains("pytest: not found"),
        "{escalation}"
    );
    assert!(has(&out, "shut-down"), "the other Builder is stopped: {out:#?}");
    assert_eq!(finish_of(&h.all), Some(Outcome::Escalated));
    // Time passing brings no retry, no new gate and no new Builder.
    let later = h.advance(3600);
    assert!(spawns(&later).is_empty() && gate_run(&later).is_none(), "{later:#?}");
    assert!(!later.iter().any(|c| matches!(c, Command::Resume { .. })));
}

#[test]
fn a_final_gate_that_cannot_run_is_escalated() {
    let plan = BuildPlan { tasks: vec![task("1", &[])], groups: vec![group("A", 1, &["1"], &["a"])] };
    let (mut h, b) = impl_until_builders(plan, LeadConfig::default());
    let out = complete_group(&mut h, &b[0].id, "1", "a");
    let (run, kind) = gate_run(&out).unwrap();
    assert_eq!(kind, GateKind::Final);
    let out =
        h.ev(Event::GateFinished { run, verdict: GateVerdict::Environment, output: "Lint `ruff` (exit 127)".into() });
    assert!(!has(&out, "commit") && saved_spec(&out).is_none());
    assert!(out.iter().any(
        |c| matches!(c, Command::Escalate { reason, .. } if reason.contains("problem of the environment") && reason.contains("Lint `ruff`"))
    ));
    assert_eq!(finish_of(&h.all), Some(Outcome::Escalated));
}

#[test]
fn final_gate_failure_commits_nothing() {
    let plan = BuildPlan { tasks: vec![task("1", &[])], groups: vec![group("A", 1, &["1"], &["a"])] };
    let (mut h, b) = impl_until_builders(plan, LeadConfig::default());
    let out = complete_group(&mut h, &b[0].id, "1", "a");
    let (run, _) = gate_run(&out).unwrap();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "lint: 3 warnings".into() });
    assert!(!has(&out, "commit"));
    assert!(saved_spec(&out).is_none());
    assert!(out.iter().any(|c| matches!(c, Command::Escalate { reason, .. } if reason.contains("lint: 3 warnings"))));
}

#[test]
fn interrupt_shuts_everyone_down() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let out = h.ev(Event::Interrupted);
    for s in &b {
        assert!(out.contains(&Command::ShutDown { id: s.id.clone(), force: false }));
    }
    assert_eq!(finish_of(&out), Some(Outcome::Interrupted));
    assert!(
        h.ev(Event::TeammateExited { id: b[0].id.clone(), error: "x".into(), stats: RunStats::default() }).is_empty()
    );
}

#[test]
fn roadmap_commits_say_wave() {
    let config = LeadConfig { roadmap_wave: Some(3), ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a = one_spawn(&out, Role::Architect);
    h.finish(&a.id, ARCH_OK);
    let out = h.ev(Event::ArtifactsChecked { missing: vec![] });
    assert!(out.contains(&Command::Commit { message: "Wave 3: login design (login with sessions)".into() }));
    assert!(a.id.starts_with("architect-login-"), "roadmap ids name the feature: {}", a.id);
}

#[test]
fn run_goes_from_design_into_impl() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Run, LeadConfig::default());
    let a = one_spawn(&out, Role::Architect);
    h.finish(&a.id, ARCH_OK);
    h.ev(Event::ArtifactsChecked { missing: vec![] });
    let out = h.ev(Event::Committed { sha: None });
    assert!(finish_of(&out).is_none());
    one_spawn(&out, Role::TaskGenerator);
    assert!(h.all.iter().any(|c| matches!(c, Command::RecordDecision { kind: DecisionKind::Gate, summary } if summary.contains("impl allowed"))));
}

#[test]
fn a_teammates_plan_is_approved_by_policy_and_recorded() {
    let (mut h, _) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    let out = h.ev(Event::PlanSubmitted { from: "builder-g1-3".into(), request: 42, plan: "1. test\n2. code".into() });
    let answer = out.iter().find_map(|c| match c {
        Command::SendMessage { to, kind, body, in_reply_to } if kind == "plan_decision" => {
            Some((to.clone(), body.clone(), *in_reply_to))
        }
        _ => None,
    });
    let (to, body, in_reply_to) = answer.expect("a plan_decision answers the plan");
    assert_eq!((to.as_str(), in_reply_to), ("builder-g1-3", Some(42)));
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["approved"], true);
    assert_eq!(body["request_id"], 42);
    assert!(out.iter().any(|c| matches!(c, Command::RecordDecision { kind: DecisionKind::Plan, summary }
        if summary.contains("builder-g1-3") && summary.contains("1. test"))));
    assert!(h.lead.ctx().buffer().is_empty(), "a plan is answered, not left for the user");
}

#[test]
fn a_plan_left_to_a_person_pauses_its_teammate_without_a_hang_until_decided() {
    let config = LeadConfig {
        hang_timeout: SignedDuration::from_secs(60),
        human_plans: vec![Role::Architect],
        ..LeadConfig::default()
    };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    let hold = out.iter().position(|c| *c == Command::HoldForPlan { id: a1.id.clone() }).expect("held for a plan");
    assert!(hold < out.iter().position(|c| matches!(c, Command::Spawn(_))).unwrap(), "held before it starts");
    assert!(a1.context.instructions.iter().any(|i| i.contains("{{tool:request_plan_approval}}")), "{a1:?}");
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    // It has spoken (its start-up allowance is over) before it submits its plan.
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: None });
    h.advance(30);
    let out = h.ev(Event::PlanSubmitted { from: a1.id.clone(), request: 7, plan: "1. research\n2. design".into() });
    assert!(!out.iter().any(|c| matches!(c, Command::SendMessage { .. })), "the Lead does not decide it: {out:#?}");
    assert!(out.contains(&Command::MarkWaiting { id: a1.id.clone(), waiting: true }), "{out:#?}");
    assert_eq!(h.lead.ctx().teammate(&a1.id).unwrap().awaiting_plan, Some(7));
    assert!(h.lead.ctx().buffer().iter().any(|b| b.contains("troupe approve 7")), "the user is told how to decide");
    // A person takes their time: no hang, no stop, and no deadline to wake for.
    assert!(h.advance(3600).is_empty(), "waiting for a person is not hanging");
    // Another teammate's decision, or an older plan's, does not resume it.
    assert!(h.ev(Event::PlanDecided { id: a1.id.clone(), request: 6, approved: true }).is_empty());
    let out = h.ev(Event::PlanDecided { id: a1.id.clone(), request: 7, approved: false });
    assert!(out.contains(&Command::MarkWaiting { id: a1.id.clone(), waiting: false }), "{out:#?}");
    assert!(out.iter().any(|c| matches!(c, Command::RecordDecision { kind: DecisionKind::Plan, summary }
        if summary.contains("rejected by a person"))));
    // The hang clock starts afresh from the decision.
    assert!(h.advance(59).is_empty());
    let out = h.advance(2);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "{out:#?}");
}

#[test]
fn roles_not_left_to_a_person_keep_the_leads_policy() {
    let config = LeadConfig { human_plans: vec![Role::Builder], ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    assert!(!out.iter().any(|c| matches!(c, Command::HoldForPlan { .. })), "not held: {out:#?}");
    let out = h.ev(Event::PlanSubmitted { from: a1.id.clone(), request: 3, plan: "1. design".into() });
    assert!(out.iter().any(|c| matches!(c, Command::SendMessage { kind, .. } if kind == "plan_decision")), "{out:#?}");
    assert!(!out.iter().any(|c| matches!(c, Command::MarkWaiting { .. })));
    assert_eq!(h.lead.ctx().teammate(&a1.id).unwrap().awaiting_plan, None);
}

#[test]
fn messages_to_the_lead_go_to_the_buffer() {
    let (mut h, _) = H::new(Spec::new("login", t0()), Job::Design, LeadConfig::default());
    h.ev(Event::MessageArrived(IncomingMessage {
        from: "builder-g1-3".into(),
        kind: "text".into(),
        body: "need a decision".into(),
    }));
    assert!(h.lead.ctx().buffer().iter().any(|b| b.contains("need a decision")));
}

#[test]
fn stats_add_up_over_resumes() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let stats = RunStats { num_turns: 3, duration_ms: 100, total_cost_usd: Some(0.5), session_id: Some("s1".into()) };
    let out = h.ev(Event::TeammateFinished {
        id: b[0].id.clone(),
        report: Some(builder_ok("1.1", "src/a.rs").into()),
        stats: stats.clone(),
    });
    let (run, _) = gate_run(&out).unwrap();
    h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "x".into() });
    h.ev(Event::TeammateFinished { id: b[0].id.clone(), report: Some(builder_ok("1.1", "src/a.rs").into()), stats });
    let t = h.lead.ctx().teammate(&b[0].id).unwrap();
    assert_eq!(t.stats.num_turns, 6);
    assert_eq!(t.stats.total_cost_usd, Some(1.0));
    assert_eq!(t.files, vec!["src/a.rs"]);
    assert_eq!(t.tests.as_deref(), Some("2 passed"));
}

// ---------------- resume with the run's reviews ----------------

fn resume_reviewed(spec: Spec, design_passed: bool, impl_passed: bool) -> Vec<Command> {
    let options = crate::review::ReviewOptions { first_seq: 3, ..Default::default() };
    let job = Job::ResumeReviewed { options, design_passed, impl_passed };
    H::new(spec, job, LeadConfig { commit: false, ..LeadConfig::default() }).1
}

fn begins_review(cmds: &[Command]) -> bool {
    cmds.iter().any(|c| {
        matches!(c, Command::Review(crate::review::ReviewCommand::BeginRound { seq: 3, feature }) if feature == "login")
    })
}

#[test]
fn resume_with_reviews_reviews_a_design_whose_last_review_did_not_pass_before_building() {
    let out = resume_reviewed(design_generated("login"), false, false);
    assert!(begins_review(&out), "{out:#?}");
    assert!(!out.iter().any(|c| matches!(c, Command::LoadPlan)), "no building before the review: {out:#?}");
}

#[test]
fn resume_with_reviews_goes_on_building_after_a_passed_design_review() {
    let out = resume_reviewed(design_generated("login"), true, false);
    assert!(out.iter().any(|c| matches!(c, Command::LoadPlan)), "{out:#?}");
    assert!(!begins_review(&out));
}

#[test]
fn resume_with_reviews_of_a_new_spec_designs_first() {
    let out = resume_reviewed(Spec::new("login", t0()), false, false);
    one_spawn(&out, Role::Architect);
}

#[test]
fn the_final_gate_waits_for_a_builder_still_shutting_down() {
    let plan = BuildPlan { tasks: vec![task("1.1", &[])], groups: vec![group("G1", 1, &["1.1"], &["src/a.rs"])] };
    let (mut h, b) = impl_until_builders(plan, LeadConfig::default());
    // The Builder completed its task on the board (through the gateway's gate),
    // then hung before it reported.
    h.ev(Event::TasksUnblocked { completed: vec!["1.1".into()], unblocked: vec![] });
    let out = h.advance(301);
    assert!(out.contains(&Command::ShutDown { id: b[0].id.clone(), force: false }), "{out:#?}");
    assert!(
        !out.iter().any(|c| matches!(c, Command::RunGate { kind: GateKind::Final, .. })),
        "no final gate and no commit while its process may still write: {out:#?}"
    );
    let out =
        h.ev(Event::TeammateExited { id: b[0].id.clone(), error: "terminated".into(), stats: RunStats::default() });
    assert!(out.iter().any(|c| matches!(c, Command::RunGate { kind: GateKind::Final, .. })), "{out:#?}");
}

fn implementation_complete(feature: &str) -> Spec {
    let mut s = design_generated(feature);
    s.mark_implementation_complete(t0(), &["src/a.rs".into()], "3 tasks in 2 groups, 1 file").unwrap();
    s
}

#[test]
fn resume_of_a_run_interrupted_during_the_impl_review_reviews_again_without_building() {
    // It said "impl of login needs phase 'design-generated', but it is
    // 'implementation-complete'" (issue 12, defect 3).
    let out = resume_reviewed(implementation_complete("login"), true, false);
    assert!(finish_of(&out).is_none(), "{out:#?}");
    assert!(begins_review(&out), "the impl review runs again: {out:#?}");
    assert!(!has(&out, "load-plan") && spawns(&out).iter().all(|s| s.role != Role::Builder), "{out:#?}");
}

#[test]
fn resume_of_a_run_interrupted_before_its_implementation_commit_makes_it() {
    let (mut h, out) = H::new(implementation_complete("login"), Job::Resume, LeadConfig::default());
    assert!(
        out.contains(&Command::CommitIfChanged {
            message: "login: implement 3 tasks in 2 groups, 1 file".into(),
            paths: vec!["src/a.rs".into()]
        }),
        "the commit it was about to make: {out:#?}"
    );
    assert!(spawns(&out).is_empty() && saved_spec(&out).is_none(), "{out:#?}");
    let out = h.ev(Event::Committed { sha: Some("abc".into()) });
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    // Made before the interruption: nothing to commit, and the run still completes.
    let (mut h, _) = H::new(implementation_complete("login"), Job::Resume, LeadConfig::default());
    let out = h.ev(Event::Committed { sha: None });
    assert_eq!(finish_of(&out), Some(Outcome::Completed));
    // Without commits there is nothing left to do.
    let config = LeadConfig { commit: false, ..LeadConfig::default() };
    let (_, out) = H::new(implementation_complete("login"), Job::Resume, config);
    assert_eq!(finish_of(&out), Some(Outcome::Completed), "{out:#?}");
}

#[test]
fn impl_of_a_complete_feature_is_still_refused_by_the_phase_gate() {
    let (_, out) = H::new(implementation_complete("login"), Job::Impl, LeadConfig::default());
    assert!(matches!(finish_of(&out), Some(Outcome::Refused(m)) if m.contains("needs phase 'design-generated'")));
}

#[test]
fn a_revisions_plan_is_renewed_on_the_board_even_when_it_reads_the_same() {
    let mut revised = implementation_complete("login");
    revised.revise(t0(), "add 2FA").unwrap();
    for (spec, renew) in [(revised, true), (design_generated("login"), false)] {
        let (mut h, out) = H::new(spec, Job::Impl, LeadConfig::default());
        let tg = one_spawn(&out, Role::TaskGenerator);
        h.finish(&tg.id, TG_OK);
        let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
        assert!(out.contains(&Command::ImportPlan { replace: true, renew }), "{out:#?}");
    }
    // A resumed revision keeps what its own plan has done.
    let mut revised = implementation_complete("login");
    revised.revise(t0(), "add 2FA").unwrap();
    revised.mark_design_generated(t0(), "revised").unwrap();
    revised.note(t0(), crate::machine::implement::PLAN_IMPORTED, "imported");
    let (mut h, _) = H::new(revised, Job::Resume, LeadConfig::default());
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    assert!(out.contains(&Command::ImportPlan { replace: false, renew: false }), "{out:#?}");
}

/// A Builder's end as the driver reports it: its final text and its `report` call.
fn ended(id: &str, text: &str, call: serde_json::Value, current: bool) -> Event {
    let call = troupe_core::report::ReportCall::from_args(&call);
    let ending = Ending { text: Some(text.into()), call, call_is_current: current, cpf_file: None };
    Event::TeammateEnded { id: id.into(), ending: Box::new(ending), stats: RunStats::default() }
}

/// The files the group's gate kept, once its gate passed.
#[track_caller]
fn recorded_files(h: &mut H, out: &[Command]) -> Vec<String> {
    let (run, _) = gate_run(out).expect("the report is gated");
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() });
    out.iter()
        .find_map(|c| match c {
            Command::RecordGroupFiles { files, .. } => Some(files.clone()),
            _ => None,
        })
        .expect("the group's files are recorded")
}

#[test]
fn the_machine_takes_a_builders_report_call_over_its_final_prose() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let call = serde_json::json!({
        "status": "complete", "summary": "a done", "task_id": "1.1", "files": ["src/a.rs"], "tests": ["3 passed"],
    });
    let out = h.ev(ended(&b[0].id, "All done, thanks!", call, true));
    assert_eq!(recorded_files(&mut h, &out), ["src/a.rs"]);
}

#[test]
fn a_report_call_from_before_a_resume_does_not_beat_a_new_text_report() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let call = serde_json::json!({"status": "complete", "summary": "old", "files": ["old.rs"], "tests": ["1 passed"]});
    let out = h.ev(ended(&b[0].id, &builder_ok("1.1", "src/a.rs"), call, false));
    assert_eq!(recorded_files(&mut h, &out), ["src/a.rs"]);
}

#[test]
fn a_report_call_without_tests_is_refused_like_text() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let call = serde_json::json!({"status": "complete", "summary": "a done", "files": ["src/a.rs"]});
    let out = h.ev(ended(&b[0].id, "done", call, true));
    assert!(gate_run(&out).is_none(), "nothing to gate: {out:#?}");
    let retry = one_spawn(&out, Role::Builder);
    assert_eq!(retry.attempt, 2);
    let told = retry.context.instructions.join("\n");
    assert!(told.contains("has no Tests: line"), "the retry hears why: {told}");
}

#[test]
fn a_hang_timeout_below_a_second_counts_in_milliseconds() {
    let config = LeadConfig { hang_timeout: SignedDuration::from_millis(250), ..LeadConfig::default() };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    spoke(&mut h, &a1.id);
    assert_eq!(h.lead.poll_timeout(), Some(h.now + SignedDuration::from_millis(250)));
    h.now += SignedDuration::from_millis(250);
    h.lead.handle_timeout(h.now);
    let out = h.drain();
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "{out:#?}");
    let said = decisions(&out).join("\n");
    assert!(said.contains("showed no activity for 250 ms"), "{said}");
}

/// Advance virtual time by `ms`, firing the timeout if it is due.
fn advance_ms(h: &mut H, ms: i64) -> Vec<Command> {
    h.now += SignedDuration::from_millis(ms);
    if h.lead.poll_timeout().is_some_and(|t| t <= h.now) {
        h.lead.handle_timeout(h.now);
    }
    h.drain()
}

/// A sub-second hang timeout beside a start-up allowance of 30 s.
fn fast_hang() -> LeadConfig {
    LeadConfig {
        hang_timeout: SignedDuration::from_millis(500),
        startup_timeout: SignedDuration::from_secs(30),
        ..LeadConfig::default()
    }
}

#[test]
fn a_teammate_that_printed_nothing_yet_gets_the_startup_allowance_then_the_hang_timeout() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, fast_hang());
    let a1 = one_spawn(&out, Role::Architect);
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    assert_eq!(h.lead.poll_timeout(), Some(h.now + SignedDuration::from_secs(30)), "the allowance, not 500 ms");
    assert!(advance_ms(&mut h, 29_000).is_empty(), "a slow start is not a hang");
    // Its first output: from now on the hang timeout applies.
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: None });
    assert_eq!(h.lead.poll_timeout(), Some(h.now + SignedDuration::from_millis(500)));
    assert!(advance_ms(&mut h, 499).is_empty());
    let out = advance_ms(&mut h, 1);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "{out:#?}");
    let said = decisions(&out).join("\n");
    assert!(said.contains("showed no activity for 500 ms"), "{said}");
}

#[test]
fn a_teammate_silent_since_its_start_is_hung_once_the_startup_allowance_is_over() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, fast_hang());
    let a1 = one_spawn(&out, Role::Architect);
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    assert!(advance_ms(&mut h, 29_999).is_empty());
    let out = advance_ms(&mut h, 1);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "{out:#?}");
    let said = decisions(&out).join("\n");
    assert!(said.contains(&format!("{} printed nothing for 30 s since it started", a1.id)), "{said}");
}

#[test]
fn a_startup_allowance_shorter_than_the_hang_timeout_never_shortens_it() {
    let config = LeadConfig {
        hang_timeout: SignedDuration::from_secs(60),
        startup_timeout: SignedDuration::from_secs(5),
        ..LeadConfig::default()
    };
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, config);
    let a1 = one_spawn(&out, Role::Architect);
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    assert!(h.advance(59).is_empty(), "quiet for less than the hang timeout is never a hang");
    let out = h.advance(1);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "{out:#?}");
}

#[test]
fn a_resumed_teammate_gets_the_startup_allowance_again() {
    let (mut h, b) = impl_until_builders(two_wave_plan(), fast_hang());
    h.ev(Event::TeammateStarted { id: b[1].id.clone() });
    h.ev(Event::TeammateActivity { id: b[1].id.clone(), tool: None });
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    let (run, _) = gate_run(&out).unwrap();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "FAILED".into() });
    assert!(out.iter().any(|c| matches!(c, Command::Resume { id, .. } if *id == b[0].id)), "{out:#?}");
    // The other Builder talks on; the resumed one starts a new process, which
    // may take a while to print anything.
    for _ in 0..10 {
        h.ev(Event::TeammateActivity { id: b[1].id.clone(), tool: None });
        let out = advance_ms(&mut h, 400);
        assert!(!out.iter().any(|c| matches!(c, Command::ShutDown { .. })), "{out:#?}");
    }
    h.ev(Event::TeammateStarted { id: b[0].id.clone() });
    h.ev(Event::TeammateActivity { id: b[0].id.clone(), tool: None });
    h.ev(Event::TeammateActivity { id: b[1].id.clone(), tool: None });
    let out = advance_ms(&mut h, 500);
    assert!(out.contains(&Command::ShutDown { id: b[0].id.clone(), force: false }), "after its output: {out:#?}");
}

/// [`fast_hang`] with a tool allowance of 20 s.
fn fast_hang_slow_tools() -> LeadConfig {
    LeadConfig { tool_timeout: SignedDuration::from_secs(20), ..fast_hang() }
}

#[test]
fn a_teammate_whose_tool_call_runs_is_busy_until_the_tool_allowance_is_over() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, fast_hang_slow_tools());
    let a1 = one_spawn(&out, Role::Architect);
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: Some("Bash".into()) });
    assert_eq!(h.lead.poll_timeout(), Some(h.now + SignedDuration::from_secs(20)), "the tool's allowance, not 500 ms");
    assert!(advance_ms(&mut h, 19_999).is_empty(), "a running tool is not a hang");
    let out = advance_ms(&mut h, 1);
    assert!(
        out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }),
        "a tool that never returns: {out:#?}"
    );
    let said = decisions(&out).join("\n");
    assert!(said.contains("showed no activity for 20 s while its tool call ran"), "{said}");
}

#[test]
fn once_its_tool_calls_returned_a_quiet_teammate_gets_the_hang_timeout_again() {
    let (mut h, out) = H::new(Spec::new("login", t0()), Job::Design, fast_hang_slow_tools());
    let a1 = one_spawn(&out, Role::Architect);
    h.ev(Event::TeammateStarted { id: a1.id.clone() });
    // Two calls at once (one model message): busy until both returned.
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: Some("Read".into()) });
    h.ev(Event::TeammateActivity { id: a1.id.clone(), tool: Some("Bash".into()) });
    assert!(advance_ms(&mut h, 5_000).is_empty());
    h.ev(Event::TeammateToolDone { id: a1.id.clone() });
    assert!(advance_ms(&mut h, 5_000).is_empty(), "one call still runs");
    h.ev(Event::TeammateToolDone { id: a1.id.clone() });
    // A result without its call (Codex prints some items only completed) does not count below zero.
    h.ev(Event::TeammateToolDone { id: a1.id.clone() });
    assert_eq!(h.lead.poll_timeout(), Some(h.now + SignedDuration::from_millis(500)));
    assert!(advance_ms(&mut h, 499).is_empty());
    let out = advance_ms(&mut h, 1);
    assert!(out.contains(&Command::ShutDown { id: a1.id.clone(), force: false }), "its model turn hangs: {out:#?}");
    assert!(decisions(&out).join("\n").contains("showed no activity for 500 ms;"));
}

/// The decisions.md lines among `out`.
fn decisions(out: &[Command]) -> Vec<String> {
    out.iter()
        .filter_map(|c| match c {
            Command::RecordDecision { summary, .. } => Some(summary.clone()),
            _ => None,
        })
        .collect()
}

/// A revision resumed after its design was revised but before a plan of it
/// was imported: tasks.yaml still held the previous version's plan, which
/// was imported as it was (every task done), and the revision ended
/// "implemented" with nothing built (issue 12, defect 6). Now the
/// TaskGenerator plans the revised design first, and once that plan is on
/// the board a later resume keeps its progress.
#[test]
fn a_revision_resumed_before_its_plan_was_imported_plans_the_revised_design() {
    use crate::machine::implement::PLAN_IMPORTED;
    let mut revised = implementation_complete("login");
    revised.revise(t0(), "add 2FA").unwrap();
    revised.mark_design_generated(t0(), "revised").unwrap();
    let (mut h, _) = H::new(revised, Job::Resume, LeadConfig::default());
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    let tg = one_spawn(&out, Role::TaskGenerator);
    assert!(!out.iter().any(|c| matches!(c, Command::ImportPlan { .. })), "the old plan is not imported: {out:#?}");
    h.finish(&tg.id, TG_OK);
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    assert!(out.contains(&Command::ImportPlan { replace: true, renew: true }), "{out:#?}");
    let out = h.ev(Event::PlanImported { completed: vec![] });
    let spec = saved_spec(&out).expect("the import is recorded in spec.yaml");
    assert!(spec.recorded_at_this_version(PLAN_IMPORTED), "{:#?}", spec.changelog);
    assert_eq!(spawns(&out).iter().filter(|s| s.role == Role::Builder).count(), 2, "wave 1 is built: {out:#?}");
    // Interrupted again from here: the plan on disk is the revision's own.
    let (mut h, _) = H::new(spec, Job::Resume, LeadConfig::default());
    let out = h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    assert!(out.contains(&Command::ImportPlan { replace: false, renew: false }), "{out:#?}");
}

/// A revision resumed before the Architect revised the design went straight
/// to the implementation of the old design; it starts with the design now.
#[test]
fn a_revision_resumed_before_its_design_was_revised_starts_with_the_architect() {
    let mut revised = implementation_complete("login");
    revised.revise(t0(), "add 2FA").unwrap();
    let (_, out) = H::new(revised.clone(), Job::Resume, LeadConfig::default());
    one_spawn(&out, Role::Architect);
    // An ordinary spec in design-generated still resumes with its implementation.
    let (_, out) = H::new(design_generated("login"), Job::Resume, LeadConfig::default());
    assert!(spawns(&out).is_empty(), "{out:#?}");
}

mod budget;
mod worktree;
