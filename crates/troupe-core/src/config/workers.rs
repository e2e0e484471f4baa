//! `[workers]`: teammates run by `troupe worker` on other hosts (with
//! `[team] executors = "workers"`).

use std::collections::BTreeMap;

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
    /// Labels every spawn job asks for: only a worker started with all of
    /// them (`troupe worker --labels …`) takes it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// More labels by engine (`[workers.engine_labels] codex = ["codex-login"]`):
    /// a job for that engine asks for these as well as [`Self::labels`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub engine_labels: BTreeMap<String, Vec<String>>,
    /// How long an ended spawn job stays in the store, in hours; the Lead
    /// deletes older ones at the end of each run (their events stay).
    pub keep_jobs_hours: u64,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig {
            remote: None,
            poll_ms: 250,
            labels: Vec::new(),
            engine_labels: BTreeMap::new(),
            keep_jobs_hours: 24,
        }
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
        let all = self.labels.iter().chain(self.engine_labels.values().flatten());
        if let Some(bad) = all.into_iter().find(|l| l.trim().is_empty() || l.contains(',')) {
            return Err(invalid(format!(
                "workers labels must be non-empty and hold no comma (`troupe worker --labels` splits on it): `{bad}`"
            )));
        }
        Ok(())
    }

    /// The labels a job for `engine` asks for: [`Self::labels`], then the engine's own, each once.
    pub fn labels_for(&self, engine: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in self.labels.iter().chain(self.engine_labels.get(engine).into_iter().flatten()) {
            if !out.contains(l) {
                out.push(l.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_asks_for_the_common_labels_then_its_engines() {
        let w = WorkersConfig {
            labels: vec!["linux".into()],
            engine_labels: BTreeMap::from([("codex".into(), vec!["codex-login".into(), "linux".into()])]),
            ..WorkersConfig::default()
        };
        assert_eq!(w.labels_for("codex"), ["linux", "codex-login"]);
        assert_eq!(w.labels_for("claude"), ["linux"]);
        assert!(w.validate().is_ok());
        let comma = WorkersConfig { labels: vec!["a,b".into()], ..WorkersConfig::default() };
        assert!(comma.validate().unwrap_err().to_string().contains("`a,b`"));
    }
}
