//! A gateway call is its agent's heartbeat (see troupe-store's `lease`):
//! the agent is alive and working, on whatever host its engine runs. A
//! renewal is a write, so an agent's calls renew at most six times a lease
//! (a burst of calls costs one write), which still renews long before the
//! lease ends.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use troupe_store::Store;

/// When each agent's lease was last renewed from this gateway.
pub struct Beats {
    lease: Duration,
    last: Mutex<HashMap<String, Instant>>,
}

impl Beats {
    /// Renewals of `lease`.
    pub fn new(lease: Duration) -> Beats {
        Beats { lease, last: Mutex::default() }
    }

    /// Renew `agent`'s lease at `now` unless it was renewed less than a
    /// sixth of a lease ago. An agent the registry does not know (a person,
    /// a test) has no lease to renew; any failure is left for the next call.
    /// True when it renewed.
    pub fn beat(&self, store: &dyn Store, agent: &str, now: Instant) -> bool {
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last
                .get(agent)
                .is_some_and(|&at| !troupe_store::lease::renewal_due(self.lease, now.saturating_duration_since(at)))
            {
                return false;
            }
            last.insert(agent.to_string(), now);
        }
        store.renew_lease(agent, self.lease).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use troupe_store::{NewAgent, Registry, SqliteStore};

    use super::*;

    #[test]
    fn calls_renew_their_agents_lease_at_most_six_times_a_lease() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("troupe.db")).unwrap();
        let lease = Duration::from_secs(60);
        store
            .register(NewAgent { lease: Some(Duration::from_secs(1)), ..NewAgent::new("b-1", "builder", "claude") })
            .unwrap();
        let before = store.agent("b-1").unwrap().lease_until.unwrap();
        let beats = Beats::new(lease);
        let t0 = Instant::now();
        assert!(beats.beat(&store, "b-1", t0));
        let after = store.agent("b-1").unwrap().lease_until.unwrap();
        assert!(after.duration_since(before).as_secs() >= 58, "renewed for a lease: {before} -> {after}");
        assert!(!beats.beat(&store, "b-1", t0 + Duration::from_secs(9)), "a burst costs one write");
        assert!(beats.beat(&store, "b-1", t0 + Duration::from_secs(10)));
        assert!(!beats.beat(&store, "user", t0), "nobody's lease to renew");
    }
}
