use std::process::ExitCode;

use clap::Args;
use troupe_core::rbac::defaults::SKILL_TEMPLATES;

use crate::cli::GlobalArgs;
use crate::error::CliResult;
use crate::output::{print_json, print_line};

/// List the templates `troupe skill add --template` accepts.
#[derive(Debug, Args)]
pub struct TemplatesArgs {}

pub fn run(g: &GlobalArgs, _args: TemplatesArgs) -> CliResult<ExitCode> {
    if g.json {
        let rows: Vec<_> =
            SKILL_TEMPLATES.iter().map(|(n, d)| serde_json::json!({"name": n, "description": d})).collect();
        print_json(&rows);
    } else {
        for (name, description) in SKILL_TEMPLATES {
            print_line(&format!("{name:20} {description}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
