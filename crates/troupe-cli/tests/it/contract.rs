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
