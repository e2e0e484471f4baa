//! Workers and spawn jobs on PostgreSQL (schema `V13_WORKERS`), with
//! SQLite's rules ([`crate::sqlite`]'s workers). A claim is one statement:
//! the host's row locked (`FOR UPDATE`, so one host's claims count its jobs
//! one after another), the oldest job it can run picked with
//! `FOR UPDATE SKIP LOCKED` (racing hosts skip each other's pick instead of
//! waiting for it) and taken, its event written with the commit.

use std::time::Duration;

use postgres::Row;
use serde_json::json;

use super::rows::{all, get};
use super::{PgStore, Tx, now_us, record};
use crate::error::{Result, StoreError};
use crate::lease;
use crate::traits::Workers;
use crate::worker::{
    self, Expired, HOST_COLS, Host, HostRow, JOB_COLS, Job, JobRow, NewHost, NewJob, WORKER_SWEEPER, event, list,
};

fn host_row(r: &Row) -> Result<Host> {
    HostRow {
        name: get(r, 0)?,
        engines: get(r, 1)?,
        labels: get(r, 2)?,
        max: get(r, 3)?,
        load_milli: get(r, 4)?,
        draining: get(r, 5)?,
        lease_until: get(r, 6)?,
        registered_at: get(r, 7)?,
        seen_at: get(r, 8)?,
        running: get(r, 9)?,
    }
    .try_into()
}

fn job_row(r: &Row) -> Result<Job> {
    JobRow {
        id: get(r, 0)?,
        feature: get(r, 1)?,
        agent: get(r, 2)?,
        role: get(r, 3)?,
        engine: get(r, 4)?,
        labels: get(r, 5)?,
        branch: get(r, 6)?,
        base: get(r, 7)?,
        payload: get(r, 8)?,
        state: get(r, 9)?,
        host: get(r, 10)?,
        lease_until: get(r, 11)?,
        stop: get(r, 12)?,
        result: get(r, 13)?,
        created_at: get(r, 14)?,
        updated_at: get(r, 15)?,
    }
    .try_into()
}

fn host(tx: &mut Tx<'_>, name: &str) -> Result<Host> {
    let sql = format!("SELECT {HOST_COLS} FROM worker_hosts h WHERE h.name = $1");
    let row = tx.opt("read a host", &sql, &[&name])?;
    host_row(&row.ok_or_else(|| StoreError::HostNotFound(name.to_string()))?)
}

/// Job `id`, its row locked for the rest of the transaction.
fn job(tx: &mut Tx<'_>, id: &str, lock: bool) -> Result<Job> {
    let sql = format!("SELECT {JOB_COLS} FROM worker_jobs WHERE id = $1{}", if lock { " FOR UPDATE" } else { "" });
    let row = tx.opt("read a job", &sql, &[&id])?;
    job_row(&row.ok_or_else(|| StoreError::JobNotFound(id.to_string()))?)
}

fn held(tx: &mut Tx<'_>, name: &str) -> Result<Vec<Job>> {
    let sql =
        format!("SELECT {JOB_COLS} FROM worker_jobs WHERE host = $1 AND state IN ('claimed', 'running') ORDER BY seq");
    let rows = tx.query("read a host's jobs", &sql, &[&name])?;
    rows.iter().map(job_row).collect()
}

fn finish(tx: &mut Tx<'_>, id: &str, state: &str, result: &str, actor: &str, now: i64) -> Result<Job> {
    tx.exec(
        "finish a job",
        "UPDATE worker_jobs SET state = $2, result = $3, lease_until = NULL, updated_at = $4 WHERE id = $1",
        &[&id, &state, &result, &now],
    )?;
    let done = job(tx, id, false)?;
    let data = json!({"state": state, "host": done.host, "agent": done.queued.agent, "result": done.result});
    record(tx, now, &event(worker::JOB_FINISHED, actor, id, data))?;
    Ok(done)
}

/// A lost job's teammate: its lease swept as a lost holder's, unless a sweep did it already.
fn sweep_agent(tx: &mut Tx<'_>, agent: &str, now: i64) -> Result<()> {
    let row = tx.opt(
        "read a lost job's teammate",
        "SELECT host, lease_until, status FROM agents WHERE id = $1 AND lease_swept_at IS NULL FOR UPDATE",
        &[&agent],
    )?;
    if let Some(r) = row {
        let (host, until, status): (Option<String>, Option<i64>, String) = (get(&r, 0)?, get(&r, 1)?, get(&r, 2)?);
        if !status.parse::<crate::AgentStatus>().is_ok_and(|s| s.is_terminal()) {
            tx.lock(super::FILE_LOCKS_LOCK)?;
            super::leases::expire(tx, agent.to_string(), host, until.unwrap_or(now).min(now), now)?;
        }
    }
    Ok(())
}

impl Workers for PgStore {
    fn register_host(&self, new: NewHost, lease: Duration) -> Result<Host> {
        worker::check_host(&new)?;
        self.write("register a worker host", |tx| {
            let now = now_us();
            let (engines, labels, max, until) =
                (list(&new.engines), list(&new.labels), i64::from(new.max), lease::until(now, lease));
            tx.exec(
                "register a worker host",
                "INSERT INTO worker_hosts (name, engines, labels, max, draining, lease_until, swept_at, registered_at, seen_at) \
                 VALUES ($1, $2, $3, $4, 0, $5, NULL, $6, $6) \
                 ON CONFLICT (name) DO UPDATE SET engines = excluded.engines, labels = excluded.labels, \
                 max = excluded.max, draining = 0, lease_until = excluded.lease_until, swept_at = NULL, \
                 registered_at = excluded.registered_at, seen_at = excluded.seen_at",
                &[&new.name, &engines, &labels, &max, &until, &now],
            )?;
            let data = json!({"engines": new.engines, "labels": new.labels, "max": new.max});
            record(tx, now, &event(worker::HOST_REGISTERED, &new.name, &new.name, data))?;
            host(tx, &new.name)
        })
    }

    fn renew_host(&self, name: &str, lease: Duration, load: Option<f64>) -> Result<(Host, Vec<Job>)> {
        self.write("renew a worker's lease", |tx| {
            let now = now_us();
            let until = lease::until(now, lease);
            let renewed = tx.exec(
                "renew a worker's lease",
                "UPDATE worker_hosts SET lease_until = $2, seen_at = $3, load_milli = $4 \
                 WHERE name = $1 AND swept_at IS NULL AND lease_until IS NOT NULL",
                &[&name, &until, &now, &worker::load_milli(load)],
            )?;
            if renewed == 0 {
                return Err(StoreError::HostNotFound(name.to_string()));
            }
            tx.exec(
                "renew a worker's jobs",
                "UPDATE worker_jobs SET lease_until = $2 WHERE host = $1 AND state IN ('claimed', 'running')",
                &[&name, &until],
            )?;
            let jobs = held(tx, name)?;
            Ok((host(tx, name)?, jobs))
        })
    }

    fn drain_host(&self, name: &str) -> Result<Host> {
        self.write("drain a worker host", |tx| {
            let now = now_us();
            let changed =
                tx.exec("drain a worker host", "UPDATE worker_hosts SET draining = 1 WHERE name = $1", &[&name])?;
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
            for j in held(tx, name)? {
                let result = worker::left_result(name);
                finish(tx, &j.queued.id, "failed", &result, name, now)?;
                sweep_agent(tx, &j.queued.agent, now)?;
            }
            tx.exec(
                "a worker host leaves",
                "UPDATE worker_hosts SET lease_until = NULL, draining = 0 WHERE name = $1",
                &[&name],
            )?;
            record(tx, now, &event(worker::HOST_GONE, name, name, json!({"reason": "left"})))
        })
    }

    fn hosts(&self) -> Result<Vec<Host>> {
        self.read("list worker hosts", |tx| {
            let sql = format!("SELECT {HOST_COLS} FROM worker_hosts h ORDER BY h.name COLLATE \"C\"");
            let rows = tx.query("list worker hosts", &sql, &[])?;
            rows.iter().map(host_row).collect()
        })
    }

    fn queue_job(&self, new: NewJob) -> Result<Job> {
        self.write("queue a spawn job", |tx| {
            let now = now_us();
            let (labels, payload) = (list(&new.labels), new.payload.to_string());
            let inserted = tx.exec(
                "queue a spawn job",
                "INSERT INTO worker_jobs (id, feature, agent, role, engine, labels, branch, base, payload, \
                 created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &new.id,
                    &new.feature,
                    &new.agent,
                    &new.role,
                    &new.engine,
                    &labels,
                    &new.branch,
                    &new.base,
                    &payload,
                    &now,
                ],
            )?;
            if inserted == 0 {
                return Err(StoreError::BadValue {
                    column: "id",
                    detail: format!("spawn job `{}` exists already", new.id),
                });
            }
            let data = json!({"agent": new.agent, "engine": new.engine, "feature": new.feature});
            record(tx, now, &event(worker::JOB_QUEUED, "lead", &new.id, data))?;
            job(tx, &new.id, false)
        })
    }

    fn claim_job(&self, name: &str, lease: Duration) -> Result<Option<Job>> {
        self.write("claim a spawn job", |tx| {
            let now = now_us();
            let until = lease::until(now, lease);
            let sql = format!(
                "WITH h AS (SELECT name, engines::jsonb AS engines, labels::jsonb AS labels, max FROM worker_hosts \
                   WHERE name = $1 AND draining = 0 AND swept_at IS NULL AND lease_until > $2 FOR UPDATE), \
                 pick AS (SELECT j.seq FROM worker_jobs j, h \
                   WHERE j.state = 'queued' \
                   AND (jsonb_array_length(h.engines) = 0 OR h.engines @> jsonb_build_array(j.engine)) \
                   AND h.labels @> j.labels::jsonb \
                   AND (SELECT count(*) FROM worker_jobs r WHERE r.host = h.name \
                        AND r.state IN ('claimed', 'running')) < h.max \
                   ORDER BY j.seq LIMIT 1 FOR UPDATE OF j SKIP LOCKED) \
                 UPDATE worker_jobs SET state = 'claimed', host = $1, lease_until = $3, updated_at = $2 \
                 FROM pick WHERE worker_jobs.seq = pick.seq RETURNING {}",
                JOB_COLS.split(", ").map(|c| format!("worker_jobs.{c}")).collect::<Vec<_>>().join(", ")
            );
            let Some(row) = tx.opt("claim a spawn job", &sql, &[&name, &now, &until])? else { return Ok(None) };
            let claimed = job_row(&row)?;
            let data = json!({"host": name, "agent": claimed.queued.agent});
            record(tx, now, &event(worker::JOB_CLAIMED, name, &claimed.queued.id, data))?;
            Ok(Some(claimed))
        })
    }

    fn start_job(&self, id: &str, name: &str) -> Result<Job> {
        self.write("start a spawn job", |tx| {
            if let Some(e) = worker::not_held(&job(tx, id, true)?, name) {
                return Err(e);
            }
            tx.exec(
                "start a spawn job",
                "UPDATE worker_jobs SET state = 'running', updated_at = $2 WHERE id = $1",
                &[&id, &now_us()],
            )?;
            job(tx, id, false)
        })
    }

    fn report_job(&self, id: &str, name: &str, report: serde_json::Value) -> Result<()> {
        self.write("report on a spawn job", |tx| {
            // Shared: reports of one job do not wait for each other, only for its end.
            let row = tx.opt(
                "report on a spawn job",
                &format!("SELECT {JOB_COLS} FROM worker_jobs WHERE id = $1 FOR SHARE"),
                &[&id],
            )?;
            let j = job_row(&row.ok_or_else(|| StoreError::JobNotFound(id.to_string()))?)?;
            if let Some(e) = worker::not_held(&j, name) {
                return Err(e);
            }
            record(tx, now_us(), &event(worker::JOB_REPORT, name, id, report.clone()))
        })
    }

    fn finish_job(&self, id: &str, name: &str, done: bool, result: serde_json::Value) -> Result<Job> {
        self.write("finish a spawn job", |tx| {
            if let Some(e) = worker::not_held(&job(tx, id, true)?, name) {
                return Err(e);
            }
            finish(tx, id, if done { "done" } else { "failed" }, &result.to_string(), name, now_us())
        })
    }

    fn stop_job(&self, id: &str, by: &str) -> Result<Job> {
        self.write("stop a spawn job", |tx| {
            let now = now_us();
            let j = job(tx, id, true)?;
            if j.state.is_final() {
                return Ok(j);
            }
            record(tx, now, &event(worker::JOB_STOP, by, id, json!({"state": j.state.as_str()})))?;
            if j.state == worker::JobState::Queued {
                let result = worker::unstarted_result();
                return finish(tx, id, "failed", &result, by, now);
            }
            tx.exec(
                "stop a spawn job",
                "UPDATE worker_jobs SET stop = 1, updated_at = $2 WHERE id = $1",
                &[&id, &now],
            )?;
            job(tx, id, false)
        })
    }

    fn job(&self, id: &str) -> Result<Job> {
        self.read("read a spawn job", |tx| job(tx, id, false))
    }

    fn jobs(&self, feature: Option<&str>) -> Result<Vec<Job>> {
        self.read("list spawn jobs", |tx| {
            let sql = format!("SELECT {JOB_COLS} FROM worker_jobs WHERE $1::text IS NULL OR feature = $1 ORDER BY seq");
            let rows = tx.query("list spawn jobs", &sql, &[&feature])?;
            rows.iter().map(job_row).collect()
        })
    }

    fn prune_jobs(&self, before: jiff::Timestamp) -> Result<u64> {
        self.write("prune ended spawn jobs", |tx| {
            tx.exec(
                "prune ended spawn jobs",
                "DELETE FROM worker_jobs WHERE state IN ('done', 'failed') AND updated_at < $1",
                &[&before.as_microsecond()],
            )
        })
    }

    fn expire_workers(&self) -> Result<Expired> {
        self.write("expire lost workers", |tx| {
            let now = now_us();
            let rows = tx.query(
                "expire lost worker hosts",
                "UPDATE worker_hosts SET swept_at = $1 WHERE name IN (SELECT name FROM worker_hosts \
                 WHERE lease_until IS NOT NULL AND swept_at IS NULL AND lease_until <= $1 FOR UPDATE SKIP LOCKED) \
                 RETURNING name",
                &[&now],
            )?;
            let mut hosts: Vec<String> = all(rows, |r| get(r, 0))?;
            hosts.sort();
            for h in &hosts {
                record(tx, now, &event(worker::HOST_GONE, WORKER_SWEEPER, h, json!({"reason": "lease_expired"})))?;
            }
            let sql = format!(
                "SELECT {JOB_COLS} FROM worker_jobs WHERE state IN ('claimed', 'running') \
                 AND (lease_until <= $1 OR host IN (SELECT name FROM worker_hosts WHERE swept_at IS NOT NULL)) \
                 ORDER BY seq FOR UPDATE SKIP LOCKED"
            );
            let lost: Vec<Job> =
                tx.query("expire lost jobs", &sql, &[&now])?.iter().map(job_row).collect::<Result<_>>()?;
            for j in &lost {
                finish(tx, &j.queued.id, "failed", &worker::lost_result(), WORKER_SWEEPER, now)?;
                sweep_agent(tx, &j.queued.agent, now)?;
            }
            Ok(Expired { hosts, jobs: lost.into_iter().map(|j| j.queued.id).collect() })
        })
    }
}
