use std::process::ExitCode;

use clap::Args;
use troupe_lead::machine::Job;
use troupe_project::Project;
use troupe_project::specs::{SpecFileError, Specs};

use super::LeadFlags;
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::project::{find, spec_error};

/// Design and implement a feature in one go, with live progress and a final
/// summary. Creates the spec if it does not exist.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The feature.
    pub feature: String,
    /// What the feature is for.
    pub description: String,
    /// Review the design after design and the implementation after implementation
    /// (Inspectors + Auditor, auto-fix loop), as `troupe review` does.
    #[arg(long)]
    pub review: bool,
    /// With --review: review pipelines per review (consensus mode).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "review")]
    pub consensus: usize,
    #[command(flatten)]
    pub flags: LeadFlags,
}

pub fn run(g: &GlobalArgs, args: RunArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    super::preflight(&project, &args.flags)?;
    let job = if args.review {
        let options = crate::commands::review::options(&project, &args.feature, args.consensus, None, true)?;
        ensure_spec(&project, &args.feature, Some(&args.description))?;
        Job::RunReviewed(options)
    } else {
        ensure_spec(&project, &args.feature, Some(&args.description))?;
        Job::Run
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
