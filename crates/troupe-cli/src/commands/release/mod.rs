//! `troupe release patch|minor|major "<summary>"`: bump, commit, tag
//! `v{version}`, and branch `release/v{version}` (seed 000 Spec 14.10–14.11).

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use troupe_core::config::{GateRule, GateStep, parse_common_commands};
use troupe_release::{Level, ReleaseFailure, ReleaseRequest, release};

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{print_json, print_line};
use crate::project::start_dir;

/// Release the project: detect the ecosystem (Python pyproject.toml, TypeScript/
/// JavaScript package.json, Rust Cargo.toml, an SDD framework VERSION file, or
/// Other with tags only), bump the version there, commit, tag v{version}, and
/// create the branch release/v{version} as a snapshot that is never merged back.
/// Refuses on a dirty working tree or a failing quality gate (the test, lint and
/// build commands of .troupe/steering/tech.md).
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Which part of the version goes up.
    pub level: LevelArg,
    /// One line describing the release (commit and tag message).
    pub summary: String,
}

/// The release level on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LevelArg {
    /// 1.2.3 → 1.2.4
    Patch,
    /// 1.2.3 → 1.3.0
    Minor,
    /// 1.2.3 → 2.0.0
    Major,
}

pub fn run(g: &GlobalArgs, args: ReleaseArgs) -> CliResult<ExitCode> {
    let start = start_dir(g)?;
    // Inside a troupe project the gate comes from its steering; elsewhere there is none.
    let (root, gate) = match troupe_project::Project::discover(&start) {
        Ok(p) => {
            let tech = std::fs::read_to_string(p.layout().steering_dir().join("tech.md")).unwrap_or_default();
            let c = parse_common_commands(&tech);
            let steps = [("Test", c.test), ("Lint", c.lint), ("Build", c.build)]
                .into_iter()
                .filter_map(|(label, command)| {
                    command.map(|command| GateStep { label: label.into(), command, rule: GateRule::Tests })
                })
                .collect();
            (p.root().to_path_buf(), steps)
        }
        Err(_) => (start, Vec::new()),
    };
    let level = match args.level {
        LevelArg::Patch => Level::Patch,
        LevelArg::Minor => Level::Minor,
        LevelArg::Major => Level::Major,
    };
    let outcome = release(&ReleaseRequest { root, level, summary: args.summary, gate }).map_err(failure)?;
    if g.json {
        print_json(&outcome);
    } else {
        let file = outcome.file.as_deref().map(|f| format!(" in {f}")).unwrap_or_default();
        print_line(&format!(
            "released {} ({}): {} -> {}{file}; tagged {}, branch {}",
            outcome.tag, outcome.ecosystem, outcome.previous, outcome.version, outcome.tag, outcome.branch
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn failure(e: ReleaseFailure) -> CliError {
    let message = e.to_string();
    match e {
        ReleaseFailure::EmptySummary => CliError::usage(message)
            .with_hint("say what the release contains: troupe release patch \"fix login timeout\""),
        ReleaseFailure::NotGit(_) => {
            CliError::user(message).with_hint("run it in a git repository with at least one commit")
        }
        ReleaseFailure::Dirty(_) => {
            CliError::user(message).with_hint("commit or stash your changes first; a release is made from a clean tree")
        }
        ReleaseFailure::Exists(_) => {
            CliError::user(message).with_hint("this version was released already; choose another level")
        }
        ReleaseFailure::Version(_) => {
            CliError::config(message).with_hint("fix the version in the file named above (MAJOR.MINOR.PATCH)")
        }
        ReleaseFailure::Gate { output, .. } => {
            let mut err = CliError::user(message).with_hint(
                "fix the failure (commands from .troupe/steering/tech.md Common Commands), commit, then release again",
            );
            err.causes.push(output);
            err
        }
        ReleaseFailure::GateUnrunnable { output, .. } => {
            let mut err = CliError::user(message).with_hint(
                "a problem of the environment, not of the code: install what the command needs or correct it in \
                 .troupe/steering/tech.md (Common Commands), then release again",
            );
            err.causes.push(output);
            err
        }
        ReleaseFailure::Git { .. } => CliError::internal(message).with_hint("check `git status`; nothing was tagged"),
        ReleaseFailure::Io { .. } => CliError::internal(message).with_source(&e),
    }
}
