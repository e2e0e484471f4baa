//! The event log on PostgreSQL. Rows are only ever inserted (a trigger refuses
//! updates and deletes) and each insert NOTIFYs `troupe_events`.

use std::time::Duration;

use super::rows::{self, EVENT_COLS, all, get as col};
use super::{PgStore, Tx, now_us, record_now};
use crate::error::{Result, StoreError};
use crate::event::{Event, NewEvent};
use crate::traits::EventLog;

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
        self.read("read events", |tx| {
            let sql = format!("SELECT {EVENT_COLS} FROM events WHERE id > $1 ORDER BY id LIMIT $2");
            all(tx.query("read events", &sql, &[&after, &i64::from(limit)])?, rows::event)
        })
    }

    fn last_event_id(&self) -> Result<i64> {
        self.read("read the newest event", |tx| {
            col(&tx.one("read the newest event", "SELECT coalesce(max(id), 0) FROM events", &[])?, 0)
        })
    }

    fn wait_for_event(&self, after: i64, timeout: Duration) -> Result<bool> {
        Ok(self.newest().wait(after, timeout))
    }
}

/// Insert an event in the caller's transaction, which holds the events lock
/// (see [`super::record_now`]); returns its id.
pub(crate) fn insert(tx: &mut Tx<'_>, at: i64, event: &NewEvent) -> Result<i64> {
    let data = if event.data.is_null() { "{}".to_string() } else { event.data.to_string() };
    let row = tx.one(
        "append an event",
        "INSERT INTO events (at, kind, actor, subject, data) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        &[&at, &event.kind, &event.actor, &event.subject, &data],
    )?;
    col(&row, 0)
}
