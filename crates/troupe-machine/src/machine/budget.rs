//! Budgets (`[budgets]` in config.toml): what a run, its feature, a role and
//! each agent have spent, and the first limit that spending reached.
//!
//! Pure arithmetic over the teammates the Lead tracks: the driver reports each
//! booked model turn (`Event::TurnSpent`) and the machine checks the limits
//! before every spawn and resume, after every turn, and at its own deadlines
//! for the minute limits. What happens on a breach (pause or stop) is
//! [`Ctx::over_budget`](crate::machine::Ctx)'s.

use std::fmt;
use std::str::FromStr;

use jiff::{SignedDuration, Timestamp};
use troupe_core::config::{BudgetsConfig, Limits};

use crate::machine::{TeammateStatus, TeammateView};

/// What a scope spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    /// US dollars, as the usage ledger booked them.
    pub cost_usd: f64,
    /// Tokens of every kind.
    pub tokens: u64,
    /// Wall-clock minutes.
    pub minutes: f64,
}

impl Spend {
    fn add(&mut self, other: Spend) {
        self.cost_usd += other.cost_usd;
        self.tokens += other.tokens;
        self.minutes += other.minutes;
    }
}

/// The limits of a run and what its feature spent before it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    /// `[budgets]`.
    pub limits: BudgetsConfig,
    /// What the usage ledger holds for the feature from earlier runs.
    pub feature_before: Spend,
}

/// A limit that was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// `run`, `feature`, `role builder` or `agent builder-g1-3`.
    pub scope: String,
    /// The config key: `max_cost_usd`, `max_tokens` or `max_minutes`.
    pub key: &'static str,
    /// What was spent, as shown (`$0.61`, `1200 tokens`, `2.5 min`).
    pub spent: String,
    /// The limit, as shown.
    pub limit: String,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} spent {} of its {} {}", self.scope, self.spent, self.key, self.limit)
    }
}

/// `troupe resume --budget`: `+N` lets this run spend N dollars more than its
/// cost limits allow, `N` sets the run's limit to N dollars.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Raise {
    /// `+N`.
    Add(f64),
    /// `N`.
    Set(f64),
}

impl FromStr for Raise {
    type Err = String;

    fn from_str(s: &str) -> Result<Raise, String> {
        let (add, number) = match s.trim().strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, s.trim()),
        };
        let dollars: f64 = number.trim_start_matches('$').parse().map_err(|_| {
            format!("`{s}` is not a budget in dollars: write `+5` for five dollars more, or `5` for a run limit of $5")
        })?;
        if !dollars.is_finite() || dollars < 0.0 {
            return Err(format!("`{s}` is not a budget: dollars are 0 or more"));
        }
        Ok(if add { Raise::Add(dollars) } else { Raise::Set(dollars) })
    }
}

impl Budgets {
    /// Apply `--budget`: `+N` raises the run's cost limit by N and the
    /// feature's to N more than it has spent (or sets the run's limit to N
    /// when neither has one); `N` sets the run's limit.
    pub fn raise(&mut self, raise: Raise) {
        let l = &mut self.limits;
        match raise {
            Raise::Set(n) => l.run.max_cost_usd = Some(n),
            Raise::Add(n) => {
                if l.run.max_cost_usd.is_none() && l.feature.max_cost_usd.is_none() {
                    l.run.max_cost_usd = Some(n);
                    return;
                }
                if let Some(run) = &mut l.run.max_cost_usd {
                    *run += n;
                }
                let spent = self.feature_before.cost_usd;
                if let Some(feature) = &mut l.feature.max_cost_usd {
                    *feature = feature.max(spent) + n;
                }
            }
        }
    }

    /// The first limit reached by the run, its feature, and (when given) the
    /// role and the agent a spawn, resume or turn is about.
    pub(crate) fn breach(&self, run: &RunView<'_>, role: Option<&str>, agent: Option<&str>) -> Option<Breach> {
        let l = &self.limits;
        let mut spent = run.spent(|_| true);
        spent.minutes = run.minutes();
        if let Some(b) = check("run", &l.run, spent) {
            return Some(b);
        }
        let mut feature = spent;
        feature.add(self.feature_before);
        if let Some(b) = check("feature", &l.feature, feature) {
            return Some(b);
        }
        if let Some(role) = role
            && let Some(limits) = l.role.get(role)
            && let Some(b) = check(&format!("role {role}"), limits, run.spent(|t| t.role.as_str() == role))
        {
            return Some(b);
        }
        let agent = agent?;
        check(&format!("agent {agent}"), &l.agent, run.spent(|t| t.id == agent))
    }

    /// The first minute limit reached at `run.now`, by any scope or live teammate.
    pub(crate) fn breach_in_time(&self, run: &RunView<'_>) -> Option<Breach> {
        let live = run.teammates.iter().filter(|t| live(t.status));
        let mut found = self.breach(run, None, None);
        for t in live {
            found = found.or_else(|| self.breach(run, Some(t.role.as_str()), Some(&t.id)));
        }
        found
    }

    /// When a minute limit will be reached if nothing changes: the run's and
    /// feature's, each live agent's, each role's (its remaining minutes shared
    /// by its live teammates).
    pub(crate) fn deadline(&self, run: &RunView<'_>) -> Option<Timestamp> {
        let l = &self.limits;
        let at = |minutes: f64| run.started + SignedDuration::from_secs_f64((minutes * 60.0).max(0.0));
        let mut times = Vec::new();
        times.extend(l.run.max_minutes.map(at));
        times.extend(l.feature.max_minutes.map(|m| at(m - self.feature_before.minutes)));
        let live: Vec<&TeammateView> = run.teammates.iter().filter(|t| live(t.status)).collect();
        if let Some(m) = l.agent.max_minutes {
            // Its running time so far is `ran`; the rest of the limit runs from this launch.
            times.extend(live.iter().map(|t| t.launched_at + SignedDuration::from_secs_f64(m * 60.0) - t.ran));
        }
        for (role, limits) in &l.role {
            let Some(m) = limits.max_minutes else { continue };
            let running = live.iter().filter(|t| t.role.as_str() == role).count();
            if running > 0 {
                let left = (m - run.spent(|t| t.role.as_str() == role).minutes).max(0.0) / running as f64;
                times.push(run.now + SignedDuration::from_secs_f64(left * 60.0));
            }
        }
        times.into_iter().min()
    }
}

/// The teammates of a run at `now`, as the budgets read them.
pub(crate) struct RunView<'a> {
    pub(crate) teammates: &'a [TeammateView],
    pub(crate) started: Timestamp,
    pub(crate) now: Timestamp,
}

impl RunView<'_> {
    fn minutes(&self) -> f64 {
        minutes(self.now.duration_since(self.started))
    }

    /// What the teammates `which` picks spent; their minutes are each one's
    /// running time: its ended launches, and the current one up to now.
    fn spent(&self, which: impl Fn(&TeammateView) -> bool) -> Spend {
        let mut s = Spend::default();
        for t in self.teammates.iter().filter(|t| which(t)) {
            let running =
                if t.ended_at.is_none() { self.now.duration_since(t.launched_at) } else { SignedDuration::ZERO };
            s.add(Spend { cost_usd: t.spent_usd, tokens: t.spent_tokens, minutes: minutes(t.ran + running) });
        }
        s
    }
}

fn minutes(d: SignedDuration) -> f64 {
    d.as_secs_f64().max(0.0) / 60.0
}

fn live(status: TeammateStatus) -> bool {
    matches!(status, TeammateStatus::Spawning | TeammateStatus::Running)
}

/// The first of `limits` that `spent` reached.
fn check(scope: &str, limits: &Limits, spent: Spend) -> Option<Breach> {
    let breach = |key, spent, limit| Some(Breach { scope: scope.to_string(), key, spent, limit });
    if let Some(max) = limits.max_cost_usd
        && spent.cost_usd >= max
    {
        return breach("max_cost_usd", format!("${:.4}", spent.cost_usd), format!("${max:.4}"));
    }
    if let Some(max) = limits.max_tokens
        && spent.tokens >= max
    {
        return breach("max_tokens", format!("{} tokens", spent.tokens), format!("{max} tokens"));
    }
    if let Some(max) = limits.max_minutes
        && spent.minutes >= max
    {
        return breach("max_minutes", format!("{:.2} min", spent.minutes), format!("{max} min"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_parse_and_apply() {
        assert_eq!("+5".parse::<Raise>(), Ok(Raise::Add(5.0)));
        assert_eq!("$2.5".parse::<Raise>(), Ok(Raise::Set(2.5)));
        assert!("five".parse::<Raise>().unwrap_err().contains("`five`"));
        assert!("-1".parse::<Raise>().is_err());
        let mut b = Budgets::default();
        b.raise(Raise::Add(5.0));
        assert_eq!(b.limits.run.max_cost_usd, Some(5.0), "no cost limit: +5 caps the run at $5");
        b.raise(Raise::Add(1.0));
        assert_eq!(b.limits.run.max_cost_usd, Some(6.0));
        let mut b = Budgets::default();
        b.limits.feature.max_cost_usd = Some(1.0);
        b.feature_before.cost_usd = 1.25;
        b.raise(Raise::Add(5.0));
        assert_eq!((b.limits.run.max_cost_usd, b.limits.feature.max_cost_usd), (None, Some(6.25)));
        b.raise(Raise::Set(3.0));
        assert_eq!(b.limits.run.max_cost_usd, Some(3.0));
    }
}
