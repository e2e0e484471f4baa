//! The hooks the Lead gives each teammate it spawns, for that run only: the
//! same entries `troupe init --<engine>` installs, restricted to the events
//! that matter to a teammate (the session start that tells it about the gates,
//! before and after each tool call, and the Stop gate). Phase guidance
//! (UserPromptSubmit / BeforeAgent) is left out: the Lead already chose the
//! phase. So is
//! SessionEnd, which clears the session's markers: a teammate resumed to fix a
//! failed gate keeps the skills it invoked.

use serde_json::{Value, json};

use super::claude::{merge_hooks, troupe_hooks};
use super::gemini::{self, Flavour};
use super::{InstallOptions, opencode};
use crate::engine::{Engine, Event};

/// The events a teammate's hooks cover, in troupe's vocabulary.
pub const TEAMMATE_EVENTS: [Event; 4] = [Event::SessionStart, Event::PreToolUse, Event::PostToolUse, Event::Stop];

/// The events of an agent a person works with in a `troupe team` pane: a
/// teammate's, plus the submitted prompt, where messages waiting for it are
/// added as context (and a pasted notice is seen to arrive).
pub const LIVE_EVENTS: [Event; 5] =
    [Event::SessionStart, Event::UserPromptSubmit, Event::PreToolUse, Event::PostToolUse, Event::Stop];

/// The `{"hooks": …}` object for one teammate run on `engine`: Claude Code's
/// `--settings`, Gemini CLI's settings file, Codex's `hooks` config. `None` for
/// OpenCode, which has no command hooks (see [`opencode_plugin`]).
pub fn teammate_hooks(engine: Engine, options: &InstallOptions) -> Option<Value> {
    hooks_for(engine, options, &TEAMMATE_EVENTS)
}

/// [`teammate_hooks`] for the given `events` (e.g. [`LIVE_EVENTS`]).
pub fn hooks_for(engine: Engine, options: &InstallOptions, events: &[Event]) -> Option<Value> {
    let mut wanted = match engine {
        Engine::Claude => troupe_hooks(options),
        Engine::Gemini => gemini::wanted(options, Flavour::Gemini),
        Engine::Codex => gemini::wanted(options, Flavour::Codex),
        Engine::OpenCode => return None,
    };
    wanted.retain(|(event, _, _)| Event::parse(engine, event).is_ok_and(|e| events.contains(&e)));
    if events == LIVE_EVENTS {
        // A live agent is handed its messages after any tool call, not only
        // after the shell and skill calls the gates look at.
        for (event, matcher, _) in &mut wanted {
            if *event == "PostToolUse" {
                *matcher = Some("*");
            }
        }
    }
    let mut settings = json!({});
    merge_hooks(&mut settings, engine.as_str(), wanted, "the teammate's hooks").expect("a fresh object merges");
    Some(settings)
}

/// The source of troupe's OpenCode bridge plugin (what `troupe init --opencode`
/// writes to `.opencode/plugin/troupe-gates.js`), calling `options.troupe`.
pub fn opencode_plugin(options: &InstallOptions) -> String {
    opencode::plugin_source(&options.troupe.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> InstallOptions {
        InstallOptions { troupe: "/bin/troupe".into(), gates: Default::default(), commands: Default::default() }
    }

    fn events(v: &Value) -> Vec<String> {
        v["hooks"].as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn each_engine_gets_the_teammate_events_in_its_own_names() {
        let claude = teammate_hooks(Engine::Claude, &options()).unwrap();
        assert_eq!(events(&claude), ["SessionStart", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"]);
        assert_eq!(claude["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "/bin/troupe hook claude PreToolUse");
        assert!(!claude.to_string().contains("\"prompt\""), "no prompt hook: {claude}");
        let gemini = teammate_hooks(Engine::Gemini, &options()).unwrap();
        assert_eq!(events(&gemini), ["SessionStart", "BeforeTool", "AfterTool", "AfterAgent"]);
        assert_eq!(gemini["hooks"]["AfterAgent"][0]["hooks"][0]["timeout"], 630_000);
        let codex = teammate_hooks(Engine::Codex, &options()).unwrap();
        assert_eq!(events(&codex), ["SessionStart", "PreToolUse", "PostToolUse", "Stop"]);
        assert!(teammate_hooks(Engine::OpenCode, &options()).is_none());
        assert!(opencode_plugin(&options()).contains("\"/bin/troupe\""));
    }

    #[test]
    fn live_agents_also_get_the_prompt_hook() {
        let events_of = |e| events(&hooks_for(e, &options(), &LIVE_EVENTS).unwrap());
        assert!(events_of(Engine::Claude).contains(&"UserPromptSubmit".to_string()));
        let claude = hooks_for(Engine::Claude, &options(), &LIVE_EVENTS).unwrap();
        assert_eq!(claude["hooks"]["PostToolUse"][0]["matcher"], "*", "messages after any tool call: {claude}");
        assert_eq!(events_of(Engine::Gemini), ["SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent"]);
        assert_eq!(events_of(Engine::Codex), ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]);
    }
}
