//! Rate limits, counted per identity (the agent), never per role: switching
//! roles cannot reset a counter. The limits that apply are those of every role
//! in effect for the connection (its ceiling and its current role), so
//! switching to a role with looser limits does not loosen them either.
//!
//! With a store, calls are counted there ([`GatewayAccess::count_call`](troupe_store::GatewayAccess::count_call)), so
//! every gateway process serving one agent draws on one budget: starting a
//! second `troupe mcp serve --agent X` gives no fresh one. Without a store
//! (outside a project) they are counted in this process. Calls in flight are
//! always counted in the process: a crashed gateway's calls end with it.
//! `set_role` is a call like any other, and also has a ceiling of its own
//! ([`SET_ROLE_PER_MINUTE`]), since each switch lists every backend's tools
//! and writes an audit row. A call that no limit in effect counts (every call
//! but `set_role` when no limits are configured) is not recorded, so it costs
//! no store write; a limit counts only the calls made while it applied.
//!
//! A budget of gateway calls (`[budgets.agent]` / `[budgets.role.<role>]`
//! `max_gateway_calls`) is a limit over the agent's whole life, counted by
//! the same store transaction ([`CallCounts::total`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use troupe_core::config::BudgetsConfig;
use troupe_core::config::RateLimit;
use troupe_core::rbac::names::GATEWAY_TOOLS;
use troupe_store::{CallCounts, Store};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// How many `set_role` calls an agent may make per minute, whatever the config says.
pub const SET_ROLE_PER_MINUTE: u64 = 30;

#[derive(Default)]
struct Counters {
    calls: VecDeque<Instant>,
    per_tool: HashMap<String, VecDeque<Instant>>,
    in_flight: u32,
    /// Every call admitted, for budgets when there is no store.
    total: u64,
}

/// `max_gateway_calls` of `[budgets]`: each agent's, and each role's agents'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallBudgets {
    /// `[budgets.agent] max_gateway_calls`.
    pub agent: Option<u64>,
    /// `[budgets.role.<role>] max_gateway_calls`.
    pub role: BTreeMap<String, u64>,
}

/// The budget that applies to one agent: its limit and the config key that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallBudget {
    /// The most calls the agent may make.
    pub max: u64,
    /// Where it is set (`[budgets.role.builder] max_gateway_calls`).
    pub key: String,
}

impl CallBudgets {
    /// The budgets of a project's `[budgets]`.
    pub fn from_config(budgets: &BudgetsConfig) -> CallBudgets {
        CallBudgets {
            agent: budgets.agent.max_gateway_calls,
            role: budgets.role.iter().filter_map(|(r, l)| Some((r.clone(), l.max_gateway_calls?))).collect(),
        }
    }

    /// The tightest budget for an agent of `role`, if any.
    pub fn for_role(&self, role: &str) -> Option<CallBudget> {
        let by_role = self
            .role
            .get(role)
            .map(|max| CallBudget { max: *max, key: format!("[budgets.role.{role}] max_gateway_calls") });
        let by_agent = self.agent.map(|max| CallBudget { max, key: "[budgets.agent] max_gateway_calls".into() });
        [by_role, by_agent].into_iter().flatten().min_by_key(|b| b.max)
    }
}

/// An agent's budget of gateway calls is spent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "budget of gateway calls reached: {agent} made {made} calls, its {} is {}; raise it in .troupe/config.toml \
     (or stop calling: finish with what you have and report)",
    budget.key,
    budget.max
)]
pub struct OverBudget {
    /// The agent.
    pub agent: String,
    /// The calls it made.
    pub made: u64,
    /// The budget.
    pub budget: CallBudget,
}

fn count_since(times: &VecDeque<Instant>, now: Instant, window: Duration) -> u64 {
    times.iter().rev().take_while(|t| now.duration_since(**t) < window).count() as u64
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate limit of role {role:?} reached: {what}")]
pub struct Limited {
    /// The role whose limit was hit (`troupe` for the built-in `set_role` limit).
    pub role: String,
    /// Which limit.
    pub what: String,
}

/// A call could not be counted: the store failed. The call is refused, never
/// let through uncounted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A limit was reached.
    #[error(transparent)]
    Limited(#[from] Limited),
    /// The agent's budget of gateway calls is spent.
    #[error(transparent)]
    Budget(#[from] OverBudget),
    /// The store could not count the call.
    #[error("cannot count the call against its rate limits: {0}")]
    Store(String),
}

/// The first limit among `limits` that `counts` reach for a call of `tool`.
fn check(tool: &str, limits: &[(&str, &RateLimit)], counts: &CallCounts) -> Result<(), Limited> {
    if tool == GATEWAY_TOOLS[0] && counts.tool_minute >= SET_ROLE_PER_MINUTE {
        return Err(Limited {
            role: "troupe".into(),
            what: format!("{SET_ROLE_PER_MINUTE} calls per minute of {tool}"),
        });
    }
    for (role, limit) in limits {
        let refuse = |what: String| Limited { role: role.to_string(), what };
        if let Some(max) = limit.per_minute
            && counts.minute >= u64::from(max)
        {
            return Err(refuse(format!("{max} calls per minute")));
        }
        if let Some(max) = limit.per_hour
            && counts.hour >= u64::from(max)
        {
            return Err(refuse(format!("{max} calls per hour")));
        }
        if let Some(max) = limit.per_tool_per_minute.get(tool)
            && counts.tool_minute >= u64::from(*max)
        {
            return Err(refuse(format!("{max} calls per minute of {tool}")));
        }
    }
    Ok(())
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
    /// and counts the call when none is exceeded: in `store` when there is one
    /// (shared by every gateway process), else in this process.
    pub fn admit(
        self: &Arc<Self>,
        store: Option<&dyn Store>,
        identity: &str,
        tool: &str,
        limits: &[(&str, &RateLimit)],
        now: Instant,
    ) -> Result<InFlight, Refused> {
        self.admit_budgeted(store, identity, tool, limits, None, now)
    }

    /// [`RateLimiter::admit`], refusing the call too once `identity` has made
    /// `budget`'s calls over its life.
    pub fn admit_budgeted(
        self: &Arc<Self>,
        store: Option<&dyn Store>,
        identity: &str,
        tool: &str,
        limits: &[(&str, &RateLimit)],
        budget: Option<&CallBudget>,
        now: Instant,
    ) -> Result<InFlight, Refused> {
        let over = |counts: &CallCounts| -> Result<(), Refused> {
            match budget {
                Some(b) if counts.total >= b.max => {
                    Err(OverBudget { agent: identity.to_string(), made: counts.total, budget: b.clone() }.into())
                }
                _ => check(tool, limits, counts).map_err(Refused::from),
            }
        };
        let mut map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let c = map.entry(identity.to_string()).or_default();
        for (role, limit) in limits {
            if let Some(max) = limit.concurrent
                && c.in_flight >= max
            {
                return Err(Limited { role: role.to_string(), what: format!("{max} concurrent calls") }.into());
            }
        }
        // A call no limit counts is not written down: without configured limits
        // (the default) only set_role costs a store write.
        let counted = tool == GATEWAY_TOOLS[0]
            || budget.is_some()
            || limits.iter().any(|(_, l)| {
                l.per_minute.is_some() || l.per_hour.is_some() || l.per_tool_per_minute.contains_key(tool)
            });
        match store {
            _ if !counted => {}
            Some(store) => {
                // The lock is held across the store's transaction so this
                // process's concurrency count and the shared count agree.
                let hit = std::cell::RefCell::new(None);
                let refusal = store
                    .count_call(identity, tool, &|counts| {
                        let refused = over(counts).err();
                        let text = refused.as_ref().map(ToString::to_string);
                        *hit.borrow_mut() = refused;
                        text
                    })
                    .map_err(|e| Refused::Store(e.to_string()))?;
                if refusal.is_some()
                    && let Some(refused) = hit.take()
                {
                    return Err(refused);
                }
            }
            None => {
                while c.calls.front().is_some_and(|t| now.duration_since(*t) >= HOUR) {
                    c.calls.pop_front();
                }
                let tool_times = c.per_tool.entry(tool.to_string()).or_default();
                while tool_times.front().is_some_and(|t| now.duration_since(*t) >= MINUTE) {
                    tool_times.pop_front();
                }
                let counts = CallCounts {
                    minute: count_since(&c.calls, now, MINUTE),
                    hour: c.calls.len() as u64,
                    tool_minute: tool_times.len() as u64,
                    total: c.total,
                };
                over(&counts)?;
                tool_times.push_back(now);
                c.calls.push_back(now);
                c.total += 1;
            }
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
        limiter.admit(None, "agent-1", "fs__read", &[("guest", &guest)], now).unwrap();
        limiter.admit(None, "agent-1", "fs__read", &[("guest", &guest)], now).unwrap();
        let err = limiter.admit(None, "agent-1", "fs__read", &[("guest", &guest)], now).err().unwrap();
        assert_eq!(err.to_string(), "rate limit of role \"guest\" reached: 2 calls per minute");
        // A switch to admin with the guest ceiling still applies the guest limit.
        assert!(limiter.admit(None, "agent-1", "fs__read", &[("guest", &guest), ("admin", &admin)], now).is_err());
        // Another identity has its own counters.
        limiter.admit(None, "agent-2", "fs__read", &[("guest", &guest)], now).unwrap();
        // A minute later the window has moved on.
        limiter.admit(None, "agent-1", "fs__read", &[("guest", &guest)], now + MINUTE).unwrap();
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
        let held = limiter.admit(None, "a", "x__fast", &[("r", &l)], now).unwrap();
        assert!(limiter.admit(None, "a", "x__fast", &[("r", &l)], now).is_err());
        drop(held);
        drop(limiter.admit(None, "a", "x__slow", &[("r", &l)], now).unwrap());
        assert_eq!(
            limiter.admit(None, "a", "x__slow", &[("r", &l)], now).err().unwrap().to_string(),
            "rate limit of role \"r\" reached: 1 calls per minute of x__slow"
        );
    }

    #[test]
    fn a_budget_of_calls_holds_over_the_agent_s_life_and_names_its_key() {
        let limiter = Arc::new(RateLimiter::default());
        let now = Instant::now();
        let budgets = CallBudgets { agent: Some(5), role: [("builder".to_string(), 2)].into() };
        let budget = budgets.for_role("builder").unwrap();
        assert_eq!(budget, CallBudget { max: 2, key: "[budgets.role.builder] max_gateway_calls".into() });
        assert_eq!(budgets.for_role("architect").unwrap().max, 5, "other roles have the agent's budget");
        for _ in 0..2 {
            drop(limiter.admit_budgeted(None, "b-1", "troupe__board_list", &[], Some(&budget), now).unwrap());
        }
        // An hour later the rate windows are empty; the budget is not.
        let later = now + HOUR + MINUTE;
        let err = limiter.admit_budgeted(None, "b-1", "troupe__report", &[], Some(&budget), later).err().unwrap();
        assert_eq!(
            err.to_string(),
            "budget of gateway calls reached: b-1 made 2 calls, its [budgets.role.builder] max_gateway_calls is 2; \
             raise it in .troupe/config.toml (or stop calling: finish with what you have and report)"
        );
        drop(limiter.admit_budgeted(None, "b-2", "troupe__report", &[], Some(&budget), later).unwrap());
    }

    #[test]
    fn set_role_has_a_ceiling_of_its_own() {
        let limiter = Arc::new(RateLimiter::default());
        let now = Instant::now();
        for _ in 0..SET_ROLE_PER_MINUTE {
            drop(limiter.admit(None, "a", "set_role", &[], now).unwrap());
        }
        let err = limiter.admit(None, "a", "set_role", &[], now).err().unwrap();
        assert_eq!(err.to_string(), "rate limit of role \"troupe\" reached: 30 calls per minute of set_role");
        drop(limiter.admit(None, "a", "x__other", &[], now).unwrap());
    }

    #[test]
    fn calls_no_limit_counts_cost_no_store_write() {
        let dir = tempfile::tempdir().unwrap();
        let store: Box<dyn Store> = Box::new(troupe_store::SqliteStore::open(&dir.path().join("t.db")).unwrap());
        let limiter = Arc::new(RateLimiter::default());
        let now = Instant::now();
        let per_tool = RateLimit { per_tool_per_minute: [("x__slow".to_string(), 1)].into(), ..RateLimit::default() };
        for _ in 0..3 {
            drop(limiter.admit(Some(store.as_ref()), "a", "x__fast", &[("r", &per_tool)], now).unwrap());
        }
        let seen = std::cell::Cell::new(CallCounts::default());
        store
            .count_call("a", "x__fast", &|c| {
                seen.set(*c);
                Some("just looking".into())
            })
            .unwrap();
        assert_eq!(seen.get(), CallCounts::default(), "uncounted calls were written");
        drop(limiter.admit(Some(store.as_ref()), "a", "x__slow", &[("r", &per_tool)], now).unwrap());
        assert!(limiter.admit(Some(store.as_ref()), "a", "x__slow", &[("r", &per_tool)], now).is_err());
    }

    #[test]
    fn with_a_store_every_limiter_shares_one_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let one: Box<dyn Store> = Box::new(troupe_store::SqliteStore::open(&path).unwrap());
        let two: Box<dyn Store> = Box::new(troupe_store::SqliteStore::open(&path).unwrap());
        // Two gateway processes: two limiters, two connections to one database.
        let (a, b) = (Arc::new(RateLimiter::default()), Arc::new(RateLimiter::default()));
        let now = Instant::now();
        let l = limit(2);
        drop(a.admit(Some(one.as_ref()), "x", "t", &[("r", &l)], now).unwrap());
        drop(b.admit(Some(two.as_ref()), "x", "t", &[("r", &l)], now).unwrap());
        let err = b.admit(Some(two.as_ref()), "x", "t", &[("r", &l)], now).err().unwrap();
        assert_eq!(err.to_string(), "rate limit of role \"r\" reached: 2 calls per minute");
        assert!(a.admit(Some(one.as_ref()), "x", "t", &[("r", &l)], now).is_err());
        drop(a.admit(Some(one.as_ref()), "y", "t", &[("r", &l)], now).unwrap());
    }
}
