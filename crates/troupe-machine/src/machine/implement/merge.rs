//! Worktree isolation (`[team] isolation = "worktree"`): each Builder group
//! works in its own git worktree; once its report passed its gate there, the
//! Lead merges its branch into the feature's line, one group at a time (in
//! wave order, since a group starts only when every earlier wave is merged;
//! within a wave in the order the reports were processed), runs the wave's
//! gate on the merged result, and only then counts the group's tasks done.
//!
//! A merge that conflicts, or whose merged gate fails, is taken back; the
//! group's worktree and branch are removed, its tasks wait again, and a new
//! Builder starts from the merged line with what went wrong as context, at
//! most [`MERGE_RETRIES`] times before the Lead escalates.
//!
//! The merges are the record: each merge commit carries a [`merge_trailer`],
//! so a resumed run keeps every merged group and redoes only the others.

use troupe_core::report::{Outcome, Submission};
use troupe_core::spec::Spec;

use super::{GroupState, ImplStage};
use crate::machine::{Command, Ctx, DecisionKind, GateKind, GateRunId, Step};
use crate::plan::TaskId;

/// How often a group is built again after a conflict or a failing merged gate.
pub const MERGE_RETRIES: u32 = 2;

/// The git trailer key of a group's merge commit.
pub const TRAILER: &str = "Troupe-Merge";

/// The value of the [`TRAILER`] line that marks group `group` of `spec`'s
/// feature as merged, at the spec's version (a revision's plan reuses group
/// ids; its groups are new work).
pub fn merge_trailer(spec: &Spec, group: &str) -> String {
    format!("{}/{group}@{}", spec.feature_name, spec.version)
}

/// The merge in progress.
#[derive(Debug, Clone)]
pub(super) struct Merging {
    /// The group.
    i: usize,
    /// The line's commit before the merge, once merged.
    before: Option<String>,
    /// The merged gate's run, once started.
    gate: Option<GateRunId>,
}

impl ImplStage {
    /// The message of group `i`'s commit in its worktree and of its merge.
    fn merge_message(&self, ctx: &Ctx, i: usize) -> String {
        let run = &self.groups[i];
        let (group, tasks) = (&run.group.id, run.group.tasks.join(", "));
        let summary = format!("merge group {group} (tasks {tasks})");
        format!("{}\n\n{TRAILER}: {}", ctx.commit_message(&summary), merge_trailer(ctx.spec(), group))
    }

    /// Group `i`'s Builder reported its work complete: its commit in its
    /// worktree can be made now, while earlier reports are gated and merged,
    /// rather than on the merge's path. A report that is refused or blocked
    /// commits nothing (a retry finishes what is there uncommitted).
    pub(super) fn commit_early(&mut self, ctx: &mut Ctx, i: usize, report: Option<&Submission>) {
        let complete = report.map(Submission::builder).is_some_and(|r| r.is_ok_and(|r| r.outcome == Outcome::Complete));
        if ctx.config().worktrees && complete {
            let message = self.merge_message(ctx, i);
            ctx.push(Command::CommitGroup { group: self.groups[i].group.id.clone(), message });
        }
    }

    /// Group `i` passed its gate in its worktree: merge it.
    pub(super) fn start_merge(&mut self, ctx: &mut Ctx, i: usize) {
        let message = self.merge_message(ctx, i);
        let run = &mut self.groups[i];
        run.state = GroupState::Merging;
        let group = run.group.id.clone();
        ctx.decide(DecisionKind::Quality, format!("group {group} passed the quality gate in its worktree; merging"));
        ctx.push(Command::MergeGroup { group, message });
        self.merging = Some(Merging { i, before: None, gate: None });
    }

    pub(super) fn is_merge_gate(&self, run: GateRunId) -> bool {
        self.merging.as_ref().is_some_and(|m| m.gate == Some(run))
    }

    /// The branch is merged: the wave's gate runs on the merged result.
    pub(super) fn on_merged(&mut self, ctx: &mut Ctx, group: &str, before: &str, after: &str) {
        let Some(m) = self.merging.as_mut().filter(|m| self.groups[m.i].group.id == group) else { return };
        let gate = ctx.new_gate_run();
        m.before = Some(before.to_string());
        m.gate = Some(gate);
        ctx.session_line(format!("group {group} merged as {after}"));
        ctx.push(Command::RunGate { run: gate, kind: GateKind::Merged { group: group.to_string() } });
    }

    pub(super) fn on_conflict(&mut self, ctx: &mut Ctx, group: &str, output: &str) {
        let Some(m) = self.merging.take_if(|m| self.groups[m.i].group.id == group) else { return };
        self.retry(ctx, m.i, format!("merging its branch conflicted with the merged work of other groups:\n{output}"));
    }

    /// The merged gate's verdict: done, or the merge taken back and retried.
    pub(super) fn on_merge_gate(&mut self, ctx: &mut Ctx, passed: bool, output: &str) {
        let Some(m) = self.merging.take() else { return };
        let group = self.groups[m.i].group.id.clone();
        if passed {
            ctx.push(Command::CloseWorktree { group });
            return self.group_done(ctx, m.i, "merged, and the wave's gate passed on the merged result");
        }
        if let Some(to) = m.before {
            ctx.push(Command::UndoMerge { to });
        }
        self.retry(
            ctx,
            m.i,
            format!("the quality gate failed on the merged result, so the merge was taken back:\n{output}"),
        );
    }

    /// Reset group `i` (worktree and branch removed, tasks pending) and build
    /// it again from the merged line, or escalate after [`MERGE_RETRIES`].
    fn retry(&mut self, ctx: &mut Ctx, i: usize, why: String) {
        let run = &mut self.groups[i];
        let group = run.group.id.clone();
        ctx.push(Command::CloseWorktree { group: group.clone() });
        ctx.session_line(format!("group {group}: {}", why.lines().next().unwrap_or_default()));
        if run.merge_retries >= MERGE_RETRIES {
            run.state = GroupState::Failed;
            let f = ctx.feature().to_string();
            ctx.escalate(
                format!("group {group} of {f} could not be merged after {MERGE_RETRIES} new attempts: {why}"),
                format!("merge by hand or change the plan's file ownership, then `troupe resume {f}`"),
            );
            return;
        }
        run.merge_retries += 1;
        ctx.decide(
            DecisionKind::Quality,
            format!(
                "group {group} reset to be built again ({}/{MERGE_RETRIES}): {}",
                run.merge_retries,
                why.lines().next().unwrap_or_default()
            ),
        );
        // A new Builder in a new worktree: its attempts count afresh.
        run.attempt = 0;
        run.problem = Some(why);
        run.state = GroupState::Pending;
    }

    /// An earlier run's worktrees are gone: merged groups are done, the rest
    /// start again (their board completions never merged, so they do not count).
    pub(super) fn on_recovered(&mut self, ctx: &mut Ctx, merged: &[String]) -> Step {
        let spec = ctx.spec().clone();
        let mut completed: Vec<TaskId> = Vec::new();
        for g in &self.plan.groups {
            if merged.contains(&merge_trailer(&spec, &g.id)) {
                completed.extend(g.tasks.iter().cloned());
            }
        }
        let ignored: Vec<&TaskId> = self.board_completed.iter().filter(|t| !completed.contains(t)).collect();
        if !ignored.is_empty() {
            let ids: Vec<&str> = ignored.iter().map(|t| t.as_str()).collect();
            ctx.session_line(format!("completed on the board but never merged, built again: {}", ids.join(", ")));
        }
        self.board_completed.clear();
        self.state = super::State::Building;
        self.build(ctx, &completed)
    }
}
