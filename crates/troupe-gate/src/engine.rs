//! The engines troupe hooks into, and the hook events it handles, under one
//! vocabulary. Each engine's own event names map onto [`Event`].

use std::fmt;
use std::str::FromStr;

/// An engine whose hooks call `troupe hook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// Claude Code (`.claude/settings.json` hooks).
    Claude,
    /// Gemini CLI (`.gemini/settings.json` hooks).
    Gemini,
    /// Codex (`hooks.json`, Claude-style contract).
    Codex,
    /// OpenCode, through troupe's bridge plugin.
    OpenCode,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 4] = [Engine::Claude, Engine::Gemini, Engine::Codex, Engine::OpenCode];

    /// The name used on the command line and in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Claude => "claude",
            Engine::Gemini => "gemini",
            Engine::Codex => "codex",
            Engine::OpenCode => "opencode",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an engine or not an event of that engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Unknown engine.
    #[error("unknown engine '{0}' (expected claude, gemini, codex or opencode)")]
    Engine(String),
    /// Unknown event for the engine.
    #[error("unknown {engine} hook event '{name}' (expected one of: {expected})")]
    Event {
        /// The engine.
        engine: Engine,
        /// What was given.
        name: String,
        /// The events the engine has.
        expected: String,
    },
}

impl FromStr for Engine {
    type Err = NameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Engine::ALL.into_iter().find(|e| e.as_str().eq_ignore_ascii_case(s)).ok_or_else(|| NameError::Engine(s.into()))
    }
}

/// A hook event, in troupe's vocabulary (Claude Code's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A session starts (Gemini: SessionStart).
    SessionStart,
    /// A session ends (Gemini: SessionEnd).
    SessionEnd,
    /// The user submitted a prompt (Gemini: BeforeAgent).
    UserPromptSubmit,
    /// Before a tool runs (Gemini: BeforeTool).
    PreToolUse,
    /// After a tool ran (Gemini: AfterTool).
    PostToolUse,
    /// The agent wants to stop (Gemini: AfterAgent).
    Stop,
    /// A subagent wants to stop.
    SubagentStop,
    /// An Agent Teams task is being marked completed.
    TaskCompleted,
    /// An Agent Teams teammate is about to go idle.
    TeammateIdle,
    /// The context is about to be compacted.
    PreCompact,
}

impl Event {
    /// Claude Code's name, which is troupe's.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::SessionEnd => "SessionEnd",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::Stop => "Stop",
            Event::SubagentStop => "SubagentStop",
            Event::TaskCompleted => "TaskCompleted",
            Event::TeammateIdle => "TeammateIdle",
            Event::PreCompact => "PreCompact",
        }
    }

    /// The events each engine delivers to troupe, as (engine's name, event).
    pub fn names(engine: Engine) -> &'static [(&'static str, Event)] {
        match engine {
            Engine::Claude => &[
                ("SessionStart", Event::SessionStart),
                ("SessionEnd", Event::SessionEnd),
                ("UserPromptSubmit", Event::UserPromptSubmit),
                ("PreToolUse", Event::PreToolUse),
                ("PostToolUse", Event::PostToolUse),
                // A tool call that failed; handled like PostToolUse (after it in
                // this list, so that PostToolUse stays the event's own name).
                (crate::input::FAILURE, Event::PostToolUse),
                ("Stop", Event::Stop),
                ("SubagentStop", Event::SubagentStop),
                ("TaskCompleted", Event::TaskCompleted),
                ("TeammateIdle", Event::TeammateIdle),
                ("PreCompact", Event::PreCompact),
            ],
            Engine::Gemini => &[
                ("SessionStart", Event::SessionStart),
                ("SessionEnd", Event::SessionEnd),
                ("BeforeAgent", Event::UserPromptSubmit),
                ("BeforeTool", Event::PreToolUse),
                ("AfterTool", Event::PostToolUse),
                ("AfterAgent", Event::Stop),
                ("PreCompress", Event::PreCompact),
            ],
            Engine::Codex => &[
                ("SessionStart", Event::SessionStart),
                ("UserPromptSubmit", Event::UserPromptSubmit),
                ("PreToolUse", Event::PreToolUse),
                ("PostToolUse", Event::PostToolUse),
                ("Stop", Event::Stop),
            ],
            Engine::OpenCode => &[
                ("SessionStart", Event::SessionStart),
                ("PreToolUse", Event::PreToolUse),
                ("PostToolUse", Event::PostToolUse),
                ("Stop", Event::Stop),
            ],
        }
    }

    /// Parse `name` as an event of `engine` (case-insensitive).
    pub fn parse(engine: Engine, name: &str) -> Result<Event, NameError> {
        Event::names(engine).iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, e)| *e).ok_or_else(|| {
            NameError::Event {
                engine,
                name: name.into(),
                expected: Event::names(engine).iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            }
        })
    }

    /// The engine's own name for this event (what its output's `hookEventName` carries).
    pub fn engine_name(self, engine: Engine) -> &'static str {
        Event::names(engine).iter().find(|(_, e)| *e == self).map(|(n, _)| *n).unwrap_or(self.as_str())
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for engine in Engine::ALL {
            assert_eq!(engine.as_str().parse::<Engine>().unwrap(), engine);
            for (name, event) in Event::names(engine) {
                assert_eq!(Event::parse(engine, name).unwrap(), *event);
                if *name != crate::input::FAILURE {
                    assert_eq!(event.engine_name(engine), *name);
                }
            }
        }
        assert_eq!(Event::PostToolUse.engine_name(Engine::Claude), "PostToolUse");
        assert_eq!(Event::parse(Engine::Gemini, "beforetool").unwrap(), Event::PreToolUse);
        let err = Event::parse(Engine::Gemini, "PreToolUse").unwrap_err();
        assert!(err.to_string().contains("BeforeTool"), "{err}");
        assert!("vim".parse::<Engine>().is_err());
    }
}
