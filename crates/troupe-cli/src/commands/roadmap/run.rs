use std::process::ExitCode;

use clap::Args;
use troupe_core::roadmap::FeatureStatus;
use troupe_lead::machine::Job;
use troupe_lead::roadmap as rm;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::commands::lead::{LeadFlags, drive_report, print_report};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};
use crate::project::{find, spec_error};

/// Run the roadmap: every feature whose dependencies are done (or skipped)
/// runs its full pipeline (design, design review, implementation, impl review),
/// wave by wave, committing as `Wave {N}: ...`. When a feature fails, every
/// feature downstream is blocked (`troupe roadmap fix|skip` unblocks them) and
/// independent features go on.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Skip the design and impl reviews.
    #[arg(long)]
    pub no_review: bool,
    /// Review pipelines per review (consensus mode).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub consensus: usize,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    crate::commands::lead::preflight(&project, &args.flags)?;
    let specs = Specs::new(&project);
    let mut ran: Vec<serde_json::Value> = Vec::new();
    loop {
        let roadmap = rm::require(&project).map_err(super::roadmap_error)?;
        let mut next = None;
        for feature in roadmap.ready() {
            let spec = specs.load(feature).map_err(spec_error)?;
            if spec.phase == troupe_core::phase::Phase::ImplementationComplete {
                // Built before (or outside) this run: nothing to do but record it.
                rm::set_status(&project, feature, FeatureStatus::Done).map_err(super::roadmap_error)?;
                next = Some(None);
                break;
            }
            if rm::runnable(&spec) {
                next = Some(Some((feature.to_string(), roadmap.wave_of(feature).unwrap_or(1))));
                break;
            }
        }
        let (feature, wave) = match next {
            None => break,
            Some(None) => continue,
            Some(Some(f)) => f,
        };
        let reviews = if args.no_review {
            None
        } else {
            Some(crate::commands::review::options(&project, &feature, args.consensus, None, true)?)
        };
        note(&format!("roadmap: wave {wave}: {feature}"));
        let report = drive_report(g, &project, &feature, Job::InRoadmap { wave, reviews }, &args.flags)?;
        if !g.json {
            print_report(g, &report);
        }
        let completed = report.outcome == "completed";
        let blocked = if completed {
            rm::set_status(&project, &feature, FeatureStatus::Done).map_err(super::roadmap_error)?;
            Vec::new()
        } else {
            let out = rm::fail(&project, &feature, troupe_project::now()).map_err(super::roadmap_error)?;
            for o in &out {
                note(&format!("roadmap: {}", super::outcome_line(o)));
            }
            out
        };
        ran.push(serde_json::json!({
            "feature": feature,
            "wave": wave,
            "outcome": report.outcome,
            "blocked": super::outcomes_json(&blocked),
        }));
    }
    let view = rm::status(&project).map_err(super::roadmap_error)?;
    let complete = view.iter().all(|f| matches!(f.status, FeatureStatus::Done | FeatureStatus::Skipped));
    if g.json {
        print_json(&serde_json::json!({ "ran": ran, "status": view, "complete": complete }));
    }
    if complete {
        return Ok(ExitCode::SUCCESS);
    }
    let stuck: Vec<String> = view
        .iter()
        .filter(|f| !matches!(f.status, FeatureStatus::Done | FeatureStatus::Skipped))
        .map(|f| format!("{} ({}, {})", f.feature, f.status, f.phase))
        .collect();
    let err = CliError::user(format!("the roadmap is not complete: {}", stuck.join(", ")))
        .with_hint("see `troupe roadmap status`; after fixing a failed feature run `troupe roadmap fix <feature>` (or `skip`), then `troupe roadmap run`");
    if g.json {
        // The JSON document above already says where it stands.
        return Ok(ExitCode::from(1));
    }
    Err(err)
}
