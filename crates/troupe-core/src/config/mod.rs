//! `.troupe/config.toml`, parsed and validated. Every section lives in its own
//! file; unknown keys are errors that name the key, so a typo never silently
//! falls back to a default.

use serde::{Deserialize, Serialize};

mod adhoc;
mod budgets;
mod engines;
mod gates;
mod gateway;
mod review;
mod runtime;
mod sandbox;
mod telemetry;
mod workers;

pub use adhoc::AdhocConfig;
pub use budgets::{BudgetsConfig, Limits, OnExceed};
pub use engines::{CustomEngine, ENGINE_PHASES, EngineModels, EnginesConfig, PromptPassing};
pub use gates::{
    CommonCommands, EngineGates, FileKind, GateRule, GateStep, GatesConfig, QualityGate, RequiredSkills,
    parse_common_commands,
};
pub use gateway::{GatewayConfig, McpConfig, McpServer, RateLimit};
pub use review::ReviewConfig;
pub use runtime::{Executors, Isolation, ServerConfig, ShutdownConfig, StoreConfig, TeamConfig};
pub use sandbox::{DEFAULT_WRITABLE, SandboxConfig};
pub use telemetry::TelemetryConfig;
pub use workers::WorkersConfig;

/// The whole of `.troupe/config.toml`. Every section is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Which engine runs each phase, and custom engines.
    pub engines: EnginesConfig,
    /// Quality gates and the skill gate.
    pub gates: GatesConfig,
    /// Team limits and hang detection.
    pub team: TeamConfig,
    /// Graceful shutdown of teammates.
    pub shutdown: ShutdownConfig,
    /// The HTTP server.
    pub server: ServerConfig,
    /// Where the board, mailbox and audit log are kept.
    pub store: StoreConfig,
    /// Backend MCP servers behind the gateway.
    pub mcp: McpConfig,
    /// Gateway policy: rate limits and audit.
    pub gateway: GatewayConfig,
    /// The reviews `troupe run` includes.
    pub review: ReviewConfig,
    /// The Landlock sandbox of teammates.
    pub sandbox: SandboxConfig,
    /// Adhoc mode: which calls wait for a person.
    pub adhoc: AdhocConfig,
    /// Model prices (USD per million tokens) over the built-in table, by
    /// model-name prefix.
    pub prices: std::collections::BTreeMap<String, crate::usage::ModelPrice>,
    /// Spending limits per run, feature, role and agent.
    pub budgets: BudgetsConfig,
    /// OpenTelemetry export of runs (off unless `otlp_endpoint` is set).
    pub telemetry: TelemetryConfig,
    /// Workers on other hosts (`[team] executors = "workers"`).
    pub workers: WorkersConfig,
}

/// A config file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}{}", location.map(|(l, c)| format!(" (line {l}, column {c})")).unwrap_or_default())]
pub struct ConfigError {
    /// What is wrong, naming the key.
    pub message: String,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
}

impl Config {
    /// Parse and validate config text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError {
            message: e.message().trim().to_string(),
            location: e.span().map(|s| line_col(text, s.start)),
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.engines.validate()?;
        self.team.validate()?;
        self.store.validate()?;
        self.gates.validate()?;
        self.review.validate()?;
        self.sandbox.validate()?;
        self.adhoc.validate()?;
        self.budgets.validate()?;
        self.telemetry.validate()?;
        self.workers.validate()?;
        if self.team.executors == Executors::Workers {
            if self.workers.remote.is_none() {
                return Err(invalid(
                    "team.executors = \"workers\" needs [workers] remote (the git remote the workers push to, e.g. \"origin\")",
                ));
            }
            if self.team.isolation != Isolation::Worktree {
                return Err(invalid(
                    "team.executors = \"workers\" needs team.isolation = \"worktree\" (a worker builds a group on its branch)",
                ));
            }
        }
        Ok(())
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError { message: message.into(), location: None }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_need_a_remote_and_worktrees() {
        let c = Config::from_toml("[team]\nexecutors = \"workers\"\n[workers]\nremote = \"origin\"\n").unwrap();
        assert_eq!((c.team.executors, c.workers.remote.as_deref()), (Executors::Workers, Some("origin")));
        assert_eq!(Config::default().team.executors, Executors::Local);
        let err = Config::from_toml("[team]\nexecutors = \"workers\"\n").unwrap_err();
        assert!(err.message.contains("[workers] remote"), "{err}");
        let shared = "[team]\nexecutors = \"workers\"\nisolation = \"shared\"\n[workers]\nremote = \"origin\"\n";
        assert!(Config::from_toml(shared).unwrap_err().message.contains("worktree"));
        assert!(Config::from_toml("[team]\nexecutors = \"cloud\"\n").is_err());
    }

    #[test]
    fn empty_config_is_all_defaults() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.team.max_concurrent, 24);
        assert_eq!(c.shutdown.timeout_seconds, 30);
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        let err = Config::from_toml("[team]\nmax_concurent = 3\n").unwrap_err();
        assert!(err.message.contains("max_concurent"), "{err}");
        assert_eq!(err.location.map(|l| l.0), Some(2));
        let err = Config::from_toml("[teams]\n").unwrap_err();
        assert!(err.message.contains("teams"), "{err}");
    }

    #[test]
    fn the_startup_allowance_is_generous_by_default_and_milliseconds_win() {
        use std::time::Duration;
        assert_eq!(Config::default().team.startup_timeout(), Duration::from_secs(120));
        let c = Config::from_toml("[team]\nhang_timeout_ms = 800\nstartup_timeout_ms = 60000\n").unwrap();
        assert_eq!(
            (c.team.hang_timeout(), c.team.startup_timeout()),
            (Duration::from_millis(800), Duration::from_secs(60))
        );
        let c = Config::from_toml("[team]\nstartup_timeout_seconds = 5\n").unwrap();
        assert_eq!(c.team.startup_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn the_tool_allowance_is_ten_minutes_by_default_and_milliseconds_win() {
        use std::time::Duration;
        assert_eq!(Config::default().team.tool_timeout(), Duration::from_secs(600));
        let c = Config::from_toml("[team]\nhang_timeout_ms = 400\ntool_timeout_ms = 30000\n").unwrap();
        let limits = c.team.quiet_limits();
        assert_eq!((limits.hang, limits.tool), (Duration::from_millis(400), Duration::from_secs(30)));
    }

    #[test]
    fn invalid_values_are_named() {
        let err = Config::from_toml("[team]\nmax_concurrent = 0\n").unwrap_err();
        assert!(err.message.contains("team.max_concurrent"), "{err}");
    }

    #[test]
    fn plan_approval_is_per_role() {
        let c = Config::from_toml("[team]\nplan_approval = { builder = \"human\", architect = \"lead\" }\n").unwrap();
        assert_eq!(c.team.human_plans(), [crate::role::Role::Builder]);
        assert!(Config::default().team.human_plans().is_empty());
        let err = Config::from_toml("[team.plan_approval]\nwizard = \"human\"\n").unwrap_err();
        assert!(err.message.contains("team.plan_approval names 'wizard'"), "{err}");
        assert!(Config::from_toml("[team.plan_approval]\nbuilder = \"robot\"\n").is_err());
    }
}
