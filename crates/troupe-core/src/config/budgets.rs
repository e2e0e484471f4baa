//! `[budgets]`: how much a run, a feature, a role and each agent may spend
//! before the Lead pauses (or stops) the run. The Lead's machine decides with
//! these limits; this file only parses and validates them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[budgets]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetsConfig {
    /// What happens when a limit is reached: `pause` (the default) or `stop`.
    pub on_exceed: OnExceed,
    /// `[budgets.run]`: one Lead run (a `troupe resume` is a run of its own).
    pub run: Limits,
    /// `[budgets.feature]`: everything the usage ledger holds for the
    /// feature, earlier runs included.
    pub feature: Limits,
    /// `[budgets.role.<role>]`: the teammates of one role in a run, together.
    pub role: BTreeMap<String, Limits>,
    /// `[budgets.agent]`: each teammate on its own.
    pub agent: Limits,
}

/// `[budgets] on_exceed`
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExceed {
    /// No new teammate starts; running ones get a shutdown request, finish
    /// their turn and stop with their sessions kept; `troupe resume` continues.
    #[default]
    Pause,
    /// Every running teammate is stopped at once.
    Stop,
}

impl OnExceed {
    /// The word in config.toml and run reports.
    pub fn as_str(self) -> &'static str {
        match self {
            OnExceed::Pause => "pause",
            OnExceed::Stop => "stop",
        }
    }
}

/// The limits of one scope; an absent key is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// US dollars, as the usage ledger books them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Tokens of every kind (input, output, cache reads and writes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Wall-clock minutes (fractions allowed): a run's since it started, an
    /// agent's since its spawn, a role's summed over its teammates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_minutes: Option<f64>,
    /// Calls of troupe's MCP gateway, each agent's own over its life, counted
    /// by the gateway's rate limiter in the store. Only `[budgets.agent]` and
    /// `[budgets.role.<role>]` (each agent of the role) take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gateway_calls: Option<u64>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    fn validate(&self, scope: &str) -> Result<(), ConfigError> {
        let bad = |v: f64| !v.is_finite() || v < 0.0;
        if self.max_cost_usd.is_some_and(bad) {
            return Err(invalid(format!("{scope}.max_cost_usd must be a number of dollars, 0 or more")));
        }
        if self.max_minutes.is_some_and(|m| bad(m) || m == 0.0) {
            return Err(invalid(format!("{scope}.max_minutes must be more than 0")));
        }
        Ok(())
    }
}

impl BudgetsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        self.run.validate("budgets.run")?;
        self.feature.validate("budgets.feature")?;
        for (scope, limits) in [("run", &self.run), ("feature", &self.feature)] {
            if limits.max_gateway_calls.is_some() {
                return Err(invalid(format!(
                    "budgets.{scope}.max_gateway_calls: gateway calls are budgeted per agent; set it in \
                     [budgets.agent] or [budgets.role.<role>]"
                )));
            }
        }
        self.agent.validate("budgets.agent")?;
        for (role, limits) in &self.role {
            crate::rbac::names::validate_role_name(role).map_err(|e| invalid(format!("budgets.role.{role}: {e}")))?;
            limits.validate(&format!("budgets.role.{role}"))?;
        }
        Ok(())
    }

    /// Whether any limit is set.
    pub fn is_empty(&self) -> bool {
        self.run.is_empty()
            && self.feature.is_empty()
            && self.agent.is_empty()
            && self.role.values().all(Limits::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    use super::*;

    #[test]
    fn scopes_parse_and_pause_is_the_default() {
        let c = Config::from_toml(
            "[budgets.run]\nmax_cost_usd = 5\nmax_minutes = 0.5\n[budgets.role.builder]\nmax_tokens = 1000\n\
             [budgets.agent]\nmax_cost_usd = 0.25\n",
        )
        .unwrap();
        assert_eq!(c.budgets.on_exceed, OnExceed::Pause);
        assert_eq!(c.budgets.run.max_cost_usd, Some(5.0));
        assert_eq!(c.budgets.run.max_minutes, Some(0.5));
        assert_eq!(c.budgets.role["builder"].max_tokens, Some(1000));
        assert_eq!(c.budgets.agent.max_cost_usd, Some(0.25));
        assert!(!c.budgets.is_empty());
        let calls = Config::from_toml("[budgets.role.builder]\nmax_gateway_calls = 40\n").unwrap();
        assert_eq!(calls.budgets.role["builder"].max_gateway_calls, Some(40));
        assert!(Config::from_toml("").unwrap().budgets.is_empty());
        let stop = Config::from_toml("[budgets]\non_exceed = \"stop\"\n").unwrap();
        assert_eq!(stop.budgets.on_exceed, OnExceed::Stop);
    }

    #[test]
    fn bad_limits_are_named() {
        for (text, named) in [
            ("[budgets.run]\nmax_cost_usd = -1\n", "budgets.run.max_cost_usd"),
            ("[budgets.agent]\nmax_minutes = 0\n", "budgets.agent.max_minutes"),
            ("[budgets.role.\"bad role\"]\nmax_tokens = 1\n", "budgets.role.bad role"),
            ("[budgets.run]\nmax_dollars = 1\n", "max_dollars"),
            ("[budgets]\non_exceed = \"kill\"\n", "kill"),
            (
                "[budgets.run]\nmax_gateway_calls = 5\n",
                "budgets.run.max_gateway_calls: gateway calls are budgeted per agent",
            ),
        ] {
            let err = Config::from_toml(text).unwrap_err();
            assert!(err.message.contains(named), "{text}: {err}");
        }
    }
}
