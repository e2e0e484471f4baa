//! The storage traits callers program against. Each method is one transaction:
//! it happens completely, with its event, or not at all. A backend (SQLite now,
//! PostgreSQL later) implements all of them; callers take `&dyn Store` or a generic
//! and never name the backend.

use crate::a2a::{A2aPushConfig, A2aTask, A2aTaskFilter, A2aTaskPage, A2aTaskUpdate};
use crate::agent::{Agent, AgentStatus, AgentUpdate, NewAgent, StaleAgent};
use std::time::Duration;

use crate::approval::PlanGate;
use crate::audit::{AuditFilter, AuditRecord, NewAuditRecord};
use crate::error::Result;
use crate::event::{Event, NewEvent};
use crate::lease::ExpiredLease;
use crate::lock::{FileChange, FileLock, LockOutcome, NewFileChange, NewLock};
use crate::message::{Message, NewMessage};
use crate::plan::{ImportOutcome, PlanTasks};
use crate::session::{ChatSession, NewSession};
use crate::task::{Claim, Completion, ListFilter, NewTask, Task, TaskFilter};
use crate::usage::{NewUsage, UsageFilter, UsageRecord};
use crate::worker::{Expired, Host, Job, NewHost, NewJob};

/// The shared task board with dependencies.
pub trait Board {
    /// Create one task. Refuses an empty subject, a duplicate id and unknown blockers.
    fn create_task(&self, task: NewTask) -> Result<Task>;

    /// Create several tasks at once; they may block each other. All or nothing:
    /// refuses unknown blockers and any set of dependencies that forms a cycle.
    fn create_tasks(&self, tasks: Vec<NewTask>) -> Result<Vec<Task>>;

    /// Make `task` wait for `blocker` as well. Refuses an edge that closes a cycle.
    fn add_blocker(&self, task: &str, blocker: &str, by: &str) -> Result<Task>;

    /// One task by id.
    fn task(&self, id: &str) -> Result<Task>;

    /// Claim a task for `agent`: an atomic compare-and-swap that succeeds only
    /// for a pending, unblocked task that is unassigned or assigned to `agent`.
    /// Claiming a task `agent` already holds succeeds and changes nothing.
    fn claim(&self, id: &str, agent: &str) -> Result<Claim>;

    /// Find the first available task (in creation order) matching `filter` and
    /// claim it, in one transaction. `None` when nothing is available.
    fn claim_next(&self, agent: &str, filter: &TaskFilter) -> Result<Option<Task>>;

    /// Complete a task. Only its assignee may, and only while it is in progress.
    /// Returns the ids of the tasks this completion unblocked.
    ///
    /// This is the bare state change: quality gates are checked by the caller
    /// before it calls this.
    fn complete(&self, id: &str, agent: &str) -> Result<Completion>;

    /// Reserve a pending task for `agent` (it may then claim it even if another
    /// agent would have). Refuses a task in progress by someone else, or completed.
    fn assign(&self, id: &str, agent: &str, by: &str) -> Result<Task>;

    /// Put a task back to pending and unassigned. With `agent`, only if that agent
    /// holds or is reserved the task; without, unconditionally (the Lead or a
    /// person recovering a stuck task).
    fn release(&self, id: &str, agent: Option<&str>, by: &str) -> Result<Task>;

    /// Tasks matching `filter`, in creation order.
    fn list(&self, filter: &ListFilter) -> Result<Vec<Task>>;

    /// Pending, unblocked tasks that are unassigned or reserved for `agent`, in
    /// creation order.
    fn available(&self, agent: &str, filter: &TaskFilter) -> Result<Vec<Task>>;

    /// Load a feature's plan onto the board, all or nothing. The same plan again
    /// is [`ImportOutcome::Unchanged`]; a plan that differs from the imported one
    /// (or from tasks already on the board under its ids) is refused with
    /// [`crate::StoreError::PlanChanged`], naming each difference.
    fn import_plan(&self, plan: PlanTasks) -> Result<ImportOutcome>;

    /// Replace a feature's plan with a new version of it (a revision, or a plan
    /// its TaskGenerator wrote again), all or nothing: the old plan's tasks
    /// leave the board (their history stays in the event log) and the new plan
    /// is imported as [`Board::import_plan`] would. The same plan again is
    /// [`ImportOutcome::Unchanged`] and keeps its progress. Refused with
    /// [`crate::StoreError::PlanInProgress`] while one of the old plan's tasks
    /// is in progress, and with [`crate::StoreError::PlanDependedOn`] when a
    /// task outside the plan waits for one of them.
    fn replace_plan(&self, plan: PlanTasks) -> Result<ImportOutcome>;

    /// [`Board::replace_plan`] for a revision's plan: new work even when it
    /// reads exactly like the old one, so the same plan again starts over too
    /// (its tasks leave the board and come back as tasks.yaml has them).
    fn renew_plan(&self, plan: PlanTasks) -> Result<ImportOutcome>;
}

/// Messages between agents.
pub trait Mailbox {
    /// Send a message. A broadcast is delivered to every registered agent that is
    /// not finished, except the sender; one message per recipient is returned.
    fn send(&self, message: NewMessage) -> Result<Vec<Message>>;

    /// `agent`'s messages, highest priority first, then oldest first. Marks the
    /// returned messages delivered.
    fn inbox(&self, agent: &str, unread_only: bool) -> Result<Vec<Message>>;

    /// Mark messages to `agent` read; ids addressed to someone else are refused.
    /// Returns how many changed.
    fn mark_read(&self, agent: &str, ids: &[i64]) -> Result<usize>;

    /// One message by id.
    fn message(&self, id: i64) -> Result<Message>;

    /// The whole thread `id` belongs to, oldest first.
    fn thread(&self, id: i64) -> Result<Vec<Message>>;
}

/// Which agents exist and what state they are in.
pub trait Registry {
    /// Register an agent, in status `READY`. An existing entry with the same id is
    /// replaced unless its process is still alive and it is not finished.
    fn register(&self, agent: NewAgent) -> Result<Agent>;

    /// Change an agent's status; records the change (from, to) as an event.
    fn set_status(&self, id: &str, status: AgentStatus) -> Result<Agent>;

    /// Change an agent's task, pid, session or model, and touch `last_event_at`.
    fn update_agent(&self, id: &str, update: AgentUpdate) -> Result<Agent>;

    /// One agent by id.
    fn agent(&self, id: &str) -> Result<Agent>;

    /// All agents, oldest first.
    fn agents(&self) -> Result<Vec<Agent>>;

    /// Remove an agent from the registry.
    fn remove_agent(&self, id: &str) -> Result<()>;

    /// Agents whose process is gone while their status says they are not
    /// finished, with the tasks they still hold.
    fn stale_agents(&self) -> Result<Vec<StaleAgent>>;

    /// Reserve `count` agent numbers for one run and return the first. Blocks
    /// never overlap and never go back, across runs, resumes and concurrent
    /// processes of one project (an event records each block); the first block
    /// of a project also starts above every number an agent id of the registry
    /// already ends with, so ids are unique within a project forever.
    fn reserve_agent_numbers(&self, count: u64) -> Result<u64>;
}

/// Leases, not pids (see [`crate::lease`]): how a holder on any host is
/// known to be alive, and what happens to its work when it is not.
pub trait Leases {
    /// `id`'s heartbeat: its lease now ends `lease` from now, held from this
    /// host. Appends no event (a heartbeat is frequent and says nothing new).
    /// A finished agent holds nothing and is left as it is.
    fn renew_lease(&self, id: &str, lease: Duration) -> Result<Agent>;

    /// Release what every holder whose lease passed still holds, in one
    /// transaction: its tasks (in progress or reserved) go back to
    /// pending and unassigned, its file locks end, its lease ends, and one
    /// [`crate::lease::LEASE_EXPIRED`] event records it all. Of racing
    /// sweepers, each holder is swept by exactly one.
    fn expire_leases(&self) -> Result<Vec<ExpiredLease>>;
}

/// Workers on other hosts and the spawn jobs they run (see [`crate::worker`]).
/// Every change but a heartbeat appends its event in its transaction.
pub trait Workers {
    /// Register (or register again) host `host.name`, on a lease of `lease`;
    /// a host registering again is no longer draining.
    fn register_host(&self, host: NewHost, lease: Duration) -> Result<Host>;

    /// The worker's heartbeat: its host's lease and the lease of every job
    /// it holds now end `lease` from now, with its load average. Returns the
    /// host (draining, when asked to) and the jobs it holds (a stop asked for
    /// shows there). Appends no event. A host whose lease was swept is
    /// refused ([`crate::StoreError::HostNotFound`]): it registers again.
    fn renew_host(&self, name: &str, lease: Duration, load: Option<f64>) -> Result<(Host, Vec<Job>)>;

    /// Ask host `name` to drain: it finishes its jobs, takes no new one, then leaves.
    fn drain_host(&self, name: &str) -> Result<Host>;

    /// Host `name` leaves (its worker exits): its lease ends. Jobs it still
    /// holds fail, as when it is lost.
    fn leave_host(&self, name: &str) -> Result<()>;

    /// Every registered host, by name, lost ones too (their lease passed).
    fn hosts(&self) -> Result<Vec<Host>>;

    /// Queue a job for any host that can run it.
    fn queue_job(&self, job: NewJob) -> Result<Job>;

    /// Claim the oldest queued job host `host` can run, on a lease of
    /// `lease`, in one statement with its event: an engine it offers (any
    /// when it names none), every label the job asks for, fewer than its
    /// `max` jobs held, not draining, its own lease holding. Of racing
    /// claimers, each job goes to exactly one. `None` when there is none.
    fn claim_job(&self, host: &str, lease: Duration) -> Result<Option<Job>>;

    /// The teammate of job `id`, held by `host`, runs now.
    fn start_job(&self, id: &str, host: &str) -> Result<Job>;

    /// Append a report of job `id`'s teammate (a [`crate::worker::JOB_REPORT`]
    /// event), only while `host` holds the job: a worker that lost its job
    /// learns it here ([`crate::StoreError::JobNotHeld`]) and stops the teammate.
    fn report_job(&self, id: &str, host: &str, report: serde_json::Value) -> Result<()>;

    /// End job `id`, held by `host`: `done` or failed, with `result`.
    fn finish_job(&self, id: &str, host: &str, done: bool, result: serde_json::Value) -> Result<Job>;

    /// Ask for job `id` to stop: a queued job fails at once, a held one is
    /// marked for its worker, which stops its teammate; an ended one is left.
    fn stop_job(&self, id: &str, by: &str) -> Result<Job>;

    /// One job by id.
    fn job(&self, id: &str) -> Result<Job>;

    /// Jobs, oldest first: of `feature`, or all.
    fn jobs(&self, feature: Option<&str>) -> Result<Vec<Job>>;

    /// Sweep hosts and jobs whose lease passed, in one transaction: a lost
    /// host is marked gone, a job whose lease passed or whose host is lost fails and its teammate's lease is
    /// swept with it (see [`crate::worker`] for why it is never queued
    /// again). Of racing sweepers, each is swept by exactly one.
    fn expire_workers(&self) -> Result<Expired>;

    /// Delete the jobs that ended (done or failed) before `before`, with no
    /// event (their `job_*` events stay in the log): the job table's
    /// retention (`[workers] keep_jobs_hours`). Returns how many went.
    fn prune_jobs(&self, before: jiff::Timestamp) -> Result<u64>;
}

/// The append-only log of what happened.
pub trait EventLog {
    /// Append an event of any kind.
    fn append_event(&self, event: NewEvent) -> Result<Event>;

    /// Events with an id greater than `after`, oldest first, at most
    /// `limit`. A reader resuming from the last id it got never misses an
    /// event nor gets one twice: on PostgreSQL, where ids may commit out of
    /// order, the page ends before an id a transaction in flight may still
    /// commit (a later call returns the rest).
    fn events_since(&self, after: i64, limit: u32) -> Result<Vec<Event>>;

    /// The id of the newest event (0 when there is none): where a waiter
    /// starts, read before it looks at what it waits for. On PostgreSQL the
    /// newest id below which no transaction in flight may still commit one.
    fn last_event_id(&self) -> Result<i64>;

    /// Wait until an event with an id greater than `after` can be read
    /// (`events_since`), or `timeout` passes; true when there is one. Every
    /// change appends an event, so this is how a waiter for a message, a
    /// claimable task or a stream's next event sleeps: on PostgreSQL woken
    /// by the writer's NOTIFY (no polling); on SQLite, which has no
    /// notification across processes, by a look at the newest id every 10 ms.
    fn wait_for_event(&self, after: i64, timeout: Duration) -> Result<bool>;
}

/// The gateway's audit log.
pub trait AuditLog {
    /// Append one record.
    fn append_audit(&self, record: NewAuditRecord) -> Result<AuditRecord>;

    /// Records matching `filter`, newest first.
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>>;
}

/// How many calls an agent made through the gateway, for its rate limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// In the last minute.
    pub minute: u64,
    /// In the last hour.
    pub hour: u64,
    /// Of the tool being called, in the last minute.
    pub tool_minute: u64,
    /// Every call the agent made through the gateway, ever: what a budget of
    /// gateway calls (`[budgets] max_gateway_calls`) is checked against.
    pub total: u64,
}

/// What the MCP gateway shares between its processes: who may speak as an
/// agent (token hashes, see [`crate::token`]) and how many calls each agent
/// made (rate limits hold per agent, however many gateways serve it).
pub trait GatewayAccess {
    /// Bind the token with hash `token_hash` to `agent`, replacing any before.
    fn set_gateway_token(&self, agent: &str, token_hash: &str) -> Result<()>;

    /// The hash of `agent`'s token, if it has one.
    fn gateway_token(&self, agent: &str) -> Result<Option<String>>;

    /// The agent whose token has hash `token_hash`, if any: how the HTTP
    /// server learns who an agent's request comes from (never from the request).
    fn gateway_agent(&self, token_hash: &str) -> Result<Option<String>>;

    /// In one transaction: count `agent`'s calls, ask `admit` (which returns a
    /// refusal or `None`), and record the call when admitted. Returns the refusal.
    fn count_call(
        &self,
        agent: &str,
        tool: &str,
        admit: &dyn Fn(&CallCounts) -> Option<String>,
    ) -> Result<Option<String>>;
}

/// The tasks clients asked for over A2A, and their push notification targets
/// (troupe-server owns the documents; see [`crate::a2a`]).
pub trait A2aTasks {
    /// Create or change a task, appending its [`crate::a2a::A2A_TASK_EVENT`]
    /// event in the same transaction. Returns the task as stored.
    fn save_a2a_task(&self, update: A2aTaskUpdate) -> Result<A2aTask>;

    /// One task by id, `None` when there is none.
    fn a2a_task(&self, id: &str) -> Result<Option<A2aTask>>;

    /// Tasks matching `filter`, newest change first, with the number matching.
    fn a2a_tasks(&self, filter: &A2aTaskFilter) -> Result<A2aTaskPage>;

    /// Register (or replace) a push target of an existing task.
    fn save_a2a_push(&self, config: A2aPushConfig) -> Result<A2aPushConfig>;

    /// The push targets of an existing task, oldest first.
    fn a2a_pushes(&self, task_id: &str) -> Result<Vec<A2aPushConfig>>;

    /// Remove a push target; `false` when it was not there (deleting twice is
    /// not an error).
    fn delete_a2a_push(&self, task_id: &str, id: &str) -> Result<bool>;
}

/// File locks and the history of writes (see [`crate::lock`]). Every call
/// first releases the locks it looks at whose lease passed or whose holder's
/// process is gone.
pub trait FileLocks {
    /// Take (or renew) a lock for `lock.agent`. When another agent holds the
    /// path, nothing changes and [`LockOutcome::Held`] names it: of two agents
    /// racing for one file, exactly one acquires it.
    fn lock_file(&self, lock: NewLock) -> Result<LockOutcome>;

    /// Release the lock on `path`, returning it (`None` when there was none).
    /// With `agent`, only its holder may ([`crate::StoreError::LockHeld`]
    /// otherwise); without, it is released whoever holds it (a person forcing it).
    fn unlock_file(&self, path: &str, agent: Option<&str>) -> Result<Option<FileLock>>;

    /// The lock on `path` that holds now, if any.
    fn file_lock(&self, path: &str) -> Result<Option<FileLock>>;

    /// Every lock that holds now, by path.
    fn file_locks(&self) -> Result<Vec<FileLock>>;

    /// Record a write to a file.
    fn record_change(&self, change: NewFileChange) -> Result<()>;

    /// The writes recorded for `path`, newest first, at most `limit`.
    fn file_history(&self, path: &str, limit: u32) -> Result<Vec<FileChange>>;
}

/// The usage ledger (see [`crate::usage`]): one row per model turn. Rows are
/// counters like the gateway's calls: inserted only, with no event.
pub trait UsageLedger {
    /// Book a turn; `false` (and nothing written) when the agent's turn with
    /// that message id is already booked.
    fn record_usage(&self, usage: NewUsage) -> Result<bool>;

    /// Booked turns matching `filter`, oldest first.
    fn usage(&self, filter: &UsageFilter) -> Result<Vec<UsageRecord>>;
}

/// Saved chat sessions (see [`crate::session`]). Each save appends a
/// [`crate::session::SESSION_EVENT`] event in its transaction.
pub trait ChatSessions {
    /// Save a new session; returns it with its id.
    fn create_session(&self, session: NewSession) -> Result<ChatSession>;

    /// Save `session` over session `id` (a later save of the same
    /// conversation); [`crate::StoreError::SessionNotFound`] when there is none.
    fn update_session(&self, id: i64, session: NewSession) -> Result<ChatSession>;

    /// One session by id.
    fn session(&self, id: i64) -> Result<ChatSession>;

    /// Every session, most recently saved first.
    fn sessions(&self) -> Result<Vec<ChatSession>>;
}

/// Plan mode (seed 003 B3): which messages asked their recipient for a plan
/// before any write, and the plans waiting for a decision. Plans and
/// decisions are mailbox messages (`plan`, `plan_decision`, decided through
/// [`crate::approval::decide_plan`]); this adds only which requests were in
/// plan mode, and the reads over them.
pub trait PlanApprovals {
    /// Send `message` in plan mode: to one agent, whose writes wait from now
    /// on for a plan of its own that is approved. The message and its plan
    /// mode are written in one transaction, with a `message_sent` event
    /// marked `plan_mode`.
    fn send_plan_mode(&self, message: NewMessage) -> Result<Message>;

    /// `agent`'s plan gate: its latest plan-mode request and the plans it
    /// sent since with their decisions; `None` when nothing put it in plan mode.
    fn plan_gate(&self, agent: &str) -> Result<Option<PlanGate>>;

    /// Plans no decision answers yet, oldest first.
    fn pending_plans(&self) -> Result<Vec<Message>>;
}

/// Everything the store offers, for callers that need more than one part.
pub trait Store:
    Board
    + Mailbox
    + Registry
    + EventLog
    + AuditLog
    + GatewayAccess
    + A2aTasks
    + FileLocks
    + UsageLedger
    + ChatSessions
    + PlanApprovals
    + Leases
    + Workers
    + Send
    + Sync
{
}

impl<
    T: Board
        + Mailbox
        + Registry
        + EventLog
        + AuditLog
        + GatewayAccess
        + A2aTasks
        + FileLocks
        + UsageLedger
        + ChatSessions
        + PlanApprovals
        + Leases
        + Workers
        + Send
        + Sync,
> Store for T
{
}
