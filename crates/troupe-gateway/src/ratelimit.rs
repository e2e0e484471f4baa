//! Rate limits, counted per identity (the agent), never per role: switching
//! roles cannot reset a counter. The limits that apply are those of every role
//! in effect for the connection (its ceiling and its current role), so
//! switching to a role with looser limits does not loosen them either.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use troupe_core::config::RateLimit;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

#[derive(Default)]
struct Counters {
    calls: VecDeque<Instant>,
    per_tool: HashMap<String, VecDeque<Instant>>,
    in_flight: u32,
}

fn count_since(times: &VecDeque<Instant>, now: Instant, window: Duration) -> usize {
    times.iter().rev().take_while(|t| now.duration_since(**t) < window).count()
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate limit of role {role:?} reached: {what}")]
pub struct Limited {
    /// The role whose limit was hit.
    pub role: String,
    /// Which limit.
    pub what: String,
}

/// Counters for every identity of one gateway.
#[derive(Default)]
pub struct RateLimiter {
    counters: Mutex<HashMap<String, Counters>>,
}

/// Held while a call is in flight; dropping it frees the concurrency slot.
pub struct InFlight {
    limiter: Arc<RateLimiter>,
    identity: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.limiter.counters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get_mut(&self.identity) {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }
}

impl RateLimiter {
    /// Checks every `(role, limit)` pair for `identity` calling `tool` at `now`,
    /// and counts the call when none is exceeded.
    pub fn admit(
        self: &Arc<Self>,
        identity: &str,
        tool: &str,
        limits: &[(&str, &RateLimit)],
        now: Instant,
    ) -> Result<InFlight, Limited> {
        let mut map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let c = map.entry(identity.to_string()).or_default();
        while c.calls.front().is_some_and(|t| now.duration_since(*t) >= HOUR) {
            c.calls.pop_front();
        }
        let minute = count_since(&c.calls, now, MINUTE);
        let hour = c.calls.len();
        let tool_times = c.per_tool.entry(tool.to_string()).or_default();
        while tool_times.front().is_some_and(|t| now.duration_since(*t) >= MINUTE) {
            tool_times.pop_front();
        }
        let tool_minute = tool_times.len();
        for (role, limit) in limits {
            let refuse = |what: String| Limited { role: role.to_string(), what };
            if let Some(max) = limit.per_minute
                && minute >= max as usize
            {
                return Err(refuse(format!("{max} calls per minute")));
            }
            if let Some(max) = limit.per_hour
                && hour >= max as usize
            {
                return Err(refuse(format!("{max} calls per hour")));
            }
            if let Some(max) = limit.concurrent
                && c.in_flight >= max
            {
                return Err(refuse(format!("{max} concurrent calls")));
            }
            if let Some(max) = limit.per_tool_per_minute.get(tool)
                && tool_minute >= *max as usize
            {
                return Err(refuse(format!("{max} calls per minute of {tool}")));
            }
        }
        c.calls.push_back(now);
        if let Some(times) = c.per_tool.get_mut(tool) {
            times.push_back(now);
        }
        c.in_flight += 1;
        Ok(InFlight { limiter: self.clone(), identity: identity.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_minute: u32) -> RateLimit {
        RateLimit { per_minute: Some(per_minute), ..RateLimit::default() }
    }

    #[test]
    fn counts_per_identity_across_roles() {
        let limiter = Arc::new(RateLimiter::default());
        let now = Instant::now();
        let guest = limit(2);
        let admin = limit(100);
        limiter.admit("agent-1", "fs__read", &[("guest", &guest)], now).unwrap();
        limiter.admit("agent-1", "fs__read", &[("guest", &guest)], now).unwrap();
        let err = limiter.admit("agent-1", "fs__read", &[("guest", &guest)], now).err().unwrap();
        assert_eq!(err.what, "2 calls per minute");
        // A switch to admin with the guest ceiling still applies the guest limit.
        assert!(limiter.admit("agent-1", "fs__read", &[("guest", &guest), ("admin", &admin)], now).is_err());
        // Another identity has its own counters.
        limiter.admit("agent-2", "fs__read", &[("guest", &guest)], now).unwrap();
        // A minute later the window has moved on.
        limiter.admit("agent-1", "fs__read", &[("guest", &guest)], now + MINUTE).unwrap();
    }

    #[test]
    fn concurrency_and_per_tool() {
        let limiter = Arc::new(RateLimiter::default());
        let now = Instant::now();
        let l = RateLimit {
            concurrent: Some(1),
            per_tool_per_minute: [("x__slow".to_string(), 1)].into(),
            ..RateLimit::default()
        };
        let held = limiter.admit("a", "x__fast", &[("r", &l)], now).unwrap();
        assert!(limiter.admit("a", "x__fast", &[("r", &l)], now).is_err());
        drop(held);
        drop(limiter.admit("a", "x__slow", &[("r", &l)], now).unwrap());
        assert_eq!(
            limiter.admit("a", "x__slow", &[("r", &l)], now).err().unwrap().what,
            "1 calls per minute of x__slow"
        );
    }
}
