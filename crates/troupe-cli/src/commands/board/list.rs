use std::process::ExitCode;

use clap::Args;
use troupe_store::{ListFilter, TaskFilter, TaskStatus};

use super::{open_store, store_error, task_row};
use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_table};

/// List tasks, oldest first.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tasks in this status: pending, in_progress or completed.
    #[arg(long)]
    pub status: Option<String>,
    /// Only tasks held by (or reserved for) this agent. With --available: the agent asking.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only tasks of this feature.
    #[arg(long)]
    pub feature: Option<String>,
    /// Only tasks of this wave.
    #[arg(long)]
    pub wave: Option<u32>,
    /// Only tasks that can be claimed now: pending, unblocked, and unassigned or reserved for --agent.
    #[arg(long, conflicts_with = "status")]
    pub available: bool,
}

pub fn run(g: &GlobalArgs, args: ListArgs) -> CliResult<ExitCode> {
    let status = match &args.status {
        Some(s) => Some(s.parse::<TaskStatus>().map_err(|e| CliError::usage(e.to_string()))?),
        None => None,
    };
    let store = open_store(g)?;
    let tasks = if args.available {
        let filter = TaskFilter { feature: args.feature, wave: args.wave, group: None };
        store.available(args.agent.as_deref().unwrap_or(""), &filter)
    } else {
        store.list(&ListFilter { status, assignee: args.agent, feature: args.feature, wave: args.wave })
    }
    .map_err(store_error)?;
    if g.json {
        print_json(&tasks);
    } else if tasks.is_empty() {
        note("no tasks match; `troupe board create \"<subject>\"` adds one, `troupe impl <feature>` imports a plan");
    } else {
        let rows: Vec<Vec<String>> = tasks.iter().map(task_row).collect();
        print_table(&["ID", "STATUS", "ASSIGNEE", "SUBJECT"], &rows, &[]);
    }
    Ok(ExitCode::SUCCESS)
}
