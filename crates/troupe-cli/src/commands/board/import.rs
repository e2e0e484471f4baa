use std::process::ExitCode;

use clap::Args;
use troupe_core::plan::TaskPlan;
use troupe_store::ImportOutcome;
use troupe_store::plan::plan_tasks;

use super::{actor, open_store_in, store_error};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};

/// Load a feature's tasks.yaml onto the board: each work item becomes a task
/// `<feature>/<id>`, `depends` becomes blocked-by, groups give waves and files.
/// Importing the same plan again changes nothing; a changed plan is refused with
/// what changed, unless `--replace` says it supersedes the old one.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The feature whose `.troupe/specs/<feature>/tasks.yaml` to import.
    pub feature: String,
    /// Replace the plan the board holds for this feature with this one: the old
    /// plan's tasks leave the board (refused while one is in progress).
    #[arg(long)]
    pub replace: bool,
}

pub fn run(g: &GlobalArgs, args: ImportArgs) -> CliResult<ExitCode> {
    if !troupe_core::layout::is_valid_feature_name(&args.feature) {
        return Err(CliError::user(format!("`{}` is not a feature name", args.feature))
            .with_hint("feature names are lowercase letters, digits, '-', '_' or '.'"));
    }
    let project = crate::project::find(g)?;
    let path = project.layout().tasks_file(&args.feature);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CliError::user(format!("{} does not exist", path.display())).with_hint(format!(
                "the TaskGenerator writes it during `troupe impl {}`; `troupe spec list` shows the features",
                args.feature
            )));
        }
        Err(e) => return Err(CliError::internal(format!("cannot read {}", path.display())).with_source(&e)),
    };
    let plan = TaskPlan::from_yaml(&text).map_err(|e| {
        CliError::config(format!("{} is not a valid task plan", path.display()))
            .with_source(&e)
            .with_hint(format!("`troupe tasks validate {}` lists every problem", args.feature))
    })?;
    let checked = plan.check().map_err(|errors| {
        let mut err = CliError::config(format!("{} does not validate", path.display()));
        for e in &errors.errors {
            err.causes.push(e.to_string());
        }
        err.with_hint("fix tasks.yaml, then import again; nothing was put on the board")
    })?;
    let tasks = plan_tasks(&args.feature, &checked, &actor());
    let store = open_store_in(&project)?;
    let outcome =
        if args.replace { store.replace_plan(tasks) } else { store.import_plan(tasks) }.map_err(store_error)?;
    if g.json {
        print_json(&serde_json::json!({ "feature": args.feature, "result": outcome }));
    } else {
        match outcome {
            ImportOutcome::Imported { created, completed } => {
                let done = if completed > 0 { format!(" ({completed} already done)") } else { String::new() };
                print_line(&format!("imported {created} tasks of {}{done}", args.feature));
            }
            ImportOutcome::Unchanged => {
                print_line(&format!("the board already holds this plan of {}; nothing changed", args.feature))
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
