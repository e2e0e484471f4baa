//! Workers and spawn jobs on SQLite (schema `V13_WORKERS`, see
//! [`crate::worker`]). Every write is one `BEGIN IMMEDIATE` transaction, so
//! a claim is a single conditional `UPDATE … RETURNING` that racing
//! claimers of other processes run one after another.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::json;

use super::{SqliteStore, now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::lease;
use crate::traits::Workers;
use crate::worker::{
    self, Expired, HOST_COLS, Host, HostRow, JOB_COLS, Job, JobRow, NewHost, NewJob, WORKER_SWEEPER, event, list,
};

fn host_row(r: &Row<'_>) -> rusqlite::Result<HostRow> {
    Ok(HostRow {
        name: r.get(0)?,
        engines: r.get(1)?,
        labels: r.get(2)?,
        max: r.get(3)?,
        load_milli: r.get(4)?,
        draining: r.get(5)?,
        lease_until: r.get(6)?,
        registered_at: r.get(7)?,
        seen_at: r.get(8)?,
        running: r.get(9)?,
    })
}

fn job_row(r: &Row<'_>) -> rusqlite::Result<JobRow> {
    Ok(JobRow {
        id: r.get(0)?,
        feature: r.get(1)?,
        agent: r.get(2)?,
        role: r.get(3)?,
        engine: r.get(4)?,
        labels: r.get(5)?,
        branch: r.get(6)?,
        base: r.get(7)?,
        payload: r.get(8)?,
        state: r.get(9)?,
        host: r.get(10)?,
        lease_until: r.get(11)?,
        stop: r.get(12)?,
        result: r.get(13)?,
        created_at: r.get(14)?,
        updated_at: r.get(15)?,
    })
}

fn host(tx: &Connection, name: &str) -> Result<Host> {
    let sql = format!("SELECT {HOST_COLS} FROM worker_hosts h WHERE h.name = ?1");
    let row = tx.prepare_cached(&sql).and_then(|mut s| s.query_row([name], host_row).optional()).op("read a host")?;
    row.ok_or_else(|| StoreError::HostNotFound(name.to_string()))?.try_into()
}

fn job(tx: &Connection, id: &str) -> Result<Job> {
    let sql = format!("SELECT {JOB_COLS} FROM worker_jobs WHERE id = ?1");
    let row = tx.prepare_cached(&sql).and_then(|mut s| s.query_row([id], job_row).optional()).op("read a job")?;
    row.ok_or_else(|| StoreError::JobNotFound(id.to_string()))?.try_into()
}

fn jobs_where(tx: &Connection, filter: &str, arg: &dyn rusqlite::ToSql) -> Result<Vec<Job>> {
    let sql = format!("SELECT {JOB_COLS} FROM worker_jobs WHERE {filter} ORDER BY seq");
    let rows: Vec<JobRow> =
        tx.prepare_cached(&sql).and_then(|mut s| s.query_map([arg], job_row)?.collect()).op("read jobs")?;
    rows.into_iter().map(Job::try_from).collect()
}

/// Set job `id`'s state, result and lease; record `kind`.
fn finish(tx: &Connection, id: &str, state: &str, result: &str, actor: &str, now: i64) -> Result<Job> {
    tx.prepare_cached(
        "UPDATE worker_jobs SET state = ?2, result = ?3, lease_until = NULL, updated_at = ?4 WHERE id = ?1",
    )
    .and_then(|mut s| s.execute(params![id, state, result, now]))
    .op("finish a job")?;
    let done = job(tx, id)?;
    let data = json!({"state": state, "host": done.host, "agent": done.queued.agent, "result": done.result});
    record(tx, now, &event(worker::JOB_FINISHED, actor, id, data))?;
    Ok(done)
}

/// A lost job's teammate: its lease swept as a lost holder's (its tasks and
/// locks released, `lease_expired` recorded), unless a sweep did it already.
fn sweep_agent(tx: &Connection, agent: &str, now: i64) -> Result<()> {
    let row: Option<(Option<String>, Option<i64>, String)> = tx
        .prepare_cached("SELECT host, lease_until, status FROM agents WHERE id = ?1 AND lease_swept_at IS NULL")
        .and_then(|mut s| s.query_row([agent], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .op("read a lost job's teammate")?;
    if let Some((host, until, status)) = row
        && !status.parse::<crate::AgentStatus>().is_ok_and(|s| s.is_terminal())
    {
        super::leases::expire(tx, agent.to_string(), host, until.unwrap_or(now).min(now), now)?;
    }
    Ok(())
}

impl Workers for SqliteStore {
    fn register_host(&self, new: NewHost, lease: Duration) -> Result<Host> {
        worker::check_host(&new)?;
        self.write("register a worker host", |tx| {
            let now = now_us();
            tx.prepare_cached(
                "INSERT INTO worker_hosts (name, engines, labels, max, draining, lease_until, swept_at, registered_at, seen_at) \
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, NULL, ?6, ?6) \
                 ON CONFLICT (name) DO UPDATE SET engines = excluded.engines, labels = excluded.labels, \
                 max = excluded.max, draining = 0, lease_until = excluded.lease_until, swept_at = NULL, \
                 registered_at = excluded.registered_at, seen_at = excluded.seen_at",
            )
            .and_then(|mut s| {
                s.execute(params![
                    new.name,
                    list(&new.engines),
                    list(&new.labels),
                    new.max,
                    lease::until(now, lease),
                    now
                ])
            })
            .op("register a worker host")?;
            let data = json!({"engines": new.engines, "labels": new.labels, "max": new.max});
            record(tx, now, &event(worker::HOST_REGISTERED, &new.name, &new.name, data))?;
            host(tx, &new.name)
        })
    }

    fn renew_host(&self, name: &str, lease: Duration, load: Option<f64>) -> Result<(Host, Vec<Job>)> {
        self.write("renew a worker's lease", |tx| {
            let now = now_us();
            let until = lease::until(now, lease);
            let renewed = tx
                .prepare_cached(
                    "UPDATE worker_hosts SET lease_until = ?2, seen_at = ?3, load_milli = ?4 \
                     WHERE name = ?1 AND swept_at IS NULL AND lease_until IS NOT NULL",
                )
                .and_then(|mut s| s.execute(params![name, until, now, worker::load_milli(load)]))
                .op("renew a worker's lease")?;
            if renewed == 0 {
                return Err(StoreError::HostNotFound(name.to_string()));
            }
            tx.prepare_cached(
                "UPDATE worker_jobs SET lease_until = ?2 WHERE host = ?1 AND state IN ('claimed', 'running')",
            )
            .and_then(|mut s| s.execute(params![name, until]))
            .op("renew a worker's jobs")?;
            let held = jobs_where(tx, "host = ?1 AND state IN ('claimed', 'running')", &name)?;
            Ok((host(tx, name)?, held))
        })
    }

    fn drain_host(&self, name: &str) -> Result<Host> {
        self.write("drain a worker host", |tx| {
            let now = now_us();
            let changed = tx
                .prepare_cached("UPDATE worker_hosts SET draining = 1 WHERE name = ?1")
                .and_then(|mut s| s.execute([name]))
                .op("drain a worker host")?;
            if changed == 0 {
                return Err(StoreError::HostNotFound(name.to_string()));
            }
            record(tx, now, &event(worker::HOST_DRAINING, name, name, json!({})))?;
            host(tx, name)
        })
    }

    fn leave_host(&self, name: &str) -> Result<()> {
        self.write("a worker host leaves", |tx| {
            let now = now_us();
            host(tx, name)?;
            for j in jobs_where(tx, "host = ?1 AND state IN ('claimed', 'running')", &name)? {
                let result = worker::left_result(name);
                finish(tx, &j.queued.id, "failed", &result, name, now)?;
                sweep_agent(tx, &j.queued.agent, now)?;
            }
            tx.prepare_cached("UPDATE worker_hosts SET lease_until = NULL, draining = 0 WHERE name = ?1")
                .and_then(|mut s| s.execute([name]))
                .op("a worker host leaves")?;
            record(tx, now, &event(worker::HOST_GONE, name, name, json!({"reason": "left"})))?;
            Ok(())
        })
    }

    fn hosts(&self) -> Result<Vec<Host>> {
        self.read("list worker hosts", |c| {
            let sql = format!("SELECT {HOST_COLS} FROM worker_hosts h ORDER BY h.name");
            let rows: Vec<HostRow> = c
                .prepare_cached(&sql)
                .and_then(|mut s| s.query_map([], host_row)?.collect())
                .op("list worker hosts")?;
            rows.into_iter().map(Host::try_from).collect()
        })
    }

    fn queue_job(&self, new: NewJob) -> Result<Job> {
        self.write("queue a spawn job", |tx| {
            let now = now_us();
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO worker_jobs (id, feature, agent, role, engine, labels, branch, base, payload, \
                     created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        new.id,
                        new.feature,
                        new.agent,
                        new.role,
                        new.engine,
                        list(&new.labels),
                        new.branch,
                        new.base,
                        new.payload.to_string(),
                        now
                    ])
                })
                .op("queue a spawn job")?;
            if inserted == 0 {
                return Err(StoreError::BadValue {
                    column: "id",
                    detail: format!("spawn job `{}` exists already", new.id),
                });
            }
            let data = json!({"agent": new.agent, "engine": new.engine, "feature": new.feature});
            record(tx, now, &event(worker::JOB_QUEUED, "lead", &new.id, data))?;
            job(tx, &new.id)
        })
    }

    fn claim_job(&self, name: &str, lease: Duration) -> Result<Option<Job>> {
        self.write("claim a spawn job", |tx| {
            let now = now_us();
            let sql = format!(
                "UPDATE worker_jobs SET state = 'claimed', host = ?1, lease_until = ?3, updated_at = ?2 \
                 WHERE seq = (SELECT j.seq FROM worker_jobs j JOIN worker_hosts h ON h.name = ?1 \
                   WHERE j.state = 'queued' AND h.draining = 0 AND h.swept_at IS NULL AND h.lease_until > ?2 \
                   AND (h.engines = '[]' OR EXISTS (SELECT 1 FROM json_each(h.engines) e WHERE e.value = j.engine)) \
                   AND NOT EXISTS (SELECT 1 FROM json_each(j.labels) l \
                                   WHERE l.value NOT IN (SELECT value FROM json_each(h.labels))) \
                   AND (SELECT count(*) FROM worker_jobs r WHERE r.host = h.name \
                        AND r.state IN ('claimed', 'running')) < h.max \
                   ORDER BY j.seq LIMIT 1) \
                 RETURNING {JOB_COLS}"
            );
            let row = tx
                .prepare_cached(&sql)
                .and_then(|mut s| s.query_row(params![name, now, lease::until(now, lease)], job_row).optional())
                .op("claim a spawn job")?;
            let Some(row) = row else { return Ok(None) };
            let claimed = Job::try_from(row)?;
            let data = json!({"host": name, "agent": claimed.queued.agent});
            record(tx, now, &event(worker::JOB_CLAIMED, name, &claimed.queued.id, data))?;
            Ok(Some(claimed))
        })
    }

    fn start_job(&self, id: &str, name: &str) -> Result<Job> {
        self.write("start a spawn job", |tx| {
            let j = job(tx, id)?;
            if let Some(e) = worker::not_held(&j, name) {
                return Err(e);
            }
            tx.prepare_cached("UPDATE worker_jobs SET state = 'running', updated_at = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, now_us()]))
                .op("start a spawn job")?;
            job(tx, id)
        })
    }

    fn report_job(&self, id: &str, name: &str, report: serde_json::Value) -> Result<()> {
        self.write("report on a spawn job", |tx| {
            if let Some(e) = worker::not_held(&job(tx, id)?, name) {
                return Err(e);
            }
            record(tx, now_us(), &event(worker::JOB_REPORT, name, id, report)).map(drop)
        })
    }

    fn finish_job(&self, id: &str, name: &str, done: bool, result: serde_json::Value) -> Result<Job> {
        self.write("finish a spawn job", |tx| {
            if let Some(e) = worker::not_held(&job(tx, id)?, name) {
                return Err(e);
            }
            finish(tx, id, if done { "done" } else { "failed" }, &result.to_string(), name, now_us())
        })
    }

    fn stop_job(&self, id: &str, by: &str) -> Result<Job> {
        self.write("stop a spawn job", |tx| {
            let now = now_us();
            let j = job(tx, id)?;
            if j.state.is_final() {
                return Ok(j);
            }
            record(tx, now, &event(worker::JOB_STOP, by, id, json!({"state": j.state.as_str()})))?;
            if j.state == worker::JobState::Queued {
                let result = worker::unstarted_result();
                return finish(tx, id, "failed", &result, by, now);
            }
            tx.prepare_cached("UPDATE worker_jobs SET stop = 1, updated_at = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, now]))
                .op("stop a spawn job")?;
            job(tx, id)
        })
    }

    fn job(&self, id: &str) -> Result<Job> {
        self.read("read a spawn job", |c| job(c, id))
    }

    fn jobs(&self, feature: Option<&str>) -> Result<Vec<Job>> {
        self.read("list spawn jobs", |c| match feature {
            Some(f) => jobs_where(c, "feature = ?1", &f),
            None => jobs_where(c, "?1 = 1", &1),
        })
    }

    fn prune_jobs(&self, before: jiff::Timestamp) -> Result<u64> {
        self.write("prune ended spawn jobs", |tx| {
            let n = tx
                .prepare_cached("DELETE FROM worker_jobs WHERE state IN ('done', 'failed') AND updated_at < ?1")
                .and_then(|mut s| s.execute([before.as_microsecond()]))
                .op("prune ended spawn jobs")?;
            Ok(n as u64)
        })
    }

    fn expire_workers(&self) -> Result<Expired> {
        self.write("expire lost workers", |tx| {
            let now = now_us();
            let hosts: Vec<String> = tx
                .prepare_cached(
                    "UPDATE worker_hosts SET swept_at = ?1 \
                     WHERE lease_until IS NOT NULL AND swept_at IS NULL AND lease_until <= ?1 RETURNING name",
                )
                .and_then(|mut s| s.query_map([now], |r| r.get(0))?.collect())
                .op("expire lost worker hosts")?;
            let mut hosts = hosts;
            hosts.sort();
            for h in &hosts {
                record(tx, now, &event(worker::HOST_GONE, WORKER_SWEEPER, h, json!({"reason": "lease_expired"})))?;
            }
            let lost = jobs_where(
                tx,
                "state IN ('claimed', 'running') AND (lease_until <= ?1 \
                 OR host IN (SELECT name FROM worker_hosts WHERE swept_at IS NOT NULL))",
                &now,
            )?;
            for j in &lost {
                finish(tx, &j.queued.id, "failed", &worker::lost_result(), WORKER_SWEEPER, now)?;
                sweep_agent(tx, &j.queued.agent, now)?;
            }
            Ok(Expired { hosts, jobs: lost.into_iter().map(|j| j.queued.id).collect() })
        })
    }
}
