//! troupe's shared state: the task board with dependencies, the mailbox, the
//! agent registry, the append-only event log and the gateway's audit log.
//!
//! Callers program against the traits [`Board`], [`Mailbox`], [`Registry`],
//! [`EventLog`], [`AuditLog`], [`GatewayAccess`] and [`A2aTasks`] (together, [`Store`]). Every method is one
//! transaction that also appends its events, so concurrent processes (teammates,
//! hooks, the gateway, the Lead) see each change whole or not at all.
//! [`SqliteStore`] is the embedded backend (one file, WAL mode); a PostgreSQL
//! backend implements the same traits without changing callers.
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
pub mod error;
pub mod event;
pub mod message;
pub mod pid;
pub mod plan;
pub mod sqlite;
pub mod task;
pub mod token;
mod traits;
pub mod usage;

pub use a2a::{A2aPushConfig, A2aTask, A2aTaskFilter, A2aTaskPage, A2aTaskUpdate};
pub use agent::{Agent, AgentStatus, AgentUpdate, NewAgent, StaleAgent};
pub use audit::{AuditFilter, AuditRecord, Decision, NewAuditRecord};
pub use error::{ClaimRefusal, Result, StoreError};
pub use event::{Event, NewEvent};
pub use message::{BROADCAST, Message, MessageKind, NewMessage};
pub use plan::{ImportOutcome, PlanTasks};
pub use sqlite::SqliteStore;
pub use task::{Claim, Completion, ListFilter, NewTask, Task, TaskFilter, TaskStatus};
pub use traits::{
    A2aTasks, AuditLog, Board, CallCounts, EventLog, GatewayAccess, Mailbox, Registry, Store, UsageLedger,
};
pub use usage::{NewUsage, UsageContext, UsageFilter, UsageRecord};

use troupe_core::config::StoreConfig;
use troupe_core::layout::Layout;

/// Open the store a project's configuration names: SQLite at
/// `.troupe/state/troupe.db` by default, or at `[store] url` when set.
pub fn open(layout: &Layout, config: &StoreConfig) -> Result<Box<dyn Store>> {
    Ok(Box::new(open_sqlite(layout, config)?))
}

/// [`open`], then check every page of the database before anything is
/// written: for callers that write for a long time (a run), where damage
/// found late would leave work half recorded. Shorter commands pay only the
/// header check [`open`] makes.
pub fn open_checked(layout: &Layout, config: &StoreConfig) -> Result<Box<dyn Store>> {
    let store = open_sqlite(layout, config)?;
    store.quick_check()?;
    Ok(Box::new(store))
}

/// The one backend so far; another is a new arm here, not a change to callers.
fn open_sqlite(layout: &Layout, config: &StoreConfig) -> Result<SqliteStore> {
    match config.backend.as_str() {
        "sqlite" => match &config.url {
            None => SqliteStore::open_project(layout),
            Some(url) => SqliteStore::open(&layout.root().join(url.strip_prefix("sqlite://").unwrap_or(url))),
        },
        other => Err(StoreError::UnsupportedBackend(other.to_string())),
    }
}
