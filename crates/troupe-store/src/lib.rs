//! troupe's shared state: the task board with dependencies, the mailbox, the
//! agent registry, the append-only event log and the gateway's audit log.
//!
//! Callers program against the traits [`Board`], [`Mailbox`], [`Registry`],
//! [`EventLog`], [`AuditLog`], [`GatewayAccess`], [`A2aTasks`], [`FileLocks`], [`UsageLedger`], [`ChatSessions`], [`PlanApprovals`], [`Leases`] and [`Workers`] (together, [`Store`]). Every method is one
//! transaction that also appends its events, so concurrent processes (teammates,
//! hooks, the gateway, the Lead) see each change whole or not at all.
//! [`SqliteStore`] is the embedded backend (one file, WAL mode); [`PgStore`]
//! implements the same traits on PostgreSQL for teams across machines. Only
//! [`open`] names a backend.
//!
//! The API is synchronous; async callers wrap calls in `spawn_blocking`.
//!
//! ```
//! use troupe_store::{Board, NewTask, SqliteStore, TaskFilter};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = SqliteStore::open(&dir.path().join("troupe.db")).unwrap();
//! let design = store.create_task(NewTask::new("design", "lead")).unwrap();
//! let build = store.create_task(NewTask::new("build", "lead").blocked_by([design.id.clone()])).unwrap();
//!
//! let claimed = store.claim_next("builder-1", &TaskFilter::default()).unwrap().unwrap();
//! assert_eq!(claimed.id, design.id);
//! let done = store.complete(&design.id, "builder-1").unwrap();
//! assert_eq!(done.unblocked, vec![build.id]);
//! ```
#![deny(missing_docs)]

pub mod a2a;
pub mod agent;
pub mod approval;
pub mod audit;
pub mod copy;
pub mod error;
pub mod event;
pub mod lease;
pub mod lock;
pub mod message;
pub mod phases;
pub mod pid;
pub mod plan;
pub mod postgres;
pub mod session;
pub mod sqlite;
pub mod task;
pub mod token;
mod traits;
pub mod usage;
pub mod worker;

pub use a2a::{A2aPushConfig, A2aTask, A2aTaskFilter, A2aTaskPage, A2aTaskUpdate};
pub use agent::{Agent, AgentStatus, AgentUpdate, NewAgent, StaleAgent};
pub use audit::{AuditFilter, AuditRecord, Decision, NewAuditRecord};
pub use error::{ClaimRefusal, Result, StoreError};
pub use event::{Event, NewEvent};
pub use lease::ExpiredLease;
pub use lock::{ChangeSource, FileChange, FileLock, LockOutcome, NewFileChange, NewLock};
pub use message::{BROADCAST, Message, MessageKind, NewMessage};
pub use plan::{ImportOutcome, PlanTasks};
pub use postgres::PgStore;
pub use session::{ChatMessage, ChatSession, NewSession, SESSION_EVENT};
pub use sqlite::SqliteStore;
pub use task::{Claim, Completion, ListFilter, NewTask, Task, TaskFilter, TaskStatus};
pub use traits::{
    A2aTasks, AuditLog, Board, CallCounts, ChatSessions, EventLog, FileLocks, GatewayAccess, Leases, Mailbox,
    PlanApprovals, Registry, Store, UsageLedger, Workers,
};
pub use usage::{NewUsage, UsageContext, UsageFilter, UsageRecord};

use troupe_core::config::StoreConfig;
use troupe_core::layout::Layout;

/// The environment variable whose database URL wins over `[store] url` (and
/// selects PostgreSQL).
pub const DATABASE_URL_ENV: &str = "TROUPE_DATABASE_URL";

/// Open the store a project's configuration names: SQLite at
/// `.troupe/state/troupe.db` by default, or at `[store] url` when set;
/// PostgreSQL at `[store] url` with `backend = "postgres"`, or at
/// `TROUPE_DATABASE_URL` when that is set.
pub fn open(layout: &Layout, config: &StoreConfig) -> Result<Box<dyn Store>> {
    open_backend(layout, config, Opening::Plain)
}

/// [`open`], then (SQLite) check every page of the database before anything
/// is written: for callers that write for a long time (a run), where damage
/// found late would leave work half recorded. Shorter commands pay only the
/// header check [`open`] makes. PostgreSQL checks its own pages.
pub fn open_checked(layout: &Layout, config: &StoreConfig) -> Result<Box<dyn Store>> {
    open_backend(layout, config, Opening::Checked)
}

/// [`open`] for a process that lives a moment and opens the store on every
/// call (a hook): SQLite's write-ahead log is left for the next opener
/// instead of checkpointed on close ([`SqliteStore::keep_wal_on_close`]).
/// PostgreSQL has nothing to skip.
pub fn open_brief(layout: &Layout, config: &StoreConfig) -> Result<Box<dyn Store>> {
    open_backend(layout, config, Opening::Brief)
}

/// Where the store of a project is, as [`open`] resolves it: the backend's
/// name and its location (a file path, or a URL with its password masked).
pub fn location(layout: &Layout, config: &StoreConfig) -> Result<(&'static str, String)> {
    Ok(match resolve(layout, config)? {
        Backend::Sqlite(path) => ("sqlite", path.display().to_string()),
        Backend::Postgres(url) => ("postgres", postgres::mask_password(&url)),
    })
}

/// Where the store of a project is, unmasked (a file path or the full
/// database URL, password included: for [`copy::migrate`], never for printing).
pub fn place(layout: &Layout, config: &StoreConfig) -> Result<String> {
    Ok(match resolve(layout, config)? {
        Backend::Sqlite(path) => path.display().to_string(),
        Backend::Postgres(url) => url,
    })
}

/// A resolved backend and where its database is.
enum Backend {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

/// The one place that picks a backend; another is a new arm here, not a
/// change to callers.
fn resolve(layout: &Layout, config: &StoreConfig) -> Result<Backend> {
    if let Some(url) = std::env::var(DATABASE_URL_ENV).ok().filter(|u| !u.trim().is_empty()) {
        return Ok(Backend::Postgres(url));
    }
    match config.backend.as_str() {
        "sqlite" => Ok(Backend::Sqlite(match &config.url {
            None => layout.database_file(),
            Some(url) => layout.root().join(url.strip_prefix("sqlite://").unwrap_or(url)),
        })),
        "postgres" | "postgresql" => match &config.url {
            Some(url) => Ok(Backend::Postgres(url.clone())),
            None => Err(StoreError::PostgresUnavailable {
                url: "(none)".into(),
                detail: format!("[store] backend = \"postgres\" needs `url = \"postgres://…\"` or {DATABASE_URL_ENV}"),
            }),
        },
        other => Err(StoreError::UnsupportedBackend(other.to_string())),
    }
}

/// What an opener asks of a SQLite store beyond opening it.
#[derive(Clone, Copy, PartialEq)]
enum Opening {
    Plain,
    /// [`open_checked`]: every page checked.
    Checked,
    /// [`open_brief`]: the WAL left on close.
    Brief,
}

fn open_backend(layout: &Layout, config: &StoreConfig, opening: Opening) -> Result<Box<dyn Store>> {
    match resolve(layout, config)? {
        Backend::Sqlite(path) => {
            let store =
                if config.url.is_none() { SqliteStore::open_project(layout)? } else { SqliteStore::open(&path)? };
            match opening {
                Opening::Plain => {}
                Opening::Checked => store.quick_check()?,
                Opening::Brief => store.keep_wal_on_close()?,
            }
            Ok(Box::new(store))
        }
        Backend::Postgres(url) => Ok(Box::new(PgStore::open(&url)?)),
    }
}
