use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{note, paint, print_json, print_line};
use crate::project::{find, spec_error};

/// List every spec with its phase. A spec that cannot be read is listed with its error.
#[derive(Debug, Args)]
pub struct ListArgs {}

pub fn run(g: &GlobalArgs, _args: ListArgs) -> CliResult<ExitCode> {
    let project = find(g)?;
    let specs = Specs::new(&project);
    let names = specs.names().map_err(spec_error)?;
    let mut rows = Vec::new();
    for name in &names {
        match specs.load(name) {
            Ok(spec) => rows.push(super::summary(&spec)),
            Err(err) => rows.push(serde_json::json!({ "feature": name, "error": err.to_string() })),
        }
    }
    if g.json {
        print_json(&rows);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        note("no specs yet; create one with `troupe spec new <feature>`");
        return Ok(ExitCode::SUCCESS);
    }
    let width = names.iter().map(String::len).max().unwrap_or(7).max(7);
    print_line(&format!("{:width$}  {:24}  {:7}  NOTE", "FEATURE", "PHASE", "VERSION"));
    for row in &rows {
        let feature = row["feature"].as_str().unwrap_or_default();
        if let Some(err) = row["error"].as_str() {
            print_line(&format!("{feature:width$}  {:24}  {:7}  unreadable: {err}", "?", "?"));
            continue;
        }
        let blocked = row["blocked_by"].as_str().map(|b| format!("blocked by {b}")).unwrap_or_default();
        let phase = row["phase"].as_str().unwrap_or_default();
        let colour = match phase {
            "implementation-complete" => "32",
            "blocked" => "31",
            "design-generated" => "36",
            _ => "0",
        };
        print_line(&format!(
            "{feature:width$}  {}  {:7}  {blocked}",
            paint(&format!("{phase:24}"), colour),
            row["version"].as_str().unwrap_or_default(),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
