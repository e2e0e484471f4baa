//! Workers on other hosts (`troupe worker`): the hosts that run teammates
//! for a Lead elsewhere, and the spawn jobs the Lead queues for them.
//!
//! A worker registers its host ([`crate::Workers::register_host`]) with the
//! engines and labels it offers and how many teammates it runs at once, and
//! keeps a lease on it by heartbeat ([`crate::Workers::renew_host`], which
//! also renews the lease of every job it holds). The Lead queues one
//! [`NewJob`] per teammate launch; a worker claims the oldest queued job its
//! host can run ([`crate::Workers::claim_job`]: engine offered, every label
//! the job asks for, fewer than `max` jobs held, not draining), in one
//! statement with its `job_claimed` event. The worker reports the
//! teammate's progress as [`JOB_REPORT`] events and finishes the job with a
//! result ([`crate::Workers::finish_job`]).
//!
//! A job whose lease passed (its worker is gone) is **failed**, never put
//! back in the queue: the teammate it ran is hung to the Lead, whose recovery
//! (seed 000 Spec 10/11) decides whether to retry, and a retry is a new
//! teammate with a new id and so a new job, which any worker may take.
//! Queuing the old job again would run the same teammate twice. In the same
//! transaction the job's teammate has its lease swept as
//! [`crate::Leases::expire_leases`] does (its tasks and locks released, one
//! [`crate::lease::LEASE_EXPIRED`] event), which the Lead reads as
//! `TeammateLeaseExpired`, as for any teammate whose host was lost.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// A host registered (subject: the host). Data: `engines`, `labels`, `max`.
pub const HOST_REGISTERED: &str = "worker_registered";
/// A host drains: it finishes its jobs and takes no new one (subject: the host).
pub const HOST_DRAINING: &str = "worker_draining";
/// A host left (its worker exited) or was lost (its lease passed). Data: `reason`.
pub const HOST_GONE: &str = "worker_gone";
/// A job was queued (subject: the job). Data: `agent`, `engine`, `feature`.
pub const JOB_QUEUED: &str = "job_queued";
/// A job was claimed (subject: the job). Data: `host`, `agent`.
pub const JOB_CLAIMED: &str = "job_claimed";
/// A job's teammate reported (subject: the job; actor: the host). Data: the
/// worker's report (a Lead event or a normalised agent event).
pub const JOB_REPORT: &str = "job_report";
/// A job ended (subject: the job). Data: `state`, `host`, `result`.
pub const JOB_FINISHED: &str = "job_finished";
/// A stop of a job was asked for (subject: the job).
pub const JOB_STOP: &str = "job_stop_requested";

/// Who sweeps lost hosts and jobs (the actor of their events).
pub const WORKER_SWEEPER: &str = "troupe-worker-lease";

/// A host as a worker registers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewHost {
    /// The host's name (unique in the store).
    pub name: String,
    /// Engines it runs (`claude`, `scripted`, ...); empty: any.
    pub engines: Vec<String>,
    /// Labels it offers; a job that asks for labels needs all of them.
    pub labels: Vec<String>,
    /// At most this many jobs at once.
    pub max: u32,
}

/// A registered host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Its name.
    pub name: String,
    /// Engines it runs; empty: any.
    pub engines: Vec<String>,
    /// Labels it offers.
    pub labels: Vec<String>,
    /// At most this many jobs at once.
    pub max: u32,
    /// Jobs it holds now (claimed or running).
    pub running: u32,
    /// Its 1-minute load average at the last heartbeat, when known.
    pub load: Option<f64>,
    /// It finishes its jobs and takes no new one.
    pub draining: bool,
    /// When its lease ends (`None`: it left or was lost).
    pub lease_until: Option<Timestamp>,
    /// When it registered.
    pub registered_at: Timestamp,
    /// Its last heartbeat.
    pub seen_at: Timestamp,
}

impl Host {
    /// Whether its lease passed at `now` (a lost host still listed).
    pub fn stale(&self, now: Timestamp) -> bool {
        self.lease_until.is_some_and(|t| t <= now)
    }

    /// Whether it can take a job for `engine` asking for `labels`, now or
    /// once it has room: live, not draining, the engine offered (or any),
    /// every label offered. The rule [`crate::Workers::claim_job`] applies,
    /// for reports of jobs nobody can take (its `max` is not checked here).
    pub fn can_take(&self, engine: &str, labels: &[String], now: Timestamp) -> bool {
        self.lease_until.is_some_and(|t| t > now)
            && !self.draining
            && (self.engines.is_empty() || self.engines.iter().any(|e| e == engine))
            && labels.iter().all(|l| self.labels.contains(l))
    }
}

/// What a person is told of queued job `job` that no live worker can take.
pub fn unplaceable(job: &str, engine: &str, labels: &[String]) -> String {
    let needs = match labels.is_empty() {
        true => format!("engine {engine}"),
        false => format!("engine {engine} and labels {}", labels.join(",")),
    };
    let flags = match labels.is_empty() {
        true => format!("--engines {engine}"),
        false => format!("--engines {engine} --labels {}", labels.join(",")),
    };
    format!("spawn job {job} waits: no live worker offers {needs}; start one with `troupe worker {flags}`")
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for a worker.
    Queued,
    /// A worker took it and prepares its checkout.
    Claimed,
    /// Its teammate runs.
    Running,
    /// It ended; the result says how.
    Done,
    /// It could not run, its worker was lost, or it was stopped before it started.
    Failed,
}

impl JobState {
    /// The name in the database and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Claimed => "claimed",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
        }
    }

    /// True once it ended.
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Done | JobState::Failed)
    }
}

impl std::str::FromStr for JobState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [JobState::Queued, JobState::Claimed, JobState::Running, JobState::Done, JobState::Failed]
            .into_iter()
            .find(|j| j.as_str() == s)
            .ok_or_else(|| format!("unknown job state `{s}`"))
    }
}

/// A job as the Lead queues it: one launch of one teammate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    /// Its id (unique in the store).
    pub id: String,
    /// The feature.
    pub feature: String,
    /// The teammate's agent id.
    pub agent: String,
    /// Its role.
    pub role: String,
    /// The engine it runs on.
    pub engine: String,
    /// Labels a host must offer to take it.
    pub labels: Vec<String>,
    /// The branch to work on, on the shared remote.
    pub branch: String,
    /// The commit the branch starts from.
    pub base: String,
    /// What the worker needs to launch it (the Lead's, opaque here).
    pub payload: serde_json::Value,
}

/// A job: what the Lead queued, and where it is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// What the Lead queued (its fields read at the job's top level in JSON).
    #[serde(flatten)]
    pub queued: NewJob,
    /// Where it is.
    pub state: JobState,
    /// The host holding it (or that held it).
    pub host: Option<String>,
    /// When its lease ends, while a host holds it.
    pub lease_until: Option<Timestamp>,
    /// A stop was asked for: its worker stops the teammate.
    pub stop: bool,
    /// How it ended, once it did.
    pub result: Option<serde_json::Value>,
    /// When it was queued.
    pub created_at: Timestamp,
    /// Its last change.
    pub updated_at: Timestamp,
}

/// Hosts and jobs a sweep found lost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Expired {
    /// Hosts whose lease passed.
    pub hosts: Vec<String>,
    /// Jobs whose lease passed, now failed.
    pub jobs: Vec<String>,
}

/// The columns both backends select for a host, in the order [`HostRow`] has them.
pub(crate) const HOST_COLS: &str = "h.name, h.engines, h.labels, h.max, h.load_milli, h.draining, h.lease_until, \
     h.registered_at, h.seen_at, \
     (SELECT count(*) FROM worker_jobs r WHERE r.host = h.name AND r.state IN ('claimed', 'running'))";

/// The columns both backends select for a job, in the order [`JobRow`] has them.
pub(crate) const JOB_COLS: &str = "id, feature, agent, role, engine, labels, branch, base, payload, state, host, \
     lease_until, stop, result, created_at, updated_at";

/// A host row as both backends read it.
pub(crate) struct HostRow {
    pub(crate) name: String,
    pub(crate) engines: String,
    pub(crate) labels: String,
    pub(crate) max: i64,
    pub(crate) load_milli: Option<i64>,
    pub(crate) draining: i64,
    pub(crate) lease_until: Option<i64>,
    pub(crate) registered_at: i64,
    pub(crate) seen_at: i64,
    pub(crate) running: i64,
}

/// A job row as both backends read it.
pub(crate) struct JobRow {
    pub(crate) id: String,
    pub(crate) feature: String,
    pub(crate) agent: String,
    pub(crate) role: String,
    pub(crate) engine: String,
    pub(crate) labels: String,
    pub(crate) branch: String,
    pub(crate) base: String,
    pub(crate) payload: String,
    pub(crate) state: String,
    pub(crate) host: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) stop: i64,
    pub(crate) result: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
}

fn bad(column: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::BadValue { column, detail: detail.to_string() }
}

fn ts(us: i64) -> crate::Result<Timestamp> {
    Timestamp::from_microsecond(us).map_err(|e| bad("timestamp", e))
}

fn json<T: serde::de::DeserializeOwned>(text: &str, column: &'static str) -> crate::Result<T> {
    serde_json::from_str(text).map_err(|e| bad(column, e))
}

impl TryFrom<HostRow> for Host {
    type Error = StoreError;
    fn try_from(r: HostRow) -> crate::Result<Host> {
        Ok(Host {
            name: r.name,
            engines: json(&r.engines, "engines")?,
            labels: json(&r.labels, "labels")?,
            max: u32::try_from(r.max).map_err(|e| bad("max", e))?,
            running: u32::try_from(r.running).map_err(|e| bad("running", e))?,
            load: r.load_milli.map(|m| m as f64 / 1000.0),
            draining: r.draining != 0,
            lease_until: r.lease_until.map(ts).transpose()?,
            registered_at: ts(r.registered_at)?,
            seen_at: ts(r.seen_at)?,
        })
    }
}

impl TryFrom<JobRow> for Job {
    type Error = StoreError;
    fn try_from(r: JobRow) -> crate::Result<Job> {
        Ok(Job {
            queued: NewJob {
                id: r.id,
                feature: r.feature,
                agent: r.agent,
                role: r.role,
                engine: r.engine,
                labels: json(&r.labels, "labels")?,
                branch: r.branch,
                base: r.base,
                payload: json(&r.payload, "payload")?,
            },
            state: r.state.parse().map_err(|e| bad("state", e))?,
            host: r.host,
            lease_until: r.lease_until.map(ts).transpose()?,
            stop: r.stop != 0,
            result: r.result.as_deref().map(|t| json(t, "result")).transpose()?,
            created_at: ts(r.created_at)?,
            updated_at: ts(r.updated_at)?,
        })
    }
}

/// Refuse a host that cannot take any job.
pub(crate) fn check_host(host: &NewHost) -> crate::Result<()> {
    if host.name.trim().is_empty() {
        return Err(bad("name", "a worker's host needs a name (`troupe worker --name`)"));
    }
    if host.max == 0 {
        return Err(bad("max", "a worker runs at least one teammate (`--max 1` or more)"));
    }
    Ok(())
}

/// A list as stored (a JSON array of strings).
pub(crate) fn list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// The result of a job its worker left before it ended.
pub(crate) fn left_result(host: &str) -> String {
    serde_json::json!({"error": format!("its worker on {host} exited before it ended")}).to_string()
}

/// The result of a job stopped while it waited in the queue.
pub(crate) fn unstarted_result() -> String {
    serde_json::json!({"error": "stopped before a worker took it"}).to_string()
}

/// The result of a job lost with its host.
pub(crate) fn lost_result() -> String {
    serde_json::json!({"error": "its worker's lease passed: the host was lost"}).to_string()
}

/// A load average as stored (thousandths: every column is an integer or text).
pub(crate) fn load_milli(load: Option<f64>) -> Option<i64> {
    load.filter(|l| l.is_finite() && *l >= 0.0).map(|l| (l * 1000.0).round() as i64)
}

/// An event of a worker's change.
pub(crate) fn event(kind: &str, actor: &str, subject: &str, data: serde_json::Value) -> crate::event::NewEvent {
    crate::event::NewEvent {
        kind: kind.to_string(),
        actor: Some(actor.to_string()),
        subject: Some(subject.to_string()),
        data,
    }
}

/// Why `host` may not act on `job` (`None`: it holds it and it has not ended).
pub(crate) fn not_held(job: &Job, host: &str) -> Option<StoreError> {
    let held = job.host.as_deref() == Some(host) && matches!(job.state, JobState::Claimed | JobState::Running);
    (!held).then(|| StoreError::JobNotHeld {
        id: job.queued.id.clone(),
        host: host.to_string(),
        state: match &job.host {
            Some(h) => format!("{} on host {h}", job.state.as_str()),
            None => job.state.as_str().to_string(),
        },
    })
}
