//! The skills the gates require. A gate must always be satisfiable, so troupe
//! ships these and `troupe init --claude` installs them under `.claude/skills/`;
//! `troupe skill use <name>` prints them for engines without a Skill tool.

use std::path::{Path, PathBuf};

use troupe_core::config::{CommonCommands, GatesConfig};

/// A skill troupe ships.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinSkill {
    /// Its name (the folder under `.claude/skills/`).
    pub name: String,
    /// Its SKILL.md text, front matter included.
    pub text: String,
}

/// The three gate skills, under the names `[gates.skills]` configures, with the
/// project's test and lint commands written into the verification skill.
pub fn gate_skills(gates: &GatesConfig, commands: &CommonCommands) -> Vec<BuiltinSkill> {
    let s = &gates.skills;
    let code_exts = gates.code_extensions.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(" ");
    vec![
        BuiltinSkill {
            name: s.code.clone(),
            text: format!(
                "---\nname: {}\ndescription: Rules for writing code in this project. Invoke before editing any code file ({code_exts}); troupe's skill gate denies code edits until this skill was invoked in the session.\n---\n{}",
                s.code, CODE_RULES
            ),
        },
        BuiltinSkill {
            name: s.document.clone(),
            text: format!(
                "---\nname: {}\ndescription: Rules for writing documents (Markdown, text). Invoke before editing a document; troupe's skill gate denies document edits until this skill was invoked in the session.\n---\n{}",
                s.document, DOC_RULES
            ),
        },
        BuiltinSkill {
            name: s.verification.clone(),
            text: format!(
                "---\nname: {}\ndescription: Verify a code change before declaring it done - run the project's tests and lint and read their output. Invoke before finishing any session that changed code; troupe's Stop gate blocks until it was invoked.\n---\n{}",
                s.verification,
                verification_body(commands)
            ),
        },
    ]
}

const CODE_RULES: &str = "# Code quality rules

Follow these for every code change in this session.

1. **Read before you write.** Open the file and its neighbours; match the
   existing style, naming, error handling and module layout. Reuse what the
   project already has instead of writing it again.
2. **Test first where behaviour changes.** Write or extend a test that fails
   without your change, then make it pass. A test must be able to fail.
3. **Small, complete steps.** No stubs, no `TODO` placeholders, no commented-out
   code. What you leave compiles and passes its tests.
4. **Errors say what failed and what to do next.** Never swallow an error or
   turn a failure into a silent success.
5. **Stay in your lane.** If troupe gave you a set of files (a Builder's group),
   write only those; ask through the board or messages for anything else.
6. **Comments say why, not what.** Keep public items documented.
7. **Before you finish,** invoke `verification-before-completion` and run the
   tests and lint it names.
";

const DOC_RULES: &str = "# Document quality rules

1. Say who the document is for and what they can do after reading it, in the
   first lines.
2. Prefer concrete facts, commands and examples over adjectives. Every command
   shown must work as written.
3. Keep one topic per section; link instead of repeating.
4. Keep spec artifacts in their formats (spec.yaml, tasks.yaml, CPF); only the
   owner of an artifact edits it.
5. Re-read the whole document once after editing: remove what is stale.
";

fn verification_body(commands: &CommonCommands) -> String {
    let mut steps = Vec::new();
    if let Some(t) = &commands.test {
        steps.push(format!("- Tests: `{t}`"));
    }
    if let Some(l) = &commands.lint {
        steps.push(format!("- Lint: `{l}`"));
    }
    if let Some(b) = &commands.build {
        steps.push(format!("- Build: `{b}`"));
    }
    let commands = if steps.is_empty() {
        "The project's commands are listed under \"Common Commands\" in `.troupe/steering/tech.md`; \
         run its test and lint commands (add them there if they are missing)."
            .to_string()
    } else {
        format!("Run these (from `.troupe/steering/tech.md`, Common Commands):\n\n{}", steps.join("\n"))
    };
    format!(
        "# Verification before completion

Evidence before claims: do not say the work is done until you have seen it work.

{commands}

1. Run every command above and read the whole output, not only the last line.
2. If anything fails, fix the cause (not the test) and run them again.
3. Check the change against what was asked: every acceptance criterion, error
   paths included.
4. Report what you ran and what it printed. Only then finish.
"
    )
}

/// Where a skill named `name` is found in the project at `root`, in order:
/// `.claude/skills/<name>/SKILL.md`, `.troupe/skills/<name>/SKILL.md`.
pub fn find_project_skill(root: &Path, name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return None;
    }
    [root.join(".claude/skills").join(name).join("SKILL.md"), root.join(".troupe/skills").join(name).join("SKILL.md")]
        .into_iter()
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_names_the_steering_commands() {
        let commands =
            CommonCommands { test: Some("cargo test".into()), lint: Some("cargo clippy".into()), ..Default::default() };
        let skills = gate_skills(&GatesConfig::default(), &commands);
        let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["code-quality-rules", "document-quality-rules", "verification-before-completion"]);
        assert!(skills[2].text.contains("- Tests: `cargo test`") && skills[2].text.contains("- Lint: `cargo clippy`"));
        assert!(skills[0].text.starts_with("---\nname: code-quality-rules\ndescription: "));
        let none = gate_skills(&GatesConfig::default(), &CommonCommands::default());
        assert!(none[2].text.contains(".troupe/steering/tech.md"));
    }
}
