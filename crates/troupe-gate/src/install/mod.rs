//! Installing troupe's hooks into a project, and removing exactly what was
//! installed. `troupe init --claude | --gemini | --codex | --opencode |
//! --claude-plugin` call [`install`]; `--uninstall-hooks` calls [`uninstall`].
//!
//! Existing settings are merged, never replaced: troupe's hook entries are
//! recognised by their command (`<troupe> hook <engine> <event>`) or, for the
//! prompt hook earlier versions installed for Claude, by its text, so a second
//! install replaces them in place (and drops that prompt hook) and uninstall
//! removes only them. Keys troupe adds beside hooks (Claude's `env`
//! and `permissions.allow` entries) and files it creates are written down in
//! `.troupe/hooks-installed.json`, so uninstall removes those and nothing else.
//! A settings file that does not parse is an error and is left as it was.

mod claude;
mod files;
mod gemini;
mod manifest;
mod opencode;
mod teammate;

use std::path::{Path, PathBuf};

use troupe_core::config::{CommonCommands, GatesConfig};

pub use claude::run_settings as claude_run_settings;
pub use manifest::Manifest;
pub use teammate::{LIVE_EVENTS, TEAMMATE_EVENTS, hooks_for, opencode_plugin, teammate_hooks};

/// Where to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// `.claude/settings.json` hooks, env, permissions, and `.claude/skills/`.
    Claude,
    /// A Claude Code plugin directory (`.troupe/claude-plugin/`).
    ClaudePlugin,
    /// `.gemini/settings.json` hooks.
    Gemini,
    /// `.codex/hooks.json`.
    Codex,
    /// The bridge plugin `.opencode/plugin/troupe-gates.js`.
    OpenCode,
}

/// An install or uninstall that could not be done; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file exists and is not what troupe can merge into.
    #[error("{} is not valid JSON ({detail}); fix or move it, then run troupe init again", path.display())]
    BadJson {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// A file exists with an unexpected shape.
    #[error("{}: {detail}", path.display())]
    BadShape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Reading or writing failed.
    #[error("cannot {action} {}", path.display())]
    Io {
        /// What troupe tried.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// What [`install`] needs to know.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The troupe binary the hooks call, by absolute path.
    pub troupe: PathBuf,
    /// `[gates]`, for the skill names.
    pub gates: GatesConfig,
    /// steering's commands, written into the verification skill.
    pub commands: CommonCommands,
}

/// Install troupe's hooks for `targets` in the project at `root`. Returns the
/// files changed, relative to `root`. All changes are computed first, then
/// written; a file that cannot be merged stops the install before any write.
pub fn install(root: &Path, targets: &[Target], options: &InstallOptions) -> Result<Vec<String>, InstallError> {
    let mut manifest = Manifest::load(root)?;
    let mut plan = files::Plan::new(root);
    for target in targets {
        match target {
            Target::Claude => claude::install(&mut plan, &mut manifest, options)?,
            Target::ClaudePlugin => claude::install_plugin(&mut plan, &mut manifest, options)?,
            Target::Gemini => gemini::install(&mut plan, &mut manifest, options, gemini::Flavour::Gemini)?,
            Target::Codex => gemini::install(&mut plan, &mut manifest, options, gemini::Flavour::Codex)?,
            Target::OpenCode => opencode::install(&mut plan, &mut manifest, options)?,
        }
    }
    plan.set_manifest(&manifest)?;
    plan.apply()
}

/// Remove everything [`install`] added to the project at `root`. Returns the
/// files changed or removed, relative to `root`.
pub fn uninstall(root: &Path) -> Result<Vec<String>, InstallError> {
    let mut manifest = Manifest::load(root)?;
    let mut plan = files::Plan::new(root);
    claude::uninstall(&mut plan, &mut manifest)?;
    gemini::uninstall(&mut plan, &manifest, gemini::Flavour::Gemini)?;
    gemini::uninstall(&mut plan, &manifest, gemini::Flavour::Codex)?;
    for created in std::mem::take(&mut manifest.created) {
        plan.remove_if_unchanged(&created.path, &created.hash)?;
    }
    plan.remove_manifest();
    plan.apply()
}

/// The shell command a hook entry runs: the binary quoted for `sh`.
pub fn hook_command(troupe: &Path, engine: &str, event: &str) -> String {
    format!("{} hook {engine} {event}", shell_quote(&troupe.to_string_lossy()))
}

/// True when `command` is a troupe hook command for `engine`.
pub fn is_troupe_hook(command: &str, engine: &str) -> bool {
    command.contains("troupe") && command.contains(&format!(" hook {engine} "))
}

fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests;
