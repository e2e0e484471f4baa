//! The `on_task_completed` quality gate in front of `troupe board complete`,
//! through troupe-gate's one runner: a refusal (a steering test command that
//! failed, a `[gates]` command's exit 2) leaves the task in progress with the
//! gate's output; a `[gates]` command's other ends and a command that cannot
//! run at all complete with a warning for the user.

use troupe_gate::run::{CompletionRefused, gate_task_completion};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::note;

pub(super) fn task_completed(g: &GlobalArgs, task: &str, agent: &str) -> CliResult<()> {
    let project = crate::project::find(g)?;
    let engine = std::env::var("TROUPE_ENGINE").ok();
    let name = std::env::var("TROUPE_AGENT_NAME").ok();
    match gate_task_completion(project.root(), task, agent, name, engine.as_deref()) {
        Ok(None) => Ok(()),
        Ok(Some(warning)) => {
            note(&format!("warning: {warning}"));
            Ok(())
        }
        Err(CompletionRefused::Config(e)) => {
            let mut err = CliError::config("cannot run the on_task_completed quality gate");
            err.causes.push(e);
            Err(err.with_hint("fix .troupe/config.toml; the task stays in progress"))
        }
        Err(CompletionRefused::Failed(run)) => {
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
