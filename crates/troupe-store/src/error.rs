//! Everything the store can refuse or fail at. Refusals (a claim on a held task,
//! a cycle) name the task and the reason; failures name the database file.

use std::path::PathBuf;

use crate::agent::AgentStatus;
use crate::task::TaskStatus;

/// A result of a store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why a claim was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRefusal {
    /// Another agent holds the task.
    HeldBy(String),
    /// The task is reserved for another agent.
    AssignedTo(String),
    /// The task is already completed.
    Completed,
    /// These blockers are not completed yet.
    Blocked(Vec<String>),
}

impl std::fmt::Display for ClaimRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimRefusal::HeldBy(a) => write!(f, "it is in progress by `{a}`"),
            ClaimRefusal::AssignedTo(a) => write!(f, "it is assigned to `{a}`"),
            ClaimRefusal::Completed => write!(f, "it is already completed"),
            ClaimRefusal::Blocked(ids) => write!(f, "it is blocked by {}", ids.join(", ")),
        }
    }
}

/// A store operation that was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No task has this id.
    #[error("no task `{0}` on the board")]
    TaskNotFound(String),
    /// A task with this id exists already.
    #[error("a task `{0}` exists already")]
    DuplicateTask(String),
    /// A task was given an empty subject.
    #[error("a task needs a non-empty subject")]
    EmptySubject,
    /// A task id that cannot be used (empty, or with whitespace).
    #[error("`{0}` cannot be a task id (it must be non-empty, without spaces or control characters)")]
    InvalidTaskId(String),
    /// A task names a blocker that does not exist.
    #[error("task `{task}` is blocked by `{blocker}`, which is not on the board")]
    UnknownBlocker {
        /// The task being created or changed.
        task: String,
        /// The missing blocker.
        blocker: String,
    },
    /// A dependency would close a cycle.
    #[error("making `{task}` wait for `{blocker}` would close a cycle: {}", .cycle.join(" -> "))]
    Cycle {
        /// The task being created or changed.
        task: String,
        /// The blocker that closes the cycle.
        blocker: String,
        /// The cycle, as task ids each waiting for the next.
        cycle: Vec<String>,
    },
    /// The task cannot be claimed.
    #[error("cannot claim task `{task}` for `{agent}`: {reason}")]
    NotClaimable {
        /// The task.
        task: String,
        /// The agent that tried.
        agent: String,
        /// Why not.
        reason: ClaimRefusal,
    },
    /// Only the assignee may do this.
    #[error("`{agent}` cannot {action} task `{task}`: {}", match .assignee {
        Some(a) => format!("it is held by `{a}`"),
        None => "nobody holds it".to_string(),
    })]
    NotAssignee {
        /// The task.
        task: String,
        /// The agent that tried.
        agent: String,
        /// What it tried (`complete`, `release`).
        action: &'static str,
        /// Who holds the task.
        assignee: Option<String>,
    },
    /// The task is in a status the operation does not apply to.
    #[error("cannot {action} task `{task}`: it is {status}")]
    WrongStatus {
        /// The task.
        task: String,
        /// What was tried.
        action: &'static str,
        /// The status it has.
        status: TaskStatus,
    },
    /// No A2A task has this id.
    #[error("no A2A task `{0}`")]
    A2aTaskNotFound(String),
    /// No message has this id.
    #[error("no message {0}")]
    MessageNotFound(i64),
    /// No chat session has this id.
    #[error("no chat session {0}")]
    SessionNotFound(i64),
    /// An agent tried to mark a message addressed to someone else.
    #[error("message {id} is addressed to `{recipient}`, not `{agent}`")]
    NotRecipient {
        /// The message.
        id: i64,
        /// The agent that tried.
        agent: String,
        /// Whom it is addressed to.
        recipient: String,
    },
    /// A message needs a sender and a recipient.
    #[error("a message needs a sender and a recipient")]
    MissingParty,
    /// Plan mode holds one agent's writes; a broadcast cannot carry it.
    #[error("a plan-mode message goes to one agent, not to `*`: send one to each agent that should plan first")]
    PlanModeBroadcast,
    /// A priority outside 1–5.
    #[error("priority {0} is out of range (1 is lowest, 5 highest)")]
    InvalidPriority(u8),
    /// An agent id was needed but empty.
    #[error("an agent id cannot be empty")]
    EmptyAgentId,
    /// No agent has this id.
    #[error("no agent `{0}` is registered")]
    AgentNotFound(String),
    /// An agent with this id is registered and its process is alive (on
    /// this host), or its lease holds (on another).
    #[error("agent `{id}` is already registered and running ({status}, {how})")]
    AgentRunning {
        /// The id.
        id: String,
        /// Its status.
        status: AgentStatus,
        /// What says it runs: `pid N`, or its lease and host.
        how: String,
    },
    /// No worker host has this name.
    #[error("no worker host `{0}` is registered (is `troupe worker` running there?)")]
    HostNotFound(String),
    /// No spawn job has this id.
    #[error("no spawn job `{0}`")]
    JobNotFound(String),
    /// A worker acted on a job it does not hold (any more): another host
    /// holds it, or it ended (its lease passed, or it was stopped).
    #[error("spawn job `{id}` is not held by host `{host}` (it is {state})")]
    JobNotHeld {
        /// The job.
        id: String,
        /// The host that acted.
        host: String,
        /// Where the job is, and who holds it.
        state: String,
    },
    /// The file is not a database, or is damaged.
    #[error("{} is not a usable troupe database (damaged or not SQLite)", .path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is an SQLite database that some other program made.
    #[error("{} is an SQLite database, but not troupe's ({what})", .path.display())]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// What gave it away.
        what: String,
    },
    /// The database was written by a newer troupe.
    #[error("{} has schema version {found}; this troupe understands up to {supported}", .path.display())]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A file lock is held by another agent, who alone may release it.
    #[error("`{path}` is locked by `{holder}`; only its holder releases it (or `troupe unlock {path} --force`)")]
    LockHeld {
        /// The file.
        path: String,
        /// Who holds it.
        holder: String,
    },
    /// The configured backend is not built into this troupe.
    #[error("store backend `{0}` is not available in this build (use `sqlite` or `postgres`)")]
    UnsupportedBackend(String),
    /// A task plan changed since it was imported.
    #[error("the plan of `{feature}` changed since it was imported: {}", .changes.join("; "))]
    PlanChanged {
        /// The feature.
        feature: String,
        /// What differs, one entry per task.
        changes: Vec<String>,
    },
    /// A plan cannot be replaced while someone works on one of its tasks.
    #[error("the plan of `{feature}` cannot be replaced while {} in progress", in_progress(.tasks))]
    PlanInProgress {
        /// The feature.
        feature: String,
        /// Its tasks in progress.
        tasks: Vec<String>,
    },
    /// A plan cannot be replaced while tasks outside it wait for its tasks.
    #[error("the plan of `{feature}` cannot be replaced: {} wait for its tasks", .dependents.join(", "))]
    PlanDependedOn {
        /// The feature.
        feature: String,
        /// Tasks outside the plan blocked by one of its tasks.
        dependents: Vec<String>,
    },
    /// The database's folder or file could not be created.
    #[error("cannot create {}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A value in the database could not be read back (written by a buggy or
    /// foreign writer).
    #[error("unreadable value in column `{column}`: {detail}")]
    BadValue {
        /// The column.
        column: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// PostgreSQL failed (the server's message follows as the source).
    #[error("database error while trying to {op}")]
    Postgres {
        /// What the store was doing.
        op: &'static str,
        /// What PostgreSQL (or the connection to it) said.
        #[source]
        source: postgres::Error,
    },
    /// The PostgreSQL store could not be reached or set up; `url` has its
    /// password masked.
    #[error("cannot use the PostgreSQL store at {url}: {detail}")]
    PostgresUnavailable {
        /// The database URL, password masked.
        url: String,
        /// What went wrong, and what to do about it.
        detail: String,
    },
    /// SQLite failed.
    #[error("database error while trying to {op}")]
    Sqlite {
        /// What the store was doing.
        op: &'static str,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
}

impl StoreError {
    /// True when the database was busy for longer than the busy timeout.
    pub fn is_busy(&self) -> bool {
        let pg_busy = matches!(self, StoreError::Postgres { source, .. } if source.code().is_some_and(|c| {
            *c == postgres::error::SqlState::LOCK_NOT_AVAILABLE || *c == postgres::error::SqlState::T_R_DEADLOCK_DETECTED
        }));
        pg_busy
            || matches!(self, StoreError::Sqlite { source: rusqlite::Error::SqliteFailure(e, _), .. }
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
    }

    /// True for refusals caused by the caller's input or the board's state, as
    /// opposed to failures of the database itself.
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            StoreError::Corrupt { .. }
                | StoreError::UnsupportedBackend(_)
                | StoreError::Foreign { .. }
                | StoreError::NewerSchema { .. }
                | StoreError::Io { .. }
                | StoreError::BadValue { .. }
                | StoreError::Sqlite { .. }
                | StoreError::Postgres { .. }
                | StoreError::PostgresUnavailable { .. }
        )
    }
}

fn in_progress(tasks: &[String]) -> String {
    match tasks {
        [one] => format!("{one} is"),
        many => format!("{} are", many.join(", ")),
    }
}

/// Attach what the store was doing to a SQLite error.
pub(crate) trait Context<T> {
    fn op(self, op: &'static str) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, rusqlite::Error> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|source| StoreError::Sqlite { op, source })
    }
}

impl<T> Context<T> for std::result::Result<T, postgres::Error> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|source| StoreError::Postgres { op, source })
    }
}
