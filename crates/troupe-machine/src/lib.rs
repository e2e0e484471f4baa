//! The Lead's decisions as a sans-IO state machine, in the shape of quinn's
//! protocol crate: troupe-lead's driver hands it events and the current time,
//! and carries out the commands it emits.
//!
//! - [`machine`]: the [`Lead`](machine::Lead). Events in ([`machine::Event`]:
//!   a teammate ended, a gate passed, a message arrived), commands out
//!   ([`machine::Command`]: spawn, run a gate, mark tasks done, save spec.yaml,
//!   commit). Which completion report of a teammate counts is decided here
//!   too ([`machine::Ending`]). Every branch is a unit test with virtual time.
//! - [`review`]: the review pipeline as a [`machine::Stage`].
//! - [`plan`]: the plan as the Lead schedules it (groups, tasks, dependencies).
//! - [`roles`]: the role prompt templates and the spawn prompt rendered from
//!   the code's constants.
//!
//! This crate depends on troupe-core and data crates only, so Cargo enforces
//! what the Lead's machine may not do: no tokio, no processes, no files, no
//! database.
//!
//! ```
//! use troupe_core::spec::Spec;
//! use troupe_machine::machine::{Command, Job, Lead, LeadConfig};
//!
//! let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
//! let mut lead = Lead::new(Spec::new("login", now), Job::Design, LeadConfig::default(), now);
//! lead.start(now);
//! let mut spawned = false;
//! while let Some(cmd) = lead.poll_command() {
//!     spawned |= matches!(cmd, Command::Spawn(_));
//! }
//! assert!(spawned, "the Architect is spawned after the gate passes");
//! ```
#![deny(missing_docs)]

pub mod machine;
pub mod plan;
pub mod review;
pub mod roles;
