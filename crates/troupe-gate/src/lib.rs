//! troupe's hook handlers: what `troupe hook <engine> <event>` answers.
//!
//! Engines (Claude Code, Gemini CLI, Codex, the OpenCode bridge plugin) call
//! `troupe hook` before and after tool calls, when a prompt is submitted and when
//! the agent wants to stop. This crate decides, in a pure function, what to
//! answer — the skill gate, the Stop gate, phase guidance, ownership of files,
//! quality gates — and renders the answer in the engine's own contract.
//!
//! The shape: [`input::parse`] turns the engine's JSON into a [`input::HookInput`];
//! [`decide::decide`] takes it with the session's [`markers::SessionState`] and a
//! [`decide::Context`] (config, teammate identity) and returns an
//! [`decide::Outcome`]: an answer plus the marker [`decide::Effect`]s to apply;
//! [`answer::render`] writes the answer as the engine expects. [`run::run_hook`]
//! is the thin IO layer around them (read config and markers, run quality gate
//! commands, apply effects). Every error on the way becomes a deny that names the
//! failed check: hooks fail closed.
//!
//! ```
//! use troupe_gate::{decide, input, markers::SessionState, Engine, Event};
//!
//! let raw = br#"{"session_id":"s1","cwd":"/p","hook_event_name":"PreToolUse",
//!   "tool_name":"Write","tool_input":{"file_path":"/p/src/main.rs","content":"fn main(){}"}}"#;
//! let hook = input::parse(Engine::Claude, Event::PreToolUse, raw).unwrap();
//! let ctx = decide::Context::new(Engine::Claude);
//! let outcome = decide::decide(&ctx, &hook, &SessionState::default(), &mut |_| None);
//! assert!(outcome.answer.is_refusal());
//! ```
#![deny(missing_docs)]

pub mod answer;
pub mod conventions;
pub mod decide;
pub mod delivery;
pub mod denials;
pub mod engine;
pub mod heartbeat;
pub mod input;
pub mod install;
pub mod markers;
pub mod modes;
pub mod phase;
pub mod postrun;
pub mod quality;
pub mod run;
pub mod shell;
pub mod skill_cache;
pub mod skills;
pub mod teammate;
pub mod tools;

pub use engine::{Engine, Event};
