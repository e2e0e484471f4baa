//! Running the real Claude Code CLI offline against an [`AnthropicStub`](crate::anthropic::AnthropicStub),
//! each run in its own scratch `HOME` so `~/.claude` state never leaks between tests.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use crate::peers;

/// A scratch Claude Code installation pointed at a stub; the scratch `HOME`
/// is deleted on drop.
pub struct Claude {
    home: TempDir,
    base_url: String,
}

impl Claude {
    /// A fresh scratch `HOME` for runs against the stub at `base_url`.
    pub fn new(base_url: &str) -> Self {
        let home = tempfile::Builder::new().prefix("troupe-claude-home-").tempdir().expect("scratch HOME for claude");
        Claude { home, base_url: base_url.to_string() }
    }

    /// The scratch `HOME`.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The `claude` binary (panics naming `scripts/install-peers` when missing).
    pub fn bin() -> PathBuf {
        peers::bin("claude")
    }

    /// The environment a run needs (set these on any process that starts
    /// `claude`, such as troupe's supervisor).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.home.path().into()),
            ("ANTHROPIC_BASE_URL".into(), self.base_url.clone().into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-stub".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(), "1".into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ("IS_SANDBOX".into(), "1".into()),
        ]
    }

    /// Prepares the scratch `HOME` for the interactive TUI (`claude` without
    /// `-p`), which asks a person two things on a first run: to finish the
    /// onboarding, and whether to use the API key in the environment. Both
    /// are answered in `~/.claude.json`, as a person's first run leaves it.
    pub fn ready_for_tui(&self) {
        let config = serde_json::json!({
            "hasCompletedOnboarding": true,
            "customApiKeyResponses": {"approved": ["sk-ant-stub"], "rejected": []},
        });
        std::fs::write(self.home.path().join(".claude.json"), config.to_string()).expect("write ~/.claude.json");
    }

    /// Variables inherited from the surrounding environment that would point
    /// the CLI somewhere else (a real account, another config dir): removed.
    pub fn inherited_to_remove() -> Vec<OsString> {
        std::env::vars_os()
            .map(|(k, _)| k)
            .filter(|k| {
                let k = k.to_string_lossy();
                k.starts_with("ANTHROPIC_") || k.starts_with("CLAUDE") || k.starts_with("XDG_CONFIG")
            })
            .collect()
    }

    /// Applies [`Claude::env`] to a command, after removing inherited
    /// variables that would interfere.
    pub fn apply_env(&self, cmd: &mut Command) {
        for k in Self::inherited_to_remove() {
            cmd.env_remove(k);
        }
        cmd.envs(self.env());
    }

    /// `claude -p <prompt> --output-format stream-json --verbose
    /// --dangerously-skip-permissions` in `cwd`, env applied, MCP servers
    /// connected before the first turn, stdin closed.
    /// Add `--settings`, `--mcp-config` and friends with `.arg()`.
    pub fn command(&self, prompt: &str, cwd: impl AsRef<Path>) -> Command {
        let mut cmd = Command::new(Self::bin());
        cmd.current_dir(cwd)
            .args(["-p", prompt, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"])
            .stdin(std::process::Stdio::null());
        self.apply_env(&mut cmd);
        // As troupe's Claude adapter does: MCP servers given with
        // `--mcp-config` are connected before the first turn.
        cmd.env("MCP_CONNECTION_NONBLOCKING", "0");
        cmd
    }
}

/// Parses stdout of a stream-json run into its JSON lines (non-JSON lines are skipped).
pub fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}
