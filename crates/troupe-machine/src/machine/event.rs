//! What the driver tells the machine: things that happened outside it, and the
//! results of commands it asked for.
//!
//! The enum is `#[non_exhaustive]` so that later stages (the review pipeline,
//! roadmap) add their own variants; a stage ignores events it does not know.

use serde::{Deserialize, Serialize};

use troupe_core::report::Submission;

use crate::machine::{AgentId, Ending, GateRunId};
use crate::plan::{BuildPlan, TaskId};

/// Numbers an engine reports about a finished run, for the final summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// Model turns.
    pub num_turns: u64,
    /// Wall time of the run in milliseconds.
    pub duration_ms: u64,
    /// Cost in US dollars, when the engine reports it.
    pub total_cost_usd: Option<f64>,
    /// The engine's session id, for resuming.
    pub session_id: Option<String>,
}

/// The result of [`Command::LoadPlan`](crate::machine::Command::LoadPlan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanLoad {
    /// tasks.yaml exists and is valid.
    Loaded(BuildPlan),
    /// There is no tasks.yaml yet.
    Missing,
    /// tasks.yaml exists but does not parse or validate; one message per problem.
    Invalid(Vec<String>),
}

/// A message from the mailbox addressed to the Lead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncomingMessage {
    /// The sender's agent id.
    pub from: String,
    /// The mailbox kind (`text`, `plan`, `findings`, ...).
    pub kind: String,
    /// The text.
    pub body: String,
}

/// Something the machine must react to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Event {
    /// A spawned teammate's process is running.
    TeammateStarted {
        /// Which teammate.
        id: AgentId,
    },
    /// A teammate did something (any normalised engine event); resets its hang timer.
    TeammateActivity {
        /// Which teammate.
        id: AgentId,
        /// The tool it called, when the event was a tool call.
        tool: Option<String>,
    },
    /// A tool call of a teammate returned (the engine's tool result): while
    /// one has not, the teammate is busy (the tool allowance applies).
    TeammateToolDone {
        /// Which teammate.
        id: AgentId,
    },
    /// What the driver reports when a teammate's run ended with a result:
    /// everything it left ([`Ending`]). The machine picks its report
    /// ([`Ending::choose`]) and its stages hear `TeammateFinished`.
    TeammateEnded {
        /// Which teammate.
        id: AgentId,
        /// Its final text, `report` call and CPF file.
        ending: Box<Ending>,
        /// Turns, time and cost of the run.
        stats: RunStats,
    },
    /// A teammate's run ended with a result. `report` is its `report` tool call if
    /// it made one, otherwise its final text; `None` when it produced neither.
    TeammateFinished {
        /// Which teammate.
        id: AgentId,
        /// The completion report.
        report: Option<Submission>,
        /// Turns, time and cost of the run.
        stats: RunStats,
    },
    /// A teammate's process ended without a successful result (crash, error
    /// result, killed).
    TeammateExited {
        /// Which teammate.
        id: AgentId,
        /// What the engine or the exit status said.
        error: String,
        /// Turns, time and cost so far.
        stats: RunStats,
    },
    /// A teammate's lease passed (see troupe-store's `lease`): no heartbeat
    /// of it reached the store for the lease's length, so its host is taken
    /// for lost and the store released its tasks and file locks. The machine
    /// treats it as hung at once (asked to stop, then forced; its stage hears
    /// `TeammateUnresponsive` once it has ended), whatever its hang timer says.
    TeammateLeaseExpired {
        /// Which teammate.
        id: AgentId,
    },
    /// A teammate showed no activity for the hang timeout, and its process has
    /// since ended: asked to stop, it ended by itself or was stopped by force
    /// at the shutdown deadline. The machine makes this from the teammate's
    /// exit (its hang timers and shutdown deadlines are its own), so a stage
    /// that replaces it never runs the replacement beside it.
    TeammateUnresponsive {
        /// Which teammate.
        id: AgentId,
    },
    /// A teammate the Lead asked to stop has ended (its process is gone). The
    /// machine makes this from the exit of a teammate that was shutting down,
    /// so that a stage can wait for the process before resuming its session;
    /// `report` is its final text, when it ended with one.
    TeammateStopped {
        /// Which teammate.
        id: AgentId,
        /// Its report, if any.
        report: Option<Submission>,
    },
    /// A teammate answered a shutdown request (its `respond_shutdown` gateway
    /// call, seed 003 B4).
    ShutdownAnswered {
        /// Which teammate.
        id: AgentId,
        /// True when it agrees to stop.
        approve: bool,
        /// Why it refuses (or anything it says when it agrees).
        reason: String,
    },
    /// A spawn or resume could not start the process at all.
    SpawnFailed {
        /// Which teammate.
        id: AgentId,
        /// Why.
        error: String,
    },
    /// A quality gate run finished.
    GateFinished {
        /// Which run (from [`Command::RunGate`](crate::machine::Command::RunGate)).
        run: GateRunId,
        /// How it ended.
        verdict: GateVerdict,
        /// The failing command and the tail of its output: for the teammate to
        /// fix when it failed, for the user when it could not run.
        output: String,
    },
    /// The result of [`Command::CheckArtifacts`](crate::machine::Command::CheckArtifacts).
    ArtifactsChecked {
        /// Paths that are missing or empty.
        missing: Vec<String>,
    },
    /// The result of [`Command::LoadPlan`](crate::machine::Command::LoadPlan).
    PlanLoaded(PlanLoad),
    /// The result of [`Command::ImportPlan`](crate::machine::Command::ImportPlan): the
    /// board holds the plan; `completed` are tasks it already had completed.
    PlanImported {
        /// Task ids completed on the board before this run.
        completed: Vec<TaskId>,
    },
    /// The board recorded task completions (a Builder's `board_complete`, or a user's
    /// `troupe board complete`), and these tasks became unblocked.
    TasksUnblocked {
        /// Tasks that were completed.
        completed: Vec<TaskId>,
        /// Tasks that no longer wait for anything.
        unblocked: Vec<TaskId>,
    },
    /// A message to the Lead arrived in the mailbox.
    MessageArrived(IncomingMessage),
    /// A teammate submitted a plan for approval (the gateway's
    /// `request_plan_approval`, addressed to the Lead).
    PlanSubmitted {
        /// Who asks.
        from: AgentId,
        /// The `plan` message's id, which the decision answers.
        request: i64,
        /// The plan.
        plan: String,
    },
    /// A person decided a plan the Lead left to them (`[team] plan_approval
    /// = "human"`): the `plan_decision` answering it is in the teammate's mailbox.
    PlanDecided {
        /// The teammate whose plan it was.
        id: AgentId,
        /// The `plan` message's id.
        request: i64,
        /// Approved (true) or rejected (false).
        approved: bool,
    },
    /// The result of [`Command::Commit`](crate::machine::Command::Commit).
    Committed {
        /// The new commit, or `None` when there was nothing to commit.
        sha: Option<String>,
    },
    /// The result of [`Command::MergeGroup`](crate::machine::Command::MergeGroup):
    /// the group's branch is merged into the feature's line.
    GroupMerged {
        /// The group.
        group: String,
        /// The line's commit before the merge (what an undo returns to).
        before: String,
        /// The merge commit.
        after: String,
    },
    /// The result of [`Command::MergeGroup`](crate::machine::Command::MergeGroup):
    /// the merge conflicted and was aborted; the line is as it was.
    MergeConflict {
        /// The group.
        group: String,
        /// What git said (the conflicting files).
        output: String,
    },
    /// The result of [`Command::RecoverWorktrees`](crate::machine::Command::RecoverWorktrees):
    /// the [`merge_trailer`](crate::machine::merge_trailer) values of the
    /// feature's merges on its line.
    WorktreesRecovered {
        /// Trailer values, as written.
        merged: Vec<String>,
    },
    /// The result of [`Command::LandLine`](crate::machine::Command::LandLine):
    /// the feature's line is merged into the project's branch.
    LineLanded {
        /// The merge commit, or `None` when the line held nothing new.
        sha: Option<String>,
    },
    /// A command the driver could not carry out (a file it could not write, git
    /// failing). The machine escalates.
    CommandFailed {
        /// Which command, by its [`Command::name`](crate::machine::Command::name).
        command: String,
        /// Why.
        error: String,
    },
    /// The user interrupted the run (Ctrl-C).
    Interrupted,
    /// The usage ledger booked a model turn of a teammate: the machine adds
    /// it to the teammate's spending and checks the budgets.
    TurnSpent {
        /// Which teammate.
        id: AgentId,
        /// What the turn cost in US dollars.
        cost_usd: f64,
        /// Its tokens of every kind.
        tokens: u64,
    },
    /// The gateway refused a teammate's call: its budget of gateway calls
    /// (`max_gateway_calls`) is spent. A budget breach like the others.
    GatewayBudgetSpent {
        /// Which teammate.
        id: AgentId,
        /// The calls it made.
        made: u64,
        /// Its budget.
        max: u64,
        /// The config key that sets it (`[budgets.agent] max_gateway_calls`).
        key: String,
    },
}

/// How a quality gate run ended (troupe-gate's one rule, as the machine needs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// Every command passed, or none is configured.
    Passed,
    /// A command failed: the code's problem, the teammate fixes it.
    Failed,
    /// A command could not run at all (not installed, exit 127): the
    /// environment's problem, escalated to the user and never sent back to a
    /// teammate.
    Environment,
}
