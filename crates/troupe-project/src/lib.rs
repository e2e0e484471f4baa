//! The filesystem side of troupe's domain. `troupe-core` knows what spec.yaml
//! means; this crate knows where it is and how to change it without losing it:
//! finding the project root, atomic writes (temp file + rename), and loading
//! files with errors that name the file, line and column.
//!
//! Every crate that writes a file troupe owns writes it through [`write_atomic`].
#![deny(missing_docs)]

pub mod config;
pub mod fsutil;
pub mod git;
pub mod project;
pub mod roadmap;
pub mod specs;

pub use fsutil::write_atomic;
pub use project::{Project, ProjectError};

/// The current time, to the second: troupe's files record times people read,
/// and sub-second digits only add noise to diffs.
pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now())
}
