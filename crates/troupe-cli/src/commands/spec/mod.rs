//! `troupe spec …`: create, inspect, gate, block, unblock and revise specs.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod block;
mod gate;
mod list;
mod new;
mod revise;
mod show;
mod unblock;

#[derive(Debug, Subcommand)]
pub enum SpecCommand {
    /// Create a spec in phase `initialized`.
    New(new::NewArgs),
    /// List every spec with its phase.
    List(list::ListArgs),
    /// Show one spec: phase, versions, blocking, counters, changelog.
    Show(show::ShowArgs),
    /// Check whether an operation may run now (exit 0) or not (exit 1, with the reason).
    Gate(gate::GateArgs),
    /// Block a spec on another feature, remembering its phase.
    Block(block::BlockArgs),
    /// Unblock a spec, restoring the phase it was blocked at.
    Unblock(unblock::UnblockArgs),
    /// Start a revision: implementation-complete → design-generated.
    Revise(revise::ReviseArgs),
}

pub fn run(g: &GlobalArgs, cmd: SpecCommand) -> CliResult<ExitCode> {
    match cmd {
        SpecCommand::New(a) => new::run(g, a),
        SpecCommand::List(a) => list::run(g, a),
        SpecCommand::Show(a) => show::run(g, a),
        SpecCommand::Gate(a) => gate::run(g, a),
        SpecCommand::Block(a) => block::run(g, a),
        SpecCommand::Unblock(a) => unblock::run(g, a),
        SpecCommand::Revise(a) => revise::run(g, a),
    }
}

/// One-line JSON summary of a spec, shared by the verbs that change one.
pub(crate) fn summary(spec: &troupe_core::spec::Spec) -> serde_json::Value {
    serde_json::json!({
        "feature": spec.feature_name,
        "phase": spec.phase.as_str(),
        "version": spec.version,
        "blocked_by": spec.blocked_by(),
        "updated_at": spec.updated_at.to_string(),
    })
}
