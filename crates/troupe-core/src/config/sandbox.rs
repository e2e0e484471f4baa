//! `[sandbox]`: the Landlock sandbox every teammate runs in.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// Build outputs a teammate may write whatever it owns, by ecosystem; each
/// is made writable only where its ecosystem is (its parent folder exists).
pub const DEFAULT_WRITABLE: &[&str] = &["target/", ".pytest_cache/", "__pycache__/", "node_modules/.cache/"];

/// `[sandbox]`: whether teammates must be sandboxed, and which build outputs
/// they may write besides what they own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// Refuse to start teammates when the kernel cannot sandbox them
    /// (no Landlock, or an ABI older than 3). `false` runs them unsandboxed
    /// there, with a warning.
    pub required: bool,
    /// Folders relative to the project root that every teammate may write
    /// (build outputs, caches); absent means [`DEFAULT_WRITABLE`].
    pub writable: Option<Vec<String>>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig { required: true, writable: None }
    }
}

impl SandboxConfig {
    /// The writable build outputs, the defaults when none are configured.
    pub fn writable(&self) -> Vec<String> {
        match &self.writable {
            Some(list) => list.clone(),
            None => DEFAULT_WRITABLE.iter().map(|s| s.to_string()).collect(),
        }
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for entry in self.writable.iter().flatten() {
            let path = entry.trim_end_matches('/');
            let first = path.split('/').next().unwrap_or("");
            if path.is_empty() || path.starts_with('/') || path.split('/').any(|p| p == "..") {
                return Err(invalid(format!(
                    "sandbox.writable entry '{entry}' must be a folder inside the project (relative, no '..')"
                )));
            }
            if [".git", ".troupe", ".claude", ".gemini", ".codex", ".opencode"].contains(&first) {
                return Err(invalid(format!(
                    "sandbox.writable entry '{entry}' is a folder no teammate may write ({first}/)"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn the_sandbox_is_required_by_default_and_its_outputs_are_checked() {
        let c = Config::from_toml("").unwrap();
        assert!(c.sandbox.required);
        assert!(c.sandbox.writable().contains(&"target/".to_string()));
        let c = Config::from_toml("[sandbox]\nrequired = false\nwritable = [\"out/\"]\n").unwrap();
        assert!(!c.sandbox.required);
        assert_eq!(c.sandbox.writable(), ["out/"]);
        for bad in ["../x", "/tmp", ".git/", ".claude", ""] {
            let e = Config::from_toml(&format!("[sandbox]\nwritable = [\"{bad}\"]\n")).unwrap_err();
            assert!(e.message.contains("sandbox.writable"), "{bad}: {e}");
        }
    }
}
