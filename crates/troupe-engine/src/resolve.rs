//! Which engine runs a phase (seed 002 Engine Resolution Flow):
//! spec.yaml `engine_override.<phase>` > `[engines.phases].<phase>` >
//! `[engines].default` > `claude`.

use std::collections::BTreeMap;

use serde::Serialize;
use troupe_core::config::{ConfigError, EnginesConfig};

use crate::registry::DEFAULT_ENGINE;

/// Where the chosen engine came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// spec.yaml `engine_override.<phase>`.
    SpecOverride,
    /// `[engines.phases].<phase>`.
    PhaseConfig,
    /// `[engines].default`.
    ConfigDefault,
    /// Nothing set: `claude`.
    BuiltinDefault,
    /// The config could not be read: `claude`.
    ConfigUnreadable,
}

/// A resolved engine id and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    /// The engine id (may still be unknown to the registry, which then falls back).
    pub engine: String,
    /// Where it came from.
    pub source: Source,
    /// Set when the config was unreadable: what was wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Resolves the engine for `phase`. `config` is the result of loading
/// `.troupe/config.toml`; an error falls back to `claude` and says so.
pub fn resolve(
    phase: &str,
    spec_override: Option<&BTreeMap<String, String>>,
    config: Result<&EnginesConfig, &ConfigError>,
) -> Resolution {
    if let Some(id) = spec_override.and_then(|o| o.get(phase)) {
        return Resolution { engine: id.clone(), source: Source::SpecOverride, note: None };
    }
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("config unreadable ({e}); using engine '{DEFAULT_ENGINE}'");
            return Resolution {
                engine: DEFAULT_ENGINE.into(),
                source: Source::ConfigUnreadable,
                note: Some(format!("config unreadable ({e}); using '{DEFAULT_ENGINE}'")),
            };
        }
    };
    if let Some(id) = config.phases.get(phase) {
        return Resolution { engine: id.clone(), source: Source::PhaseConfig, note: None };
    }
    if let Some(id) = &config.default {
        return Resolution { engine: id.clone(), source: Source::ConfigDefault, note: None };
    }
    Resolution { engine: DEFAULT_ENGINE.into(), source: Source::BuiltinDefault, note: None }
}
