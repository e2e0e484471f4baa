//! Worktree isolation: merges in wave order, the merged gate, conflicts and
//! resets, recovery after a crash; all in virtual time.

use super::*;
use crate::plan::TaskId;

fn wt_config() -> LeadConfig {
    LeadConfig { worktrees: true, ..LeadConfig::default() }
}

/// Up to the Builders of the first wave, through the worktree recovery.
fn until_builders(merged: Vec<String>, board: Vec<TaskId>) -> (H, Vec<Command>) {
    until_builders_with(wt_config(), merged, board)
}

fn until_builders_with(config: LeadConfig, merged: Vec<String>, board: Vec<TaskId>) -> (H, Vec<Command>) {
    let (mut h, out) = H::new(design_generated("login"), Job::Impl, config);
    let tg = one_spawn(&out, Role::TaskGenerator);
    h.finish(&tg.id, TG_OK);
    h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    let out = h.ev(Event::PlanImported { completed: board });
    assert_eq!(out, vec![Command::RecoverWorktrees], "nothing starts before the worktrees are recovered");
    let out = h.ev(Event::WorktreesRecovered { merged });
    (h, out)
}

fn opened(cmds: &[Command]) -> Vec<String> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::OpenWorktree { group } => Some(group.clone()),
            _ => None,
        })
        .collect()
}

fn merge_of(cmds: &[Command]) -> Option<(String, String)> {
    cmds.iter().find_map(|c| match c {
        Command::MergeGroup { group, message } => Some((group.clone(), message.clone())),
        _ => None,
    })
}

/// Report, gate in the worktree: the merge is asked for.
fn report_and_gate(h: &mut H, id: &str, tasks: &str, files: &str) -> Vec<Command> {
    let out = h.finish(id, &builder_ok(tasks, files));
    let (run, kind) = gate_run(&out).expect("a gate runs on the report");
    assert!(matches!(kind, GateKind::TaskCompleted { .. }));
    h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() })
}

fn merged(h: &mut H, group: &str) -> Vec<Command> {
    h.ev(Event::GroupMerged { group: group.into(), before: format!("before-{group}"), after: format!("after-{group}") })
}

fn pass(h: &mut H, cmds: &[Command]) -> Vec<Command> {
    let (run, _) = gate_run(cmds).expect("a gate runs");
    h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() })
}

#[test]
fn groups_merge_one_at_a_time_and_the_next_wave_starts_from_the_merged_line() {
    let (mut h, out) = until_builders(vec![], vec![]);
    assert_eq!(opened(&out), ["G1", "G2"], "each Builder gets its worktree before it is spawned");
    let b = spawns(&out);
    assert_eq!(b.len(), 2);
    // The board says 1.1 is complete: under worktrees that unblocks nothing.
    let out = h.ev(Event::TasksUnblocked { completed: vec!["1.1".into()], unblocked: vec!["2.1".into()] });
    assert!(spawns(&out).is_empty(), "{out:#?}");

    // G2 reports first: its merge comes first (completion order).
    let out = report_and_gate(&mut h, &b[1].id, "1.2", "src/b.rs");
    let (group, message) = merge_of(&out).expect("merged after its gate");
    assert_eq!(group, "G2");
    assert!(message.starts_with("login: merge group G2 (tasks 1.2)"), "{message}");
    assert!(message.ends_with("\n\nTroupe-Merge: login/G2@1.0"), "{message}");
    assert!(!has(&out, "mark-tasks-done"), "not done before the merged gate");
    // G1 reports meanwhile: it waits, nothing else runs beside a merge.
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    assert!(gate_run(&out).is_none() && merge_of(&out).is_none(), "{out:#?}");

    let out = merged(&mut h, "G2");
    let (_, kind) = gate_run(&out).unwrap();
    assert_eq!(kind, GateKind::Merged { group: "G2".into() });
    let out = pass(&mut h, &out);
    assert!(out.contains(&Command::CloseWorktree { group: "G2".into() }));
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.2".into()] }));
    // Now G1's report is gated; G3 still waits for G1's merge.
    let (_, kind) = gate_run(&out).expect("G1's report is gated next");
    assert!(matches!(kind, GateKind::TaskCompleted { agent, .. } if agent == b[0].id));
    assert!(spawns(&out).is_empty());
    let out = pass(&mut h, &out);
    assert_eq!(merge_of(&out).unwrap().0, "G1");
    let out = merged(&mut h, "G1");
    let out = pass(&mut h, &out);
    assert_eq!(opened(&out), ["G3"]);
    let g3 = one_spawn(&out, Role::Builder);
    let out = report_and_gate(&mut h, &g3.id, "2.1", "src/c.rs");
    assert_eq!(merge_of(&out).unwrap().0, "G3");
    let out = merged(&mut h, "G3");
    let out = pass(&mut h, &out);
    assert_eq!(gate_run(&out).unwrap().1, GateKind::Final, "the final gate after the last merge");
}

fn commits_of(cmds: &[Command]) -> Vec<(String, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::CommitGroup { group, message } => Some((group.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_report_commits_in_its_worktree_at_once_even_while_another_merges() {
    let (mut h, out) = until_builders(vec![], vec![]);
    let b = spawns(&out);
    let out = h.finish(&b[1].id, &builder_ok("1.2", "src/b.rs"));
    let commit = out.iter().position(|c| matches!(c, Command::CommitGroup { .. })).expect("committed at the report");
    let gate = out.iter().position(|c| matches!(c, Command::RunGate { .. })).expect("gated");
    assert!(commit < gate, "the commit starts before the gate: {out:#?}");
    let early = commits_of(&out);
    let run = gate_run(&out).unwrap().0;
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() });
    assert_eq!(early, [merge_of(&out).unwrap()], "one commit, with its merge's message");
    assert!(commits_of(&out).is_empty(), "{out:#?}");
    // G1 reports while G2 merges: its gate waits, its commit does not.
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    assert!(gate_run(&out).is_none() && merge_of(&out).is_none(), "{out:#?}");
    let commits = commits_of(&out);
    assert_eq!(commits.len(), 1, "{out:#?}");
    assert_eq!(commits[0].0, "G1");
    assert!(commits[0].1.ends_with("\n\nTroupe-Merge: login/G1@1.0"), "the merge's message: {}", commits[0].1);
}

#[test]
fn a_blocked_or_refused_report_and_the_shared_tree_commit_nothing_early() {
    let (mut h, out) = until_builders(vec![], vec![]);
    let b = spawns(&out);
    let out = h.finish(&b[0].id, "BUILDER_BLOCKED\nFeature: login\nStatus: blocked\nBlocker: undecided\n");
    assert!(commits_of(&out).is_empty(), "{out:#?}");
    let out = h.finish(&b[1].id, "no report at all");
    assert!(commits_of(&out).is_empty(), "{out:#?}");

    let config = LeadConfig { worktrees: false, ..LeadConfig::default() };
    let (mut h, out) = H::new(design_generated("login"), Job::Impl, config);
    let tg = one_spawn(&out, Role::TaskGenerator);
    h.finish(&tg.id, TG_OK);
    h.ev(Event::PlanLoaded(PlanLoad::Loaded(two_wave_plan())));
    let out = h.ev(Event::PlanImported { completed: vec![] });
    let b = spawns(&out);
    let out = h.finish(&b[0].id, &builder_ok("1.1", "src/a.rs"));
    assert!(commits_of(&out).is_empty() && gate_run(&out).is_some(), "{out:#?}");
}

#[test]
fn a_conflict_resets_the_group_and_a_new_builder_gets_the_conflict_then_escalation_after_two() {
    let (mut h, out) = until_builders(vec![], vec![]);
    let b = spawns(&out);
    let mut id = b[0].id.clone();
    for attempt in 1..=3 {
        report_and_gate(&mut h, &id, "1.1", "src/a.rs");
        let out = h.ev(Event::MergeConflict { group: "G1".into(), output: "CONFLICT (content): src/a.rs".into() });
        assert!(out.contains(&Command::CloseWorktree { group: "G1".into() }), "{out:#?}");
        if attempt == 3 {
            assert!(spawns(&out).is_empty());
            assert!(h.lead.ctx().escalations()[0].0.contains("could not be merged after 2 new attempts"));
            return;
        }
        assert_eq!(opened(&out), ["G1"], "a fresh worktree from the merged line");
        let again = one_spawn(&out, Role::Builder);
        assert_eq!(again.attempt, 1, "a new Builder in a new worktree starts its attempts afresh");
        assert!(
            again.context.instructions[0].contains("CONFLICT (content): src/a.rs"),
            "{:?}",
            again.context.instructions
        );
        id = again.id;
    }
}

#[test]
fn a_failing_merged_gate_takes_the_merge_back_and_rebuilds_with_the_output() {
    let (mut h, out) = until_builders(vec![], vec![]);
    let b = spawns(&out);
    report_and_gate(&mut h, &b[0].id, "1.1", "src/a.rs");
    let out = merged(&mut h, "G1");
    let (run, _) = gate_run(&out).unwrap();
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "test b fails".into() });
    let undo = out.iter().position(|c| *c == Command::UndoMerge { to: "before-G1".into() }).expect("undo");
    let close = out.iter().position(|c| *c == Command::CloseWorktree { group: "G1".into() }).expect("close");
    let open = out.iter().position(|c| *c == Command::OpenWorktree { group: "G1".into() }).expect("open");
    assert!(undo < close && close < open, "undo, reset, then a new worktree: {out:#?}");
    assert!(!has(&out, "mark-tasks-done"));
    let again = one_spawn(&out, Role::Builder);
    assert!(again.context.instructions[0].contains("test b fails"));
}

#[test]
fn resume_keeps_merged_groups_and_rebuilds_groups_only_completed_on_the_board() {
    let spec = design_generated("login");
    let merged_g1 = merge_trailer(&spec, "G1");
    // G2's Builder completed 1.2 on the board, but the run died before its merge.
    let (_, out) = until_builders(vec![merged_g1, "login/G2@0.9".into()], vec!["1.1".into(), "1.2".into()]);
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.1".into()] }), "{out:#?}");
    let b = spawns(&out);
    assert_eq!(b.iter().map(|r| r.group.clone().unwrap()).collect::<Vec<_>>(), ["G2"], "G1 is never redone");
    assert_eq!(opened(&out), ["G2"]);
}

/// In a roadmap wave the groups merge into the feature's own line; once the
/// final gate passed there, the line lands on the project's branch as one
/// `Wave {N}:` merge, and only then is the implementation complete and committed.
#[test]
fn a_roadmap_feature_lands_its_line_after_its_final_gate_and_only_then_completes() {
    let config = LeadConfig { roadmap_wave: Some(2), ..wt_config() };
    let (mut h, out) = until_builders_with(config, vec![], vec![]);
    let b = spawns(&out);
    let mut next = Vec::new();
    for (builder, task, group) in [(&b[0], "1.1", "G1"), (&b[1], "1.2", "G2")] {
        report_and_gate(&mut h, &builder.id, task, "src/x.rs");
        let out = merged(&mut h, group);
        next = pass(&mut h, &out);
    }
    let g3 = one_spawn(&next, Role::Builder);
    report_and_gate(&mut h, &g3.id, "2.1", "src/c.rs");
    let out = merged(&mut h, "G3");
    let out = pass(&mut h, &out);
    let (run, kind) = gate_run(&out).unwrap();
    assert_eq!(kind, GateKind::Final);
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() });
    let land = Command::LandLine { message: "Wave 2: login merge the implementation (3 groups)".into() };
    assert_eq!(out.last(), Some(&land), "{out:#?}");
    assert!(!out.iter().any(|c| matches!(c, Command::Commit { .. } | Command::SaveSpec(_))), "{out:#?}");
    assert_ne!(h.lead.ctx().spec().phase, Phase::ImplementationComplete, "not complete before it landed");
    let out = h.ev(Event::LineLanded { sha: Some("abc".into()) });
    assert_eq!(h.lead.ctx().spec().phase, Phase::ImplementationComplete);
    assert!(
        out.iter().any(|c| matches!(c, Command::Commit { message } if message.starts_with("Wave 2: login implement")))
    );

    // A landing that conflicts with what a sibling landed first escalates,
    // and nothing is committed (a resume lands the kept line again).
    let spec = design_generated("login");
    let all = ["G1", "G2", "G3"].map(|g| merge_trailer(&spec, g)).to_vec();
    let (mut h, out) = until_builders_with(LeadConfig { roadmap_wave: Some(2), ..wt_config() }, all, vec![]);
    let out = pass(&mut h, &out);
    assert!(matches!(out.last(), Some(Command::LandLine { .. })), "{out:#?}");
    let out = h.ev(Event::CommandFailed { command: "land-line".into(), error: "CONFLICT (content): x".into() });
    assert!(!out.iter().any(|c| matches!(c, Command::Commit { .. })), "{out:#?}");
    assert!(h.lead.ctx().escalations()[0].0.contains("land-line failed: CONFLICT"));
    assert_ne!(h.lead.ctx().spec().phase, Phase::ImplementationComplete);
}

/// A budget pause keeps what was paid for: under worktrees only a merge
/// records a group, so a Builder that finishes its turn after the pause is
/// still gated and merged (nothing new spawns), and only then does the run end.
#[test]
fn a_paused_run_still_gates_and_merges_a_report_that_arrives_before_it_ends() {
    let mut config = wt_config();
    config.budgets.limits.run.max_cost_usd = Some(1.0);
    let (mut h, out) = until_builders_with(config, vec![], vec![]);
    let b = spawns(&out);
    let out = h.ev(Event::TurnSpent { id: b[1].id.clone(), cost_usd: 1.0, tokens: 10 });
    assert!(out.iter().any(|c| matches!(c, Command::ShutDown { force: false, .. })), "{out:#?}");
    let out = report_and_gate(&mut h, &b[0].id, "1.1", "src/a.rs");
    assert_eq!(merge_of(&out).unwrap().0, "G1", "the paused run still merges G1: {out:#?}");
    let out = merged(&mut h, "G1");
    let out = pass(&mut h, &out);
    assert!(out.contains(&Command::MarkTasksDone { tasks: vec!["1.1".into()] }), "{out:#?}");
    assert!(spawns(&out).is_empty() && finish_of(&out).is_none(), "{out:#?}");
    let out = h.ev(Event::TeammateExited { id: b[1].id.clone(), error: "stopped".into(), stats: RunStats::default() });
    assert!(matches!(finish_of(&out), Some(Outcome::OverBudget { stopped: false, .. })), "{out:#?}");
}
