//! Leases, not pids: how a teammate on another host is known to be gone.
//!
//! A registered agent may hold a lease (`lease_until`), recorded with the
//! host it runs on. Its holder's heartbeat ([`crate::Leases::renew_lease`]:
//! the teammate's hooks, its gateway calls, the Lead's watcher while its
//! process runs) pushes the lease forward. A holder whose lease passed is
//! taken for lost with its host: [`crate::Leases::expire_leases`] puts the
//! board tasks it held back to pending, releases its file locks, ends the
//! lease and appends one [`LEASE_EXPIRED`] event, which the Lead reads as
//! "this teammate hangs" (seed 000 Spec 10/11 recovery). The task a holder
//! claimed carries its holder's lease: one lease per holder, never one per
//! row, so a heartbeat is one write whatever it holds.
//!
//! On the host a holder runs on, its pid says more, and sooner: a registry
//! entry of this host whose process is gone is stale at once
//! ([`crate::Registry::stale_agents`]), as before. A pid of another host
//! means nothing here, so only the lease can tell there.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use serde_json::json;

use crate::agent::Agent;
use crate::event::{NewEvent, kind};
use crate::pid::pid_alive;

/// The event of a lease that passed (subject: the agent). Data: `host`,
/// `lease_until` (µs), `tasks` and `locks` it held, now released.
pub const LEASE_EXPIRED: &str = "lease_expired";

/// Who released what an expired holder held (the actor of its events).
pub const LEASE_SWEEPER: &str = "troupe-lease";

/// How long a lease lasts when nothing says otherwise (`[store] lease_seconds`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a heartbeat that comes with every call (a teammate's gateway
/// calls, its hooks) renews a lease of `lease`: once its last renewal is a
/// sixth of a lease old. A burst of calls costs one write transaction, and
/// a renewal is never skipped long enough for a working holder's lease to
/// pass.
pub fn renewal_due(lease: Duration, since_last: Duration) -> bool {
    since_last >= lease / 6
}

/// A holder whose lease passed, and what was released of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredLease {
    /// The agent.
    pub agent: String,
    /// The host it ran on, when known.
    pub host: Option<String>,
    /// When its lease ended.
    pub lease_until: Timestamp,
    /// Board tasks it held (in progress or reserved), now pending and unassigned.
    pub tasks: Vec<String>,
    /// Files it had locked, now free.
    pub locks: Vec<String>,
}

/// Why `agent`, seen from `host` at `now` (µs), no longer runs; `None` while
/// it may. A terminal status is never stale. Same host: its pid is gone.
/// Any host: its lease passed.
pub fn stale(agent: &Agent, now: i64, host: &str) -> Option<&'static str> {
    if agent.status.is_terminal() {
        return None;
    }
    // Entries from before leases have no host: they were this machine's.
    let here = agent.host.as_deref().is_none_or(|h| h == host);
    if here && agent.pid.is_some_and(|p| !pid_alive(p)) {
        return Some("holder_gone");
    }
    if agent.lease_until.is_some_and(|t| t.as_microsecond() <= now) {
        return Some("lease_expired");
    }
    None
}

/// Whether `agent` still runs for a new registration of its id to be
/// refused: its pid lives (this host), or its lease holds (another host).
pub fn running(agent: &Agent, now: i64, host: &str) -> bool {
    if agent.status.is_terminal() {
        return false;
    }
    let here = agent.host.as_deref().is_none_or(|h| h == host);
    match (here, agent.pid) {
        (true, Some(pid)) => pid_alive(pid),
        _ => agent.lease_until.is_some_and(|t| t.as_microsecond() > now),
    }
}

/// What [`running`] went by, in words: `pid N`, or the lease and its host.
pub fn running_how(agent: &Agent, host: &str) -> String {
    let here = agent.host.as_deref().is_none_or(|h| h == host);
    match (here, agent.pid, agent.lease_until) {
        (true, Some(pid), _) => format!("pid {pid}"),
        (_, _, Some(until)) => {
            format!("its lease from host {} holds until {until}", agent.host.as_deref().unwrap_or("?"))
        }
        _ => "no pid or lease".into(),
    }
}

/// A holder being swept: what [`crate::Leases::expire_leases`] returns of
/// it, and the status each of its tasks had (for the events).
pub(crate) struct Sweep {
    pub(crate) lease: ExpiredLease,
    statuses: Vec<String>,
}

/// The sweep of `agent`, whose lease ended at `until` (µs), holding `tasks`
/// (id, status) and the locks on `locks`.
pub(crate) fn expired(
    agent: String,
    host: Option<String>,
    until: i64,
    tasks: Vec<(String, String)>,
    locks: Vec<String>,
) -> crate::Result<Sweep> {
    let lease_until = Timestamp::from_microsecond(until)
        .map_err(|e| crate::StoreError::BadValue { column: "lease_until", detail: e.to_string() })?;
    let (tasks, statuses) = tasks.into_iter().unzip();
    Ok(Sweep { lease: ExpiredLease { agent, host, lease_until, tasks, locks }, statuses })
}

/// The events of a sweep, in the order they happened: each task released,
/// each lock ended, then the lease's end (which the Lead reads).
pub(crate) fn expiry_events(sweep: &Sweep) -> Vec<NewEvent> {
    let l = &sweep.lease;
    let by = |kind: &str, subject: &str, data: serde_json::Value| NewEvent {
        kind: kind.to_string(),
        actor: Some(LEASE_SWEEPER.to_string()),
        subject: Some(subject.to_string()),
        data,
    };
    let tasks = l.tasks.iter().zip(&sweep.statuses).map(|(id, status)| {
        by(kind::TASK_RELEASED, id, json!({"previous": l.agent, "status": status, "reason": LEASE_EXPIRED}))
    });
    let locks = l.locks.iter().map(|path| {
        by(crate::sqlite::locks::kind::LOCK_RELEASED, path, json!({"holder": l.agent, "reason": LEASE_EXPIRED}))
    });
    let data = json!({
        "host": l.host,
        "lease_until": l.lease_until.as_microsecond(),
        "tasks": l.tasks,
        "locks": l.locks,
    });
    tasks.chain(locks).chain(std::iter::once(by(LEASE_EXPIRED, &l.agent, data))).collect()
}

/// `now` plus `lease`, in µs.
pub(crate) fn until(now: i64, lease: Duration) -> i64 {
    now.saturating_add(i64::try_from(lease.as_micros()).unwrap_or(i64::MAX / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentStatus;

    fn agent(host: Option<&str>, pid: Option<u32>, lease_until: Option<i64>) -> Agent {
        Agent {
            id: "builder-1".into(),
            name: "builder-1".into(),
            role: "builder".into(),
            engine: "claude".into(),
            model: None,
            feature: None,
            task: None,
            pid,
            status: AgentStatus::Processing,
            session_id: None,
            started_at: Timestamp::UNIX_EPOCH,
            last_event_at: Timestamp::UNIX_EPOCH,
            host: host.map(str::to_string),
            lease_until: lease_until.map(|us| Timestamp::from_microsecond(us).unwrap()),
        }
    }

    #[test]
    fn the_pid_decides_on_its_own_host_and_the_lease_everywhere() {
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let gone = dead.id();
        dead.wait().unwrap();
        let alive = std::process::id();
        for (a, want, why) in [
            (agent(Some("here"), Some(gone), Some(10_000)), Some("holder_gone"), "dead pid here, lease holds"),
            (agent(None, Some(gone), None), Some("holder_gone"), "an entry from before leases"),
            (agent(Some("there"), Some(gone), Some(10_000)), None, "a pid of another host means nothing"),
            (agent(Some("there"), Some(gone), Some(1_000)), Some("lease_expired"), "another host, lease passed"),
            (agent(Some("here"), Some(alive), Some(1_000)), Some("lease_expired"), "alive, but nothing renewed"),
            (agent(Some("here"), None, None), None, "no pid, no lease: nothing to tell"),
            (agent(Some("here"), None, Some(5_000)), Some("lease_expired"), "exactly at the end"),
        ] {
            assert_eq!(stale(&a, 5_000, "here"), want, "{why}");
        }
        let mut done = agent(Some("there"), None, Some(1_000));
        done.status = AgentStatus::Done;
        assert_eq!(stale(&done, 5_000, "here"), None, "finished agents hold nothing");
    }

    #[test]
    fn a_registration_waits_for_a_live_pid_here_or_a_live_lease_there() {
        assert!(running(&agent(Some("here"), Some(std::process::id()), None), 5_000, "here"));
        assert!(!running(&agent(Some("there"), Some(std::process::id()), None), 5_000, "here"));
        assert!(running(&agent(Some("there"), Some(1), Some(9_000)), 5_000, "here"));
        assert!(!running(&agent(Some("there"), Some(1), Some(4_000)), 5_000, "here"));
        assert!(running(&agent(Some("here"), None, Some(9_000)), 5_000, "here"));
    }
}
