use std::process::ExitCode;

use clap::Args;
use troupe_store::TaskFilter;

use super::{AGENT_ENV, open_store, require_agent, store_error};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};

/// Claim a task for an agent and print its id. The claim is atomic: of several
/// agents claiming at once, exactly one gets the task.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The task to claim.
    #[arg(required_unless_present = "next", conflicts_with = "next")]
    pub id: Option<String>,
    /// Claim the next available task instead (tasks reserved for the agent first, then oldest first).
    #[arg(long)]
    pub next: bool,
    /// The agent claiming.
    #[arg(long, env = AGENT_ENV, hide_env_values = true)]
    pub agent: Option<String>,
    /// With --next: only tasks of this feature.
    #[arg(long, requires = "next")]
    pub feature: Option<String>,
    /// With --next: only tasks of this wave.
    #[arg(long, requires = "next")]
    pub wave: Option<u32>,
    /// With --next: only tasks of this execution group.
    #[arg(long, requires = "next")]
    pub group: Option<String>,
}

pub fn run(g: &GlobalArgs, args: ClaimArgs) -> CliResult<ExitCode> {
    let agent = require_agent(args.agent, "board claim")?;
    let store = open_store(g)?;
    let (task, already_held) = match args.id {
        Some(id) => {
            let claim = store.claim(&id, &agent).map_err(store_error)?;
            (claim.task, claim.already_held)
        }
        None => {
            let filter = TaskFilter { feature: args.feature, wave: args.wave, group: args.group };
            let task = store.claim_next(&agent, &filter).map_err(store_error)?.ok_or_else(|| {
                CliError::user(format!("no task is available for `{agent}`"))
                    .with_hint("`troupe board list` shows what is blocked or held, and by whom")
            })?;
            (task, false)
        }
    };
    if g.json {
        print_json(&serde_json::json!({ "task": task, "already_held": already_held }));
    } else {
        print_line(&task.id);
    }
    Ok(ExitCode::SUCCESS)
}
