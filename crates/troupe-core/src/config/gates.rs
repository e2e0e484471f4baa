//! `[gates]`: quality gate commands (seed 003 B2) and the skill gate (seed 001).

use serde::{Deserialize, Serialize};

/// `[gates]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatesConfig {
    /// Command run when a teammate goes idle; defaults to the steering test command.
    pub on_idle: Option<String>,
    /// Command run before a task is marked complete; defaults to the steering test and lint commands.
    pub on_task_completed: Option<String>,
}
