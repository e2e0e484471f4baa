//! The config and steering files `troupe init` writes: tech.md's Common
//! Commands read from the project (see `detect`), each checked, and product.md
//! and structure.md filled from the manifest and the tree, or marked "edit me".

use super::ScaffoldFile;
use super::detect::{Detected, Guess};

/// A Common Command and why it cannot run here (`None`: its program was found).
pub type Checked = (Guess, Option<String>);

pub fn files(
    detected: &Detected,
    checked: &[Checked],
    folders: &[(String, Option<&'static str>)],
) -> Vec<ScaffoldFile> {
    vec![
        ScaffoldFile { path: ".troupe/config.toml".into(), contents: CONFIG.into() },
        ScaffoldFile { path: ".troupe/steering/product.md".into(), contents: product_md(detected) },
        ScaffoldFile { path: ".troupe/steering/tech.md".into(), contents: tech_md(detected, checked) },
        ScaffoldFile { path: ".troupe/steering/structure.md".into(), contents: structure_md(folders) },
    ]
}

const TECH_INTRO: &str = "# Tech\n\n\
The languages, frameworks and tools of this project. Teammates read this file;\n\
troupe runs the commands below verbatim for its quality gates (seed rule: never\n\
an alternative invocation of the same tool).\n\n";

const CONVENTIONS: &str = "## Conventions\n\n\
- edit me: your coding conventions (error handling, logging, naming)\n";

pub fn tech_md(detected: &Detected, checked: &[Checked]) -> String {
    if checked.is_empty() {
        // Guessing a command that does not exist (`make test` without a Makefile)
        // would make every quality gate refuse; with no command the gates allow.
        return format!(
            "{TECH_INTRO}Runtime: edit me (your language and toolchain)\n\n\
## Common Commands\n\n\
No project type was recognised, so no commands are set and the quality gates\n\
have nothing to run. Add one line per command, such as `- Test: make test` or\n\
`- Lint: make lint`; troupe's gates use Test and Lint.\n\n{CONVENTIONS}"
        );
    }
    let mut lines = String::new();
    for (g, problem) in checked {
        match problem {
            None => lines.push_str(&format!("- {}: `{}`\n", g.purpose, g.command)),
            // Commented out: a gate never runs a command whose program is missing.
            Some(why) => lines.push_str(&format!(
                "<!-- - {}: `{}` ({why} when troupe init ran; install it, then remove this comment) -->\n",
                g.purpose, g.command
            )),
        }
    }
    format!(
        "{TECH_INTRO}Runtime: {runtime}\n\n\
## Common Commands\n\n\
One command per line, as `- <Purpose>: \\`<command>\\``. troupe's gates use Test and Lint.\n\
A command in an HTML comment is not used.\n\n\
{lines}\n{CONVENTIONS}",
        runtime = if detected.runtime.is_empty() { "edit me (your language and toolchain)" } else { &detected.runtime },
    )
}

fn product_md(d: &Detected) -> String {
    let purpose = match (&d.description, d.manifest) {
        (Some(desc), Some(m)) => format!("- {desc} (from {m}; say more if it helps the reviewers)"),
        _ => "- edit me: one paragraph on the problem this project solves".to_string(),
    };
    let name = d.name.as_deref().map(|n| format!(": {n}")).unwrap_or_default();
    format!(
        "# Product{name}\n\n\
What this project is for and who uses it. The Auditor checks every review's\n\
findings against this intent (Product Intent check), so keep it short and true.\n\n\
## Purpose\n\n{purpose}\n\n\
## Users\n\n\
- edit me: who uses it, and for what\n\n\
## Non-goals\n\n\
- edit me: what this project deliberately does not do\n"
    )
}

fn structure_md(folders: &[(String, Option<&'static str>)]) -> String {
    let layout = if folders.is_empty() {
        "- edit me: no folders yet; name where the code and the tests will live\n".to_string()
    } else {
        folders.iter().map(|(name, what)| format!("- `{name}/`: {}\n", what.unwrap_or("edit me"))).collect::<String>()
    };
    format!(
        "# Structure\n\n\
Where things live in this repository. Architects and Builders follow it when they\n\
place new files; Inspectors check new code against it.\n\n\
## Layout\n\n{layout}\n\
## Rules\n\n\
- edit me: e.g. one module per concept; tests beside the code they test\n"
    )
}

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
# A teammate with no event for this long is unresponsive (hang_timeout_ms,
# when set, wins: for tests and fast scripted runs).
# hang_timeout_seconds = 300
# Until its first output a teammate gets this start-up allowance instead, when
# longer (startup_timeout_ms, when set, wins).
# startup_timeout_seconds = 120
# While a tool call of a teammate has not returned (a long test run), it gets
# this tool allowance instead, when longer (tool_timeout_ms, when set, wins).
# tool_timeout_seconds = 600
# Where Builders work: "worktree" (each group in its own git worktree under
# .troupe/state/worktrees, merged by troupe in wave order, so one group's gate
# never sees another's unfinished work) or "shared" (the project's work tree).
# isolation = "worktree"
# Where teammates run: "local" (processes of the Lead) or "workers": each
# Builder group becomes a spawn job in the store that a `troupe worker` on any
# host takes (needs isolation = "worktree", [workers] remote and a store every
# host reaches: [store] backend = "postgres").
# executors = "local"

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
# Seconds between a shutdown request and the forced kill (timeout_ms, when
# set, wins).
# timeout_seconds = 30
# graceful_enabled = true

[server]
# bind = "127.0.0.1:7878"   # binding beyond loopback requires a token
# token_file = "secrets/troupe.token"   # or $TROUPE_TOKEN; `troupe serve --generate-token` makes one

[store]
# backend = "sqlite"        # or "postgres" with url = "postgres://...?sslmode=verify-full&sslrootcert=ca.crt"
# Seconds a teammate's heartbeat keeps its lease; a lost host's tasks and file
# locks are released once it passes (lease_ms, when set, wins).
# lease_seconds = 30

# [workers]
# The git remote the Lead and the workers exchange branches through: a remote
# of this repository ("origin") or a git URL; each worker keeps its own clone.
# remote = "origin"
# How often a worker looks for jobs when the store cannot wake it (SQLite).
# poll_ms = 250
# Labels every job asks for: only a worker started with them all takes it
# (`troupe worker --labels linux`); [workers.engine_labels] adds some per engine.
# labels = ["linux"]
# Hours an ended spawn job stays in the store (the Lead deletes older ones).
# keep_jobs_hours = 24

# [mcp.servers.filesystem]
# Backend MCP servers teammates reach through troupe's gateway, as `filesystem__read_file`.
# command = "mcp-server-filesystem"
# args = ["."]

# [gateway.rate_limits.builder]
# per_minute = 120
# per_hour = 2000
# concurrent = 4

# Budgets (docs/cost.md): on a breach the run pauses (no new teammate, running
# ones finish their turn); `troupe resume <feature> --budget +5` continues.
# [budgets]
# on_exceed = "pause"        # or "stop"
# [budgets.run]              # one Lead run
# max_cost_usd = 5.0
# max_minutes = 60
# [budgets.feature]          # every run of the feature
# max_cost_usd = 20.0
# [budgets.role.builder]     # a run's Builders together (max_gateway_calls: each Builder's)
# max_tokens = 2000000
# [budgets.agent]            # each teammate; minutes count its running time only
# max_cost_usd = 1.5
# max_gateway_calls = 200    # calls of troupe's MCP gateway over its life

# OpenTelemetry export of each Lead run (off unless an endpoint is set).
# [telemetry]
# otlp_endpoint = "http://127.0.0.1:4318"
# service_name = "troupe"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tech_md_commands_parse_and_missing_programs_are_commented_out() {
        use troupe_core::config::parse_common_commands;
        let detected = Detected { runtime: "Python".into(), ..Detected::default() };
        let none = parse_common_commands(&tech_md(&detected, &[]));
        assert_eq!((none.test, none.lint), (None, None), "no guessed command for an unknown project");
        let guess = |purpose, command: &str| Guess { purpose, command: command.into(), source: "guess" };
        let checked = vec![
            (guess("Test", "python3 -m unittest"), None),
            (guess("Lint", "ruff check ."), Some("ruff not found".into())),
        ];
        let text = tech_md(&detected, &checked);
        let parsed = parse_common_commands(&text);
        assert_eq!(parsed.test.as_deref(), Some("python3 -m unittest"));
        assert_eq!(parsed.lint, None, "a command whose program is missing is never used by a gate:\n{text}");
        assert!(text.contains("ruff check ."), "{text}");
    }

    #[test]
    fn config_template_is_valid_and_all_defaults() {
        let config = troupe_core::config::Config::from_toml(CONFIG).unwrap();
        assert_eq!(config, troupe_core::config::Config::default());
    }

    #[test]
    fn the_budget_and_telemetry_examples_are_valid_once_uncommented() {
        let start = CONFIG.find("# [budgets]").unwrap();
        let examples: String = CONFIG[start..]
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.starts_with('[') || l.contains(" = "))
            .map(|l| format!("{l}\n"))
            .collect();
        let config = troupe_core::config::Config::from_toml(&examples).unwrap();
        assert_eq!(config.budgets.agent.max_gateway_calls, Some(200));
        assert_eq!(config.budgets.role["builder"].max_tokens, Some(2_000_000));
        assert_eq!(config.telemetry.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
    }
}
