//! `troupe revise <feature> "<change>"`: the revision flow of seed 000 Spec 5.6
//! (implementation-complete → design-generated → the full pipeline), routed
//! through the roadmap when the feature is part of an active one (Spec 4.6–4.7).

use std::process::ExitCode;

use clap::Args;
use troupe_core::gate::{Operation, check};
use troupe_lead::machine::Job;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::commands::lead::{LeadFlags, drive};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line};
use crate::project::{find, spec_error};

/// Revise an implemented feature: its phase goes back to design-generated, the
/// version's minor part goes up, the change is added to the description the
/// Architect reads, and the full pipeline runs again (design, design review,
/// implementation, impl review). Inside an active roadmap the feature and the
/// finished features downstream of it are queued for `troupe roadmap run`.
#[derive(Debug, Args)]
pub struct ReviseArgs {
    /// The feature.
    pub feature: String,
    /// What changes, in a sentence or two.
    pub change: String,
    /// Only record the revision; do not run the pipeline.
    #[arg(long)]
    pub no_run: bool,
    /// Skip the design and impl reviews of the pipeline.
    #[arg(long)]
    pub no_review: bool,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: ReviseArgs) -> CliResult<ExitCode> {
    if args.change.trim().is_empty() {
        return Err(
            CliError::usage("the change is empty").with_hint("say what changes: troupe revise login \"add 2FA\"")
        );
    }
    let project = find(g)?;
    if !args.no_run {
        crate::commands::lead::preflight(&project, &args.flags)?;
    }
    let specs = Specs::new(&project);
    let current = specs.load(&args.feature).map_err(spec_error)?;
    check(&current, Operation::Revise).map_err(|e| CliError::user(e.to_string()))?;
    // A feature of a roadmap (finished or not) is revised through it.
    let in_roadmap = troupe_project::roadmap::load(&project)
        .map_err(super::roadmap::roadmap_error)?
        .is_some_and(|r| r.contains(&args.feature));
    let now = troupe_project::now();
    let change = args.change.trim().to_string();
    let (spec, ()) = specs
        .update(&args.feature, |s| {
            s.revise(now, &change)?;
            let entry = format!("Revision {}: {change}", s.version);
            s.description = if s.description.trim().is_empty() {
                entry
            } else {
                format!("{}\n\n{entry}", s.description.trim_end())
            };
            Ok(())
        })
        .map_err(spec_error)?;
    let queued = if in_roadmap {
        troupe_project::roadmap::revise(&project, &args.feature).map_err(super::roadmap::roadmap_error)?
    } else {
        Vec::new()
    };
    if args.no_run || in_roadmap {
        if g.json {
            print_json(&serde_json::json!({
                "feature": spec.feature_name,
                "phase": spec.phase.as_str(),
                "version": spec.version,
                "roadmap_queued": queued,
            }));
        } else if in_roadmap {
            print_line(&format!(
                "{} is in revision (version {}); queued in the roadmap: {}; next: `troupe roadmap run`",
                spec.feature_name,
                spec.version,
                queued.join(", ")
            ));
        } else {
            print_line(&format!(
                "{} is in revision (version {}); next: `troupe run {}`",
                spec.feature_name, spec.version, spec.feature_name
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    note(&format!("{} is in revision (version {}); running the pipeline", spec.feature_name, spec.version));
    let job = if args.no_review {
        Job::Run
    } else {
        Job::RunReviewed(crate::commands::review::options(&project, &args.feature, 1, None, true)?)
    };
    drive(g, &project, &args.feature, job, &args.flags)
}
