//! `troupe tasks …`: check a feature's task plan and show its waves.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use troupe_core::layout::is_valid_feature_name;
use troupe_core::plan::{Schedule, TaskPlan, ValidationErrors};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use crate::project::find;

mod validate;
mod waves;

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Check `.troupe/specs/<feature>/tasks.yaml`: ids, dependencies, cycles, groups, files, wave order.
    Validate(validate::ValidateArgs),
    /// Show the plan's waves: the groups (one Builder each) that run in parallel, their tasks and files.
    Waves(waves::WavesArgs),
}

pub fn run(g: &GlobalArgs, cmd: TasksCommand) -> CliResult<ExitCode> {
    match cmd {
        TasksCommand::Validate(a) => validate::run(g, a),
        TasksCommand::Waves(a) => waves::run(g, a),
    }
}

/// A feature's plan, read and checked.
struct Loaded {
    /// The file, relative to the project root, for messages.
    shown: String,
    plan: TaskPlan,
    checked: Result<Schedule, ValidationErrors>,
}

/// Read and validate the plan of `feature`. A missing or unreadable file is
/// an error; an invalid plan is returned for the verb to report.
fn load(g: &GlobalArgs, feature: &str) -> CliResult<Loaded> {
    if !is_valid_feature_name(feature) {
        return Err(CliError::user(format!("'{feature}' is not a feature name"))
            .with_hint("feature names are lowercase letters, digits, '-', '_' and '.'"));
    }
    let project = find(g)?;
    let layout = project.layout();
    let path: PathBuf = layout.tasks_file(feature);
    let shown = path.strip_prefix(project.root()).unwrap_or(&path).display().to_string();
    if !layout.spec_dir(feature).is_dir() {
        return Err(CliError::user(format!("no spec named '{feature}'"))
            .with_hint("`troupe spec list` shows the existing specs; `troupe spec new <feature>` creates one"));
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CliError::user(format!("{feature} has no task plan yet ({shown} does not exist)"))
                .with_hint("the TaskGenerator writes tasks.yaml once the design is done"));
        }
        Err(e) => return Err(CliError::internal(format!("cannot read {shown}")).with_source(&e)),
    };
    let plan = TaskPlan::from_yaml(&text).map_err(|e| {
        CliError::config(format!("{shown} is not a valid task plan: {e}"))
            .with_hint("fix the YAML at that line; troupe changes nothing in a file it cannot read")
    })?;
    let checked = plan.validate();
    Ok(Loaded { shown, plan, checked })
}

/// Report an invalid plan: every error on stderr, and with `--json` a
/// structured list on stdout. Exit 1.
fn invalid(g: &GlobalArgs, feature: &str, shown: &str, errors: &ValidationErrors) -> CliResult<ExitCode> {
    if g.json {
        let list: Vec<serde_json::Value> = errors
            .errors
            .iter()
            .map(|e| {
                let mut v = serde_json::to_value(e).expect("plan errors serialize");
                v["message"] = e.to_string().into();
                v
            })
            .collect();
        print_json(&serde_json::json!({ "feature": feature, "file": shown, "valid": false, "errors": list }));
    }
    let n = errors.errors.len();
    let mut text = format!("error: {shown} has {n} problem{}", if n == 1 { "" } else { "s" });
    for e in &errors.errors {
        text.push_str(&format!("\n  - {e}"));
    }
    text.push_str(&format!(
        "\n\nhint: tasks.yaml belongs to the TaskGenerator; fix it there and run `troupe tasks validate {feature}` again"
    ));
    eprintln!("{text}");
    Ok(ExitCode::FAILURE)
}
