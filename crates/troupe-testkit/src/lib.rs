//! Test-only helpers for troupe: stub model servers that the real agent CLIs
//! talk to offline, per-CLI scratch setup, and a scripted fake agent.
//!
//! The real CLIs (Claude Code, Gemini CLI, Codex, OpenCode) are installed by
//! `scripts/install-peers` into `.peers/`; [`peers::bin`] finds them. Each stub
//! server replays a [`Script`] of [`Turn`]s, choosing the turn from the
//! conversation it receives, so the CLI executes real tools between turns.
//!
//! ```no_run
//! use serde_json::json;
//! use troupe_testkit::{anthropic::AnthropicStub, claude::Claude, Script, Turn};
//!
//! let stub = AnthropicStub::start(Script::new([
//!     Turn::tool("Write", json!({"file_path": "/tmp/x/hello.txt", "content": "hi\n"})),
//!     Turn::text("Done."),
//! ]));
//! let claude = Claude::new(&stub.url());
//! let out = claude.command("write hello", "/tmp/x").output().unwrap();
//! assert!(out.status.success());
//! ```
#![deny(missing_docs)]

pub mod anthropic;
pub mod chat;
pub mod claude;
pub mod codex;
pub mod fake_agent;
pub mod gemini;
pub mod gemini_cli;
pub mod netns;
pub mod obedient;
pub mod opencode;
pub mod peers;
pub mod postgres;
pub mod responses;
mod script;
mod server;
pub mod sse;

pub use script::{Conversation, HttpError, Responder, Script, ToolCall, ToolInput, Turn};
pub use server::{Recorded, StubServer};
