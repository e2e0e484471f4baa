//! Where the real peers live: `.peers/` at the workspace root, filled by
//! `scripts/install-peers`.

use std::path::PathBuf;

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(|p| p.parent()).map(PathBuf::from).unwrap_or(manifest)
}

/// The `.peers` directory (override with `TROUPE_PEERS_DIR`).
pub fn dir() -> PathBuf {
    match std::env::var_os("TROUPE_PEERS_DIR") {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join(".peers"),
    }
}

/// The path of an installed peer binary, `.peers/node_modules/.bin/<name>`.
///
/// # Panics
/// When the binary is missing, with a message saying how to install it: tests
/// that need a real peer must fail loudly, never skip.
pub fn bin(name: &str) -> PathBuf {
    let path = dir().join("node_modules").join(".bin").join(name);
    if !path.exists() {
        panic!(
            "real peer `{name}` is not installed (looked for {}): run `scripts/install-peers` \
             from the workspace root to install the agent CLIs and MCP servers into .peers/",
            path.display()
        );
    }
    path
}

/// The Python interpreter of `.peers/venv` (with `mcp` and `a2a-sdk`).
///
/// # Panics
/// When the venv is missing, naming `scripts/install-peers`.
pub fn python() -> PathBuf {
    let path = dir().join("venv").join("bin").join("python");
    if !path.exists() {
        panic!(
            "the peers' Python venv is not installed (looked for {}): run `scripts/install-peers` \
             from the workspace root",
            path.display()
        );
    }
    path
}

#[cfg(test)]
mod tests {
    #[test]
    #[should_panic(expected = "scripts/install-peers")]
    fn missing_peer_names_the_install_script() {
        super::bin("no-such-peer-binary");
    }
}
