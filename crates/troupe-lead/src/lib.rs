//! The Lead: troupe's pipeline for one feature, seed 000 run as a program.
//!
//! - [`machine`]: a sans-IO state machine. Events in ([`machine::Event`]: a
//!   teammate finished, a gate passed, a message arrived), commands out
//!   ([`machine::Command`]: spawn, run a gate, mark tasks done, save spec.yaml,
//!   commit). It decides everything and does no IO; every branch is a unit test
//!   with virtual time.
//! - [`report`]: completion reports (`BUILDER_COMPLETE`, ...), parsed tolerantly.
//! - [`plan`]: the plan as the Lead schedules it (groups, tasks, dependencies).
//!
//! Stages are pluggable ([`machine::Stage`]): design and implementation live
//! here; the review pipeline adds its own stage in its own module.
//!
//! ```
//! use troupe_core::spec::Spec;
//! use troupe_lead::machine::{Command, Job, Lead, LeadConfig};
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

pub mod driver;
pub mod machine;
pub mod plan;
pub mod release;
pub mod review;
pub mod roadmap;
pub mod roles;
pub mod scripted;
