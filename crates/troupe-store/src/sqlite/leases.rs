//! Leases on SQLite (schema `V11_LEASES`, see [`crate::lease`]). A
//! heartbeat is one small write; the sweep is one `BEGIN IMMEDIATE`
//! transaction that releases every passed lease's tasks and locks with
//! their events.

use std::time::Duration;

use rusqlite::{Connection, params};

use super::registry::get;
use super::{SqliteStore, now_us, record};
use crate::agent::Agent;
use crate::error::{Context, Result};
use crate::lease::{self, ExpiredLease};
use crate::traits::Leases;

impl Leases for SqliteStore {
    fn renew_lease(&self, id: &str, lease: Duration) -> Result<Agent> {
        self.write("renew a lease", |tx| {
            let agent = get(tx, id)?;
            if agent.status.is_terminal() {
                return Ok(agent);
            }
            tx.prepare_cached("UPDATE agents SET lease_until = ?2, lease_swept_at = NULL WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, lease::until(now_us(), lease)]))
                .op("renew a lease")?;
            get(tx, id)
        })
    }

    fn expire_leases(&self) -> Result<Vec<ExpiredLease>> {
        self.write("expire leases", |tx| {
            let now = now_us();
            let passed: Vec<(String, Option<String>, i64)> = tx
                .prepare_cached(
                    "SELECT id, host, lease_until FROM agents WHERE lease_until IS NOT NULL AND lease_swept_at IS NULL AND lease_until <= ?1 \
                     ORDER BY lease_until, id",
                )
                .and_then(|mut s| s.query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
                .op("find passed leases")?;
            passed.into_iter().map(|(agent, host, until)| expire(tx, agent, host, until, now)).collect()
        })
    }
}

/// Release what `agent` holds and end its lease, with the events.
pub(super) fn expire(
    tx: &Connection,
    agent: String,
    host: Option<String>,
    until: i64,
    now: i64,
) -> Result<ExpiredLease> {
    let op = "release an expired holder's work";
    let tasks: Vec<(String, String)> = tx
        .prepare_cached("SELECT id, status FROM tasks WHERE assignee = ?1 AND status <> 'completed' ORDER BY seq")
        .and_then(|mut s| s.query_map([&agent], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .op(op)?;
    tx.prepare_cached(
        "UPDATE tasks SET status = 'pending', assignee = NULL, updated_at = ?2 \
         WHERE assignee = ?1 AND status <> 'completed'",
    )
    .and_then(|mut s| s.execute(params![agent, now]))
    .op(op)?;
    let locks: Vec<String> = tx
        .prepare_cached("SELECT path FROM file_locks WHERE agent = ?1 ORDER BY path")
        .and_then(|mut s| s.query_map([&agent], |r| r.get(0))?.collect())
        .op(op)?;
    tx.prepare_cached("DELETE FROM file_locks WHERE agent = ?1").and_then(|mut s| s.execute([&agent])).op(op)?;
    tx.prepare_cached("UPDATE agents SET lease_swept_at = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![agent, now]))
        .op(op)?;
    let expired = lease::expired(agent, host, until, tasks, locks)?;
    for event in lease::expiry_events(&expired) {
        record(tx, now, &event)?;
    }
    Ok(expired.lease)
}
