//! The review pipeline (seed 000 Spec 7, 9.4–9.5, 10, 11): Inspectors and an
//! Auditor spawned at once, the recovery protocols for a silent Inspector and
//! a silent Auditor, consensus over N pipelines, the verdict record, and the
//! auto-fix loop.
//!
//! Like the rest of [`crate::machine`], this is sans-IO: [`ReviewStage`] is a
//! [`Stage`](crate::machine::Stage) driven by the [`Lead`](crate::machine::Lead)
//! (`handle_event(event, now)`, `handle_timeout(now)`, `poll_command()`,
//! `poll_timeout()`), so every recovery path is a unit test with virtual time.
//! Its teammate commands are the Lead's own (`Spawn`, `Resume` for the nudge,
//! `ShutDown`, `SendMessage` for the recovery notice); its file work is
//! [`Command::Review`](crate::machine::Command::Review) carrying a
//! [`ReviewCommand`], which the driver carries out (troupe-lead's
//! `review::files::apply`, the only IO of a review).
//!
//! - [`perspectives`]: review kinds and the Inspectors' role templates.
//! - [`pipeline`]: one pipeline with both recovery protocols.
//! - [`policy`]: what a verdict makes the Lead do.
//! - [`fix`]: who fixes what after a NO-GO.
//! - [`record`]: `verdicts.md` entries and `B{seq}` numbering.
//!
//! ```
//! use troupe_core::spec::Spec;
//! use troupe_machine::machine::{Command, Lead, LeadConfig, Stage};
//! use troupe_machine::review::{ReviewKind, ReviewOptions, ReviewStage};
//!
//! let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
//! let mut spec = Spec::new("login", now);
//! spec.mark_design_generated(now, "design").unwrap();
//! let stage: Box<dyn Stage> = Box::new(ReviewStage::new(ReviewKind::Design, ReviewOptions::default()));
//! let mut lead = Lead::with_stages(spec, LeadConfig::default(), now, [stage].into());
//! lead.start(now);
//! let spawned = std::iter::from_fn(|| lead.poll_command()).filter(|c| matches!(c, Command::Spawn(_))).count();
//! assert_eq!(spawned, 7, "six Inspectors and the Auditor, at once");
//! ```

use serde::{Deserialize, Serialize};

pub mod fix;
pub mod perspectives;
pub mod pipeline;
pub mod policy;
pub mod record;
mod stage;
#[cfg(test)]
mod tests;

pub use perspectives::{Perspective, ReviewKind, UnknownReviewKind, role_templates};
pub use pipeline::{NUDGE, RECOVERY_MODE, recovery_notice};
pub use stage::{ReviewOptions, ReviewStage, RoundSummary, SeqCounter};

/// File work of a review round, carried out by the driver (troupe-lead's `review::files::apply`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviewCommand {
    /// Round `B{seq}` starts: `reviews/active/` exists and is empty (files an
    /// interrupted round left are moved to `reviews/interrupted-before-B{seq}/`).
    BeginRound {
        /// The feature.
        feature: String,
        /// The round's number.
        seq: u32,
    },
    /// Write a file in `reviews/active/` (the Lead's verdict copy, a consensus
    /// pipeline's verdict, the aggregate).
    WriteActive {
        /// The feature.
        feature: String,
        /// A plain file name (`verdict.cpf`, `verdict-p2.cpf`).
        file: String,
        /// Its contents.
        contents: String,
        /// Replace an existing file; otherwise an existing file (the Auditor's own) wins.
        overwrite: bool,
    },
    /// Move `reviews/active/` to `reviews/B{seq}/` (never overwriting an archive).
    Archive {
        /// The feature.
        feature: String,
        /// The round's number.
        seq: u32,
    },
    /// Append an entry to the feature's `verdicts.md`.
    AppendVerdicts {
        /// The feature.
        feature: String,
        /// The entry, from [`record::entry`].
        entry: String,
    },
}
