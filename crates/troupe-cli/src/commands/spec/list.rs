use std::process::ExitCode;

use clap::Args;
use troupe_project::specs::Specs;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{note, print_json, print_table_styled};
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
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let feature = row["feature"].as_str().unwrap_or_default().to_string();
            if let Some(err) = row["error"].as_str() {
                return vec![feature, "?".into(), "?".into(), format!("unreadable: {err}")];
            }
            let blocked = row["blocked_by"].as_str().map(|b| format!("blocked by {b}")).unwrap_or_default();
            let phase = row["phase"].as_str().unwrap_or_default().to_string();
            vec![feature, phase, row["version"].as_str().unwrap_or_default().to_string(), blocked]
        })
        .collect();
    let style = |r: usize, c: usize| match (c, table[r][1].as_str()) {
        (1, "implementation-complete") => Some("32"),
        (1, "blocked") => Some("31"),
        (1, "design-generated") => Some("36"),
        _ => None,
    };
    print_table_styled(&["FEATURE", "PHASE", "VERSION", "NOTE"], &table, &[], &style);
    Ok(ExitCode::SUCCESS)
}
