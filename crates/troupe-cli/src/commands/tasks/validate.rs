use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Check a feature's task plan and list every problem, each naming its task ids.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The feature.
    pub feature: String,
}

pub fn run(g: &GlobalArgs, args: ValidateArgs) -> CliResult<ExitCode> {
    let loaded = super::load(g, &args.feature)?;
    let schedule = match &loaded.checked {
        Ok(s) => s,
        Err(errors) => return super::invalid(g, &args.feature, &loaded.shown, errors),
    };
    let tasks = loaded.plan.tasks.len();
    let subtasks: usize = loaded.plan.tasks.iter().map(|t| t.subtasks.len()).sum();
    let waves = schedule.waves.len();
    let groups: usize = schedule.waves.iter().map(|w| w.groups.len()).sum();
    let source = match schedule.source {
        troupe_core::plan::ScheduleSource::Declared => "declared",
        troupe_core::plan::ScheduleSource::Computed => "computed from depends",
    };
    if g.json {
        print_json(&serde_json::json!({
            "feature": args.feature, "file": loaded.shown, "valid": true,
            "tasks": tasks, "subtasks": subtasks, "waves": waves, "groups": groups, "source": schedule.source,
        }));
    } else {
        let n = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        print_line(&format!(
            "{}: valid ({}, {}, {}, {}, {source})",
            loaded.shown,
            n(tasks, "task"),
            n(subtasks, "subtask"),
            n(waves, "wave"),
            n(groups, "group")
        ));
    }
    Ok(ExitCode::SUCCESS)
}
