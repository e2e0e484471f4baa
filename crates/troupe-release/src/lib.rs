//! `troupe release patch|minor|major "<summary>"` (seed 000 Spec 14.10–14.11):
//! detect the ecosystem, bump the version where it lives, commit, tag
//! `v{version}`, and create the branch `release/v{version}` as a snapshot that
//! is never merged back (and never checked out: work stays on the trunk).
//!
//! Everything that can refuse is checked before anything changes: a git
//! repository with a commit, a clean working tree, a readable version, a tag
//! and branch that do not exist yet, and a passing quality gate. If the commit
//! fails, the version files are restored.
//!
//! [`version`] is the pure part (detection, bumping, surgical edits); this
//! module runs git and the gate commands.

#![deny(missing_docs)]

pub mod version;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use troupe_core::config::{GateRule, GateStep};
use troupe_gate::quality::{GateEnv, GateResult, run_step};

pub use version::{Ecosystem, Level, ReleaseError};

/// What to release.
#[derive(Debug, Clone)]
pub struct ReleaseRequest {
    /// The repository root.
    pub root: PathBuf,
    /// Which part of the version goes up.
    pub level: Level,
    /// One line for the commit and the tag.
    pub summary: String,
    /// The quality gate (steering's Test, Lint, Build), run in `root` by
    /// troupe-gate's runner: any failure refuses the release.
    pub gate: Vec<GateStep>,
}

/// What a release did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseOutcome {
    /// The detected ecosystem.
    pub ecosystem: Ecosystem,
    /// The file the version was bumped in (none for Other).
    pub file: Option<String>,
    /// The version before.
    pub previous: String,
    /// The new version.
    pub version: String,
    /// `v{version}`.
    pub tag: String,
    /// `release/v{version}`.
    pub branch: String,
    /// The release commit (none for Other, which only tags).
    pub commit: Option<String>,
    /// The gate commands that ran and passed.
    pub gate: Vec<String>,
}

/// Why a release was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseFailure {
    /// The summary is empty.
    #[error("the release summary is empty")]
    EmptySummary,
    /// Not inside a git repository, or no commit yet.
    #[error("{} is not a git repository with at least one commit", .0.display())]
    NotGit(PathBuf),
    /// Uncommitted changes.
    #[error("the working tree has uncommitted changes: {}", .0.join(", "))]
    Dirty(Vec<String>),
    /// The tag or branch exists already.
    #[error("{0} already exists")]
    Exists(String),
    /// The version could not be read or written.
    #[error(transparent)]
    Version(#[from] ReleaseError),
    /// A gate command could not run at all (not installed, exit 127).
    #[error("the quality gate could not run its {label} command `{command}` ({detail})")]
    GateUnrunnable {
        /// Test, Lint or Build.
        label: String,
        /// The command.
        command: String,
        /// How it ended.
        detail: String,
        /// The tail of its output.
        output: String,
    },
    /// A gate command failed.
    #[error("the quality gate failed: `{command}` exited with {status}")]
    Gate {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
        /// The tail of its output.
        output: String,
    },
    /// A git command failed.
    #[error("git {args} failed: {stderr}")]
    Git {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// A file could not be read or written.
    #[error("cannot access {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn git(root: &Path, args: &[&str]) -> Result<String, ReleaseFailure> {
    let out = troupe_project::git::command(root)
        .args(args)
        .output()
        .map_err(|e| ReleaseFailure::Git { args: args.join(" "), stderr: format!("cannot run git: {e}") })?;
    if !out.status.success() {
        return Err(ReleaseFailure::Git {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn git_ok(root: &Path, args: &[&str]) -> bool {
    troupe_project::git::command(root).args(args).output().map(|o| o.status.success()).unwrap_or(false)
}

fn read(path: &Path) -> Result<String, ReleaseFailure> {
    fs::read_to_string(path).map_err(|source| ReleaseFailure::Io { path: path.to_path_buf(), source })
}

fn write(path: &Path, text: &str) -> Result<(), ReleaseFailure> {
    troupe_project::write_atomic(path, text.as_bytes())
        .map_err(|source| ReleaseFailure::Io { path: path.to_path_buf(), source })
}

/// The highest `vX.Y.Z` tag's version, for projects whose version lives only in tags.
fn latest_tag_version(root: &Path) -> Result<String, ReleaseFailure> {
    let tags = git(root, &["tag", "--list", "v*"])?;
    let best = tags
        .lines()
        .filter_map(|t| {
            let v = t.trim().trim_start_matches('v');
            let parts: Vec<u64> = v.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
            (parts.len() == 3).then(|| (parts, v.to_string()))
        })
        .max_by(|a, b| a.0.cmp(&b.0));
    Ok(best.map(|b| b.1).unwrap_or_else(|| "0.0.0".to_string()))
}

/// The release gate: steering's commands are tests, so any failure refuses.
fn run_gate(root: &Path, step: &GateStep) -> Result<(), ReleaseFailure> {
    let timeout = std::time::Duration::from_secs(troupe_core::config::GatesConfig::default().timeout_seconds);
    let step = GateStep { rule: GateRule::Tests, ..step.clone() };
    match run_step(&step, root, &GateEnv::default(), timeout) {
        GateResult::Passed => Ok(()),
        GateResult::Unrunnable(r) => {
            Err(ReleaseFailure::GateUnrunnable { label: r.label, command: r.command, detail: r.detail, output: r.tail })
        }
        GateResult::Failed(r) | GateResult::Errored(r) => {
            Err(ReleaseFailure::Gate { command: r.command, status: r.detail, output: r.tail })
        }
    }
}

/// Make the release. See the module docs for what is checked first.
pub fn release(req: &ReleaseRequest) -> Result<ReleaseOutcome, ReleaseFailure> {
    let summary = req.summary.trim();
    if summary.is_empty() {
        return Err(ReleaseFailure::EmptySummary);
    }
    let root = &req.root;
    if !git_ok(root, &["rev-parse", "--verify", "HEAD"]) {
        return Err(ReleaseFailure::NotGit(root.clone()));
    }
    let status = git(root, &["status", "--porcelain"])?;
    if !status.is_empty() {
        let files = status.lines().map(|l| l.get(3..).unwrap_or(l).to_string()).collect();
        return Err(ReleaseFailure::Dirty(files));
    }
    let ecosystem = Ecosystem::detect(|f| root.join(f).is_file());
    let file = ecosystem.version_file();
    let (previous, original) = match file {
        Some(f) => {
            let text = read(&root.join(f))?;
            (version::read_version(ecosystem, &text)?, Some(text))
        }
        None => (latest_tag_version(root)?, None),
    };
    let new = version::bump(&previous, req.level)?;
    let tag = format!("v{new}");
    let branch = format!("release/{tag}");
    if git_ok(root, &["rev-parse", "--verify", "--quiet", &format!("refs/tags/{tag}")]) {
        return Err(ReleaseFailure::Exists(format!("tag {tag}")));
    }
    if git_ok(root, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")]) {
        return Err(ReleaseFailure::Exists(format!("branch {branch}")));
    }
    for step in &req.gate {
        run_gate(root, step)?;
    }

    let mut changed: Vec<(PathBuf, String)> = Vec::new();
    if let (Some(f), Some(text)) = (file, &original) {
        let path = root.join(f);
        write(&path, &version::write_version(ecosystem, text, &new)?)?;
        changed.push((path, text.clone()));
        if let Some(lock) = ecosystem.lock_file()
            && root.join(lock).is_file()
            && git_ok(root, &["ls-files", "--error-unmatch", lock])
        {
            let path = root.join(lock);
            let before = read(&path)?;
            let after = match ecosystem {
                Ecosystem::Rust => version::bump_cargo_lock(&before, &previous, &new),
                _ => version::bump_package_lock(&before, &new)?,
            };
            write(&path, &after)?;
            changed.push((path, before));
        }
    }
    let message = format!("Release {tag}: {summary}");
    let commit = if changed.is_empty() {
        None
    } else {
        let paths: Vec<String> =
            changed.iter().map(|(p, _)| p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned()).collect();
        let mut add = vec!["add", "--"];
        add.extend(paths.iter().map(String::as_str));
        let committed = git(root, &add).and_then(|_| git(root, &["commit", "-m", &message]));
        if let Err(e) = committed {
            for (path, text) in &changed {
                let _ = troupe_project::write_atomic(path, text.as_bytes());
            }
            let _ = git(root, &["reset", "-q", "--", "."]);
            return Err(e);
        }
        Some(git(root, &["rev-parse", "HEAD"])?)
    };
    git(root, &["tag", "-a", &tag, "-m", &message])?;
    git(root, &["branch", &branch, &tag])?;
    Ok(ReleaseOutcome {
        ecosystem,
        file: file.map(str::to_string),
        previous,
        version: new,
        tag,
        branch,
        commit,
        gate: req.gate.iter().map(|s| s.command.clone()).collect(),
    })
}
