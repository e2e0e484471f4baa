//! File locks and the history of writes (seed 003 category A, "file safety"):
//! an agent holds a lock on a project file so that other agents' writes to it
//! are refused by the hooks; every write troupe sees is recorded, so an agent
//! about to edit a file someone else changed a moment ago is told so.
//!
//! Paths are relative to the project root, with `/` separators and no `.` or
//! `..` parts; callers normalise them (see [`normalize`]) so one file has one key.
//!
//! A lock ends when its holder releases it, when its lease (`expires_at`)
//! passes, or when its holder's process is gone: a lock records the pid and
//! host of the agent that took it (the registry's pid of that agent, when it
//! has one), and a lock whose pid no longer runs on this host is released the
//! next time anyone looks. On another host only the lease can tell.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A lock to take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLock {
    /// The file, relative to the project root ([`normalize`]d).
    pub path: String,
    /// The agent that will hold it.
    pub agent: String,
    /// The process whose end releases the lock; `None` takes the registry's
    /// pid of `agent`, if it has one (else only the lease ends it).
    pub pid: Option<u32>,
    /// The board task the agent works on, for the history.
    pub task: Option<String>,
    /// How long the lease lasts; taking a lock one holds again renews it.
    pub ttl_seconds: u64,
}

/// A lock that is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLock {
    /// The file, relative to the project root.
    pub path: String,
    /// Who holds it.
    pub agent: String,
    /// The process whose end releases it.
    pub pid: Option<u32>,
    /// The host that pid runs on.
    pub host: String,
    /// The task it was taken for.
    pub task: Option<String>,
    /// When it was first taken (a renewal keeps this).
    pub since: Timestamp,
    /// When the lease ends.
    pub expires_at: Timestamp,
}

/// What taking a lock came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LockOutcome {
    /// The caller holds the lock now (newly, or renewed).
    Acquired {
        /// The lock as held.
        lock: FileLock,
    },
    /// Another agent holds it; nothing changed.
    Held {
        /// The other agent's lock.
        lock: FileLock,
    },
}

/// Where a recorded write was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeSource {
    /// A hook saw the write tool run (PostToolUse / AfterTool).
    Hook,
    /// A post-run check found the file changed after a command or a run.
    PostRun,
}

impl ChangeSource {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeSource::Hook => "hook",
            ChangeSource::PostRun => "post_run",
        }
    }
}

/// A write to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFileChange {
    /// The file, relative to the project root.
    pub path: String,
    /// Who wrote it.
    pub agent: String,
    /// For which board task.
    pub task: Option<String>,
    /// Where the write was seen.
    pub source: ChangeSource,
}

/// A recorded write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file, relative to the project root.
    pub path: String,
    /// Who wrote it.
    pub agent: String,
    /// For which board task.
    pub task: Option<String>,
    /// Where the write was seen.
    pub source: ChangeSource,
    /// When.
    pub at: Timestamp,
}

/// `path` as a lock key: relative to `root` when under it, `/`-separated,
/// with `.` parts dropped and `..` applied. `None` for a path outside the
/// project (nothing there is troupe's to lock) or the root itself.
pub fn normalize(root: &std::path::Path, path: &std::path::Path) -> Option<String> {
    use std::path::Component;
    let joined = if path.is_absolute() { path.to_path_buf() } else { root.join(path) };
    let mut parts: Vec<String> = Vec::new();
    for c in joined.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let root_parts: Vec<String> = root
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.len() <= root_parts.len() || parts[..root_parts.len()] != root_parts[..] {
        return None;
    }
    Some(parts[root_parts.len()..].join("/"))
}

/// This machine's name, which a lock's pid is only meaningful on.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::normalize;

    #[test]
    fn paths_become_one_key_per_file() {
        let root = Path::new("/p");
        for (input, want) in [
            ("src/a.rs", Some("src/a.rs")),
            ("./src/../src/a.rs", Some("src/a.rs")),
            ("/p/src/a.rs", Some("src/a.rs")),
            ("/p/../q/a.rs", None),
            ("/tmp/x", None),
            ("/p", None),
            ("../p2/a", None),
        ] {
            assert_eq!(normalize(root, Path::new(input)).as_deref(), want, "{input}");
        }
    }
}
