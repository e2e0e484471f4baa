//! Resolving the project a command runs in, and the errors of loading its files.

use std::path::{Path, PathBuf};

use troupe_project::Project;
use troupe_project::specs::SpecFileError;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};

/// The folder the command starts from: `-C DIR`, else the current folder;
/// a Builder's command run inside its own worktree starts at its project.
pub fn start_dir(g: &GlobalArgs) -> CliResult<PathBuf> {
    match &g.project {
        Some(dir) => Ok(dir.clone()),
        None => {
            let cwd = std::env::current_dir()
                .map_err(|e| CliError::internal("cannot read the current folder").with_source(&e))?;
            Ok(worktree_project(&cwd).unwrap_or(cwd))
        }
    }
}

/// `TROUPE_PROJECT` when `cwd` is inside the teammate's worktree
/// (`TROUPE_WORKTREE`): the worktree holds copies of the spec files, so it
/// looks like a project, but the config, the store and the board are the
/// project's.
fn worktree_project(cwd: &Path) -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let (worktree, project) = (var(troupe_gate::teammate::env::WORKTREE)?, var(troupe_gate::teammate::env::PROJECT)?);
    let inside = cwd.canonicalize().ok()?.starts_with(worktree.canonicalize().ok()?);
    inside.then_some(project)
}

/// The troupe project at or above the start folder.
pub fn find(g: &GlobalArgs) -> CliResult<Project> {
    let start = start_dir(g)?;
    Project::discover(&start).map_err(|e| {
        CliError::user(e.to_string())
            .with_hint("run `troupe init` in the project's root folder, or point troupe at it with `-C DIR`")
    })
}

/// `.troupe/config.toml` cannot be used: every command reports it the same way.
pub fn config_error(path: &std::path::Path, detail: impl std::fmt::Display) -> CliError {
    let mut err = CliError::config(format!("{} is not valid", path.display()));
    err.causes.push(detail.to_string());
    err.with_hint(CONFIG_HINT)
}

/// `.troupe/config.toml` cannot be used (unreadable, not UTF-8, invalid): exit
/// 3 with its path, the line and the hint, from every command alike.
pub fn config_file_error(err: troupe_project::config::ConfigFileError) -> CliError {
    use troupe_project::config::ConfigFileError as E;
    match &err {
        E::Unreadable { path, source } => CliError::config(format!("cannot read {}", path.display()))
            .with_source(source)
            .with_hint("check the file's permissions (troupe only reads it); `troupe doctor` checks the whole project"),
        E::NotUtf8 { path, .. } => {
            let mut e = CliError::config(format!("{} is not valid", path.display()));
            e.causes.push(err.detail());
            e.with_hint("save the file as UTF-8 (TOML is UTF-8 only): troupe never guesses, nor falls back to defaults")
        }
        E::Invalid { path, .. } => config_error(path, err.detail()),
    }
}

/// The project's config through the one loader ([`troupe_project::config::load`]).
pub fn load_config(project: &Project) -> CliResult<troupe_core::config::Config> {
    troupe_project::config::load(project.layout()).map_err(config_file_error)
}

/// The hint of every broken-config error.
pub const CONFIG_HINT: &str = "fix that line (unknown keys are errors, so a typo never falls back to a default); `troupe doctor` checks the whole project";

/// Turn a spec file error into a user-facing error with a hint.
pub fn spec_error(err: SpecFileError) -> CliError {
    match &err {
        SpecFileError::NotFound { .. } => CliError::user(err.to_string())
            .with_hint("`troupe spec list` shows the existing specs; `troupe spec new <feature>` creates one"),
        SpecFileError::AlreadyExists { feature, .. } => {
            let hint = format!("`troupe spec show {feature}` shows it");
            CliError::user(err.to_string()).with_hint(hint)
        }
        SpecFileError::InvalidName(_) => CliError::user(err.to_string()),
        SpecFileError::Malformed { .. } | SpecFileError::NameMismatch { .. } => {
            CliError::config(err.to_string()).with_hint(
                "fix the file by hand (troupe never rewrites a spec.yaml it cannot read), or restore it with `git checkout`",
            )
        }
        SpecFileError::Transition(_) => CliError::user(err.to_string()),
        SpecFileError::Io { .. } => CliError::internal(err.to_string()).with_source(&err),
    }
}
