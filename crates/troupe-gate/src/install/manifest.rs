//! `.troupe/hooks-installed.json`: what an install added besides hook entries,
//! so that uninstall removes exactly that.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::InstallError;

/// Where the manifest lives, relative to the root.
pub const MANIFEST: &str = ".troupe/hooks-installed.json";

/// What troupe added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    /// Files troupe created, with the hash of what it wrote.
    pub created: Vec<Created>,
    /// `env` keys troupe added to `.claude/settings.json`.
    pub claude_env: Vec<String>,
    /// `permissions.allow` entries troupe added to `.claude/settings.json`.
    pub claude_permissions: Vec<String>,
    /// Settings files that did not exist before troupe wrote them.
    pub settings_created: Vec<String>,
}

/// A file troupe created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// Relative to the root.
    pub path: String,
    /// [`hash`] of the content written.
    pub hash: String,
}

impl Manifest {
    /// The project's manifest, or an empty one.
    pub fn load(root: &Path) -> Result<Manifest, InstallError> {
        let path = root.join(MANIFEST);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| InstallError::BadJson { path, detail: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(source) => Err(InstallError::Io { action: "read", path, source }),
        }
    }
}

/// FNV-1a, 64 bits, hex: enough to tell "unchanged since troupe wrote it".
pub fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}
