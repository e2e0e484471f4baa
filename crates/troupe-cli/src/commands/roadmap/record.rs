//! Recording `troupe roadmap run` for `troupe replay`: its start before any
//! feature's run, its end with every feature's run and board
//! ([`troupe_lead::driver::record::start_roadmap`]). As for a feature's run,
//! recording never stops the roadmap: a failure is a note.

use std::process::ExitCode;

use clap::Parser;
use jiff::Timestamp;
use troupe_core::roadmap::FeatureStatus;
use troupe_lead::driver::record::{self, Recording, RoadmapStart};
use troupe_project::Project;

use crate::commands::lead::{LeadFlags, ReviewFlags};
use crate::error::CliResult;
use crate::output::note;

/// The review flags as they were given, to give them again on replay.
pub fn review_args(r: &ReviewFlags) -> Vec<String> {
    let mut out = Vec::new();
    if r.review {
        out.push("--review".to_string());
    }
    if r.no_review {
        out.push("--no-review".to_string());
    }
    for (flag, n) in [("--consensus", r.consensus), ("--threshold", r.threshold)] {
        if let Some(n) = n {
            out.extend([flag.to_string(), n.to_string()]);
        }
    }
    out
}

/// [`review_args`] read back.
pub fn review_flags(args: &[String]) -> Result<ReviewFlags, String> {
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        reviews: ReviewFlags,
    }
    let argv = std::iter::once("troupe".to_string()).chain(args.iter().cloned());
    Flags::try_parse_from(argv).map(|f| f.reviews).map_err(|e| e.to_string())
}

/// Record the roadmap run's start; `None` (and a note) when it cannot be.
pub fn start(project: &Project, reviews: &ReviewFlags, flags: &LeadFlags) -> Option<Recording> {
    let layout = project.layout();
    let run = format!("roadmap@{}", Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ"));
    let recorded = troupe_lead::driver::load_config(project)
        .map_err(|e| e.to_string())
        .and_then(|config| troupe_store::place(layout, &config.store).map_err(|e| e.to_string()))
        .and_then(|place| {
            let start = RoadmapStart {
                run: &run,
                root: project.root(),
                store_place: &place,
                engine: flags.engine.clone(),
                commit: !flags.no_commit,
                budget: flags.budget,
                review_args: review_args(reviews),
            };
            record::start_roadmap(layout, start)
        });
    recorded.map_err(|e| note(&format!("this roadmap run is not recorded for `troupe replay`: {e}"))).ok()
}

/// Record how the roadmap run ended.
pub fn finish(project: &Project, recording: Option<Recording>, result: &CliResult<ExitCode>) {
    let Some(recording) = recording else { return };
    let outcome = match result {
        Err(_) => "failed",
        Ok(code) if *code == ExitCode::from(130) => "interrupted",
        Ok(_) => match troupe_project::roadmap::status(project) {
            Ok(view) if view.iter().all(|f| matches!(f.status, FeatureStatus::Done | FeatureStatus::Skipped)) => {
                "completed"
            }
            _ => "incomplete",
        },
    };
    let layout = project.layout();
    let finished = troupe_lead::driver::load_config(project)
        .map_err(|e| e.to_string())
        .and_then(|config| troupe_store::open(layout, &config.store).map_err(|e| e.to_string()))
        .and_then(|store| recording.finish_roadmap(layout, store.as_ref(), outcome));
    if let Err(e) = finished {
        note(&format!("this roadmap run is not recorded for `troupe replay`: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_flags_read_back_as_given() {
        let given = ReviewFlags { review: true, no_review: false, consensus: Some(3), threshold: Some(2) };
        let back = review_flags(&review_args(&given)).unwrap();
        assert_eq!((back.review, back.no_review, back.consensus, back.threshold), (true, false, Some(3), Some(2)));
        assert!(review_flags(&review_args(&ReviewFlags { no_review: true, ..Default::default() })).unwrap().no_review);
    }
}
