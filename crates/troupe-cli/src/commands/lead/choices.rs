//! A run's choices (`--engine`, `--review`/`--no-review`, `--consensus`,
//! `--threshold`, `--no-commit`, `--script`), recorded with the run so that
//! `troupe resume` makes the same ones unless its own flags say otherwise.
//! They live in `.troupe/state/runs/<feature>.json` (troupe's private state).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use troupe_project::Project;

use super::{LeadFlags, ReviewFlags};

/// What a run was told on its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choices {
    /// `--engine`.
    pub engine: Option<String>,
    /// `--review` (`Some(true)`), `--no-review` (`Some(false)`), else the config decides.
    pub review: Option<bool>,
    /// `--consensus`.
    pub consensus: Option<usize>,
    /// `--threshold`.
    pub threshold: Option<usize>,
    /// `--no-commit`.
    pub no_commit: bool,
    /// `--script`.
    pub script: Option<PathBuf>,
}

fn path(project: &Project, feature: &str) -> PathBuf {
    project.layout().state_dir().join("runs").join(format!("{feature}.json"))
}

/// Record the choices of a run of `feature` (`reviews` is `None` for a step
/// that does not review: a design or an implementation alone). A file that
/// cannot be written only costs resume its memory, so it is logged, not fatal.
pub fn record(project: &Project, feature: &str, flags: &LeadFlags, reviews: Option<&ReviewFlags>) {
    let choices = Choices {
        engine: flags.engine.clone(),
        review: reviews.and_then(|r| match (r.no_review, r.review || r.consensus.is_some()) {
            (true, _) => Some(false),
            (false, true) => Some(true),
            (false, false) => None,
        }),
        consensus: reviews.and_then(|r| r.consensus),
        threshold: reviews.and_then(|r| r.threshold),
        no_commit: flags.no_commit,
        script: flags.script.clone(),
    };
    let text = serde_json::to_vec_pretty(&choices).expect("choices serialize");
    if let Err(e) = troupe_project::write_atomic(&path(project, feature), &text) {
        tracing::warn!("cannot record the run's choices for troupe resume: {e}");
    }
}

/// The recorded choices of `feature`'s last run, if any.
pub fn recall(project: &Project, feature: &str) -> Option<Choices> {
    let text = std::fs::read(path(project, feature)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Fill in what `resume`'s own flags leave open from the last run's choices.
pub fn apply(recalled: &Choices, flags: &mut LeadFlags, reviews: &mut ReviewFlags) {
    if flags.engine.is_none() {
        flags.engine.clone_from(&recalled.engine);
    }
    if flags.script.is_none() {
        flags.script.clone_from(&recalled.script);
    }
    if !flags.commit && recalled.no_commit {
        flags.no_commit = true;
    }
    let reviews_given =
        reviews.review || reviews.no_review || reviews.consensus.is_some() || reviews.threshold.is_some();
    if !reviews_given {
        match recalled.review {
            Some(false) => reviews.no_review = true,
            Some(true) => {
                reviews.review = true;
                reviews.consensus = recalled.consensus;
                reviews.threshold = recalled.threshold;
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> LeadFlags {
        LeadFlags { engine: None, no_commit: false, commit: false, script: None, serve: None, budget: None }
    }

    #[test]
    fn resume_takes_what_it_was_not_told() {
        let recalled =
            Choices { engine: Some("scripted".into()), review: Some(false), no_commit: true, ..Choices::default() };
        let (mut f, mut r) = (flags(), ReviewFlags::default());
        apply(&recalled, &mut f, &mut r);
        assert_eq!((f.engine.as_deref(), f.no_commit, r.no_review), (Some("scripted"), true, true));

        // What resume is told wins.
        let (mut f, mut r) = (flags(), ReviewFlags { review: true, ..ReviewFlags::default() });
        f.engine = Some("claude".into());
        f.commit = true;
        apply(&recalled, &mut f, &mut r);
        assert_eq!((f.engine.as_deref(), f.no_commit, r.no_review, r.review), (Some("claude"), false, false, true));

        let recalled = Choices { review: Some(true), consensus: Some(3), ..Choices::default() };
        let (mut f, mut r) = (flags(), ReviewFlags::default());
        apply(&recalled, &mut f, &mut r);
        assert_eq!((r.review, r.consensus), (true, Some(3)));
    }
}
