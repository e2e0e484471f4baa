use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{note, print_json, print_line};

/// List every role derived from the skills, with its skills and parent.
#[derive(Debug, Args)]
pub struct RolesArgs {}

pub fn run(g: &GlobalArgs, _args: RolesArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let setup = crate::commands::mcp::load_setup(&project)?;
    let roles: Vec<_> = setup.policy.roles().values().collect();
    if g.json {
        let rows: Vec<_> = roles
            .iter()
            .map(|r| json!({"id": r.id, "description": r.description, "inherits": r.inherits, "skills": r.skills}))
            .collect();
        print_json(&json!({"roles": rows, "warnings": setup.warnings}));
    } else {
        for r in roles {
            let parent = r.inherits.as_ref().map(|p| format!(" (inherits {p})")).unwrap_or_default();
            print_line(&format!("{}{parent}  {}", r.id, r.description));
        }
        for w in &setup.warnings {
            note(&format!("warning: {w}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
