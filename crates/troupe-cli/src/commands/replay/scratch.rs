//! The scratch copy a replay runs in: the project's files as the recorded run
//! found them (a shared clone of its repository at the run's HEAD, with the
//! run's recorded tree on top: uncommitted and untracked files included), and
//! the store's snapshot as its SQLite store. Nothing of the user's tree, git
//! refs or store is written.

use std::path::{Path, PathBuf};
use std::process::Command;

use troupe_core::layout::Layout;
use troupe_lead::driver::record::{RunRecord, STORE_FILE};

use crate::error::{CliError, CliResult};

fn git(dir: &Path, args: &[&str]) -> CliResult<()> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| CliError::internal("cannot run git").with_source(&e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(CliError::internal(format!(
        "replay: `git {}` failed in {}: {}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// The folder to replay in: `dir` (new or empty), else a new temporary folder that is kept.
pub fn folder(dir: Option<PathBuf>) -> CliResult<PathBuf> {
    let io = |what: &str, e: std::io::Error| CliError::internal(format!("replay: cannot {what}")).with_source(&e);
    let dir = match dir {
        Some(d) => {
            if d.exists() && d.read_dir().map_err(|e| io("read the folder", e))?.next().is_some() {
                return Err(CliError::user(format!("{} is not empty", d.display()))
                    .with_hint("pass a new or empty folder to --dir"));
            }
            std::fs::create_dir_all(&d).map_err(|e| io("create the folder", e))?;
            d
        }
        None => {
            tempfile::Builder::new().prefix("troupe-replay-").tempdir().map_err(|e| io("create a folder", e))?.keep()
        }
    };
    dir.canonicalize().map_err(|e| io("resolve the folder", e))
}

/// Lay the recorded run's start out in `scratch`, from the project at `root`.
pub fn prepare(root: &Path, run_dir: &Path, record: &RunRecord, scratch: &Path) -> CliResult<()> {
    let Some(start) = &record.git else {
        return Err(CliError::user(format!("run {} was recorded outside a git repository", record.run))
            .with_hint("replay needs the files the run started from, which troupe keeps as a git tree"));
    };
    let source = root.display().to_string();
    git(scratch, &["clone", "-q", "--shared", "--no-checkout", &source, "."])?;
    if let Some(head) = &start.head {
        git(scratch, &["checkout", "-q", "--detach", head])?;
    }
    // The run's tree over HEAD, then HEAD's index again: what was uncommitted stays so.
    git(scratch, &["read-tree", "-u", "--reset", &start.tree])?;
    if start.head.is_some() {
        git(scratch, &["reset", "-q"])?;
    }
    let layout = Layout::new(scratch);
    let io = |what: String, e: std::io::Error| CliError::internal(format!("replay: cannot {what}")).with_source(&e);
    std::fs::create_dir_all(layout.state_dir())
        .map_err(|e| io(format!("create {}", layout.state_dir().display()), e))?;
    std::fs::copy(run_dir.join(STORE_FILE), layout.database_file())
        .map_err(|e| io(format!("copy the store's snapshot of {}", run_dir.display()), e))?;
    sqlite_store(&layout)
}

/// The replay's store is the snapshot: a `[store]` naming another backend or
/// file is dropped from the scratch copy's config.toml.
fn sqlite_store(layout: &Layout) -> CliResult<()> {
    let path = layout.config_file();
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        CliError::config(format!("{} is not valid TOML", path.display())).with_source(&e)
    })?;
    let store = table.get("store").and_then(|s| s.as_table());
    let other = store.is_some_and(|s| {
        s.get("url").is_some() || s.get("backend").and_then(|b| b.as_str()).is_some_and(|b| b != "sqlite")
    });
    if other {
        table.remove("store");
        let text = toml::to_string(&table)
            .map_err(|e| CliError::internal("replay: cannot write the config").with_source(&e))?;
        std::fs::write(&path, text)
            .map_err(|e| CliError::internal("replay: cannot write the config").with_source(&e))?;
    }
    Ok(())
}
