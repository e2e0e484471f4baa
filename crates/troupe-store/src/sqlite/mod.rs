//! The embedded backend: one SQLite file in WAL mode, shared by every troupe
//! process of a project.
//!
//! Concurrency: readers never block (WAL); every write runs in `BEGIN IMMEDIATE`,
//! so a write transaction takes the database's single write lock before it reads
//! anything, and a claim's check and update can never interleave with another
//! process's. Waiting for the lock is a short, jittered spin (see `busy_wait`)
//! up to [`BUSY_TIMEOUT`], rather than SQLite's default sleeps of up to 100 ms,
//! which would cap throughput with several writers.
//!
//! Crash safety: `synchronous = NORMAL` in WAL mode keeps the database
//! consistent when a process is killed at any point (a transaction is in the WAL
//! completely or not at all); only a power loss may drop the last commits.

use std::cell::Cell;
use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};
use troupe_core::layout::Layout;

use crate::error::{Context, Result, StoreError};
use crate::event::NewEvent;

mod a2a;
pub(crate) mod approvals;
mod audit;
pub(crate) mod board;
mod bulk;
mod events;
pub use events::REPLAY_LAST_EVENT_ENV;
pub(crate) mod gateway;
mod leases;
pub mod locks;
pub(crate) mod mailbox;
pub(crate) mod plans;
mod readers;
pub(crate) mod registry;
pub(crate) mod rows;
pub mod schema;
pub(crate) mod sessions;
pub(crate) mod usage;
mod workers;

/// How long a write waits for another process's write to finish before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection's page cache (`cache_size`, negative: KiB): 32 MiB.
pub(crate) const CACHE_KIB: i64 = -32 * 1024;

/// The WAL size over which a brief store (see [`SqliteStore::keep_wal_on_close`])
/// checkpoints on close after all: 256 KiB, about 60 pages, so that the next
/// opener reads little; a hook's denial adds a few pages.
pub const BRIEF_WAL_LIMIT: u64 = 256 * 1024;

/// The page cache of a bulk load: 512 MiB at most, taken only as pages are
/// touched (a 100,000-task plan dirties about 100 MiB), given back after it.
const BULK_CACHE_KIB: i64 = -512 * 1024;

/// The SQLite store. Cheap to share across threads (`Arc<SqliteStore>`):
/// writes are serialised on one connection; reads move to a small pool of
/// read-only connections once they find it busy (see `readers`).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    readers: readers::Readers,
    path: PathBuf,
    /// Opened by [`SqliteStore::keep_wal_on_close`].
    brief: std::sync::atomic::AtomicBool,
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        if *self.brief.get_mut() {
            self.trim_wal();
        }
    }
}

impl SqliteStore {
    /// Open (creating if needed) the project's database at
    /// `.troupe/state/troupe.db`, creating `.troupe/state/` with mode 0700.
    pub fn open_project(layout: &Layout) -> Result<SqliteStore> {
        let state = layout.state_dir();
        if !state.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&state)
                .map_err(|source| StoreError::Io { path: state.clone(), source })?;
        }
        SqliteStore::open(&layout.database_file())
    }

    /// Open (creating if needed) the database at `path`. Its folder must exist.
    /// Refuses a file that is not SQLite, an SQLite file that is not troupe's,
    /// and a database from a newer troupe.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        // SQLite would create the file world-readable; messages and the audit log
        // are nobody else's business.
        let mut created = false;
        if !path.exists() {
            match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
                Ok(_) => created = true,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => return Err(StoreError::Io { path: path.to_path_buf(), source }),
            }
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| classify(path, e, "open the database"))?;
        conn.busy_handler(Some(busy_wait)).op("set the busy handler")?;
        conn.set_prepared_statement_cache_capacity(64);
        let store = SqliteStore {
            conn: Mutex::new(conn),
            readers: Default::default(),
            path: path.to_path_buf(),
            brief: Default::default(),
        };
        store.prepare(created)?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Check the file is troupe's, migrate it, and set per-connection pragmas.
    /// `created`: this opener made the file (a new one, or one moved aside).
    fn prepare(&self, created: bool) -> Result<()> {
        let mut conn = self.lock();
        let path = self.path.clone();
        let mut header = Header::read(&conn, &path)?;
        header.check(&path)?;
        if header.version < schema::LATEST {
            // Creating or migrating the schema happens once, by one opener:
            // others (threads of this process, or other processes) wait on the
            // lock, then find the work done. Without it a second opener could
            // see a half-made file, or fail to switch it to WAL.
            let mut init = InitLock::take(&path)?;
            header = Header::read(&conn, &path)?;
            header.check(&path)?;
            if header.version == 0 && !created && init.initialized_before() {
                // Emptied (a 0-byte file, truncated by a crash or by hand), not
                // new: recreating it would silently lose the board, the
                // mailboxes and the registry.
                return Err(StoreError::Corrupt {
                    path: path.clone(),
                    source: rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                        Some("the database is empty, but it was created before: its contents are lost".into()),
                    ),
                });
            }
            if header.version < schema::LATEST {
                // WAL is a property of the file, so it is set once, before the first
                // migration; it cannot change inside a transaction.
                let mode: String = conn
                    .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
                    .map_err(|e| classify(&path, e, "switch the database to WAL"))?;
                if !mode.eq_ignore_ascii_case("wal") {
                    return Err(StoreError::BadValue {
                        column: "journal_mode",
                        detail: format!("SQLite kept `{mode}`"),
                    });
                }
                migrate(&mut conn, &path)?;
                init.mark_initialized();
            }
        }
        header.check(&path)?;
        conn.pragma_update(None, "foreign_keys", true).op("enable foreign keys")?;
        conn.pragma_update(None, "synchronous", "NORMAL").op("set synchronous")?;
        // Reads go through the OS page cache by mmap instead of a read() per
        // page, which matters for a fresh CLI process on a large board; SQLite
        // maps only what it touches.
        conn.pragma_update(None, "mmap_size", 256i64 << 20).op("set mmap_size")?;
        conn.pragma_update(None, "cache_size", CACHE_KIB).op("set cache_size")?;
        // The last connection to close checkpoints the WAL into the file and
        // deletes it (fsyncs, and the next opener recreates both files). CLI
        // commands keep that; a hook, which opens the store on every tool call,
        // skips it (see `keep_wal_on_close`). While a long-lived process (the
        // Lead, the gateway) holds the database open, no CLI process is last.
        Ok(())
    }

    /// For a process that lives a moment and opens the store again and again
    /// (a hook, on every tool call of every agent): closing it leaves the
    /// write-ahead log for the next opener instead of checkpointing it into
    /// the file and deleting it (fsyncs, and an unlink and re-creation of the
    /// WAL and its index: most of what a hook writing one audit row waited for).
    ///
    /// The WAL stays bounded: closing checkpoints it after all once it holds
    /// more than [`BRIEF_WAL_LIMIT`] bytes, and empties it. SQLite's own
    /// automatic checkpoint would not do: an opener that finds no other
    /// connection rebuilds the WAL's index from the WAL and forgets what was
    /// checkpointed, so the log never restarts from its beginning and grows
    /// with every brief opener. The limit is small because that opener reads
    /// every page of the WAL. A long-lived process keeps SQLite's defaults
    /// (a checkpoint every 1,000 pages; closing last, the checkpoint on close).
    pub fn keep_wal_on_close(&self) -> Result<()> {
        let conn = self.lock();
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .op("keep the WAL on close")?;
        self.brief.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Closing a brief store: checkpoint and empty a WAL over the limit, without
    /// waiting for readers (a long-lived process reading keeps its snapshot;
    /// the checkpoint then copies what it can, and the WAL restarts at the
    /// next write, since that process keeps the WAL's index alive meanwhile).
    fn trim_wal(&self) {
        let wal =
            self.path.with_file_name(format!("{}-wal", self.path.file_name().unwrap_or_default().to_string_lossy()));
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > BRIEF_WAL_LIMIT) {
            let conn = self.lock();
            let _ = conn.busy_handler(None);
            // Best effort: a WAL left as it is only costs the next opener a read.
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite itself consistent (an open
        // transaction is rolled back when the Transaction is dropped).
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run `f` in a write transaction (`BEGIN IMMEDIATE`), committing on success.
    pub(crate) fn write<T>(&self, op: &'static str, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).op(op)?;
        let value = f(&tx)?;
        tx.commit().op(op)?;
        Ok(value)
    }

    /// [`Self::write`] for a bulk load (a plan of 100,000 tasks) whose keys
    /// `f` checks itself, as `insert_task_rows` does (every blocker is in the
    /// batch or on the board, every id new): SQLite's own foreign key checks
    /// (two index lookups per dependency row) are off for it, and the page
    /// cache is large enough that no page is spilled to the WAL and read back
    /// before the commit. Both settings are the connection's and are put back
    /// before the lock is released, whatever `f` returns.
    pub(crate) fn bulk_write<T>(&self, op: &'static str, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        // Outside a transaction: SQLite ignores `foreign_keys` inside one.
        conn.pragma_update(None, "foreign_keys", false).op(op)?;
        conn.pragma_update(None, "cache_size", BULK_CACHE_KIB).op(op)?;
        let result = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).op(op)?;
            let value = f(&tx)?;
            crate::phases::mark("the rest of the transaction");
            tx.commit().op(op)?;
            crate::phases::mark("commit");
            Ok(value)
        })();
        let restored = conn
            .pragma_update(None, "foreign_keys", true)
            .and_then(|()| conn.pragma_update(None, "cache_size", CACHE_KIB))
            .op(op);
        let value = result?;
        restored?;
        Ok(value)
    }

    /// Run `f` in a read transaction, so that several queries see one snapshot:
    /// on the writer's connection while it is free and no read found it busy,
    /// else on a read-only connection of the pool (a commit made before the
    /// call is visible either way: WAL readers see every finished commit).
    pub(crate) fn read<T>(&self, op: &'static str, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if !self.readers.in_use() {
            match self.conn.try_lock() {
                Ok(mut conn) => return snapshot(&mut conn, op, f),
                Err(std::sync::TryLockError::Poisoned(p)) => return snapshot(&mut p.into_inner(), op, f),
                Err(std::sync::TryLockError::WouldBlock) => self.readers.start(),
            }
        }
        match self.readers.take(&self.path)? {
            Some(mut conn) => {
                let value = snapshot(&mut conn, op, f);
                self.readers.give_back(conn);
                value
            }
            None => snapshot(&mut self.lock(), op, f),
        }
    }

    /// Copy everything in the write-ahead log into the database file and empty
    /// the log, so the file alone holds the whole database (before copying it
    /// elsewhere, say). Waits for writers like any write.
    pub fn checkpoint(&self) -> Result<()> {
        let conn = self.lock();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).op("checkpoint the database")
    }

    /// Refuse a database whose pages are damaged (`PRAGMA quick_check`: zeroed
    /// or torn pages SQLite would otherwise read around, and write beside).
    /// Reads every page, so it is for processes that open the store once for
    /// a long time (the Lead), before they write anything.
    pub fn quick_check(&self) -> Result<()> {
        let conn = self.lock();
        let mut stmt =
            conn.prepare("PRAGMA quick_check(1)").map_err(|e| classify(&self.path, e, "check the database"))?;
        let first: String =
            stmt.query_row([], |r| r.get(0)).map_err(|e| classify(&self.path, e, "check the database"))?;
        if first == "ok" {
            return Ok(());
        }
        Err(StoreError::Corrupt {
            path: self.path.clone(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(format!("damaged pages: {first}")),
            ),
        })
    }

    /// Problems with the database's integrity or the store's own invariants;
    /// empty when there are none. Reads the whole database: for tests, recovery
    /// and `doctor`, not for every command.
    pub fn verify(&self) -> Result<Vec<String>> {
        self.read("verify the database", |c| {
            let mut problems = Vec::new();
            let mut stmt = c.prepare("PRAGMA integrity_check").op("check integrity")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).op("check integrity")?;
            for row in rows {
                let line = row.op("check integrity")?;
                if line != "ok" {
                    problems.push(format!("integrity: {line}"));
                }
            }
            let fk: i64 =
                c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0)).op("check keys")?;
            if fk > 0 {
                problems.push(format!("{fk} rows break a foreign key"));
            }
            let checks: [(&str, &str); 3] = [
                (
                    "open_blockers does not match the blockers that are not completed",
                    "SELECT t.id FROM tasks t WHERE t.open_blockers <> (SELECT count(*) FROM task_deps d \
                     JOIN tasks b ON b.seq = d.blocker_seq WHERE d.task_seq = t.seq AND b.status <> 'completed')",
                ),
                (
                    "blocked_by does not match the dependency table",
                    "SELECT t.id FROM tasks t WHERE json_array_length(t.blocked_by) <> \
                     (SELECT count(*) FROM task_deps d WHERE d.task_seq = t.seq)",
                ),
                (
                    "message thread does not exist",
                    "SELECT CAST(m.id AS TEXT) FROM messages m WHERE NOT EXISTS \
                     (SELECT 1 FROM messages r WHERE r.id = m.thread)",
                ),
            ];
            for (what, sql) in checks {
                let mut stmt = c.prepare(sql).op("check invariants")?;
                let ids = stmt.query_map([], |r| r.get::<_, String>(0)).op("check invariants")?;
                for id in ids {
                    problems.push(format!("{}: {what}", id.op("check invariants")?));
                }
            }
            Ok(problems)
        })
    }
}

/// `f` in a read transaction of `conn`.
fn snapshot<T>(conn: &mut Connection, op: &'static str, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).op(op)?;
    let value = f(&tx)?;
    tx.finish().op(op)?;
    Ok(value)
}

/// Apply the migrations the database lacks, each in its own transaction that
/// re-reads the version (another process may have migrated meanwhile).
/// What a database file says about itself, read in one snapshot (three separate
/// reads could straddle another opener's first migration and disagree).
struct Header {
    app_id: i32,
    version: i64,
    objects: i64,
}

impl Header {
    fn read(conn: &Connection, path: &Path) -> Result<Header> {
        let err = |e| classify(path, e, "read the database header");
        conn.execute_batch("BEGIN DEFERRED").map_err(err)?;
        let header = (|| {
            Ok(Header {
                app_id: conn.pragma_query_value(None, "application_id", |r| r.get(0))?,
                version: conn.pragma_query_value(None, "user_version", |r| r.get(0))?,
                objects: conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?,
            })
        })();
        let _ = conn.execute_batch("COMMIT");
        header.map_err(err)
    }

    /// Refuse a file that is someone else's, or newer than this troupe.
    fn check(&self, path: &Path) -> Result<()> {
        let path = path.to_path_buf();
        if self.app_id != schema::APPLICATION_ID {
            if self.app_id != 0 {
                return Err(StoreError::Foreign { path, what: format!("its application id is {:#x}", self.app_id) });
            }
            if self.objects > 0 || self.version != 0 {
                return Err(StoreError::Foreign {
                    path,
                    what: format!("it has {} schema objects of its own", self.objects),
                });
            }
        }
        if self.version > schema::LATEST {
            return Err(StoreError::NewerSchema { path, found: self.version, supported: schema::LATEST });
        }
        Ok(())
    }
}

/// An exclusive lock on `<database>.init-lock` while the schema is created or
/// migrated; released when dropped.
struct InitLock {
    held: nix::fcntl::Flock<std::fs::File>,
}

impl InitLock {
    fn take(db: &Path) -> Result<InitLock> {
        let mut name = db.as_os_str().to_owned();
        name.push(".init-lock");
        let path = PathBuf::from(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|source| StoreError::Io { path: path.clone(), source })?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| StoreError::Io { path, source: errno.into() })?;
        Ok(InitLock { held: lock })
    }

    /// Whether a schema was created in this database before (the lock file
    /// says so once the first migration committed), so that an empty file is
    /// a damaged database, not a new one.
    fn initialized_before(&mut self) -> bool {
        use std::io::{Read, Seek};
        let mut text = String::new();
        let file: &mut std::fs::File = &mut self.held;
        file.rewind().is_ok() && file.read_to_string(&mut text).is_ok() && text.starts_with(INITIALIZED)
    }

    /// Record that the schema exists (best effort: without the mark an emptied
    /// file is only taken for a new one, as before).
    fn mark_initialized(&mut self) {
        use std::io::{Seek, Write};
        let file: &mut std::fs::File = &mut self.held;
        let _ = file.rewind().and_then(|()| file.write_all(INITIALIZED.as_bytes())).and_then(|()| file.sync_data());
    }
}

/// What the init-lock file holds once the database's schema was created.
const INITIALIZED: &str = "initialized\n";

fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).op("start a migration")?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0)).op("read the schema version")?;
        if version >= schema::LATEST {
            return tx.commit().op("finish migrating");
        }
        let Some(sql) = usize::try_from(version).ok().and_then(|v| schema::MIGRATIONS.get(v)) else {
            return Err(StoreError::BadValue {
                column: "user_version",
                detail: format!("{version} in {}", path.display()),
            });
        };
        tx.execute_batch(sql).op("migrate the schema")?;
        tx.pragma_update(None, "user_version", version + 1).op("record the schema version")?;
        tx.pragma_update(None, "application_id", schema::APPLICATION_ID).op("mark the database as troupe's")?;
        tx.commit().op("commit a migration")?;
    }
}

/// Turn SQLite's "not a database" and "corrupt" into [`StoreError::Corrupt`].
fn classify(path: &Path, e: rusqlite::Error, op: &'static str) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt { path: path.to_path_buf(), source: e }
        }
        Some(ErrorCode::CannotOpen) => {
            StoreError::Io { path: path.to_path_buf(), source: std::io::Error::other(e.to_string()) }
        }
        _ => StoreError::Sqlite { op, source: e },
    }
}

/// A busy handler that retries quickly with jitter until [`BUSY_TIMEOUT`]
/// passes. Write transactions here are microseconds long, so waiting a few tens
/// of microseconds, growing to at most 2 ms, wastes far less than SQLite's
/// default back-off (sleeps of up to 100 ms). SQLite takes a plain function, so
/// the wait's start and the jitter state live in thread-locals; `count` is 0 at
/// the start of each wait.
fn busy_wait(count: i32) -> bool {
    thread_local! {
        static STARTED: Cell<Instant> = Cell::new(Instant::now());
        static SEED: Cell<u64> = Cell::new(u64::from(std::process::id()) ^ 0x9e37_79b9_7f4a_7c15);
    }
    if count == 0 {
        STARTED.set(Instant::now());
    }
    if STARTED.get().elapsed() >= BUSY_TIMEOUT {
        return false;
    }
    // xorshift: enough randomness to keep waiting processes from waking in step.
    let mut seed = SEED.get();
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    SEED.set(seed);
    let ceiling = 20u64.saturating_mul(1 << count.clamp(0, 7)).min(2_000);
    std::thread::sleep(Duration::from_micros(10 + seed % ceiling));
    true
}

/// Now, as stored: microseconds since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    Timestamp::now().as_microsecond()
}

/// Append an event inside the caller's transaction.
pub(crate) fn record(tx: &Connection, at: i64, event: &NewEvent) -> Result<i64> {
    events::insert(tx, at, event)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bulk write gives the connection back as it found it, after a
    /// success and after a failure: foreign keys enforced, the usual cache.
    #[test]
    fn a_bulk_write_puts_the_connection_settings_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let settings = |s: &SqliteStore| {
            let c = s.lock();
            let fk: i64 = c.pragma_query_value(None, "foreign_keys", |r| r.get(0)).unwrap();
            let cache: i64 = c.pragma_query_value(None, "cache_size", |r| r.get(0)).unwrap();
            (fk, cache)
        };
        let inside = store
            .bulk_write("test", |tx| {
                let fk: i64 = tx.pragma_query_value(None, "foreign_keys", |r| r.get(0)).op("read")?;
                Ok(fk)
            })
            .unwrap();
        assert_eq!(inside, 0, "off inside the bulk write");
        assert_eq!(settings(&store), (1, CACHE_KIB));
        let failed: Result<()> = store.bulk_write("test", |_| Err(StoreError::EmptySubject));
        assert!(failed.is_err());
        assert_eq!(settings(&store), (1, CACHE_KIB));
    }
}
