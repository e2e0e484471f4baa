//! The contract between what troupe tells a teammate and what it accepts
//! (issue 11): every `troupe` command a rendered role prompt names exists in
//! the binary that would be named (the path is the running binary's own).

use std::path::PathBuf;

use troupe_core::config::RequiredSkills;
use troupe_core::role::Role;
use troupe_lead::machine::{SpawnContext, SpawnRequest};
use troupe_lead::roles::{RenderEnv, builtin, render};

use crate::support::troupe;

const ROLES: [Role; 6] =
    [Role::Architect, Role::TaskGenerator, Role::Builder, Role::Inspector, Role::Auditor, Role::Coordinator];

/// The words after each mention of `bin` up to the first argument placeholder
/// or the end of the command (`board claim` of `` `/x/troupe board claim <id>` ``);
/// a skill id after `skill use` is kept, it is an argument clap accepts.
fn commands(prompt: &str, bin: &str) -> Vec<Vec<String>> {
    prompt
        .match_indices(bin)
        .map(|(at, _)| {
            let rest = &prompt[at + bin.len()..];
            // The command ends with its code span (`...`) or its line.
            rest[..rest.find(['`', '\n']).unwrap_or(rest.len())]
                .split_whitespace()
                .map(|w| w.trim_end_matches(['`', '.', ',', ')', ';']))
                .take_while(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                .map(str::to_string)
                .collect()
        })
        .collect()
}

#[test]
fn every_troupe_command_a_role_prompt_names_exists() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_troupe"));
    let skills = RequiredSkills::default();
    let mut checked = std::collections::BTreeSet::new();
    for role in ROLES {
        let req = SpawnRequest {
            id: format!("{}-1", role.as_str()),
            role,
            engine_phase: "impl".into(),
            group: None,
            tasks: vec!["1.1".into()],
            context: SpawnContext {
                feature: "login".into(),
                read: Vec::new(),
                write: Vec::new(),
                scope: "s".into(),
                instructions: vec![
                    "or in the shell `{{troupe}} board claim <id>` and `{{troupe}} board complete <id>`".into(),
                ],
            },
            attempt: 1,
        };
        for engine in ["claude", "gemini", "codex", "opencode", "scripted"] {
            let env = RenderEnv { engine, troupe: &bin, skills: &skills };
            let prompt = render(builtin(role).unwrap(), "builtin", &req, &env).unwrap();
            for words in commands(&prompt, &bin.display().to_string()) {
                assert!(!words.is_empty(), "{}: the troupe path without a command", role.as_str());
                checked.insert(words);
            }
        }
    }
    assert!(checked.iter().any(|w| w[..2] == ["board", "complete"]), "{checked:?}");
    assert!(checked.iter().any(|w| w[..2] == ["skill", "use"]), "{checked:?}");
    for words in &checked {
        // Every subcommand named parses: `--help` after a leaf prints its help,
        // an unknown subcommand is an error.
        let out = troupe().args(words).arg("--help").output().unwrap();
        assert!(
            out.status.success(),
            "`troupe {}` does not exist: {}",
            words.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bogus = troupe().args(["board", "complete-task", "--help"]).output().unwrap();
    assert!(!bogus.status.success(), "the check can fail");
}

/// Every gate skill a rendered role prompt names is reachable on its engine
/// for that run: in the engine's own skill mechanism (Claude Code's plugin
/// folder for the Skill tool, Gemini CLI's skills folder for `activate_skill`,
/// OpenCode's `skills.paths` for `skill`), or, where the engine has no skill
/// tool (Codex, the scripted engine), through the `troupe skill use` command
/// the prompt gives, which must print it.
#[test]
fn every_skill_a_role_prompt_names_is_reachable_on_its_engine() {
    use troupe_engine::{EngineKind, Registry, RunOptions};
    use troupe_lead::driver::launch::{LaunchEnv, Who, wire};

    let p = crate::support::TestProject::new();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_troupe"));
    let config = troupe_core::config::Config::default();
    let names = [&config.gates.skills.code, &config.gates.skills.document, &config.gates.skills.verification];
    let registry = Registry::from_config(&config.engines);
    let script = p.path(".troupe/scripted.yaml");
    let env = LaunchEnv { root: p.root(), troupe: &bin, script: &script, config: &config, workdir: None };
    let mut by_shell = std::collections::BTreeSet::new();
    let mut native = 0;
    for engine_id in ["claude", "gemini", "codex", "opencode", "scripted"] {
        let engine = registry.lookup(engine_id).unwrap();
        for role in ROLES {
            let req = SpawnRequest {
                id: format!("{}-{engine_id}-1", role.as_str()),
                role,
                engine_phase: "impl".into(),
                group: Some("G1".into()),
                tasks: vec!["1.1".into()],
                context: SpawnContext {
                    feature: "login".into(),
                    read: Vec::new(),
                    write: vec!["src/a.rs".into()],
                    scope: "s".into(),
                    instructions: Vec::new(),
                },
                attempt: 1,
            };
            let render_env = RenderEnv { engine: engine_id, troupe: &bin, skills: &config.gates.skills };
            let prompt = render(builtin(role).unwrap(), "builtin", &req, &render_env).unwrap();
            let named: Vec<&String> = names.iter().copied().filter(|n| prompt.contains(n.as_str())).collect();
            if named.is_empty() {
                continue;
            }
            let mut opts = RunOptions::default();
            wire(engine, &env, Who { id: &req.id, role: role.as_str(), delegate: false }, &mut opts).unwrap();
            let folder = match engine.kind {
                EngineKind::Claude => Some(opts.plugin_dirs[0].join("skills")),
                EngineKind::Gemini => opts.engine_home.as_ref().map(|h| h.join(".gemini/skills")),
                EngineKind::OpenCode => {
                    let config: serde_json::Value =
                        serde_json::from_str(opts.inline_config.as_deref().unwrap()).unwrap();
                    config["skills"]["paths"].as_array().and_then(|p| p.last()?.as_str()).map(PathBuf::from)
                }
                _ => None,
            };
            for name in named {
                let what = format!("{} on {engine_id}: skill {name}", role.as_str());
                match &folder {
                    Some(folder) => {
                        let text = std::fs::read_to_string(folder.join(name).join("SKILL.md"))
                            .unwrap_or_else(|e| panic!("{what} is not in the engine's skills: {e}"));
                        assert!(text.starts_with(&format!("---\nname: {name}\n")), "{what}: {text}");
                        native += 1;
                    }
                    None => {
                        let shell = format!("{} skill use ", bin.display());
                        assert!(prompt.contains(&shell), "{what}: no skill mechanism and no `skill use` command");
                        by_shell.insert(name.clone());
                    }
                }
            }
        }
    }
    assert!(native > 0 && !by_shell.is_empty(), "both ways were checked");
    for name in by_shell {
        let out =
            troupe().current_dir(p.root()).args(["skill", "use", &name]).env("TROUPE_AGENT_ID", "x").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(&name), "`troupe skill use {name}`: {text}");
    }
}
