//! `troupe skill use <name>`: print a skill and record it as invoked in the
//! session. This is how agents on engines without a Skill tool (Codex, Gemini
//! CLI, OpenCode, custom commands) satisfy troupe's skill and Stop gates.

use std::process::ExitCode;

use clap::Args;
use troupe_core::config::Config;
use troupe_gate::markers::{MarkerStore, default_dir};
use troupe_gate::skills::{find_project_skill, gate_skills};
use troupe_gate::teammate::env;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};

/// Print a skill and record it as invoked in this session.
#[derive(Debug, Args)]
pub struct UseArgs {
    /// The skill's name (e.g. code-quality-rules).
    pub name: String,
    /// The engine session to record it in (defaults to $TROUPE_AGENT_ID; the
    /// engine's hook also records it when it sees this command run).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

pub fn run(g: &GlobalArgs, args: UseArgs) -> CliResult<ExitCode> {
    let name = troupe_gate::tools::skill_name(&args.name);
    let start = match &g.project {
        Some(p) => p.clone(),
        None => {
            std::env::current_dir().map_err(|e| CliError::internal("cannot read the current folder").with_source(&e))?
        }
    };
    let root = troupe_gate::run::project_root(&|k| std::env::var(k).ok(), &start).unwrap_or(start.clone());
    let (source, text) = match find_project_skill(&root, &name) {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| CliError::user(format!("cannot read {}", path.display())).with_source(&e))?;
            (path.display().to_string(), text)
        }
        None => {
            let config = load_config(&root)?;
            let steering = troupe_gate::run::read_steering(&root);
            let builtin = gate_skills(&config.gates, &steering);
            match builtin.into_iter().find(|s| s.name == name) {
                Some(s) => ("built into troupe".to_string(), s.text),
                None => {
                    return Err(CliError::user(format!("no skill named '{name}'"))
                        .with_hint(format!(
                            "skills are read from .claude/skills/<name>/SKILL.md and .troupe/skills/<name>/SKILL.md under {}; troupe's gate skills are {}, {} and {}",
                            root.display(),
                            config.gates.skills.code,
                            config.gates.skills.document,
                            config.gates.skills.verification
                        )));
                }
            }
        }
    };
    let key = args.session.or_else(|| std::env::var(env::AGENT_ID).ok()).filter(|k| !k.is_empty());
    let recorded = match &key {
        Some(key) => {
            let dir = default_dir(|k| std::env::var(k).ok())
                .map_err(|e| CliError::internal("cannot record the skill").with_source(&e))?;
            let store =
                MarkerStore::open(dir).map_err(|e| CliError::internal("cannot record the skill").with_source(&e))?;
            store.mark_skill(key, &name).map_err(|e| CliError::internal("cannot record the skill").with_source(&e))?;
            true
        }
        None => false,
    };
    if g.json {
        print_json(
            &serde_json::json!({ "skill": name, "source": source, "recorded": recorded, "session": key, "text": text }),
        );
    } else {
        print_line(text.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

fn load_config(root: &std::path::Path) -> CliResult<Config> {
    troupe_project::config::load(&troupe_core::layout::Layout::new(root)).map_err(crate::project::config_file_error)
}
