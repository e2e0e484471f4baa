use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{note, print_json, print_table};

/// List every skill with the roles and tools it grants (and check they all parse).
#[derive(Debug, Args)]
pub struct ListArgs {}

pub fn run(g: &GlobalArgs, _args: ListArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let setup = crate::commands::mcp::load_setup(&project)?;
    let skills = setup.policy.skills();
    if g.json {
        let rows: Vec<_> = skills
            .iter()
            .map(|s| {
                json!({
                    "id": s.id, "displayName": s.display_name, "description": s.description,
                    "allowedRoles": s.allowed_roles, "allowedTools": s.allowed_tools, "deniedTools": s.denied_tools,
                    "grants": s.grants, "path": setup.skill_files.get(&s.id),
                })
            })
            .collect();
        print_json(&json!({"skills": rows}));
    } else if skills.is_empty() {
        note("no skills in .troupe/skills; `troupe skill add <name>` creates one");
    } else {
        let rows: Vec<Vec<String>> = skills
            .iter()
            .map(|s| {
                let tools = s.allowed_tools.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
                vec![s.id.clone(), s.allowed_roles.join(", "), tools]
            })
            .collect();
        print_table(&["SKILL", "ROLES", "TOOLS"], &rows, &[]);
    }
    Ok(ExitCode::SUCCESS)
}
