//! troupe's domain, with no IO: spec state and phase gates, artifact ownership,
//! task plans and their waves, review formats, completion reports.
//!
//! Everything here takes text and timestamps in and gives values and errors out.
//! The shells around it (`troupe-project` for files, `troupe-store` for the
//! database, `troupe-engine` for processes, `troupe-lead` for the pipeline) do the IO.
//!
//! Key types: [`spec::Spec`] (spec.yaml) with its transitions, [`gate::check`]
//! (the phase gate), [`ownership::may_write`] (artifact ownership), [`role::Role`].
//!
//! ```
//! use troupe_core::spec::Spec;
//! use troupe_core::gate::{check, Operation};
//!
//! let now = "2026-01-01T00:00:00Z".parse().unwrap();
//! let spec = Spec::new("login", now);
//! assert!(check(&spec, Operation::Design).is_ok());
//! assert!(check(&spec, Operation::Impl).is_err());
//! ```
#![deny(missing_docs)]

pub mod approval;
pub mod config;
pub mod consensus;
pub mod cpf;
pub mod event;
pub mod gate;
pub mod hash;
pub mod layout;
pub mod liveness;
pub mod names;
pub mod ownership;
pub mod phase;
pub mod plan;
pub mod rbac;
pub mod report;
pub mod roadmap;
pub mod role;
pub mod spec;
pub mod tools;
pub mod usage;
