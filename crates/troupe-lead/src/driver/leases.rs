//! The Lead's side of leases (see troupe-store's `lease`): while a run's
//! teammate's process lives on this host, the Lead's watcher is its
//! heartbeat (a teammate thinking quietly for minutes calls no hook and no
//! gateway tool, yet runs); and the watcher sweeps passed leases, so a lost
//! host's tasks and locks are released within a lease and a sweep interval
//! of its last heartbeat. The teammates whose lease passed reach the machine
//! from the event log (`lease_expired`, whoever swept them), as
//! `TeammateLeaseExpired`.

use std::time::{Duration, Instant};

use troupe_store::lock::host_name;
use troupe_store::pid::pid_alive;
use troupe_store::{Agent, Store};

/// How often the Lead renews and sweeps: six times a lease, so a renewal
/// never comes late and a passed lease waits at most a sixth more; never
/// more often than the watcher looks at the store.
pub fn interval(lease: Duration, tick: Duration) -> Duration {
    (lease / 6).max(tick)
}

/// Renewals and sweeps at [`interval`].
pub struct LeaseKeeper {
    lease: Duration,
    every: Duration,
    next: Instant,
    host: String,
}

impl LeaseKeeper {
    /// A keeper for leases of `lease`, called every `tick`.
    pub fn new(lease: Duration, tick: Duration) -> LeaseKeeper {
        LeaseKeeper { lease, every: interval(lease, tick), next: Instant::now(), host: host_name() }
    }

    /// When due: renew the leases of `feature`'s teammates whose process
    /// lives here, then sweep passed leases. Errors are left for the next
    /// turn (a sweep that fails now is done by the next one).
    pub fn tick(&mut self, store: &dyn Store, feature: &str) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + self.every;
        if let Ok(agents) = store.agents() {
            for a in agents.iter().filter(|a| self.keeps(a, feature)) {
                let _ = store.renew_lease(&a.id, self.lease);
            }
        }
        let _ = store.expire_leases();
    }

    /// Whether the Lead beats for `a`: this run's, leased, unfinished, and
    /// its process alive on this host.
    fn keeps(&self, a: &Agent, feature: &str) -> bool {
        a.feature.as_deref() == Some(feature)
            && a.lease_until.is_some()
            && !a.status.is_terminal()
            && a.host.as_deref() == Some(self.host.as_str())
            && a.pid.is_some_and(pid_alive)
    }
}

#[cfg(test)]
mod tests {
    use troupe_store::{EventLog, Leases, NewAgent, Registry, SqliteStore};

    use super::*;

    #[test]
    fn the_lead_beats_for_its_live_teammates_only_and_sweeps_the_rest() {
        assert_eq!(interval(Duration::from_secs(30), Duration::from_millis(200)), Duration::from_secs(5));
        assert_eq!(interval(Duration::from_millis(300), Duration::from_millis(200)), Duration::from_millis(200));
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("troupe.db")).unwrap();
        let lease = Duration::from_millis(150);
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let gone = dead.id();
        dead.wait().unwrap();
        for (id, feature, pid) in
            [("live", "login", Some(std::process::id())), ("dead", "login", Some(gone)), ("other", "cart", None)]
        {
            let agent = NewAgent {
                feature: Some(feature.into()),
                pid,
                lease: Some(lease),
                ..NewAgent::new(id, "builder", "claude")
            };
            store.register(agent).unwrap();
        }
        let mut keeper = LeaseKeeper::new(lease, Duration::ZERO);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut swept = Vec::new();
        while swept.len() < 2 {
            assert!(Instant::now() < deadline, "the unkept leases never expired: {swept:?}");
            keeper.tick(&store, "login");
            swept = store
                .events_since(0, 100)
                .unwrap()
                .into_iter()
                .filter(|e| e.kind == troupe_store::lease::LEASE_EXPIRED)
                .filter_map(|e| e.subject)
                .collect();
            std::thread::sleep(Duration::from_millis(10));
        }
        swept.sort();
        assert_eq!(swept, ["dead", "other"], "the live teammate's lease was kept");
        assert!(store.agent("live").unwrap().lease_until.unwrap() > jiff::Timestamp::now());
        let _ = store.expire_leases();
    }
}
