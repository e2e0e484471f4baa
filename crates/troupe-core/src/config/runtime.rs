//! `[team]`, `[shutdown]`, `[server]` and `[store]`.

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
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig { max_concurrent: 24, hang_timeout_seconds: 300 }
    }
}

impl TeamConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_concurrent == 0 {
            return Err(invalid("team.max_concurrent must be at least 1"));
        }
        if self.hang_timeout_seconds == 0 {
            return Err(invalid("team.hang_timeout_seconds must be at least 1"));
        }
        Ok(())
    }
}

/// `[shutdown]`: graceful shutdown of teammates (seed 003 B4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Seconds from the shutdown request to the forced kill.
    pub timeout_seconds: u64,
    /// When false, shutdown goes straight to signals.
    pub graceful_enabled: bool,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { timeout_seconds: 30, graceful_enabled: true }
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
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { backend: "sqlite".into(), url: None }
    }
}
