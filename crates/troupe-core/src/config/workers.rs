//! `[workers]`: teammates run by `troupe worker` on other hosts (with
//! `[team] executors = "workers"`).

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[workers]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkersConfig {
    /// The shared git remote the Lead and the workers exchange branches
    /// through: a remote name of the project's repository (`origin`) or a
    /// git URL. Each worker keeps its own clone of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// How often a worker looks for jobs and heartbeats, in milliseconds,
    /// when the store cannot wake it (SQLite); PostgreSQL wakes it at once.
    pub poll_ms: u64,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig { remote: None, poll_ms: 250 }
    }
}

impl WorkersConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.poll_ms == 0 {
            return Err(invalid("workers.poll_ms must be at least 1"));
        }
        if self.remote.as_deref().is_some_and(|r| r.trim().is_empty() || r.starts_with('-')) {
            return Err(invalid("workers.remote must name a git remote (`origin`) or a git URL"));
        }
        Ok(())
    }
}
