//! troupe's engines: which agent CLI runs a teammate, how it is invoked, how
//! its output stream is normalised, and how its process is supervised.
//!
//! Only this crate knows the CLIs' JSON wire formats; everything else sees
//! [`troupe_core::event::AgentEvent`]. Key items: [`parse::StreamFormat`] and
//! [`parse::Normaliser`] (bytes in, events out).
//!
//! ```
//! use troupe_engine::parse::{StreamFormat, parse_output};
//! use troupe_core::event::ResultType;
//!
//! let stream = br#"{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"hi","session_id":"s"}"#;
//! let out = parse_output(StreamFormat::Claude, stream, Some(0));
//! assert_eq!(out.kind, ResultType::Success);
//! assert_eq!(out.result.as_deref(), Some("hi"));
//! ```
#![deny(missing_docs)]

pub mod args;
pub mod ledger;
pub mod parse;
pub mod registry;
pub mod resolve;
pub mod sandbox;

pub use args::{Invocation, RunOptions};
pub use registry::{Engine, EngineKind, NotInstalled, Registry, UnknownEngine};
pub mod supervisor;
