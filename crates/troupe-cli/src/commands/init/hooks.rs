//! `troupe init --claude | --gemini | --codex | --opencode | --claude-plugin`
//! and `--uninstall-hooks`: the flags; the work is `troupe_gate::install`.

use std::path::Path;

use clap::Args;
use troupe_core::config::Config;
use troupe_gate::install::{InstallOptions, Target, install, uninstall};

use crate::error::{CliError, CliResult};

/// Which engines to install troupe's hooks into.
#[derive(Debug, Args, Default)]
pub struct HookFlags {
    /// Install the hooks into .claude/settings.json (merged), with the gate skills in .claude/skills/.
    #[arg(long)]
    pub claude: bool,
    /// Generate a Claude Code plugin directory with the hooks and skills (.troupe/claude-plugin/).
    #[arg(long)]
    pub claude_plugin: bool,
    /// Install the hooks into .gemini/settings.json (merged).
    #[arg(long)]
    pub gemini: bool,
    /// Install the hooks into .codex/hooks.json (merged).
    #[arg(long)]
    pub codex: bool,
    /// Install the OpenCode bridge plugin (.opencode/plugin/troupe-gates.js).
    #[arg(long)]
    pub opencode: bool,
    /// Remove exactly what the flags above installed, and nothing else.
    #[arg(long, conflicts_with_all = ["claude", "claude_plugin", "gemini", "codex", "opencode"])]
    pub uninstall_hooks: bool,
}

impl HookFlags {
    fn targets(&self) -> Vec<Target> {
        [
            (self.claude, Target::Claude),
            (self.claude_plugin, Target::ClaudePlugin),
            (self.gemini, Target::Gemini),
            (self.codex, Target::Codex),
            (self.opencode, Target::OpenCode),
        ]
        .into_iter()
        .filter_map(|(on, t)| on.then_some(t))
        .collect()
    }
}

/// Install the hooks the flags ask for, with the gates of `config`; returns the files changed.
pub fn install_hooks(root: &Path, flags: &HookFlags, config: &Config) -> CliResult<Vec<String>> {
    let targets = flags.targets();
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let troupe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::internal("cannot find the troupe binary's own path for the hooks").with_source(&e))?;
    let options =
        InstallOptions { troupe, gates: config.gates.clone(), commands: troupe_gate::run::read_steering(root) };
    install(root, &targets, &options)
        .map_err(|e| CliError::user("cannot install troupe's hooks; nothing was changed").with_source(&e))
}

/// `--uninstall-hooks`: returns the files changed or removed.
pub fn uninstall_hooks(root: &Path) -> CliResult<Vec<String>> {
    uninstall(root).map_err(|e| CliError::user("cannot remove troupe's hooks; nothing was changed").with_source(&e))
}
