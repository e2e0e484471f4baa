use std::process::ExitCode;

use clap::Args;

use super::{open_store, store_error};
use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{escape, print_json, print_line};

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
    let mut out = vec![format!("task:        {}", escape(&t.id)), format!("subject:     {}", escape(&t.subject))];
    if !t.description.is_empty() {
        out.push(format!("description: {}", escape(&t.description)));
    }
    let blocked = if t.blocked { " (blocked)" } else { "" };
    out.push(format!("status:      {}{blocked}", t.status));
    out.push(format!("assignee:    {}", escape(t.assignee.as_deref().unwrap_or("-"))));
    out.push(format!("created by:  {}", escape(&t.created_by)));
    if !t.blocked_by.is_empty() {
        out.push(format!("blocked by:  {}", escape(&t.blocked_by.join(", "))));
    }
    if let Some(f) = &t.feature {
        let wave = t.wave.map(|w| format!("   wave: {w}")).unwrap_or_default();
        let group = t.group.as_ref().map(|g| format!("   group: {g}")).unwrap_or_default();
        out.push(escape(&format!("feature:     {f}{wave}{group}")).into_owned());
    }
    if !t.files.is_empty() {
        out.push(format!("files:       {}", escape(&t.files.join(", "))));
    }
    out.push(format!("created:     {}", t.created_at));
    out.push(format!("updated:     {}", t.updated_at));
    if let Some(c) = t.completed_at {
        out.push(format!("completed:   {c}"));
    }
    print_line(&out.join("\n"));
    Ok(ExitCode::SUCCESS)
}
