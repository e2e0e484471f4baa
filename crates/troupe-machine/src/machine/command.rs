//! What the machine asks the driver to do. The driver carries each command out
//! and reports results back as [`Event`](crate::machine::Event)s; it decides nothing.
//!
//! Stages add variants here (the review pipeline has its own); the driver's
//! match over them is exhaustive, so each new one is carried out.

use serde::{Deserialize, Serialize};
use troupe_core::role::Role;
use troupe_core::spec::Spec;

use crate::machine::{AgentId, GateRunId};
use crate::plan::TaskId;

/// Everything a teammate is told at spawn (seed 000 Spec 6.1: feature, paths,
/// scope, instructions). Teammates share no memory (Spec 9.1), so this is all
/// they know besides their role prompt and the files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnContext {
    /// The feature.
    pub feature: String,
    /// Files to read first, relative to the project root.
    pub read: Vec<String>,
    /// Files (or globs) this teammate may write; everything else is denied by the hooks.
    pub write: Vec<String>,
    /// What this teammate is responsible for, in one or two sentences.
    pub scope: String,
    /// What to do, step by step, including what earlier attempts got wrong.
    pub instructions: Vec<String>,
}

/// A teammate to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// A fresh id (a retry gets a new one, seed 000 Spec 10.3).
    pub id: AgentId,
    /// Its role; picks the prompt template, the hooks' ownership rules, the
    /// gateway's tool set and the model tier.
    pub role: Role,
    /// The pipeline phase it works in (`design`, `tasks`, `impl`, `inspection`),
    /// for the engine resolution of seed 002.
    pub engine_phase: String,
    /// The Builder group it implements, if any.
    pub group: Option<String>,
    /// The board tasks it implements (`TROUPE_TASK_ID` is the first).
    pub tasks: Vec<TaskId>,
    /// What it is told.
    pub context: SpawnContext,
    /// 1 for the first attempt, 2 for the retry.
    pub attempt: u32,
}

/// A quality gate to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GateKind {
    /// `on_task_completed` for a Builder's report: the steering test and lint commands.
    TaskCompleted {
        /// The Builder.
        agent: AgentId,
        /// The tasks it reported.
        tasks: Vec<TaskId>,
    },
    /// The gate over the whole change before committing (Spec 14.6).
    Final,
    /// The wave's gate on the feature's line right after a group's branch was
    /// merged into it (`[team] isolation = "worktree"`): the steering test and
    /// lint commands over the merged result.
    Merged {
        /// The group just merged.
        group: String,
    },
}

/// Which commit message convention applies (seed 000 Spec 14.9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommitScope {
    /// `{feature}: {summary}`.
    Standalone {
        /// The feature.
        feature: String,
    },
    /// `Wave {N}: {feature} {summary}` inside a roadmap (the features of a
    /// wave commit side by side, so the summary names its feature).
    RoadmapWave {
        /// The roadmap wave.
        wave: u32,
        /// The feature.
        feature: String,
    },
}

impl CommitScope {
    /// The commit message for `summary`.
    pub fn message(&self, summary: &str) -> String {
        match self {
            CommitScope::Standalone { feature } => format!("{feature}: {summary}"),
            CommitScope::RoadmapWave { wave, feature } => format!("Wave {wave}: {feature} {summary}"),
        }
    }
}

/// A `decisions.md` entry type (`[ISO-8601] D{seq}: {TYPE} | {summary}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecisionKind {
    /// A phase gate passed or refused.
    Gate,
    /// A teammate was spawned, retried or given up on.
    Spawn,
    /// A phase transition in spec.yaml.
    Phase,
    /// A quality gate outcome.
    Quality,
    /// A commit.
    Commit,
    /// Something handed to the user.
    Escalation,
    /// A teammate's plan, approved or rejected.
    Plan,
    /// A budget was reached.
    Budget,
}

impl DecisionKind {
    /// The TYPE written in decisions.md.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Gate => "GATE",
            DecisionKind::Spawn => "SPAWN",
            DecisionKind::Phase => "PHASE",
            DecisionKind::Quality => "QUALITY",
            DecisionKind::Commit => "COMMIT",
            DecisionKind::Escalation => "ESCALATION",
            DecisionKind::Plan => "PLAN",
            DecisionKind::Budget => "BUDGET",
        }
    }
}

/// A knowledge tag from a completion report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum KnowledgeTag {
    /// `[PATTERN]`: a reusable way of doing something.
    Pattern,
    /// `[INCIDENT]`: something that went wrong and how it was handled.
    Incident,
    /// `[REFERENCE]`: a pointer worth keeping.
    Reference,
}

impl KnowledgeTag {
    /// The knowledge lines of a report read by `troupe_core::report`.
    pub fn entries(knowledge: &[troupe_core::report::Knowledge]) -> Vec<(KnowledgeTag, String)> {
        use troupe_core::report::Tag;
        let tag = |t: Tag| match t {
            Tag::Pattern => KnowledgeTag::Pattern,
            Tag::Incident => KnowledgeTag::Incident,
            Tag::Reference => KnowledgeTag::Reference,
        };
        knowledge.iter().map(|k| (tag(k.tag), k.text.clone())).collect()
    }

    /// The tag as written: `[PATTERN]`.
    pub fn as_str(self) -> &'static str {
        match self {
            KnowledgeTag::Pattern => "[PATTERN]",
            KnowledgeTag::Incident => "[INCIDENT]",
            KnowledgeTag::Reference => "[REFERENCE]",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Everything asked for was done.
    Completed,
    /// The Lead stopped and needs the user; the escalations say why.
    Escalated,
    /// The phase gate refused before anything was spawned.
    Refused(String),
    /// The user interrupted.
    Interrupted,
    /// A budget was reached (`[budgets]`): the run paused (its teammates
    /// finished their turns) or stopped (`on_exceed = "stop"`); `troupe
    /// resume` continues it.
    OverBudget {
        /// The limit reached and what was spent.
        reason: String,
        /// `on_exceed = "stop"`.
        stopped: bool,
    },
}

/// Something the driver must do. Deliberately exhaustive: the driver (in
/// another crate) matches every variant, so a new command cannot go unexecuted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Start a teammate: role prompt + context, `TROUPE_*` env, hooks, MCP config.
    Spawn(Box<SpawnRequest>),
    /// Continue a finished teammate's session with a new prompt (a quality gate
    /// failure to fix). Its id stays; a `TeammateFinished` follows again.
    Resume {
        /// Which teammate.
        id: AgentId,
        /// What to tell it.
        prompt: String,
    },
    /// Stop a teammate. Graceful: a `shutdown_request` in its mailbox, then up
    /// to the shutdown timeout for its process to end (an approving answer
    /// comes back as `ShutdownAnswered`, and the machine then forces); forced:
    /// SIGTERM to its process group at once, SIGKILL after a short grace.
    ShutDown {
        /// Which teammate.
        id: AgentId,
        /// Skip the request: signals at once.
        force: bool,
    },
    /// Put a message in a teammate's mailbox.
    SendMessage {
        /// The recipient.
        to: AgentId,
        /// The mailbox kind (`recovery_notice`, `nudge`, `text`).
        kind: String,
        /// The text.
        body: String,
        /// The message this answers (a `plan_decision` answers a `plan`).
        in_reply_to: Option<i64>,
    },
    /// Put a teammate about to spawn in plan mode (a plan-mode message from
    /// the Lead), so that its writes wait for a plan a person approved.
    HoldForPlan {
        /// The teammate.
        id: AgentId,
    },
    /// Show a teammate as waiting for a person (the registry's `WAITING`,
    /// which `troupe status` shows), or as working again.
    MarkWaiting {
        /// The teammate.
        id: AgentId,
        /// Waiting (true) or working again (false).
        waiting: bool,
    },
    /// Write spec.yaml with this content (the machine applied the transition).
    SaveSpec(Box<Spec>),
    /// Check that these files exist and are non-empty; answered by `ArtifactsChecked`.
    CheckArtifacts {
        /// Paths relative to the project root.
        paths: Vec<String>,
    },
    /// Read and validate tasks.yaml; answered by `PlanLoaded`.
    LoadPlan,
    /// Load the validated plan into the board; answered by `PlanImported`.
    ImportPlan {
        /// The plan was written in this run (a TaskGenerator ran): it supersedes
        /// a different plan the board holds for the feature. Otherwise a plan
        /// that differs from the board's is refused, never merged.
        replace: bool,
        /// The plan is a revision's (seed 000 Spec 5.6): new work even when it
        /// reads like the old one, so nothing the board completed for the old
        /// plan counts.
        renew: bool,
    },
    /// Set these tasks to `done` in tasks.yaml (the Lead's only right there) and
    /// completed on the board.
    MarkTasksDone {
        /// The task ids.
        tasks: Vec<TaskId>,
    },
    /// Keep the files a group's Builder reported, once the group passed its
    /// gate, for a later run of the feature ([`PlanGroup::reported_files`](crate::plan::PlanGroup)).
    RecordGroupFiles {
        /// The group.
        group: String,
        /// Its files.
        files: Vec<String>,
    },
    /// Record on the board that these tasks are blocked, and why.
    MarkTasksBlocked {
        /// The task ids.
        tasks: Vec<TaskId>,
        /// The Builder's blocker.
        reason: String,
    },
    /// Run a quality gate with the commands of `.troupe/steering/tech.md`;
    /// answered by `GateFinished`.
    RunGate {
        /// The id the answer carries.
        run: GateRunId,
        /// Which gate.
        kind: GateKind,
    },
    /// Commit the feature's spec artifacts and the implementation changes (never
    /// `.troupe/state/`); answered by `Committed`.
    Commit {
        /// The full message.
        message: String,
    },
    /// Make the commit an interrupted run was about to make, if it was not
    /// made: like `Commit` when any of `paths` is changed in the work tree,
    /// else answered by `Committed { sha: None }` without committing.
    CommitIfChanged {
        /// The full message.
        message: String,
        /// The files whose changes say the commit is still to be made.
        paths: Vec<String>,
    },
    /// Append to `.troupe/handover/decisions.md`.
    RecordDecision {
        /// The TYPE.
        kind: DecisionKind,
        /// One line.
        summary: String,
    },
    /// Add tagged lines to `.troupe/handover/knowledge.md` (deduplicated there).
    RecordKnowledge {
        /// The teammate that reported them.
        from: AgentId,
        /// Tag and text.
        entries: Vec<(KnowledgeTag, String)>,
    },
    /// Rewrite `.troupe/handover/session.md` and `buffer.md`.
    WriteHandover {
        /// What ran and how it ended, one line each.
        session: Vec<String>,
        /// The next action for whoever picks this up.
        next_action: String,
        /// Open items (blockers, escalations, messages).
        buffer: Vec<String>,
    },
    /// Tell the user something needs them; the run will end `Escalated`.
    Escalate {
        /// What happened.
        reason: String,
        /// What to do about it.
        hint: String,
    },
    /// Make sure Builder group `group` has its git worktree (on branch
    /// `troupe/<feature>/<group>`, cut from the feature's line, with the
    /// feature's spec files to read), keeping one an earlier attempt left in
    /// this run. The next `Spawn` of the group's Builder starts there.
    OpenWorktree {
        /// The group.
        group: String,
    },
    /// Commit the group's work in its worktree (only the files it may write)
    /// with `message`, off the Lead's path: its Builder reported, and the
    /// commit is ready before its merge is due. Unanswered: the group's
    /// `MergeGroup` waits for it, and commits whatever changed since (a gate
    /// run in the worktree) or, if it failed, commits itself.
    CommitGroup {
        /// The group.
        group: String,
        /// The commit's message (its merge's, with the [`merge_trailer`](crate::machine::merge_trailer)).
        message: String,
    },
    /// Commit the group's work in its worktree (only the files it may write)
    /// and merge its branch into the feature's line; answered by
    /// `GroupMerged`, or `MergeConflict` with the line as it was before.
    MergeGroup {
        /// The group.
        group: String,
        /// The merge commit's message, with its [`merge_trailer`](crate::machine::merge_trailer).
        message: String,
    },
    /// Take a merge back: the feature's line returns to commit `to`, keeping
    /// every uncommitted change of the work tree.
    UndoMerge {
        /// The commit the line had before the merge.
        to: String,
    },
    /// Remove the group's worktree and delete its branch.
    CloseWorktree {
        /// The group.
        group: String,
    },
    /// After a crash: abort a merge left half done, remove every worktree
    /// and branch of the feature, and report which groups' merges the
    /// feature's line holds; answered by `WorktreesRecovered`.
    RecoverWorktrees,
    /// The final gate passed on the feature's line. When that line is the
    /// feature's own integration branch (a roadmap wave, or one an interrupted
    /// roadmap run left), merge it into the project's current branch with
    /// `message`, then remove its worktree and branch; otherwise there is
    /// nothing to do. Answered by `LineLanded`. A conflict with what a sibling
    /// feature landed first aborts the merge and keeps the branch
    /// (`CommandFailed`).
    LandLine {
        /// The merge commit's message.
        message: String,
    },
    /// File work of the review pipeline (archive, verdict files, verdicts.md);
    /// the driver carries it out (troupe-lead's `review::files::apply`).
    Review(crate::review::ReviewCommand),
    /// The run is over; no more commands follow.
    Finish(Outcome),
}

impl Command {
    /// A short name, used in `CommandFailed` and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Spawn(_) => "spawn",
            Command::Resume { .. } => "resume",
            Command::ShutDown { .. } => "shut-down",
            Command::SendMessage { .. } => "send-message",
            Command::MarkWaiting { .. } => "mark-waiting",
            Command::HoldForPlan { .. } => "hold-for-plan",
            Command::SaveSpec(_) => "save-spec",
            Command::CheckArtifacts { .. } => "check-artifacts",
            Command::LoadPlan => "load-plan",
            Command::ImportPlan { .. } => "import-plan",
            Command::RecordGroupFiles { .. } => "record-group-files",
            Command::MarkTasksDone { .. } => "mark-tasks-done",
            Command::MarkTasksBlocked { .. } => "mark-tasks-blocked",
            Command::RunGate { .. } => "run-gate",
            Command::Commit { .. } | Command::CommitIfChanged { .. } => "commit",
            Command::RecordDecision { .. } => "record-decision",
            Command::RecordKnowledge { .. } => "record-knowledge",
            Command::WriteHandover { .. } => "write-handover",
            Command::Escalate { .. } => "escalate",
            Command::OpenWorktree { .. } => "open-worktree",
            Command::CommitGroup { .. } => "commit-group",
            Command::MergeGroup { .. } => "merge-group",
            Command::UndoMerge { .. } => "undo-merge",
            Command::CloseWorktree { .. } => "close-worktree",
            Command::RecoverWorktrees => "recover-worktrees",
            Command::LandLine { .. } => "land-line",
            Command::Review(_) => "review",
            Command::Finish(_) => "finish",
        }
    }
}
