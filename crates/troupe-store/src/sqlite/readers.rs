//! Read-only connections beside the writer's, so that a long read (a 10k-task
//! board listing, an event stream catching up) never holds the one
//! connection every write needs, and reads run in parallel. In WAL mode a
//! reader sees the last commit before its transaction began and blocks no
//! writer (nor is blocked by one).
//!
//! Opened lazily and only under contention: a process whose reads never find
//! the writer's connection busy (a CLI command, a hook) keeps one connection;
//! once a read found it busy, every later read of this store uses the pool
//! (a server, the Lead with its threads).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, StoreError};

/// The most read-only connections one store opens.
pub const MAX_READERS: usize = 4;

/// The pool: idle connections, how many were opened, and whether reads use it.
#[derive(Debug, Default)]
pub struct Readers {
    idle: Mutex<Vec<Connection>>,
    opened: AtomicUsize,
    in_use: AtomicBool,
}

impl Readers {
    /// Whether reads have moved to the pool.
    pub fn in_use(&self) -> bool {
        self.in_use.load(Ordering::Relaxed)
    }

    /// Reads use the pool from now on (the writer's connection was busy).
    pub fn start(&self) {
        self.in_use.store(true, Ordering::Relaxed);
    }

    /// An idle connection, a new one while fewer than [`MAX_READERS`] exist,
    /// or `None` (the caller waits for the writer's connection instead).
    pub fn take(&self, path: &Path) -> Result<Option<Connection>> {
        if let Some(conn) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(Some(conn));
        }
        if self.opened.fetch_add(1, Ordering::SeqCst) >= MAX_READERS {
            self.opened.fetch_sub(1, Ordering::SeqCst);
            return Ok(None);
        }
        match open(path) {
            Ok(conn) => Ok(Some(conn)),
            Err(e) => {
                self.opened.fetch_sub(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Hand a connection back after a read.
    pub fn give_back(&self, conn: Connection) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
    }
}

/// A connection that can only read (`query_only`), with the writer's cache
/// settings; the schema was checked and migrated by the writer's connection.
fn open(path: &Path) -> Result<Connection> {
    let err = |source: rusqlite::Error| StoreError::Sqlite { op: "open a reading connection", source };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(err)?;
    conn.busy_handler(Some(super::busy_wait)).map_err(err)?;
    conn.set_prepared_statement_cache_capacity(64);
    conn.pragma_update(None, "query_only", true).map_err(err)?;
    conn.pragma_update(None, "mmap_size", 256i64 << 20).map_err(err)?;
    conn.pragma_update(None, "cache_size", super::CACHE_KIB).map_err(err)?;
    Ok(conn)
}
