use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;
use troupe_project::Project;
use troupe_project::specs::{SpecFileError, Specs};

use super::{LeadFlags, ReviewFlags};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::project::{find, spec_error};

/// Design and implement a feature in one go, with live progress and a final
/// summary: design, design review, implementation, impl review (the reviews as
/// `troupe review` runs them, with the auto-fix loop; `[review] in_run` in
/// .troupe/config.toml or --no-review turns them off). Creates the spec if it
/// does not exist.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The feature.
    pub feature: String,
    /// What the feature is for (needed only when its spec does not exist yet;
    /// an existing spec, a revised one too, keeps its own).
    pub description: Option<String>,
    #[command(flatten)]
    pub reviews: ReviewFlags,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    super::preflight(&project, &args.flags)?;
    let reviews = args.reviews.resolve(&project, &args.feature)?;
    super::choices::record(&project, &args.feature, &args.flags, Some(&args.reviews));
    ensure_spec(&project, &args.feature, args.description.as_deref())?;
    let job = match reviews {
        Some(options) => Job::RunReviewed(options),
        None => Job::Run,
    };
    super::drive(g, &project, &args.feature, job, &args.flags)
}

/// Create the spec unless it exists. An existing spec is left as it is.
pub fn ensure_spec(project: &Project, feature: &str, description: Option<&str>) -> CliResult<()> {
    let specs = Specs::new(project);
    match specs.load(feature) {
        Ok(_) => Ok(()),
        Err(SpecFileError::NotFound { .. }) => {
            let description = description.unwrap_or("").trim();
            if description.is_empty() {
                return Err(CliError::user(format!("there is no spec named '{feature}' yet"))
                    .with_hint(format!("describe it: `troupe design {feature} --description \"...\"`")));
            }
            specs.create(feature, description, jiff::Timestamp::now()).map(|_| ()).map_err(spec_error)
        }
        Err(e) => Err(spec_error(e)),
    }
}
