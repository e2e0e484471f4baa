//! The `on_task_completed` quality gate in front of `troupe board complete`,
//! through troupe-gate's one runner: a refusal (a steering test command that
//! failed, a `[gates]` command's exit 2) leaves the task in progress with the
//! gate's output; a `[gates]` command's other ends and a command that cannot
//! run at all complete with a warning for the user.

use troupe_core::config::QualityGate;
use troupe_gate::quality::{GateEnv, GateResult};
use troupe_gate::run::run_quality_gate;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::note;

pub(super) fn task_completed(g: &GlobalArgs, task: &str, agent: &str) -> CliResult<()> {
    let project = crate::project::find(g)?;
    let env = GateEnv {
        agent_id: Some(agent.to_string()),
        agent_name: std::env::var("TROUPE_AGENT_NAME").ok(),
        last_task_id: Some(task.to_string()),
        status_from: Some("in_progress".into()),
        status_to: Some("completed".into()),
    };
    let engine = std::env::var("TROUPE_ENGINE").ok();
    let result =
        run_quality_gate(project.root(), QualityGate::OnTaskCompleted, engine.as_deref(), &env).map_err(|e| {
            let mut err = CliError::config("cannot run the on_task_completed quality gate");
            err.causes.push(e);
            err.with_hint("fix .troupe/config.toml; the task stays in progress")
        })?;
    match result {
        None | Some(GateResult::Passed) => Ok(()),
        Some(r @ (GateResult::Errored(_) | GateResult::Unrunnable(_))) => {
            note(&format!("warning: {}", r.message(QualityGate::OnTaskCompleted).unwrap_or_default()));
            Ok(())
        }
        Some(GateResult::Failed(run)) => {
            let mut err = CliError::user(format!(
                "the on_task_completed quality gate refused to complete {task}: {} `{}` failed ({})",
                run.label, run.command, run.detail
            ));
            if !run.tail.is_empty() {
                err.causes.push(run.tail);
            }
            Err(err.with_hint(format!(
                "fix what failed, then run `troupe board complete {task}` again; the task stays in progress"
            )))
        }
    }
}
