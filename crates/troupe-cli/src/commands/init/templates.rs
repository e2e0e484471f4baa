//! The config and steering files `troupe init` writes, with commands guessed
//! from the project's ecosystem so the quality gates work from the first run.

use std::path::Path;

use super::ScaffoldFile;

pub fn files(root: &Path) -> Vec<ScaffoldFile> {
    vec![
        ScaffoldFile { path: ".troupe/config.toml".into(), contents: CONFIG.into() },
        ScaffoldFile { path: ".troupe/steering/product.md".into(), contents: PRODUCT.into() },
        ScaffoldFile { path: ".troupe/steering/tech.md".into(), contents: tech_md(root) },
        ScaffoldFile { path: ".troupe/steering/structure.md".into(), contents: STRUCTURE.into() },
    ]
}

/// The commands of `tech.md`'s "Common Commands" section, by ecosystem.
struct Commands {
    runtime: &'static str,
    test: &'static str,
    lint: &'static str,
    build: &'static str,
    format: &'static str,
}

fn detect(root: &Path) -> Option<Commands> {
    let commands = if root.join("Cargo.toml").exists() {
        Commands {
            runtime: "Rust (cargo)",
            test: "cargo test",
            lint: "cargo clippy --all-targets -- -D warnings",
            build: "cargo build",
            format: "cargo fmt",
        }
    } else if root.join("package.json").exists() {
        Commands {
            runtime: "Node.js (npm)",
            test: "npm test",
            lint: "npm run lint",
            build: "npm run build",
            format: "npm run format",
        }
    } else if root.join("pyproject.toml").exists() {
        Commands {
            runtime: "Python",
            test: "python3 -m pytest",
            lint: "python3 -m ruff check .",
            build: "python3 -m build",
            format: "python3 -m ruff format .",
        }
    } else if root.join("go.mod").exists() {
        Commands {
            runtime: "Go",
            test: "go test ./...",
            lint: "go vet ./...",
            build: "go build ./...",
            format: "gofmt -w .",
        }
    } else {
        return None;
    };
    Some(commands)
}

const TECH_INTRO: &str = "# Tech\n\n\
The languages, frameworks and tools of this project. Teammates read this file;\n\
troupe runs the commands below verbatim for its quality gates (seed rule: never\n\
an alternative invocation of the same tool).\n\n";

fn tech_md(root: &Path) -> String {
    let Some(c) = detect(root) else {
        // Guessing a command that does not exist (`make test` without a Makefile)
        // would make every quality gate refuse; with no command the gates allow.
        return format!(
            "{TECH_INTRO}Runtime: (your language and toolchain)\n\n\
## Common Commands\n\n\
No project type was recognised, so no commands are set and the quality gates\n\
have nothing to run. Add one line per command, such as `- Test: make test` or\n\
`- Lint: make lint`; troupe's gates use Test and Lint.\n\n\
## Conventions\n\n\
- (your coding conventions, e.g. error handling, logging, naming)\n"
        );
    };
    format!(
        "{TECH_INTRO}Runtime: {runtime}\n\n\
## Common Commands\n\n\
One command per line, as `- <Purpose>: \\`<command>\\``. troupe's gates use Test and Lint.\n\n\
- Test: `{test}`\n\
- Lint: `{lint}`\n\
- Build: `{build}`\n\
- Format: `{format}`\n\n\
## Conventions\n\n\
- (your coding conventions, e.g. error handling, logging, naming)\n",
        runtime = c.runtime,
        test = c.test,
        lint = c.lint,
        build = c.build,
        format = c.format
    )
}

const PRODUCT: &str = "# Product\n\n\
What this project is for and who uses it. The Auditor checks every review's\n\
findings against this intent (Product Intent check), so keep it short and true.\n\n\
## Purpose\n\n\
- (one paragraph: the problem this project solves)\n\n\
## Users\n\n\
- (who uses it, and for what)\n\n\
## Non-goals\n\n\
- (what this project deliberately does not do)\n";

const STRUCTURE: &str = "# Structure\n\n\
Where things live in this repository. Architects and Builders follow it when they\n\
place new files; Inspectors check new code against it.\n\n\
## Layout\n\n\
- `src/`: (the code)\n\
- `tests/`: (the tests)\n\n\
## Rules\n\n\
- (e.g. one module per concept; tests beside the code they test)\n";

/// Commented defaults; every key shown is the default value.
pub const CONFIG: &str = r#"# troupe configuration. Every key below shows its default; uncomment to change.
# Unknown keys are errors, so a typo never silently falls back to a default.

[engines]
# The engine for phases without their own setting: claude, gemini, codex, opencode,
# or the id of a custom engine below.
# default = "claude"

# [engines.phases]
# Engine per pipeline phase (plan, requirements, design, tasks, document-review,
# document-review-reply, inspection, impl). A spec's own `engine_override` wins.
# design = "claude"
# impl = "codex"

# [engines.models.claude]
# Model per tier: t2 = Architect and Auditor, t3 = TaskGenerator, Builder, Inspector.
# t2 = "opus"
# t3 = "sonnet"

# [engines.commands]
# Path of an engine's executable when it is not on PATH.
# claude = "/opt/claude/bin/claude"

# [engines.custom.my-agent]
# command = "my-agent"
# args = ["--json"]
# prompt = "argument"      # or "stdin"
# format = "text"          # claude, gemini, codex, opencode or text

[gates]
# Quality gates (exit 0 allows, exit 2 refuses, anything else allows with a warning).
# Default: the Test and Lint commands of .troupe/steering/tech.md.
# on_idle = "cargo test"
# on_task_completed = "cargo test && cargo clippy"

[team]
# At most this many teammates at once (3 review pipelines x 7 + headroom).
# max_concurrent = 24
# A teammate with no event for this long is unresponsive.
# hang_timeout_seconds = 300

[review]
# `troupe run` and `troupe resume` review the design after design and the
# implementation after implementation (Inspectors + Auditor, auto-fix on NO-GO).
# `troupe run --no-review` skips them once.
# in_run = true
# Review pipelines per review (consensus mode above 1) and how many must agree
# (default: a majority).
# consensus = 1
# threshold = 2

[shutdown]
# Seconds between a shutdown request and the forced kill.
# timeout_seconds = 30
# graceful_enabled = true

[server]
# bind = "127.0.0.1:7878"   # binding beyond loopback requires a token
# token = "..."

[store]
# backend = "sqlite"        # or "postgres" with url = "postgres://..."

# [mcp.servers.filesystem]
# Backend MCP servers teammates reach through troupe's gateway, as `filesystem__read_file`.
# command = "mcp-server-filesystem"
# args = ["."]

# [gateway.rate_limits.builder]
# per_minute = 120
# per_hour = 2000
# concurrent = 4
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tech_md_commands_parse_and_unknown_projects_get_none() {
        use troupe_core::config::parse_common_commands;
        let dir = tempfile::tempdir().unwrap();
        let none = parse_common_commands(&tech_md(dir.path()));
        assert_eq!((none.test, none.lint), (None, None), "no guessed command for an unknown project");
        std::fs::write(dir.path().join("package.json"), "{}").unwrap();
        let npm = parse_common_commands(&tech_md(dir.path()));
        assert_eq!(npm.test.as_deref(), Some("npm test"));
        assert_eq!(npm.lint.as_deref(), Some("npm run lint"));
    }

    #[test]
    fn config_template_is_valid_and_all_defaults() {
        let config = troupe_core::config::Config::from_toml(CONFIG).unwrap();
        assert_eq!(config, troupe_core::config::Config::default());
    }
}
