//! The command line of an engine's interactive session (its TUI, as a
//! person runs it), for `troupe team`'s panes: the same per-run wiring as a
//! headless run (hooks, gateway, config folders), the role's prompt as the
//! session's first prompt, no stream output. Engines without a TUI troupe
//! can drive (OpenCode, the scripted engine) have none; a custom engine is
//! its command with the prompt as its last argument.

use super::{Invocation, RunOptions};
use crate::registry::{Engine, EngineKind};

impl Engine {
    /// The interactive command line for `o`, or `None` when this engine has
    /// no interactive session troupe can start in a pane.
    pub fn build_interactive(&self, o: &RunOptions) -> Option<Invocation> {
        let mut inv = Invocation::new(&self.command, self.format);
        match &self.kind {
            EngineKind::Claude => claude(&mut inv, o),
            EngineKind::Gemini => gemini(&mut inv, o),
            EngineKind::Codex => codex(&mut inv, o),
            EngineKind::Custom { args, .. } => {
                for a in args {
                    inv.arg(a.clone());
                }
                inv.arg(o.prompt.clone());
            }
            EngineKind::OpenCode | EngineKind::Scripted => return None,
        }
        Some(inv)
    }
}

fn claude(inv: &mut Invocation, o: &RunOptions) {
    // The first prompt first: variadic flags such as --mcp-config would
    // swallow a trailing positional.
    inv.arg(o.prompt.clone());
    if o.skip_permissions {
        inv.arg("--dangerously-skip-permissions");
    }
    // Nobody answers a question put up in a pane troupe drives by messages.
    inv.arg("--disallowedTools=AskUserQuestion");
    if let Some(m) = &o.model {
        inv.arg("--model").arg(m.clone());
    }
    super::claude_wiring(inv, o);
}

fn gemini(inv: &mut Invocation, o: &RunOptions) {
    if let Some(m) = &o.model {
        inv.arg("-m").arg(m.clone());
    }
    if o.skip_permissions {
        inv.arg("--yolo").arg("--skip-trust");
    }
    if let Some(h) = &o.engine_home {
        inv.env.push(("GEMINI_CLI_HOME".into(), h.to_string_lossy().into_owned()));
    }
    // `=` keeps a prompt that starts with '-' from being read as a flag.
    inv.arg(format!("--prompt-interactive={}", o.prompt));
}

fn codex(inv: &mut Invocation, o: &RunOptions) {
    super::codex_wiring(inv, o);
    inv.arg("--").arg(o.prompt.clone());
}

#[cfg(test)]
mod tests {
    use crate::{Registry, RunOptions};

    fn opts() -> RunOptions {
        RunOptions {
            prompt: "You are claude-1".into(),
            skip_permissions: true,
            settings: Some("{}".into()),
            mcp_config: Some("{}".into()),
            config_overrides: vec!["hooks.Stop=[]".into()],
            ..RunOptions::default()
        }
    }

    #[test]
    fn each_tui_gets_its_wiring_and_no_headless_flag() {
        let registry = Registry::default();
        let claude = registry.get("claude").0.build_interactive(&opts()).unwrap();
        assert_eq!(claude.args[0], "You are claude-1");
        assert!(claude.args.iter().any(|a| a == "--settings") && !claude.args.iter().any(|a| a == "-p"));
        let gemini = registry.get("gemini").0.build_interactive(&opts()).unwrap();
        assert!(gemini.args.contains(&"--prompt-interactive=You are claude-1".to_string()), "{:?}", gemini.args);
        assert!(!gemini.args.iter().any(|a| a.starts_with("--output-format")));
        let codex = registry.get("codex").0.build_interactive(&opts()).unwrap();
        assert!(!codex.args.iter().any(|a| a == "exec"), "{:?}", codex.args);
        assert!(codex.args.contains(&"--dangerously-bypass-hook-trust".to_string()));
        assert_eq!(codex.args.last().unwrap(), "You are claude-1");
        assert!(registry.get("opencode").0.build_interactive(&opts()).is_none());
    }
}
