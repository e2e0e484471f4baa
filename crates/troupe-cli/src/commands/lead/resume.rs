use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;
use troupe_lead::review::{ReviewKind, files};

use super::{LeadFlags, ReviewFlags};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::project::find;

/// Continue an interrupted or escalated feature from spec.yaml, tasks.yaml and
/// the board. Completed tasks are never redone. Like `troupe run`, it includes
/// the design review (unless the last one passed) and the impl review. It makes
/// the choices the run it continues was given (--engine, --no-review, --review,
/// --consensus, --threshold, --no-commit, --script) unless told otherwise here.
/// troupe never resumes by itself.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The feature.
    pub feature: String,
    #[command(flatten)]
    pub reviews: ReviewFlags,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, mut args: ResumeArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    super::check_state(&project)?;
    if let Some(recalled) = super::choices::recall(&project, &args.feature) {
        super::choices::apply(&recalled, &mut args.flags, &mut args.reviews);
    }
    super::choices::record(&project, &args.feature, &args.flags, Some(&args.reviews));
    let job = match args.reviews.resolve(&project, &args.feature)? {
        None => Job::Resume,
        Some(options) => {
            let path = files::verdicts_file(project.layout(), &args.feature);
            let md = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => {
                    return Err(CliError::internal(format!("cannot read {}", path.display())).with_source(&e));
                }
            };
            Job::ResumeReviewed {
                options,
                design_passed: last_round_passed(&md, ReviewKind::Design),
                impl_passed: last_round_passed(&md, ReviewKind::Impl),
            }
        }
    };
    super::drive(g, &project, &args.feature, job, &args.flags)
}

/// Did the last `kind` round in `verdicts.md` pass (GO or CONDITIONAL)? An
/// interrupted review, or one that ended NO-GO, runs again on resume.
fn last_round_passed(verdicts_md: &str, kind: ReviewKind) -> bool {
    let kind = kind.to_string();
    troupe_lead::review::record::rounds(verdicts_md)
        .iter()
        .rev()
        .find(|r| r.kind == kind)
        .is_some_and(|r| matches!(r.verdict.as_str(), "GO" | "CONDITIONAL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_round_of_a_kind_counts() {
        let md = "## [B1] design | t | v1.0 | runs:1 | threshold:1/1\n- verdict: NO-GO\n\n\
                  ## [B2] design | t | v1.0 | runs:1 | threshold:1/1\n- verdict: CONDITIONAL\n\n\
                  ## [B3] impl | t | v1.0 | runs:1 | threshold:1/1\n- verdict: GO\n\n\
                  ## [B4] impl | t | v1.0 | runs:1 | threshold:1/1\n- verdict: NO-GO\n";
        assert!(last_round_passed(md, ReviewKind::Design));
        assert!(!last_round_passed(md, ReviewKind::Impl));
        assert!(!last_round_passed("", ReviewKind::Design));
    }
}
