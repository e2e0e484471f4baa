//! The implementation stage (seed 000 Flow 3, Spec 8 for `troupe impl`): gate,
//! the TaskGenerator writes tasks.yaml, the Lead validates and imports it, then
//! Builders run one per group, up to `max_concurrent` at once. Reports are
//! processed one at a time in arrival order: quality gate, tasks marked done,
//! files and knowledge collected; a group starts as soon as every task it
//! depends on is done and no running group owns one of its files, without
//! waiting for the rest of its wave. After the last group: a final quality gate,
//! phase `implementation-complete`, commit.
//!
//! With `[team] isolation = "worktree"` each group works in its own git
//! worktree and is merged by the Lead after its gate ([`merge`]).

mod merge;

pub use merge::{TRAILER as MERGE_TRAILER, merge_trailer};

use std::collections::{BTreeSet, VecDeque};

use troupe_core::gate::Operation;
use troupe_core::layout::Layout;
use troupe_core::role::Role;
use troupe_core::tools;

use crate::machine::{
    AgentId, Command, Ctx, DecisionKind, Event, GateKind, GateRunId, GateVerdict, KnowledgeTag, PlanLoad, SpawnContext,
    SpawnRequest, Stage, Step, gate_step,
};
use crate::plan::{BuildPlan, PlanGroup, TaskId};
use troupe_core::report::{Outcome, Submission};

/// The changelog action recorded once a revision's plan is imported.
pub const PLAN_IMPORTED: &str = "plan-imported";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Generating,
    LoadingPlan,
    Importing,
    /// Worktrees of an earlier run are being cleaned up; the board's
    /// completions wait for the merges they report.
    Recovering,
    Building,
    FinalGate(GateRunId),
    /// In a roadmap wave: the feature's own line is being merged into the
    /// project's branch after its final gate passed there.
    Landing,
    Committing,
}

/// Where one Builder group stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// Not started: waits for its dependencies, a free slot, or its files.
    Pending,
    /// Its Builder works.
    Running,
    /// Its Builder finished; the report waits its turn.
    Queued,
    /// Its report's quality gate runs.
    Gating,
    /// Its branch is merged into the feature's line and the wave's gate runs
    /// on the result (worktree isolation).
    Merging,
    /// Its tasks are done.
    Done,
    /// Its Builder reported `BUILDER_BLOCKED`.
    Blocked,
    /// Its Builder failed twice, or never fixed the quality gate.
    Failed,
}

#[derive(Debug, Clone)]
struct GroupRun {
    group: PlanGroup,
    state: GroupState,
    agent: Option<AgentId>,
    attempt: u32,
    gate_fixes: u32,
    files: Vec<String>,
    problem: Option<String>,
    /// Times its merge conflicted or failed the merged gate.
    merge_retries: u32,
}

impl GroupRun {
    fn holds_files(&self) -> bool {
        matches!(self.state, GroupState::Running | GroupState::Queued | GroupState::Gating | GroupState::Merging)
    }
}

/// Runs the TaskGenerator and the Builder waves.
#[derive(Debug)]
pub struct ImplStage {
    resume: bool,
    state: State,
    taskgen: Option<AgentId>,
    taskgen_attempt: u32,
    plan: BuildPlan,
    groups: Vec<GroupRun>,
    done: BTreeSet<TaskId>,
    /// Tasks already `done` in tasks.yaml (a board completion counts for
    /// scheduling before it is marked there).
    marked: BTreeSet<TaskId>,
    reports: VecDeque<(AgentId, Option<Submission>)>,
    gating: Option<(usize, GateRunId)>,
    /// The group being merged (worktree isolation): one at a time.
    merging: Option<merge::Merging>,
    /// Board completions reported at import, held while worktrees are recovered.
    board_completed: Vec<TaskId>,
    files: BTreeSet<String>,
}

impl ImplStage {
    /// An implementation stage. With `resume`, an existing valid tasks.yaml is
    /// used instead of generating a new one, and tasks already done are skipped.
    pub fn new(resume: bool) -> ImplStage {
        ImplStage {
            resume,
            state: State::Idle,
            taskgen: None,
            taskgen_attempt: 0,
            plan: BuildPlan::default(),
            groups: Vec::new(),
            done: BTreeSet::new(),
            marked: BTreeSet::new(),
            reports: VecDeque::new(),
            gating: None,
            merging: None,
            board_completed: Vec::new(),
            files: BTreeSet::new(),
        }
    }

    /// Every group and its state, in plan order.
    pub fn groups(&self) -> Vec<(&PlanGroup, GroupState)> {
        self.groups.iter().map(|g| (&g.group, g.state)).collect()
    }

    // ---- TaskGenerator ----

    fn spawn_taskgen(&mut self, ctx: &mut Ctx, problem: Option<Vec<String>>) {
        self.taskgen_attempt += 1;
        let id = ctx.new_agent_id(Role::TaskGenerator, None);
        let l = Layout::new("");
        let f = ctx.feature().to_string();
        let tasks = l.tasks_file(&f).to_string_lossy().into_owned();
        let mut instructions = vec![
            format!("Read {} and {}.", l.design_file(&f).display(), l.research_file(&f).display()),
            format!("Write {tasks}: `tasks:` (id, summary, status, subtasks with id, p, summary, details, depends, status) and `execution:` waves of groups (id, tasks, files), as your role prompt shows."),
            "Each group is one Builder's file ownership: two groups of the same wave never own the same file; a task never runs in a wave before a task it depends on.".into(),
            "End with the TASKGEN_COMPLETE report of your role prompt.".into(),
        ];
        if let Some(messages) = problem {
            instructions.insert(
                0,
                format!(
                    "The previous tasks.yaml was rejected; fix every one of these problems:\n- {}",
                    messages.join("\n- ")
                ),
            );
        }
        let read = [l.design_file(&f), l.research_file(&f), l.steering_dir().join("tech.md")]
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        ctx.spawn(SpawnRequest {
            id: id.clone(),
            role: Role::TaskGenerator,
            engine_phase: "tasks".into(),
            group: None,
            tasks: Vec::new(),
            context: SpawnContext {
                feature: f.clone(),
                read,
                write: vec![tasks],
                scope: format!("The task plan of feature {f}: tasks, dependencies, waves and Builder groups."),
                instructions,
            },
            attempt: self.taskgen_attempt,
        });
        self.taskgen = Some(id);
        self.state = State::Generating;
    }

    /// The TaskGenerator failed: `plan` says whether its plan was wrong (the
    /// user may fix tasks.yaml) or its run was (an engine or API failure: its
    /// log says why).
    fn taskgen_failed(&mut self, ctx: &mut Ctx, problems: Vec<String>, plan: bool) -> Step {
        let id = self.taskgen.clone().unwrap_or_default();
        ctx.session_line(format!("TaskGenerator {id}: failed ({})", problems.join("; ")));
        if self.taskgen_attempt < 2 {
            self.spawn_taskgen(ctx, Some(problems));
            return Step::Continue;
        }
        let f = ctx.feature().to_string();
        let hint = if plan {
            format!(
                "fix .troupe/specs/{f}/tasks.yaml by hand (check it with `troupe tasks validate {f}`), then run `troupe resume {f}`"
            )
        } else {
            format!(
                "see why in `troupe agent logs {id}` (an engine, credential or API problem is fixed outside troupe), then run `troupe resume {f}`"
            )
        };
        ctx.escalate(format!("the TaskGenerator failed twice for {f}: {}", problems.join("; ")), hint);
        Step::Escalated
    }

    fn on_plan(&mut self, ctx: &mut Ctx, load: &PlanLoad) -> Step {
        let first_look = self.resume && self.taskgen.is_none();
        let revision = ctx.spec().in_revision();
        match load {
            // A revision resumed before its plan was imported: tasks.yaml is
            // still the plan of the version before (all of it done), or a
            // revised one never imported. Either way the revised design gets
            // a plan of its own, as an uninterrupted revision does.
            PlanLoad::Loaded(_) if first_look && revision && !ctx.spec().recorded_at_this_version(PLAN_IMPORTED) => {
                ctx.session_line(format!(
                    "revision {}: no plan was imported for it yet; the TaskGenerator plans the revised design",
                    ctx.spec().version
                ));
                self.spawn_taskgen(ctx, None);
                Step::Continue
            }
            PlanLoad::Loaded(plan) if plan.groups.is_empty() => {
                self.taskgen_failed(ctx, vec!["tasks.yaml has no execution groups".into()], true)
            }
            PlanLoad::Loaded(plan) => {
                self.plan = plan.clone();
                // A revision's TaskGenerator wrote the plan of the revised
                // design: nothing of the old plan's progress counts, even when
                // the new plan reads the same.
                let replace = self.taskgen.is_some();
                ctx.push(Command::ImportPlan { replace, renew: replace && revision });
                self.state = State::Importing;
                Step::Continue
            }
            PlanLoad::Missing if first_look => {
                self.spawn_taskgen(ctx, None);
                Step::Continue
            }
            PlanLoad::Invalid(messages) if first_look => {
                self.spawn_taskgen(ctx, Some(messages.clone()));
                Step::Continue
            }
            PlanLoad::Missing => self.taskgen_failed(ctx, vec!["it did not write tasks.yaml".into()], true),
            PlanLoad::Invalid(messages) => self.taskgen_failed(ctx, messages.clone(), true),
        }
    }

    fn on_imported(&mut self, ctx: &mut Ctx, completed: &[TaskId]) -> Step {
        if ctx.config().worktrees {
            // A Builder completes its tasks on the board before its branch is
            // merged: only the merges the line holds say what is done.
            self.board_completed = completed.to_vec();
            ctx.push(Command::RecoverWorktrees);
            self.state = State::Recovering;
            return Step::Continue;
        }
        self.build(ctx, completed)
    }

    /// Start building, with `completed` the tasks done outside tasks.yaml.
    fn build(&mut self, ctx: &mut Ctx, completed: &[TaskId]) -> Step {
        // What a resumed revision goes by: this version's plan is on the board.
        if ctx.spec().in_revision() && !ctx.spec().recorded_at_this_version(PLAN_IMPORTED) {
            let now = ctx.now;
            let summary = format!("the plan of revision {} is on the board", ctx.spec().version);
            let _ = ctx.change_spec(|s| {
                s.note(now, PLAN_IMPORTED, &summary);
                Ok(())
            });
        }
        self.done = self.plan.done_ids();
        self.marked = self.done.clone();
        self.done.extend(completed.iter().filter(|t| self.plan.task(t).is_some()).cloned());
        // Completed on the board but not yet in tasks.yaml: bring the file up to date.
        let unmarked: Vec<TaskId> = self.done.difference(&self.marked).cloned().collect();
        if !unmarked.is_empty() {
            self.marked.extend(unmarked.iter().cloned());
            ctx.push(Command::MarkTasksDone { tasks: unmarked });
        }
        self.groups = self
            .plan
            .groups
            .iter()
            .map(|g| GroupRun {
                group: g.clone(),
                state: GroupState::Pending,
                agent: None,
                attempt: 0,
                gate_fixes: 0,
                files: Vec::new(),
                problem: None,
                merge_retries: 0,
            })
            .collect();
        let summary = format!(
            "plan: {} in {} over {} ({} already done)",
            count(self.plan.tasks.len(), "task"),
            count(self.plan.groups.len(), "group"),
            count(self.plan.wave_count() as usize, "wave"),
            self.done.len()
        );
        ctx.decide(DecisionKind::Spawn, summary.clone());
        ctx.session_line(summary);
        self.state = State::Building;
        self.schedule(ctx);
        self.check_end(ctx)
    }

    // ---- Builders ----

    /// Start every group that can start now, in plan order.
    fn schedule(&mut self, ctx: &mut Ctx) {
        for i in 0..self.groups.len() {
            if self.groups[i].state != GroupState::Pending {
                continue;
            }
            let g = &self.groups[i].group;
            if g.tasks.iter().all(|t| self.done.contains(t)) {
                // Done in an earlier run: its files still count as created.
                self.files.extend(g.reported_files.iter().cloned());
                self.groups[i].state = GroupState::Done;
                continue;
            }
            if ctx.free_slots() == 0 {
                return;
            }
            let ready = g
                .tasks
                .iter()
                .filter_map(|t| self.plan.task(t))
                .all(|t| t.depends.iter().all(|d| self.done.contains(d) || g.tasks.contains(d)));
            let clash =
                self.groups.iter().any(|o| o.holds_files() && o.group.files.iter().any(|f| g.files.contains(f)));
            // Merges go in wave order: a group starts from the merged result
            // of every wave before its own.
            let merged_before = !ctx.config().worktrees
                || self.groups.iter().all(|o| o.group.wave >= g.wave || o.state == GroupState::Done);
            if ready && !clash && merged_before {
                self.spawn_builder(ctx, i);
            }
        }
    }

    fn spawn_builder(&mut self, ctx: &mut Ctx, i: usize) {
        let l = Layout::new("");
        let f = ctx.feature().to_string();
        let run = &mut self.groups[i];
        run.attempt += 1;
        run.gate_fixes = 0;
        let id = ctx.new_agent_id(Role::Builder, Some(&run.group.id));
        let todo: Vec<TaskId> = run.group.tasks.iter().filter(|t| !self.done.contains(*t)).cloned().collect();
        let listing: Vec<String> = todo
            .iter()
            .map(|t| match self.plan.task(t) {
                Some(task) => format!("{t} {}", task.summary),
                None => t.clone(),
            })
            .collect();
        let mut instructions = vec![
            format!("Implement these tasks, in order: {}.", listing.join("; ")),
            "Work test first for each task: RED (write a failing test and see it fail), GREEN (the least code that passes), REFACTOR (clean up with the tests green).".into(),
            "Run tests and linters only with the exact commands in .troupe/steering/tech.md (Common Commands).".into(),
            format!("Write only these files: {}. Anything else is denied.", run.group.files.join(", ")),
            format!(
                "Claim each task on the board with `{{{{tool:{claim}}}}}` before you start it and complete it with `{{{{tool:{complete}}}}}` when its tests pass, with the task ids exactly as your assignment lists them (Tasks:); or in the shell `{{{{troupe}}}} board claim <id>` and `{{{{troupe}}}} board complete <id>`.",
                claim = tools::BOARD_CLAIM,
                complete = tools::BOARD_COMPLETE,
            ),
            "End with the BUILDER_COMPLETE report of your role prompt (or BUILDER_BLOCKED with a Blocker: line).".into(),
        ];
        if let Some(p) = run.problem.take() {
            instructions.insert(
                0,
                format!("A previous Builder for this group failed: {p}. Check what it left and finish the work."),
            );
        }
        let read = [l.design_file(&f), l.tasks_file(&f), l.steering_dir().join("tech.md")]
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let request = SpawnRequest {
            id: id.clone(),
            role: Role::Builder,
            engine_phase: "impl".into(),
            group: Some(run.group.id.clone()),
            tasks: todo,
            context: SpawnContext {
                feature: f.clone(),
                read,
                write: run.group.files.clone(),
                scope: format!("Group {} (wave {}) of feature {f}.", run.group.id, run.group.wave),
                instructions,
            },
            attempt: run.attempt,
        };
        run.agent = Some(id);
        run.state = GroupState::Running;
        if ctx.config().worktrees {
            ctx.push(Command::OpenWorktree { group: run.group.id.clone() });
        }
        ctx.spawn(request);
    }

    fn group_of(&self, agent: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.agent.as_deref() == Some(agent))
    }

    /// A Builder attempt failed outright: retry the group once with a new Builder.
    fn builder_failed(&mut self, ctx: &mut Ctx, i: usize, why: String) {
        let run = &mut self.groups[i];
        let id = run.agent.clone().unwrap_or_default();
        ctx.session_line(format!("Builder {id} (group {}): failed ({why})", run.group.id));
        if run.attempt < 2 {
            run.problem = Some(why);
            run.state = GroupState::Pending;
            // Its slot and files are free again; it goes first since it is earliest in plan order.
        } else {
            run.state = GroupState::Failed;
            let group = run.group.id.clone();
            let f = ctx.feature().to_string();
            ctx.escalate(
                format!("group {group} of {f} failed twice: {why}"),
                format!("see `troupe agent logs {id}`, fix the cause, then run `troupe resume {f}`"),
            );
        }
    }

    /// Process queued reports, one at a time, in arrival order.
    fn pump(&mut self, ctx: &mut Ctx) {
        while self.gating.is_none() && self.merging.is_none() {
            let Some((agent, text)) = self.reports.pop_front() else { return };
            let Some(i) = self.group_of(&agent) else { continue };
            let r = match text.as_ref().map(Submission::builder) {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    self.builder_failed(ctx, i, format!("its report was refused: {e}"));
                    continue;
                }
                None => {
                    self.builder_failed(ctx, i, "it ended without a BUILDER_COMPLETE report".into());
                    continue;
                }
            };
            if !r.knowledge.is_empty() {
                ctx.push(Command::RecordKnowledge {
                    from: agent.clone(),
                    entries: KnowledgeTag::entries(&r.knowledge),
                });
            }
            let files = r.files.clone();
            if let Some(t) = ctx.teammate_mut(&agent) {
                t.files = files.clone();
                t.tests = Some(r.tests.clone()).filter(|t| !t.is_empty());
            }
            let run = &mut self.groups[i];
            if let Outcome::Blocked { blocker } = &r.outcome {
                let blocker = blocker.clone();
                run.state = GroupState::Blocked;
                let tasks: Vec<TaskId> = run.group.tasks.iter().filter(|t| !self.done.contains(*t)).cloned().collect();
                ctx.session_line(format!("Builder {agent} (group {}): BLOCKED: {blocker}", run.group.id));
                ctx.buffer_item(format!("group {} blocked: {blocker}", run.group.id));
                ctx.decide(DecisionKind::Escalation, format!("group {} blocked: {blocker}", run.group.id));
                ctx.push(Command::MarkTasksBlocked { tasks, reason: blocker });
                continue;
            }
            run.files = files;
            run.state = GroupState::Gating;
            let tasks = run.group.tasks.clone();
            let gate = ctx.new_gate_run();
            self.gating = Some((i, gate));
            ctx.push(Command::RunGate { run: gate, kind: GateKind::TaskCompleted { agent, tasks } });
        }
    }

    fn on_gate(&mut self, ctx: &mut Ctx, i: usize, passed: bool, output: &str) {
        self.gating = None;
        let fixes_allowed = ctx.config().gate_fix_attempts;
        if passed && ctx.config().worktrees {
            return self.start_merge(ctx, i);
        }
        if passed {
            return self.group_done(ctx, i, "passed the quality gate");
        }
        let run = &mut self.groups[i];
        let agent = run.agent.clone().unwrap_or_default();
        if run.gate_fixes < fixes_allowed {
            run.gate_fixes += 1;
            run.state = GroupState::Running;
            ctx.decide(
                DecisionKind::Quality,
                format!(
                    "group {} failed the quality gate; {agent} sent back to fix it (fix {}/{fixes_allowed})",
                    run.group.id, run.gate_fixes
                ),
            );
            ctx.resume(
                &agent,
                format!(
                    "The quality gate failed after your report. Fix the cause, keeping to your files, run the tests again, and end with a new BUILDER_COMPLETE report.\n\n{output}"
                ),
            );
        } else {
            run.state = GroupState::Failed;
            let group = run.group.id.clone();
            let f = ctx.feature().to_string();
            ctx.escalate(
                format!("group {group} of {f} still fails the quality gate after {fixes_allowed} fixes"),
                format!("run the test command of .troupe/steering/tech.md, fix it, then `troupe resume {f}`"),
            );
        }
    }

    /// Group `i` is finished (`how`: its gate passed, or its merge did): its
    /// tasks are done and its successors may start.
    fn group_done(&mut self, ctx: &mut Ctx, i: usize, how: &str) {
        let run = &mut self.groups[i];
        let agent = run.agent.clone().unwrap_or_default();
        run.state = GroupState::Done;
        let tasks: Vec<TaskId> = run.group.tasks.iter().filter(|t| !self.marked.contains(*t)).cloned().collect();
        self.done.extend(tasks.iter().cloned());
        self.marked.extend(tasks.iter().cloned());
        self.files.extend(run.files.iter().cloned());
        ctx.decide(DecisionKind::Quality, format!("group {} {how}", run.group.id));
        ctx.session_line(format!("Builder {agent} (group {}): done [{}]", run.group.id, run.group.tasks.join(", ")));
        ctx.push(Command::MarkTasksDone { tasks });
        if !run.files.is_empty() {
            ctx.push(Command::RecordGroupFiles { group: run.group.id.clone(), files: run.files.clone() });
        }
    }

    /// Once nothing runs: the final gate if every group is done, else escalate.
    /// A Builder still shutting down counts as running: its process may still
    /// write, and the final gate and the commit must see the tree it leaves.
    fn check_end(&mut self, ctx: &mut Ctx) -> Step {
        let stopping = ctx
            .teammates()
            .iter()
            .any(|t| t.role == Role::Builder && t.status == crate::machine::TeammateStatus::ShuttingDown);
        if self.state != State::Building
            || self.gating.is_some()
            || self.merging.is_some()
            || !self.reports.is_empty()
            || self.groups.iter().any(|g| g.holds_files())
            || stopping
        {
            return Step::Continue;
        }
        if self.groups.iter().all(|g| g.state == GroupState::Done) {
            let run = ctx.new_gate_run();
            ctx.push(Command::RunGate { run, kind: GateKind::Final });
            self.state = State::FinalGate(run);
            return Step::Continue;
        }
        let f = ctx.feature().to_string();
        let stuck: Vec<String> = self
            .groups
            .iter()
            .filter(|g| g.state != GroupState::Done)
            .map(|g| {
                let why = match g.state {
                    GroupState::Blocked => "blocked",
                    GroupState::Failed => "failed",
                    _ => "waiting on them",
                };
                format!("{} ({why})", g.group.id)
            })
            .collect();
        let done = self.groups.iter().filter(|g| g.state == GroupState::Done).count();
        ctx.escalate(
            format!("{f}: {done}/{} groups done; not done: {}", self.groups.len(), stuck.join(", ")),
            format!("resolve the blockers in .troupe/handover/buffer.md, then run `troupe resume {f}` (completed tasks are not redone)"),
        );
        Step::Escalated
    }

    /// A resumed run whose implementation is already complete (it was
    /// interrupted after spec.yaml said so: during its commit, or in the
    /// review after it) finishes what is left of this stage from the records:
    /// the implementation commit, unless it was made before.
    fn finish_interrupted(&mut self, ctx: &mut Ctx) -> Step {
        let summary = ctx
            .spec()
            .changelog
            .iter()
            .rev()
            .find(|c| c.action == "implementation-complete")
            .map(|c| c.summary.clone())
            .unwrap_or_else(|| "the implementation".to_string());
        ctx.session_line(format!("implementation already complete ({summary}); nothing to build again"));
        if !ctx.config().commit {
            return Step::Done;
        }
        let message = ctx.commit_message(&format!("implement {summary}"));
        let mut paths = ctx.spec().implementation.files_created.clone();
        if ctx.config().worktrees {
            // The groups' files are on the line already (merged); tasks.yaml's
            // done marks are what the implementation commit still holds.
            paths.push(Layout::new("").tasks_file(ctx.feature()).to_string_lossy().into_owned());
        }
        ctx.push(Command::CommitIfChanged { message, paths });
        self.state = State::Committing;
        Step::Continue
    }

    fn on_final_gate(&mut self, ctx: &mut Ctx, passed: bool, output: &str) -> Step {
        let f = ctx.feature().to_string();
        if !passed {
            ctx.decide(DecisionKind::Quality, "final quality gate failed; nothing committed".into());
            ctx.escalate(
                format!("the final quality gate of {f} failed (nothing committed):\n{output}"),
                format!("fix the failing command of .troupe/steering/tech.md, then run `troupe resume {f}`"),
            );
            return Step::Escalated;
        }
        ctx.decide(DecisionKind::Quality, "final quality gate passed".into());
        // A roadmap feature's groups merged into its own line (siblings never
        // saw them): the whole feature lands on the project's branch now.
        if ctx.config().commit && ctx.config().worktrees {
            let message = ctx.commit_message(&format!("merge the implementation ({} groups)", self.groups.len()));
            ctx.push(Command::LandLine { message });
            self.state = State::Landing;
            return Step::Continue;
        }
        self.complete(ctx)
    }

    /// The final gate passed (and a roadmap feature's line landed): mark the
    /// implementation complete in spec.yaml and commit it.
    fn complete(&mut self, ctx: &mut Ctx) -> Step {
        let files: Vec<String> = self.files.iter().cloned().collect();
        let now = ctx.now();
        let summary = implemented_summary(self.plan.tasks.len(), self.groups.len(), files.len());
        if let Err(e) = ctx.change_spec(|s| s.mark_implementation_complete(now, &files, &summary)) {
            ctx.escalate(e.to_string(), "check spec.yaml with `troupe spec show`".into());
            return Step::Escalated;
        }
        ctx.session_line(format!("implementation complete: {summary}"));
        if ctx.config().commit {
            let message = ctx.commit_message(&format!("implement {summary}"));
            ctx.push(Command::Commit { message });
            self.state = State::Committing;
            Step::Continue
        } else {
            Step::Done
        }
    }
}

/// A quality gate whose command could not run: the user's environment, not
/// the code. Nobody is sent to "fix" it; the run stops and says what to fix.
pub(crate) fn gate_unrunnable(ctx: &mut Ctx, output: &str) -> Step {
    let f = ctx.feature().to_string();
    ctx.decide(DecisionKind::Quality, "the quality gate could not run; no teammate was asked to fix it".into());
    ctx.escalate(
        format!(
            "the quality gate of {f} could not run (a problem of the environment, not of the code; nothing committed):\n{output}"
        ),
        format!(
            "install what the command needs, or correct it in .troupe/steering/tech.md (Common Commands) or [gates] of .troupe/config.toml, then run `troupe resume {f}`"
        ),
    );
    ctx.shut_down_all();
    Step::Escalated
}

impl Stage for ImplStage {
    fn name(&self) -> &'static str {
        "impl"
    }

    fn settling(&self, ctx: &Ctx) -> bool {
        use crate::machine::TeammateStatus::{Running, ShuttingDown, Spawning};
        // A Builder asked to stop by the pause may still finish its turn and report.
        let reporting = |g: &GroupRun| {
            g.state == GroupState::Running
                && g.agent
                    .as_deref()
                    .and_then(|a| ctx.teammate(a))
                    .is_some_and(|t| matches!(t.status, Running | ShuttingDown | Spawning))
        };
        ctx.config().worktrees
            && self.state == State::Building
            && (self.gating.is_some()
                || self.merging.is_some()
                || !self.reports.is_empty()
                || self.groups.iter().any(reporting))
    }

    fn start(&mut self, ctx: &mut Ctx) -> Step {
        if self.resume && ctx.spec().phase == troupe_core::phase::Phase::ImplementationComplete {
            return self.finish_interrupted(ctx);
        }
        if let Some(refused) = gate_step(ctx, Operation::Impl) {
            return refused;
        }
        if self.resume {
            ctx.push(Command::LoadPlan);
            self.state = State::LoadingPlan;
        } else {
            self.spawn_taskgen(ctx, None);
        }
        Step::Continue
    }

    fn wave(&self) -> Option<u32> {
        self.groups.iter().filter(|g| g.state != GroupState::Done).map(|g| g.group.wave).min()
    }

    fn handle_event(&mut self, event: &Event, ctx: &mut Ctx) -> Step {
        let is_taskgen = |id: &str| self.taskgen.as_deref() == Some(id);
        match (event, self.state) {
            (Event::TeammateFinished { id, report, .. }, State::Generating) if is_taskgen(id) => {
                match report.as_ref().map(|r| r.completion("TASKGEN")) {
                    None => self.taskgen_failed(ctx, vec!["it ended without a TASKGEN_COMPLETE report".into()], false),
                    Some(Err(e)) => self.taskgen_failed(
                        ctx,
                        vec![format!("it ended without a TASKGEN_COMPLETE report ({e})")],
                        false,
                    ),
                    Some(Ok(r)) if r.is_blocked() => {
                        let blocker = r.field("blocker").unwrap_or("no reason given").to_string();
                        let f = ctx.feature().to_string();
                        ctx.escalate(
                            format!("the TaskGenerator is blocked on {f}: {blocker}"),
                            format!(
                                "resolve it (often a design question: `troupe design {f}`), then `troupe resume {f}`"
                            ),
                        );
                        Step::Escalated
                    }
                    Some(_) => {
                        ctx.push(Command::LoadPlan);
                        self.state = State::LoadingPlan;
                        Step::Continue
                    }
                }
            }
            (Event::TeammateExited { id, error, .. }, State::Generating) if is_taskgen(id) => {
                self.taskgen_failed(ctx, vec![format!("its process ended without a result: {error}")], false)
            }
            (Event::SpawnFailed { id, error }, State::Generating) if is_taskgen(id) => {
                self.taskgen_failed(ctx, vec![format!("it could not be started: {error}")], false)
            }
            (Event::TeammateUnresponsive { id }, State::Generating) if is_taskgen(id) => {
                self.taskgen_failed(ctx, vec!["it stopped responding and was shut down".into()], false)
            }
            (Event::PlanLoaded(load), State::LoadingPlan) => self.on_plan(ctx, load),
            (Event::PlanImported { completed }, State::Importing) => self.on_imported(ctx, completed),
            (Event::WorktreesRecovered { merged }, State::Recovering) => self.on_recovered(ctx, merged),
            (Event::GroupMerged { group, before, after }, State::Building) => {
                self.on_merged(ctx, group, before, after);
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::MergeConflict { group, output }, State::Building) => {
                self.on_conflict(ctx, group, output);
                self.pump(ctx);
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::GateFinished { run, verdict, output }, State::Building) if self.is_merge_gate(*run) => {
                if *verdict == GateVerdict::Environment {
                    return gate_unrunnable(ctx, output);
                }
                self.on_merge_gate(ctx, *verdict == GateVerdict::Passed, output);
                self.pump(ctx);
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::TeammateFinished { id, report, .. }, State::Building) => {
                if let Some(i) = self.group_of(id)
                    && self.groups[i].state == GroupState::Running
                {
                    self.groups[i].state = GroupState::Queued;
                    self.commit_early(ctx, i, report.as_ref());
                    self.reports.push_back((id.clone(), report.clone()));
                    self.pump(ctx);
                }
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::TeammateExited { id, error: why, .. }, State::Building)
            | (Event::SpawnFailed { id, error: why }, State::Building) => {
                if let Some(i) = self.group_of(id)
                    && self.groups[i].state == GroupState::Running
                {
                    self.builder_failed(ctx, i, format!("its process ended without a result: {why}"));
                }
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::TeammateUnresponsive { id }, State::Building) => {
                if let Some(i) = self.group_of(id)
                    && self.groups[i].state == GroupState::Running
                {
                    self.builder_failed(ctx, i, "it stopped responding and was shut down".into());
                }
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::GateFinished { run, verdict, output }, State::Building) => {
                if let Some((i, r)) = self.gating
                    && r == *run
                {
                    if *verdict == GateVerdict::Environment {
                        self.gating = None;
                        self.groups[i].state = GroupState::Failed;
                        return gate_unrunnable(ctx, output);
                    }
                    self.on_gate(ctx, i, *verdict == GateVerdict::Passed, output);
                    self.pump(ctx);
                }
                self.schedule(ctx);
                self.check_end(ctx)
            }
            // A Builder stopped by a budget pause: under worktrees its report
            // is still gated and merged (only a merge keeps its work); without
            // one, its group waits for `troupe resume`.
            (Event::TeammateStopped { id, report }, State::Building) if ctx.config().worktrees => {
                if let Some(i) = self.group_of(id)
                    && self.groups[i].state == GroupState::Running
                {
                    match report {
                        Some(_) => {
                            self.groups[i].state = GroupState::Queued;
                            self.reports.push_back((id.clone(), report.clone()));
                            self.pump(ctx);
                        }
                        None => self.groups[i].state = GroupState::Pending,
                    }
                }
                self.schedule(ctx);
                self.check_end(ctx)
            }
            (Event::TeammateStopped { .. }, State::Building) => {
                self.schedule(ctx);
                self.check_end(ctx)
            }
            // Under worktree isolation a task counts as done once its group is
            // merged, not when its Builder completes it on the board.
            (Event::TasksUnblocked { .. }, State::Building) if ctx.config().worktrees => Step::Continue,
            (Event::TasksUnblocked { completed, .. }, State::Building) => {
                self.done.extend(completed.iter().filter(|t| self.plan.task(t).is_some()).cloned());
                self.schedule(ctx);
                Step::Continue
            }
            (Event::GateFinished { run, verdict, output }, State::FinalGate(r)) if *run == r => match verdict {
                GateVerdict::Environment => gate_unrunnable(ctx, output),
                _ => self.on_final_gate(ctx, *verdict == GateVerdict::Passed, output),
            },
            (Event::LineLanded { sha }, State::Landing) => {
                if let Some(s) = sha {
                    ctx.decide(DecisionKind::Commit, format!("the feature's own line landed as {s}"));
                }
                self.complete(ctx)
            }
            (Event::Committed { sha }, State::Committing) => {
                let what = sha
                    .as_deref()
                    .map(|s| format!("implementation committed as {s}"))
                    .unwrap_or("implementation: nothing to commit".into());
                ctx.decide(DecisionKind::Commit, what);
                Step::Done
            }
            (Event::CommandFailed { command, error }, _) if self.state != State::Idle => {
                ctx.escalate(
                    format!("{command} failed: {error}"),
                    format!("fix the cause, then run `troupe resume {}`", ctx.feature()),
                );
                ctx.shut_down_all();
                Step::Escalated
            }
            _ => Step::Continue,
        }
    }
}

/// `n noun` or `n nouns`: commit messages are permanent, so `1 task`, never `1 tasks`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// What the implementation commit and spec.yaml's changelog say was done.
fn implemented_summary(tasks: usize, groups: usize, files: usize) -> String {
    format!("{} in {}, {}", count(tasks, "task"), count(groups, "group"), count(files, "file"))
}

#[cfg(test)]
mod plural_tests {
    #[test]
    fn the_implementation_summary_uses_the_singular_for_one() {
        assert_eq!(super::implemented_summary(1, 1, 1), "1 task in 1 group, 1 file");
        assert_eq!(super::implemented_summary(3, 2, 0), "3 tasks in 2 groups, 0 files");
    }
}
