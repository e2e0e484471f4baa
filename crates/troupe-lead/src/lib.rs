//! The Lead: troupe's pipeline for one feature, seed 000 run as a program.
//!
//! The decisions are troupe-machine's sans-IO state machine, re-exported here
//! as [`machine`], [`plan`], [`roles`] and [`review`]; this crate carries them
//! out:
//!
//! - [`driver`]: the async loop that executes the machine's commands with real
//!   processes, files, the store and git, and feeds the results back as events.
//! - [`review::files`]: the file side of the review pipeline's commands.
//! - [`replay`]: a recorded run's teammates as a script for the `scripted`
//!   engine (troupe-scripted), and the comparison of two runs.
//!
//! ```
//! use troupe_core::spec::Spec;
//! use troupe_lead::machine::{Command, Job, Lead, LeadConfig};
//!
//! let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
//! let mut lead = Lead::new(Spec::new("login", now), Job::Design, LeadConfig::default(), now);
//! lead.start(now);
//! assert!(std::iter::from_fn(|| lead.poll_command()).any(|c| matches!(c, Command::Spawn(_))));
//! ```
#![deny(missing_docs)]

pub mod driver;
pub mod replay;

pub use troupe_machine::{machine, plan, roles};

/// The review pipeline: troupe-machine's stage, and [`files`](review::files),
/// the driver's side of its [`ReviewCommand`](review::ReviewCommand)s.
pub mod review {
    pub use troupe_machine::review::*;

    pub mod files;
}
