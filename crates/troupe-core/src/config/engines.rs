//! `[engines]`: which engine runs each pipeline phase, model names per tier,
//! and user-defined engines (seed 002, extended to four engines plus custom ones).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// The pipeline phases an engine can be chosen for (seed 002 `EngineConfigPhase`).
pub const ENGINE_PHASES: [&str; 8] =
    ["plan", "requirements", "design", "tasks", "document-review", "document-review-reply", "inspection", "impl"];

/// `[engines]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnginesConfig {
    /// The engine for phases without their own setting (`claude` when unset).
    pub default: Option<String>,
    /// `[engines.phases]`: engine per phase.
    pub phases: BTreeMap<String, String>,
    /// `[engines.models.<engine>]`: model id per tier (`t2`, `t3`) for an engine.
    pub models: BTreeMap<String, EngineModels>,
    /// `[engines.custom.<id>]`: engines defined by the user.
    pub custom: BTreeMap<String, CustomEngine>,
    /// `[engines.commands]`: path of an engine's executable, when not on PATH.
    pub commands: BTreeMap<String, String>,
}

/// Model ids per tier for one engine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineModels {
    /// Model for T2 roles (Architect, Auditor).
    pub t2: Option<String>,
    /// Model for T3 roles (TaskGenerator, Builder, Inspector).
    pub t3: Option<String>,
}

/// How a custom engine receives its prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptPassing {
    /// As the last argument.
    #[default]
    Argument,
    /// On standard input.
    Stdin,
}

/// `[engines.custom.<id>]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomEngine {
    /// The executable.
    pub command: String,
    /// Arguments always passed before the prompt.
    #[serde(default)]
    pub args: Vec<String>,
    /// How the prompt is passed.
    #[serde(default)]
    pub prompt: PromptPassing,
    /// Which stream format its stdout uses: `claude`, `gemini`, `codex`, `opencode`, or `text`.
    #[serde(default = "default_format")]
    pub format: String,
}

fn default_format() -> String {
    "text".into()
}

impl EnginesConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for phase in self.phases.keys() {
            if !ENGINE_PHASES.contains(&phase.as_str()) {
                return Err(invalid(format!(
                    "engines.phases.{phase}: unknown phase (expected one of: {})",
                    ENGINE_PHASES.join(", ")
                )));
            }
        }
        for (id, custom) in &self.custom {
            if ["claude", "gemini", "codex", "opencode"].contains(&id.as_str()) {
                return Err(invalid(format!(
                    "engines.custom.{id}: '{id}' is a built-in engine; pick another id, or set its executable in [engines.commands]"
                )));
            }
            if !matches!(custom.format.as_str(), "claude" | "gemini" | "codex" | "opencode" | "text" | "troupe") {
                return Err(invalid(format!(
                    "engines.custom.{id}.format: unknown stream format '{}' (expected claude, gemini, codex, opencode, text or troupe)",
                    custom.format
                )));
            }
            if custom.command.trim().is_empty() {
                return Err(invalid(format!("engines.custom.{id}.command is empty")));
            }
        }
        Ok(())
    }
}
