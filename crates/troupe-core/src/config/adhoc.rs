//! `[adhoc]`: which calls of adhoc mode wait for a person (seed 004's risk
//! levels and dangerous categories).

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};
use crate::rbac::pattern::ToolPattern;
use crate::rbac::risk::{Category, DEFAULT_CATEGORIES, DEFAULT_CRITICAL, Risk, RiskRules};

/// `[adhoc]`: the approval threshold and the risk rules. A list that is
/// absent keeps the seed's defaults; a list given replaces them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdhocConfig {
    /// Calls at or above this level wait for a person: `low`, `medium`, `high` or `critical`.
    pub approve_from: Risk,
    /// How long a held call waits for an answer before it is refused
    /// (milliseconds; at most 25 s, within the engines' hook timeout).
    pub approval_timeout_ms: u64,
    /// Backend tool patterns (`server__tool`, `server__*`) that write files.
    pub file_write: Option<Vec<String>>,
    /// Backend tool patterns that run commands.
    pub shell_exec: Option<Vec<String>>,
    /// Backend tool patterns that reach the network.
    pub network: Option<Vec<String>>,
    /// Backend tool patterns that change databases.
    pub database: Option<Vec<String>>,
    /// Text that makes a shell command critical (matched case-insensitively).
    pub critical_commands: Option<Vec<String>>,
}

impl Default for AdhocConfig {
    fn default() -> Self {
        AdhocConfig {
            approve_from: Risk::High,
            approval_timeout_ms: 25_000,
            file_write: None,
            shell_exec: None,
            network: None,
            database: None,
            critical_commands: None,
        }
    }
}

impl AdhocConfig {
    fn lists(&self) -> [(Category, &Option<Vec<String>>); 4] {
        [
            (Category::FileWrite, &self.file_write),
            (Category::ShellExec, &self.shell_exec),
            (Category::Network, &self.network),
            (Category::Database, &self.database),
        ]
    }

    /// The risk rules: configured lists, else the seed's.
    pub fn rules(&self) -> RiskRules {
        let categories = self
            .lists()
            .into_iter()
            .map(|(category, list)| {
                let defaults = DEFAULT_CATEGORIES.iter().find(|(c, _)| *c == category).map(|(_, p)| *p).unwrap_or(&[]);
                let pats: Vec<String> = match list {
                    Some(list) => list.clone(),
                    None => defaults.iter().map(|s| s.to_string()).collect(),
                };
                (category, pats.iter().filter_map(|p| ToolPattern::parse(p).ok()).collect())
            })
            .collect();
        let critical_commands = match &self.critical_commands {
            Some(list) => list.clone(),
            None => DEFAULT_CRITICAL.iter().map(|s| s.to_string()).collect(),
        };
        RiskRules { categories, critical_commands }
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (category, list) in self.lists() {
            for p in list.iter().flatten() {
                ToolPattern::parse(p).map_err(|e| {
                    invalid(format!(
                        "adhoc.{} entry '{p}' is not a tool pattern: {e}",
                        category.as_str().to_ascii_lowercase()
                    ))
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.adhoc.approve_from, Risk::High);
        let c = Config::from_toml("[adhoc]\napprove_from = \"critical\"\ndatabase = [\"pg__*\"]\n").unwrap();
        assert_eq!(c.adhoc.approve_from, Risk::Critical);
        let rules = c.adhoc.rules();
        assert_eq!(rules.classify("mcp__pg__query", None).category, Some(Category::Database));
        assert_eq!(rules.classify("postgres__execute", None).category, None);
        let err = Config::from_toml("[adhoc]\napprove_from = \"severe\"\n").unwrap_err();
        assert!(err.to_string().contains("severe"), "{err}");
        assert!(Config::from_toml("[adhoc]\nnetwork = [\"a b\"]\n").is_err());
    }
}
