//! The event log on PostgreSQL. Rows are only ever inserted (a trigger refuses
//! updates and deletes); each writer NOTIFYs `troupe_events` as it commits.
//!
//! Ids may commit out of order (`V18_EVENTS_WITHOUT_GLOBAL_ORDER`), so every
//! read by id cursor goes through [`PgStore::settled`]: events in id order up
//! to the first missing id that a transaction in flight may still hold
//! ([`super::gaps`] has the argument). `events_since` returns that prefix,
//! `last_event_id` the id below which everything is settled, and
//! `wait_for_event` wakes only when an event after `after` can be read.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use postgres::Row;

use super::rows::{self, EVENT_COLS, all, get as col};
use super::{Conn, PgStore, Tx, now_us, off_runtime, prepared, record_now};
use crate::error::{Context, Result, StoreError};
use crate::event::{Event, NewEvent};
use crate::traits::EventLog;

/// How often a waiter held by a missing id looks again when no notification
/// comes (a rolled-back transaction sends none).
const RECHECK: Duration = Duration::from_millis(5);

/// How long `last_event_id` waits for the transactions holding a missing id.
const HORIZON_WAIT: Duration = Duration::from_secs(10);

/// The transactions that may still commit an event, now: those holding
/// [`super::EVENT_WRITERS`] (`classid`/`objid` are its two halves) in this
/// database. An advisory lock belongs to the database it was taken in, and
/// `pg_locks` shows the whole cluster's: another troupe database on the
/// same server would otherwise hold this one's readers at every gap.
const RUNNING: &str = "SELECT virtualtransaction FROM pg_locks WHERE locktype = 'advisory' AND classid = 21586 \
                       AND objid = 1431306245 AND objsubid = 1 AND granted \
                       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

const IDS_SINCE: &str = "SELECT id FROM events WHERE id > $1 ORDER BY id LIMIT $2";

impl EventLog for PgStore {
    fn append_event(&self, event: NewEvent) -> Result<Event> {
        if event.kind.trim().is_empty() {
            return Err(StoreError::BadValue { column: "kind", detail: "an event needs a kind".into() });
        }
        self.write("append an event", |tx| {
            let id = record_now(tx, now_us(), &event)?;
            let sql = format!("SELECT {EVENT_COLS} FROM events WHERE id = $1");
            rows::event(&tx.one("read an event", &sql, &[&id])?)
        })
    }

    fn events_since(&self, after: i64, limit: u32) -> Result<Vec<Event>> {
        let sql = format!("SELECT {EVENT_COLS} FROM events WHERE id > $1 ORDER BY id LIMIT $2");
        all(self.settled("read events", &sql, after, limit)?, rows::event)
    }

    fn last_event_id(&self) -> Result<i64> {
        let deadline = Instant::now() + HORIZON_WAIT;
        loop {
            let from = self.gaps().horizon;
            let page = self.settled("read the newest event", IDS_SINCE, from, 10_000)?;
            let mut gaps = self.gaps();
            if let Some(row) = page.last() {
                gaps.horizon = gaps.horizon.max(col(row, 0)?);
                if page.len() == 10_000 {
                    continue;
                }
            }
            // Caught up, or held by an id still in flight: wait for its transactions, within reason.
            if !gaps.pending_after(gaps.horizon) || Instant::now() >= deadline {
                return Ok(gaps.horizon);
            }
            drop(gaps);
            std::thread::sleep(RECHECK);
        }
    }

    fn wait_for_event(&self, after: i64, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let newest = self.newest();
        loop {
            let notes = newest.notes();
            if !newest.wait(after, deadline.saturating_duration_since(Instant::now())) {
                return Ok(false);
            }
            if !self.settled("look for an event", IDS_SINCE, after, 1)?.is_empty() {
                return Ok(true);
            }
            // A later id was announced but an earlier one may still come: the next notification, or a look soon.
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            newest.wait_note(notes, left.min(RECHECK));
        }
    }
}

impl PgStore {
    fn gaps(&self) -> std::sync::MutexGuard<'_, super::gaps::Gaps> {
        self.gaps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The rows of `sql` (ids after `$1` in order, at most `$2`, the id
    /// first) that a reader resuming after `after` may have: those before
    /// the first missing id that may still appear. Each statement is its own
    /// snapshot, in this order: pending ids are settled against the
    /// transactions running now, then the rows are read, then (for ids seen
    /// missing for the first time) the running transactions are read again.
    fn settled(&self, op: &'static str, sql: &str, after: i64, limit: u32) -> Result<Vec<Row>> {
        off_runtime(|| {
            let mut conn = self.conn()?;
            let Conn { client, cache } = &mut *conn;
            let statement = prepared(client, cache, op, sql)?;
            // At most a few rounds: each one after the first follows new gaps that were found gone at once.
            for round in 0.. {
                if self.gaps().pending_after(after) {
                    let now = running(client, cache)?;
                    self.gaps().settle(&now);
                }
                let mut rows = client.query(&statement, &[&after, &i64::from(limit)]).op(op)?;
                let ids = rows.iter().map(|r| col(r, 0)).collect::<Result<Vec<i64>>>()?;
                let walk = self.gaps().walk(after, &ids);
                rows.truncate(walk.deliver);
                if walk.new.is_empty() {
                    return Ok(rows);
                }
                let now = running(client, cache)?;
                self.gaps().record(&walk.new, &now);
                // Gone at once (nothing in flight): read again, past them.
                if !now.is_empty() || round == 2 {
                    return Ok(rows);
                }
            }
            unreachable!("the loop returns")
        })
    }
}

fn running(
    client: &mut postgres::Client,
    cache: &mut std::collections::HashMap<String, postgres::Statement>,
) -> Result<HashSet<String>> {
    let statement = prepared(client, cache, "read the running transactions", RUNNING)?;
    let rows = client.query(&statement, &[]).op("read the running transactions")?;
    rows.iter().map(|r| col(r, 0)).collect()
}

/// Insert an event in the caller's transaction, which has its transaction
/// id already (see [`super::record_now`]); returns its id.
pub(crate) fn insert(tx: &mut Tx<'_>, at: i64, event: &NewEvent) -> Result<i64> {
    let data = if event.data.is_null() { "{}".to_string() } else { event.data.to_string() };
    let row = tx.one(
        "append an event",
        "INSERT INTO events (at, kind, actor, subject, data) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        &[&at, &event.kind, &event.actor, &event.subject, &data],
    )?;
    col(&row, 0)
}
