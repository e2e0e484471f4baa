//! `[team]`, `[shutdown]`, `[server]` and `[store]`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[team]`: how many teammates run at once and when one counts as hung.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TeamConfig {
    /// At most this many teammates run at once (seed 000 Spec 9.4: 24).
    pub max_concurrent: u32,
    /// A teammate with no event for this many seconds is unresponsive.
    pub hang_timeout_seconds: u64,
    /// The same in milliseconds; when set, it wins over `hang_timeout_seconds`
    /// (for tests and fast scripted runs, which need less than a second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang_timeout_ms: Option<u64>,
    /// The start-up allowance: until a teammate's first output since its
    /// process started, it counts as hung only after the longer of this and
    /// the hang timeout (a real agent CLI may take seconds to print anything
    /// on a loaded machine).
    pub startup_timeout_seconds: u64,
    /// The same in milliseconds; when set, it wins over `startup_timeout_seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_timeout_ms: Option<u64>,
    /// The tool allowance: while a tool call it made has not returned (a
    /// test suite, a build), a teammate counts as hung only after the
    /// longer of this and the hang timeout. The tool is working; the
    /// teammate is busy, not hung.
    pub tool_timeout_seconds: u64,
    /// The same in milliseconds; when set, it wins over `tool_timeout_seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_timeout_ms: Option<u64>,
    /// Where Builders work: `shared` (the project's work tree) or `worktree`
    /// (each group in its own git worktree, merged by the Lead).
    pub isolation: Isolation,
    /// Who decides the plans of each role's teammates (seed 003 B3), by role
    /// name: `lead` (the Lead approves at once by policy) or `human` (the
    /// teammate waits for `troupe approve`/`reject`, not counted as hung).
    /// Roles not named: `lead`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub plan_approval: std::collections::BTreeMap<String, PlanApproval>,
    /// Where teammates run: `local` (processes of the Lead) or `workers`
    /// (spawn jobs that `troupe worker` takes on any host, see `[workers]`).
    pub executors: Executors,
}

/// `[team] executors`: who starts the teammates' processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Executors {
    /// The default: the Lead starts each teammate on its own host.
    #[default]
    Local,
    /// The Lead queues a spawn job per Builder launch in the store; a
    /// `troupe worker` on any host runs it in its own clone of
    /// `[workers] remote` and pushes the branch back.
    Workers,
}

/// `[team] plan_approval`: who decides a role's plans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanApproval {
    /// The Lead, by policy, at once (recorded in decisions.md).
    #[default]
    Lead,
    /// A person (`troupe approve`, `troupe reject`, the dashboard).
    Human,
}

/// `[team] isolation`: whether Builder groups share the work tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Every Builder writes in the project's work tree; quality gates see
    /// every group's files, finished or not.
    Shared,
    /// The default: each Builder group works in its own git worktree on its
    /// own branch; the Lead merges it after its gate passed (needs commits: a
    /// run with `--no-commit` runs shared).
    #[default]
    Worktree,
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            max_concurrent: 24,
            hang_timeout_seconds: 300,
            hang_timeout_ms: None,
            startup_timeout_seconds: 120,
            startup_timeout_ms: None,
            tool_timeout_seconds: 600,
            tool_timeout_ms: None,
            isolation: Isolation::default(),
            plan_approval: std::collections::BTreeMap::new(),
            executors: Executors::default(),
        }
    }
}

impl TeamConfig {
    /// The roles whose plans a person decides.
    pub fn human_plans(&self) -> Vec<crate::role::Role> {
        self.plan_approval
            .iter()
            .filter(|(_, a)| **a == PlanApproval::Human)
            .filter_map(|(r, _)| r.parse().ok())
            .collect()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_concurrent == 0 {
            return Err(invalid("team.max_concurrent must be at least 1"));
        }
        if self.hang_timeout_seconds == 0 {
            return Err(invalid("team.hang_timeout_seconds must be at least 1"));
        }
        if self.hang_timeout_ms == Some(0) {
            return Err(invalid("team.hang_timeout_ms must be at least 1"));
        }
        if let Some(role) = self.plan_approval.keys().find(|r| r.parse::<crate::role::Role>().is_err()) {
            return Err(invalid(format!(
                "team.plan_approval names '{role}', which is not a role (architect, auditor, task-generator, builder, inspector, coordinator)"
            )));
        }
        Ok(())
    }

    /// How long a teammate may show no activity: `hang_timeout_ms` when set,
    /// else `hang_timeout_seconds`.
    pub fn hang_timeout(&self) -> Duration {
        millis_or_seconds(self.hang_timeout_ms, self.hang_timeout_seconds)
    }

    /// The start-up allowance: `startup_timeout_ms` when set, else
    /// `startup_timeout_seconds` (0: none beyond the hang timeout).
    pub fn startup_timeout(&self) -> Duration {
        millis_or_seconds(self.startup_timeout_ms, self.startup_timeout_seconds)
    }

    /// The tool allowance: `tool_timeout_ms` when set, else
    /// `tool_timeout_seconds` (0: none beyond the hang timeout).
    pub fn tool_timeout(&self) -> Duration {
        millis_or_seconds(self.tool_timeout_ms, self.tool_timeout_seconds)
    }

    /// The limits of silence by what a quiet teammate is doing
    /// ([`crate::liveness`]): hang, start-up and tool timeouts.
    pub fn quiet_limits(&self) -> crate::liveness::QuietLimits<Duration> {
        crate::liveness::QuietLimits {
            hang: self.hang_timeout(),
            startup: self.startup_timeout(),
            tool: self.tool_timeout(),
        }
    }

    /// How often a running quality gate shows its teammate is alive: often
    /// enough that three beats fit in the hang timeout, at most every 5 s.
    pub fn heartbeat(&self) -> Duration {
        (self.hang_timeout() / 3).clamp(Duration::from_millis(10), Duration::from_secs(5))
    }
}

fn millis_or_seconds(ms: Option<u64>, seconds: u64) -> Duration {
    ms.map(Duration::from_millis).unwrap_or(Duration::from_secs(seconds))
}

/// `[shutdown]`: graceful shutdown of teammates (seed 003 B4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Seconds from the shutdown request to the forced kill.
    pub timeout_seconds: u64,
    /// The same in milliseconds; when set, it wins over `timeout_seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// When false, shutdown goes straight to signals.
    pub graceful_enabled: bool,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { timeout_seconds: 30, timeout_ms: None, graceful_enabled: true }
    }
}

impl ShutdownConfig {
    /// From the shutdown request to the forced stop: `timeout_ms` when set,
    /// else `timeout_seconds`.
    pub fn timeout(&self) -> Duration {
        millis_or_seconds(self.timeout_ms, self.timeout_seconds)
    }
}

/// `[server]`: the HTTP API and dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to bind; loopback unless a token is set.
    pub bind: String,
    /// Bearer token required for non-loopback binds. Prefer `token_file` or
    /// `$TROUPE_TOKEN`: config.toml is usually committed.
    pub token: Option<String>,
    /// A file holding the bearer token (relative to the project root). When
    /// set, every request needs the token, on loopback too.
    pub token_file: Option<std::path::PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { bind: "127.0.0.1:7878".into(), token: None, token_file: None }
    }
}

/// `[store]`: where the board, mailbox, registry and audit log live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite` (default) or `postgres`.
    pub backend: String,
    /// Database URL for `postgres`; for `sqlite` an optional path (default `.troupe/state/troupe.db`).
    pub url: Option<String>,
    /// How long a heartbeat keeps a teammate's lease (and so its claimed
    /// tasks and file locks): a holder silent for longer is taken for lost
    /// with its host, and what it holds is released. The default, 30 s, with
    /// the Lead's sweep every few seconds, releases a lost host's tasks well
    /// within 60 s of its last heartbeat.
    pub lease_seconds: u64,
    /// The same in milliseconds; when set, it wins over `lease_seconds` (for tests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { backend: "sqlite".into(), url: None, lease_seconds: 30, lease_ms: None }
    }
}

impl StoreConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        // A lease of nothing would release every teammate's work at once.
        if self.lease_seconds == 0 {
            return Err(invalid("store.lease_seconds must be at least 1"));
        }
        if self.lease_ms == Some(0) {
            return Err(invalid("store.lease_ms must be at least 1"));
        }
        Ok(())
    }

    /// How long a heartbeat keeps a lease: `lease_ms` when set, else `lease_seconds`.
    pub fn lease(&self) -> Duration {
        millis_or_seconds(self.lease_ms, self.lease_seconds)
    }
}
