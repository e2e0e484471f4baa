use std::process::ExitCode;

use clap::Args;

use super::{open_store, store_error};
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// Show one task.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The task.
    pub id: String,
}

pub fn run(g: &GlobalArgs, args: ShowArgs) -> CliResult<ExitCode> {
    let store = open_store(g)?;
    let t = store.task(&args.id).map_err(store_error)?;
    if g.json {
        print_json(&t);
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = vec![format!("task:        {}", t.id), format!("subject:     {}", t.subject)];
    if !t.description.is_empty() {
        out.push(format!("description: {}", t.description));
    }
    let blocked = if t.blocked { " (blocked)" } else { "" };
    out.push(format!("status:      {}{blocked}", t.status));
    out.push(format!("assignee:    {}", t.assignee.as_deref().unwrap_or("-")));
    out.push(format!("created by:  {}", t.created_by));
    if !t.blocked_by.is_empty() {
        out.push(format!("blocked by:  {}", t.blocked_by.join(", ")));
    }
    if let Some(f) = &t.feature {
        let wave = t.wave.map(|w| format!("   wave: {w}")).unwrap_or_default();
        let group = t.group.as_ref().map(|g| format!("   group: {g}")).unwrap_or_default();
        out.push(format!("feature:     {f}{wave}{group}"));
    }
    if !t.files.is_empty() {
        out.push(format!("files:       {}", t.files.join(", ")));
    }
    out.push(format!("created:     {}", t.created_at));
    out.push(format!("updated:     {}", t.updated_at));
    if let Some(c) = t.completed_at {
        out.push(format!("completed:   {c}"));
    }
    print_line(&out.join("\n"));
    Ok(ExitCode::SUCCESS)
}
