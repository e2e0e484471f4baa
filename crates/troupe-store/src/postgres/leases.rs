//! Leases on PostgreSQL (schema `V11_LEASES`), with SQLite's rules
//! ([`crate::sqlite`]'s leases). The sweep picks passed leases with
//! `FOR UPDATE SKIP LOCKED`, so of sweepers racing on several hosts each
//! holder is swept by one, and a heartbeat racing the sweep waits for it
//! (its holder then starts a new lease; what it held is gone).

use std::time::Duration;

use super::registry::{get, get_locked};
use super::rows::{all, get as col};
use super::{FILE_LOCKS_LOCK, PgStore, Tx, now_us, record};
use crate::agent::Agent;
use crate::error::Result;
use crate::lease::{self, ExpiredLease};
use crate::traits::Leases;

impl Leases for PgStore {
    fn renew_lease(&self, id: &str, lease: Duration) -> Result<Agent> {
        self.write("renew a lease", |tx| {
            let agent = get_locked(tx, id)?;
            if agent.status.is_terminal() {
                return Ok(agent);
            }
            let until = lease::until(now_us(), lease);
            tx.exec(
                "renew a lease",
                "UPDATE agents SET lease_until = $2, lease_swept_at = NULL WHERE id = $1",
                &[&id, &until],
            )?;
            get(tx, id)
        })
    }

    fn expire_leases(&self) -> Result<Vec<ExpiredLease>> {
        self.write("expire leases", |tx| {
            let now = now_us();
            let rows = tx.query(
                "find passed leases",
                "SELECT id, host, lease_until FROM agents WHERE lease_until IS NOT NULL AND lease_swept_at IS NULL AND lease_until <= $1 \
                 ORDER BY lease_until, id COLLATE \"C\" FOR UPDATE SKIP LOCKED",
                &[&now],
            )?;
            let passed: Vec<(String, Option<String>, i64)> =
                all(rows, |r| Ok((col(r, 0)?, col(r, 1)?, col(r, 2)?)))?;
            if passed.is_empty() {
                return Ok(Vec::new());
            }
            // File-lock writes are serialised (see `FILE_LOCKS_LOCK`).
            tx.lock(FILE_LOCKS_LOCK)?;
            passed.into_iter().map(|(agent, host, until)| expire(tx, agent, host, until, now)).collect()
        })
    }
}

/// Release what `agent` holds and end its lease, with the events.
pub(super) fn expire(
    tx: &mut Tx<'_>,
    agent: String,
    host: Option<String>,
    until: i64,
    now: i64,
) -> Result<ExpiredLease> {
    let op = "release an expired holder's work";
    let rows = tx.query(
        op,
        "UPDATE tasks t SET status = 'pending', assignee = NULL, updated_at = $2 \
         FROM (SELECT seq, status AS was FROM tasks WHERE assignee = $1 AND status <> 'completed' FOR UPDATE) o \
         WHERE t.seq = o.seq RETURNING t.id, o.was, t.seq",
        &[&agent, &now],
    )?;
    let mut tasks: Vec<(i64, String, String)> = all(rows, |r| Ok((col(r, 2)?, col(r, 0)?, col(r, 1)?)))?;
    tasks.sort();
    let tasks = tasks.into_iter().map(|(_, id, was)| (id, was)).collect();
    let rows = tx.query(op, "DELETE FROM file_locks WHERE agent = $1 RETURNING path", &[&agent])?;
    let mut locks: Vec<String> = all(rows, |r| col(r, 0))?;
    locks.sort();
    tx.exec(op, "UPDATE agents SET lease_swept_at = $2 WHERE id = $1", &[&agent, &now])?;
    let sweep = lease::expired(agent, host, until, tasks, locks)?;
    for event in lease::expiry_events(&sweep) {
        record(tx, now, &event)?;
    }
    Ok(sweep.lease)
}
