//! The PostgreSQL backend: the same traits as [`crate::SqliteStore`], for a
//! team spread over several machines that share one database.
//!
//! Concurrency: every write is one transaction (READ COMMITTED) that appends
//! its events. Claims are one `UPDATE` whose row is picked by
//! `FOR UPDATE SKIP LOCKED` with the blocker count checked in the same
//! statement, so concurrent claimers never wait on each other's rows. The
//! claim path (`claim`, `claim_next`, `complete`) runs as server-side
//! functions (migration `V14_CLAIM_FUNCTIONS`), each one statement that is
//! its own transaction: one round trip per call, no `BEGIN` or `COMMIT`. Writes
//! that read before they decide lock what they read (`FOR UPDATE`, or
//! `FOR SHARE` on a blocker whose status they rely on), and writes that number
//! or check the whole board (creating tasks, plans, blockers, agent numbers)
//! take one transaction-scoped advisory lock, as SQLite's single writer would.
//! Events are appended with the COMMIT, in the same round trip. No lock
//! orders the writers' events (`V18_EVENTS_WITHOUT_GLOBAL_ORDER`): ids may
//! commit out of order, and a reader resuming from an id waits out an id
//! that a transaction in flight may still hold (`gaps` has the argument).
//!
//! Wake-ups: a writer NOTIFYs `troupe_events` with its newest event id in
//! the round trip of its commit, once per transaction (`NOTIFIED`);
//! [`crate::EventLog::wait_for_event`] waits on one listening connection per
//! store (`listen`) instead of polling.
//!
//! TLS: as the URL's `sslmode` asks, with libpq's meanings ([`tls`]).
//!
//! The schema is migrated once, under a session advisory lock, by the first
//! opener that finds it behind; a newer schema is refused.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, Row, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Context, Result, StoreError};
use crate::event::NewEvent;

mod a2a;
mod approvals;
mod audit;
mod board;
mod events;
mod gaps;
mod gateway;
mod leases;
mod listen;
mod locks;
mod mailbox;
mod plans;
mod registry;
mod rows;
pub mod schema;
mod sessions;
pub mod tls;
pub mod url;
mod usage;
mod workers;

pub use url::mask_password;

/// Advisory lock keys (per database): `TRUP` then a number.
const MIGRATION_LOCK: i64 = 0x5452_5550_0000;
/// Held by writes that number tasks or check the whole dependency graph.
pub(crate) const BOARD_LOCK: i64 = 0x5452_5550_0001;
// 0x5452_5550_0002 was the events lock (before V18): unused, not reused.
/// Taken *shared* by every transaction before it draws an event id, held to
/// its end: no writer waits for another, and `pg_locks` shows readers which
/// transactions may still commit an event (an `advisory` lock with `classid`
/// 21586 and `objid` 1431306245; `gaps` has the argument). The claim
/// functions name it by its number (`V18_EVENTS_WITHOUT_GLOBAL_ORDER`).
pub const EVENT_WRITERS: i64 = 0x5452_5550_0005;
/// Held by writes that number agents.
pub(crate) const AGENTS_LOCK: i64 = 0x5452_5550_0003;
/// Serialises file-lock writes, as SQLite's single writer does: an absent
/// row cannot be locked with `FOR UPDATE`, so two racers for a new lock
/// would otherwise both see the path free.
pub(crate) const FILE_LOCKS_LOCK: i64 = 0x5452_5550_0004;

/// The PostgreSQL store. Share it across threads (`Arc<PgStore>`): each call
/// takes a pooled connection for one transaction, at most the URL's
/// `pool_max_conns` ([`url::DEFAULT_POOL_SIZE`]) at once, so a process's
/// threads put that many backends on the server, not one each.
pub struct PgStore {
    /// Always present; taken only by `Drop` (see [`off_runtime`]).
    pool: Option<r2d2::Pool<Manager>>,
    config: postgres::Config,
    tls: MakeRustlsConnect,
    masked: String,
    /// The newest event id announced, once a waiter started the listener.
    newest: std::sync::OnceLock<std::sync::Arc<listen::Newest>>,
    /// What this store's readers know about missing event ids (boxed: a
    /// store is moved around by value, this is rarely touched).
    gaps: Box<std::sync::Mutex<gaps::Gaps>>,
}

impl Drop for PgStore {
    /// Closing the pool's connections blocks on the client's runtime, as every call does.
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            off_runtime(move || drop(pool));
        }
    }
}

/// Run `f`, which blocks on the `postgres` client's own runtime, so that a
/// caller inside a tokio runtime (the Lead's driver, `troupe worker`) can
/// use the store as any other caller does: on a multi-threaded runtime the
/// thread leaves the runtime for the call (`block_in_place`), as starting a
/// runtime inside one is refused. Elsewhere `f` runs as it is.
pub(crate) fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.masked).finish()
    }
}

impl PgStore {
    /// Connect to the database at `url` (`postgres://user:password@host:port/db`
    /// or key=value form), create or migrate its schema, and refuse a database
    /// that is not troupe's or comes from a newer troupe. The URL is never
    /// printed with its password.
    pub fn open(url: &str) -> Result<PgStore> {
        off_runtime(|| PgStore::open_here(url))
    }

    fn open_here(url: &str) -> Result<PgStore> {
        let masked = mask_password(url);
        let unavailable = |detail: String| StoreError::PostgresUnavailable { url: masked.clone(), detail };
        let (url, pool_size) = url::pool_size(url).map_err(|e| unavailable(format!("not a database URL: {e}")))?;
        let split = tls::split(&url).map_err(|e| unavailable(format!("not a database URL: {e}")))?;
        let tls = tls::connector(split.mode, split.rootcert.as_deref()).map_err(unavailable)?;
        let mut config =
            postgres::Config::from_str(&split.url).map_err(|e| unavailable(format!("not a database URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("troupe");
        }
        // One connection first: an unreachable server or a refused login is
        // reported now, not after the pool's wait for a connection.
        let mut first = config.connect(tls.clone()).map_err(|e| unavailable(connect_error(&e)))?;
        migrate(&mut first, &masked)?;
        let manager = Manager { config: config.clone(), tls: tls.clone() };
        let pool = r2d2::Pool::builder()
            .max_size(pool_size)
            .min_idle(Some(0))
            .connection_timeout(Duration::from_secs(30))
            // A broken connection is dropped when a call fails on it
            // (`has_broken`); testing each checkout would add a round trip to every call.
            .test_on_check_out(false)
            .build_unchecked(manager);
        Ok(PgStore { pool: Some(pool), config, tls, masked, newest: std::sync::OnceLock::new(), gaps: Box::default() })
    }

    /// The database URL with its password masked, for messages.
    pub fn url(&self) -> &str {
        &self.masked
    }

    /// How many connections this store's pool opens at most (the URL's `pool_max_conns`).
    pub fn pool_size(&self) -> u32 {
        self.pool.as_ref().map_or(0, |pool| pool.max_size())
    }

    fn conn(&self) -> Result<r2d2::PooledConnection<Manager>> {
        let unavailable = |detail: String| StoreError::PostgresUnavailable { url: self.masked.clone(), detail };
        let pool = self.pool.as_ref().ok_or_else(|| unavailable("the store is closing".into()))?;
        pool.get().map_err(|e| unavailable(e.to_string()))
    }

    /// Run `f` in a write transaction, committing on success. A deadlock
    /// PostgreSQL broke by aborting this transaction is retried.
    pub(crate) fn write<T>(&self, op: &'static str, f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        off_runtime(|| self.write_here(op, f))
    }

    fn write_here<T>(&self, op: &'static str, mut f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.conn()?;
        let mut attempt = 0;
        loop {
            let Conn { client, cache } = &mut *conn;
            let mut tx = Tx::begin(client, cache, "BEGIN", op)?;
            let result = f(&mut tx).and_then(|value| tx.commit(op).map(|()| value));
            match result {
                Err(e) if attempt < 5 && retryable(&e) => attempt += 1,
                other => return other,
            }
        }
    }

    /// Run `sql` as a transaction of its own (no `BEGIN`: the server commits
    /// as the statement ends), one round trip on a prepared statement: the
    /// claim path's server-side functions (`V14_CLAIM_FUNCTIONS`). A
    /// deadlock PostgreSQL broke by aborting it is retried, as [`Self::write`] does.
    /// A statement that writes events notifies the waiters itself, in its
    /// select list ([`NOTIFIED`]).
    pub(crate) fn statement(&self, op: &'static str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        off_runtime(|| {
            let mut conn = self.conn()?;
            let Conn { client, cache } = &mut *conn;
            let statement = prepared(client, cache, op, sql)?;
            let mut attempt = 0;
            loop {
                match client.query(&statement, params).op(op) {
                    Err(e) if attempt < 5 && retryable(&e) => attempt += 1,
                    other => return other,
                }
            }
        })
    }

    /// Run `f` in a read-only transaction on one snapshot.
    pub(crate) fn read<T>(&self, op: &'static str, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        off_runtime(|| self.read_here(op, f))
    }

    fn read_here<T>(&self, op: &'static str, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.conn()?;
        let Conn { client, cache } = &mut *conn;
        let mut tx = Tx::begin(client, cache, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", op)?;
        let value = f(&mut tx)?;
        tx.commit(op)?;
        Ok(value)
    }

    /// Whether this store's connections to the server are encrypted (TLS),
    /// as the server sees them (`pg_stat_ssl`).
    pub fn encrypted(&self) -> Result<bool> {
        self.read("read the connection's TLS state", |tx| {
            let row = tx.one(
                "read the connection's TLS state",
                "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
                &[],
            )?;
            rows::get(&row, 0)
        })
    }

    /// The listener's newest id, starting it on first use.
    pub(crate) fn newest(&self) -> &listen::Newest {
        self.newest.get_or_init(|| {
            let newest = std::sync::Arc::default();
            listen::start(&newest, self.config.clone(), self.tls.clone());
            newest
        })
    }

    /// A connection of its own, outside the pool (with the URL's TLS).
    pub(crate) fn client(&self) -> Result<Client> {
        self.config
            .connect(self.tls.clone())
            .map_err(|e| StoreError::PostgresUnavailable { url: self.masked.clone(), detail: connect_error(&e) })
    }

    /// Problems with the store's own invariants; empty when there are none
    /// (the twin of [`crate::SqliteStore::verify`]).
    pub fn verify(&self) -> Result<Vec<String>> {
        self.read("verify the database", |tx| {
            let checks: [(&str, &str); 3] = [
                (
                    "open_blockers does not match the blockers that are not completed",
                    "SELECT t.id FROM tasks t WHERE t.open_blockers <> (SELECT count(*) FROM task_deps d \
                     JOIN tasks b ON b.seq = d.blocker_seq WHERE d.task_seq = t.seq AND b.status <> 'completed')",
                ),
                (
                    "blocked_by does not match the dependency table",
                    "SELECT t.id FROM tasks t WHERE json_array_length(t.blocked_by::json) <> \
                     (SELECT count(*) FROM task_deps d WHERE d.task_seq = t.seq)",
                ),
                (
                    "message thread does not exist",
                    "SELECT m.id::text FROM messages m WHERE NOT EXISTS \
                     (SELECT 1 FROM messages r WHERE r.id = m.thread)",
                ),
            ];
            let mut problems = Vec::new();
            for (what, sql) in checks {
                for row in tx.query("check invariants", sql, &[])? {
                    problems.push(format!("{}: {what}", row.get::<_, String>(0)));
                }
            }
            Ok(problems)
        })
    }
}

/// Create or migrate the schema once, under a session advisory lock:
/// other openers wait, then find the work done.
fn migrate(client: &mut Client, masked: &str) -> Result<()> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).op("lock the schema")?;
    let result = migrate_locked(client, masked);
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).op("unlock the schema");
    result.and(unlocked.map(drop))
}

fn migrate_locked(client: &mut Client, masked: &str) -> Result<()> {
    let marked: bool =
        client.query_one("SELECT to_regclass('troupe_schema') IS NOT NULL", &[]).op("read the schema version")?.get(0);
    if !marked {
        let tables: i64 = client
            .query_one("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()", &[])
            .op("inspect the database")?
            .get(0);
        if tables > 0 {
            return Err(StoreError::Foreign {
                path: masked.into(),
                what: format!("it has {tables} tables of its own and no troupe_schema"),
            });
        }
        let mut tx = client.transaction().op("create the schema")?;
        tx.batch_execute(schema::VERSION_TABLE).op("create the schema")?;
        tx.execute("INSERT INTO troupe_schema (app, version) VALUES ('troupe', 0)", &[]).op("create the schema")?;
        tx.commit().op("create the schema")?;
    }
    loop {
        let mut tx = client.transaction().op("start a migration")?;
        let version: i64 = tx.query_one("SELECT version FROM troupe_schema", &[]).op("read the schema version")?.get(0);
        if version > schema::LATEST {
            return Err(StoreError::NewerSchema { path: masked.into(), found: version, supported: schema::LATEST });
        }
        let Some(sql) = usize::try_from(version).ok().and_then(|v| schema::MIGRATIONS.get(v)) else {
            return tx.commit().op("finish migrating");
        };
        tx.batch_execute(sql).op("migrate the schema")?;
        tx.execute("UPDATE troupe_schema SET version = $1", &[&(version + 1)]).op("record the schema version")?;
        tx.commit().op("commit a migration")?;
    }
}

/// Deadlocks and serialisation failures: the transaction did nothing and may run again.
fn retryable(e: &StoreError) -> bool {
    use postgres::error::SqlState;
    matches!(e, StoreError::Postgres { source, .. }
        if source.code().is_some_and(|c| *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE))
}

/// A pooled connection with its prepared statements (prepared once per
/// connection: a claim is then one round trip per statement, not two).
pub(crate) struct Conn {
    client: Client,
    cache: HashMap<String, Statement>,
}

/// Makes connections for r2d2.
struct Manager {
    config: postgres::Config,
    tls: MakeRustlsConnect,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> std::result::Result<Conn, postgres::Error> {
        let mut client = self.config.connect(self.tls.clone())?;
        session(&mut client)?;
        Ok(Conn { client, cache: HashMap::new() })
    }

    fn is_valid(&self, conn: &mut Conn) -> std::result::Result<(), postgres::Error> {
        conn.client.simple_query("").map(drop)
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client.is_closed()
    }
}

/// Per-connection settings. `synchronous_commit = off` is the counterpart of
/// SQLite's `synchronous = NORMAL`: the database is never corrupted, but a
/// crash of the server or its machine may drop the last commits (at most
/// three `wal_writer_delay`s, 600 ms by default). Without it every
/// transaction would wait for its WAL flush while holding its rows' locks.
fn session(client: &mut Client) -> std::result::Result<(), postgres::Error> {
    client.batch_execute("SET synchronous_commit = off; SET standard_conforming_strings = on")
}

/// A parameter of a statement.
pub(crate) type Param<'a> = &'a (dyn ToSql + Sync);

/// Wakes the store's waiters when a transaction that wrote events commits:
/// the newest event id this session drew (`currval`, its own
/// transaction's), as an expression for a statement of that transaction.
/// PostgreSQL delivers a NOTIFY when (and only if) its transaction commits,
/// so it is sent in the transaction, in the round trip that commits it:
/// once per transaction (not from a per-row trigger), and not as a
/// transaction of its own after the commit, which cost a round trip, a
/// transaction id and a commit record per write, and took PostgreSQL's
/// cluster-wide notify lock at its own commit all the same (BENCHMARKS.md,
/// "many claimers": the NOTIFY in the commit's round trip).
pub(crate) const NOTIFIED: &str = "pg_notify('troupe_events', currval('events_id_seq')::text)";

/// One transaction, with the connection's statement cache. Its events wait
/// in `pending` and go to the server with the COMMIT, in one round trip that
/// inserts them, notifies the waiters and commits.
pub(crate) struct Tx<'a> {
    client: &'a mut Client,
    cache: &'a mut HashMap<String, Statement>,
    pending: Vec<(i64, NewEvent)>,
    /// Events were inserted before the commit ([`record_now`]), under
    /// [`EVENT_WRITERS`].
    wrote: bool,
    open: bool,
}

impl<'a> Tx<'a> {
    fn begin(
        client: &'a mut Client,
        cache: &'a mut HashMap<String, Statement>,
        sql: &str,
        op: &'static str,
    ) -> Result<Tx<'a>> {
        client.batch_execute(sql).op(op)?;
        Ok(Tx { client, cache, pending: Vec::new(), wrote: false, open: true })
    }

    /// Insert the pending events, notify the waiters when events were
    /// written ([`NOTIFIED`]) and commit, in one round trip.
    /// [`EVENT_WRITERS`] is taken before the events' ids are drawn (see [`gaps`]).
    fn commit(&mut self, op: &'static str) -> Result<()> {
        let mut sql = String::new();
        if !self.pending.is_empty() {
            sql.push_str(&format!("SELECT pg_advisory_xact_lock_shared({EVENT_WRITERS}); "));
            sql.push_str("INSERT INTO events (at, kind, actor, subject, data) VALUES ");
            for (i, (at, event)) in self.pending.iter().enumerate() {
                let data = if event.data.is_null() { "{}".to_string() } else { event.data.to_string() };
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!(
                    "({at}, {}, {}, {}, {})",
                    literal(Some(&event.kind)),
                    literal(event.actor.as_deref()),
                    literal(event.subject.as_deref()),
                    literal(Some(&data))
                ));
            }
            sql.push_str("; ");
        }
        if self.wrote || !self.pending.is_empty() {
            sql.push_str(&format!("SELECT {NOTIFIED}; "));
        }
        sql.push_str("COMMIT");
        let result = self.client.batch_execute(&sql).op(op);
        // After a failure inside the batch the transaction is still open (aborted): Drop rolls it back.
        self.open = result.is_err();
        result
    }

    fn prepare(&mut self, op: &'static str, sql: &str) -> Result<Statement> {
        prepared(self.client, self.cache, op, sql)
    }

    /// All rows of `sql`.
    pub(crate) fn query(&mut self, op: &'static str, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        let s = self.prepare(op, sql)?;
        self.client.query(&s, params).op(op)
    }

    /// The row of `sql`, if any.
    pub(crate) fn opt(&mut self, op: &'static str, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>> {
        let s = self.prepare(op, sql)?;
        self.client.query_opt(&s, params).op(op)
    }

    /// The one row of `sql`.
    pub(crate) fn one(&mut self, op: &'static str, sql: &str, params: &[Param<'_>]) -> Result<Row> {
        let s = self.prepare(op, sql)?;
        self.client.query_one(&s, params).op(op)
    }

    /// Run `sql`; how many rows it changed.
    pub(crate) fn exec(&mut self, op: &'static str, sql: &str, params: &[Param<'_>]) -> Result<u64> {
        let s = self.prepare(op, sql)?;
        self.client.execute(&s, params).op(op)
    }

    /// Take a transaction-scoped advisory lock (exclusive).
    pub(crate) fn lock(&mut self, key: i64) -> Result<()> {
        self.exec("take a lock", "SELECT pg_advisory_xact_lock($1)", &[&key]).map(drop)
    }
}

/// `sql` prepared on `client`, once per connection (`cache`).
fn prepared(
    client: &mut Client,
    cache: &mut HashMap<String, Statement>,
    op: &'static str,
    sql: &str,
) -> Result<Statement> {
    if let Some(s) = cache.get(sql) {
        return Ok(s.clone());
    }
    let s = client.prepare(sql).op(op)?;
    cache.insert(sql.to_string(), s.clone());
    Ok(s)
}

impl Drop for Tx<'_> {
    /// A transaction that did not commit (an error, a panic) is rolled back
    /// before its connection goes back to the pool.
    fn drop(&mut self) {
        if self.open {
            let _ = self.client.batch_execute("ROLLBACK");
        }
    }
}

/// `text` as an SQL string literal (`standard_conforming_strings` is on, see
/// [`session`]: only `'` needs doubling), or NULL.
fn literal(text: Option<&str>) -> String {
    match text {
        Some(t) => format!("'{}'", t.replace('\'', "''")),
        None => "NULL".to_string(),
    }
}

/// Append an event to the caller's transaction; it is written with the commit.
pub(crate) fn record(tx: &mut Tx<'_>, at: i64, event: &NewEvent) -> Result<()> {
    tx.pending.push((at, event.clone()));
    Ok(())
}

/// Append an event now, for a caller that needs its id (the rare writes
/// that name their event), under [`EVENT_WRITERS`] (see [`gaps`]).
pub(crate) fn record_now(tx: &mut Tx<'_>, at: i64, event: &NewEvent) -> Result<i64> {
    if !tx.wrote {
        tx.exec("announce an event writer", "SELECT pg_advisory_xact_lock_shared($1)", &[&EVENT_WRITERS])?;
        tx.wrote = true;
    }
    // Events recorded before this one keep their order.
    for (at, pending) in std::mem::take(&mut tx.pending) {
        events::insert(tx, at, &pending)?;
    }
    events::insert(tx, at, event)
}

pub(crate) use crate::sqlite::now_us;

/// A connection failure in words, with what to check; never the password
/// (the driver's messages do not contain it).
fn connect_error(e: &postgres::Error) -> String {
    let text = match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => std::error::Error::source(e).map_or_else(|| e.to_string(), |s| format!("{e}: {s}")),
    };
    format!("{text} (is the server running, and are the URL's host, port, user and database right?)")
}
