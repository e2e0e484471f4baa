//! Gemini CLI (`.gemini/settings.json`) and Codex (`.codex/hooks.json`): both
//! take Claude-style `hooks` objects, with their own event names and timeouts.

use serde_json::{Value, json};

use super::claude::{merge_hooks, remove_hooks};
use super::files::Plan;
use super::manifest::Manifest;
use super::{InstallError, InstallOptions, hook_command};

/// Which of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Gemini CLI.
    Gemini,
    /// Codex.
    Codex,
}

impl Flavour {
    fn file(self) -> &'static str {
        match self {
            Flavour::Gemini => ".gemini/settings.json",
            Flavour::Codex => ".codex/hooks.json",
        }
    }

    fn engine(self) -> &'static str {
        match self {
            Flavour::Gemini => "gemini",
            Flavour::Codex => "codex",
        }
    }

    fn events(self) -> &'static [(&'static str, Option<&'static str>)] {
        match self {
            Flavour::Gemini => &[
                ("SessionStart", None),
                ("SessionEnd", None),
                ("BeforeAgent", None),
                ("BeforeTool", Some(".*")),
                ("AfterTool", Some(".*")),
                ("AfterAgent", None),
            ],
            Flavour::Codex => &[
                ("SessionStart", None),
                ("UserPromptSubmit", None),
                ("PreToolUse", Some(".*")),
                ("PostToolUse", Some(".*")),
                ("Stop", None),
            ],
        }
    }
}

pub fn install(
    plan: &mut Plan,
    manifest: &mut Manifest,
    options: &InstallOptions,
    flavour: Flavour,
) -> Result<(), InstallError> {
    let file = flavour.file();
    let existed = plan.read(file)?.is_some();
    let mut settings = plan.read_json(file)?.unwrap_or_else(|| json!({}));
    merge_hooks(&mut settings, flavour.engine(), wanted(options, flavour), file)?;
    if !existed && !manifest.settings_created.iter().any(|s| s == file) {
        manifest.settings_created.push(file.into());
    }
    plan.write_json(file, &settings);
    Ok(())
}

/// troupe's hook entries for `flavour`, event by event (the engine's own event names).
pub fn wanted(options: &InstallOptions, flavour: Flavour) -> Vec<(&'static str, Option<&'static str>, Vec<Value>)> {
    let long = options.gates.timeout_seconds + 30;
    flavour
        .events()
        .iter()
        .map(|(event, matcher)| {
            let seconds = if matches!(*event, "Stop" | "AfterAgent") { long } else { 30 };
            let command = hook_command(&options.troupe, flavour.engine(), event);
            let hook = match flavour {
                // Gemini CLI counts hook timeouts in milliseconds and names each hook.
                Flavour::Gemini => {
                    json!({ "type": "command", "command": command, "name": "troupe", "timeout": seconds * 1000 })
                }
                Flavour::Codex => json!({ "type": "command", "command": command, "timeout": seconds }),
            };
            (*event, *matcher, vec![hook])
        })
        .collect()
}

pub fn uninstall(plan: &mut Plan, manifest: &Manifest, flavour: Flavour) -> Result<(), InstallError> {
    let file = flavour.file();
    let Some(mut settings) = plan.read_json(file)? else { return Ok(()) };
    let before = settings.clone();
    remove_hooks(&mut settings, flavour.engine(), file)?;
    let empty = settings.as_object().is_some_and(|o| o.is_empty());
    if empty && manifest.settings_created.iter().any(|s| s == file) {
        plan.remove(file);
    } else if settings != before {
        plan.write_json(file, &settings);
    }
    Ok(())
}
