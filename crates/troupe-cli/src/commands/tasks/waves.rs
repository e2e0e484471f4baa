use std::process::ExitCode;

use clap::Args;
use troupe_core::plan::{DONE, ScheduleSource};

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Show the order Builders run in: waves one after another, the groups of a
/// wave in parallel, each group one Builder owning its files.
#[derive(Debug, Args)]
pub struct WavesArgs {
    /// The feature.
    pub feature: String,
}

pub fn run(g: &GlobalArgs, args: WavesArgs) -> CliResult<ExitCode> {
    let loaded = super::load(g, &args.feature)?;
    let schedule = match &loaded.checked {
        Ok(s) => s,
        Err(errors) => return super::invalid(g, &args.feature, &loaded.shown, errors),
    };
    let plan = &loaded.plan;
    let done = |id: &str| plan.status_of(id) == Some(DONE);
    if g.json {
        let ready: Vec<&str> = schedule.ready_groups(plan).iter().map(|g| g.id.as_str()).collect();
        let waves: Vec<serde_json::Value> = schedule
            .waves
            .iter()
            .map(|w| {
                let groups: Vec<serde_json::Value> = w
                    .groups
                    .iter()
                    .map(|gr| {
                        let done: Vec<&str> = gr.tasks.iter().map(String::as_str).filter(|t| done(t)).collect();
                        serde_json::json!({ "id": gr.id, "tasks": gr.tasks, "files": gr.files, "done": done })
                    })
                    .collect();
                serde_json::json!({ "wave": w.number, "groups": groups })
            })
            .collect();
        print_json(&serde_json::json!({
            "feature": args.feature, "file": loaded.shown, "source": schedule.source, "waves": waves, "ready": ready,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    let groups: usize = schedule.waves.iter().map(|w| w.groups.len()).sum();
    let source = match schedule.source {
        ScheduleSource::Declared => "as declared in tasks.yaml",
        ScheduleSource::Computed => "computed from depends",
    };
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut out = vec![format!(
        "{}: {}, {} ({source})",
        args.feature,
        plural(schedule.waves.len(), "wave"),
        plural(groups, "group")
    )];
    for w in &schedule.waves {
        out.push(format!("wave {}", w.number));
        for gr in &w.groups {
            let tasks: Vec<String> =
                gr.tasks.iter().map(|t| if done(t) { format!("{t} (done)") } else { t.clone() }).collect();
            out.push(format!("  {}: {}", gr.id, tasks.join(", ")));
            if !gr.files.is_empty() {
                out.push(format!("    files: {}", gr.files.join(", ")));
            }
        }
    }
    let ready: Vec<&str> = schedule.ready_groups(plan).iter().map(|g| g.id.as_str()).collect();
    if !ready.is_empty() {
        out.push(format!("ready to start: {}", ready.join(", ")));
    }
    print_line(&out.join("\n"));
    Ok(ExitCode::SUCCESS)
}
