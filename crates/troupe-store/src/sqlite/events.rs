//! The event log on SQLite. Rows are only ever inserted; triggers in the schema
//! refuse updates and deletes.

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use super::rows::{self, EVENT_COLS};
use super::{SqliteStore, now_us};
use crate::error::{Context, Result, StoreError};
use crate::event::{Event, NewEvent};
use crate::traits::EventLog;

impl EventLog for SqliteStore {
    fn append_event(&self, event: NewEvent) -> Result<Event> {
        if event.kind.trim().is_empty() {
            return Err(StoreError::BadValue { column: "kind", detail: "an event needs a kind".into() });
        }
        self.write("append an event", |tx| {
            let id = insert(tx, now_us(), &event)?;
            tx.prepare_cached(&format!("SELECT {EVENT_COLS} FROM events WHERE id = ?1"))
                .and_then(|mut s| s.query_row([id], rows::event))
                .op("read an event")
        })
    }

    fn events_since(&self, after: i64, limit: u32) -> Result<Vec<Event>> {
        self.read("read events", |c| {
            c.prepare_cached(&format!("SELECT {EVENT_COLS} FROM events WHERE id > ?1 ORDER BY id LIMIT ?2"))
                .and_then(|mut s| s.query_map(params![after, limit], rows::event)?.collect())
                .op("read events")
        })
    }

    fn last_event_id(&self) -> Result<i64> {
        self.read("read the newest event", |c| {
            c.prepare_cached("SELECT coalesce(max(id), 0) FROM events")
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .op("read the newest event")
        })
    }

    fn wait_for_event(&self, after: i64, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.last_event_id()? > after {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            // No notification crosses processes on SQLite: look again soon
            // (the newest id is one index probe).
            std::thread::sleep(left.min(SQLITE_LOOK));
        }
    }
}

/// How often a waiter on SQLite looks for a new event.
const SQLITE_LOOK: Duration = Duration::from_millis(10);

/// Insert an event in the caller's transaction; returns its id.
pub(crate) fn insert(c: &Connection, at: i64, event: &NewEvent) -> Result<i64> {
    let data = if event.data.is_null() { "{}".to_string() } else { event.data.to_string() };
    c.prepare_cached("INSERT INTO events (at, kind, actor, subject, data) VALUES (?1, ?2, ?3, ?4, ?5)")
        .and_then(|mut s| s.execute(params![at, event.kind, event.actor, event.subject, data]))
        .op("append an event")?;
    let id = c.last_insert_rowid();
    // `troupe replay --until`: nothing past the chosen event enters the
    // replay's store; the change this event belongs to is rolled back with it.
    if let Some(last) = replay_last_event()
        && id > last
    {
        return Err(crate::error::StoreError::BadValue {
            column: "events",
            detail: format!("the replay stops at event {last} ({REPLAY_LAST_EVENT_ENV})"),
        });
    }
    Ok(id)
}

/// The environment variable `troupe replay --until` sets on the run it
/// replays: the id of the last event its SQLite store may take.
pub const REPLAY_LAST_EVENT_ENV: &str = "TROUPE_REPLAY_LAST_EVENT";

fn replay_last_event() -> Option<i64> {
    static LAST: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| std::env::var(REPLAY_LAST_EVENT_ENV).ok()?.trim().parse().ok())
}
