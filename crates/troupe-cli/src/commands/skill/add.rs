use std::process::ExitCode;

use clap::Args;
use troupe_core::rbac::defaults::{SKILL_TEMPLATES, skill_template};
use troupe_core::rbac::names::validate_skill_id;
use troupe_project::fsutil::write_new;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};

/// Create `.troupe/skills/<name>/SKILL.md` from a template (never overwrites).
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The new skill's id (its folder name).
    pub name: String,
    /// The template (`troupe skill templates` lists them).
    #[arg(long, default_value = "basic")]
    pub template: String,
}

pub fn run(g: &GlobalArgs, args: AddArgs) -> CliResult<ExitCode> {
    validate_skill_id(&args.name).map_err(|e| CliError::user(e.to_string()))?;
    let Some(text) = skill_template(&args.template, &args.name) else {
        let names: Vec<&str> = SKILL_TEMPLATES.iter().map(|(n, _)| *n).collect();
        return Err(CliError::user(format!("unknown template {:?}", args.template))
            .with_hint(format!("templates: {}", names.join(", "))));
    };
    let project = crate::project::find(g)?;
    let path = project.layout().skills_dir().join(&args.name).join("SKILL.md");
    let created = write_new(&path, text.as_bytes())
        .map_err(|e| CliError::internal(format!("cannot write {}", path.display())).with_source(&e))?;
    if !created {
        return Err(CliError::user(format!("skill {:?} already exists at {}", args.name, path.display()))
            .with_hint("edit that file, or choose another name"));
    }
    if g.json {
        print_json(&serde_json::json!({"skill": args.name, "path": path, "template": args.template}));
    } else {
        print_line(&format!("created {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}
