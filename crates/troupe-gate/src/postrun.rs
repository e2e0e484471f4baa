//! The post-run ownership check: what a hook cannot see in a shell command
//! (a script, a build step, `python -c`) shows up in `git status`. Around each
//! shell command of a teammate, the hook snapshots the changed files (path,
//! size, modification time) before and after; files that changed during the
//! command and that the teammate may not write are violations — reported to the
//! agent, and reverted when `[gates] revert_violations` is set.
//!
//! Comparing snapshots taken around one command (rather than the whole
//! worktree at the end) keeps parallel Builders in one worktree from being
//! blamed for each other's files, except for a file another teammate changes
//! during the same few seconds.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use troupe_core::ownership::{Decision, Writer, may_write};

/// A changed file's state: enough to tell whether it changed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Size in bytes (`None`: deleted).
    pub len: Option<u64>,
    /// Modification time, nanoseconds since the epoch.
    pub mtime: Option<u128>,
    /// True when git does not track it.
    pub untracked: bool,
}

/// The changed files of a worktree, by path relative to the root.
pub type Snapshot = BTreeMap<String, Stamp>;

/// A write outside the teammate's ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Relative to the root.
    pub path: String,
    /// The ownership rule that refuses it.
    pub rule: String,
    /// True when git does not track it (a new file).
    pub untracked: bool,
}

/// `git status` of `root`, stamped. Errors name the git failure.
pub fn snapshot(root: &Path) -> Result<Snapshot, String> {
    let out = troupe_project::git::command(root)
        .args(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"])
        .output()
        .map_err(|e| format!("cannot run git status: {e}"))?;
    if !out.status.success() {
        return Err(format!("git status failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let mut snap = Snapshot::new();
    for entry in out.stdout.split(|b| *b == 0).filter(|e| e.len() > 3) {
        let untracked = entry.starts_with(b"??");
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        let meta = std::fs::symlink_metadata(root.join(&path)).ok();
        let mtime = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos());
        snap.insert(path, Stamp { len: meta.map(|m| m.len()), mtime, untracked });
    }
    Ok(snap)
}

/// Files that changed between two snapshots (new, changed again, or back to clean).
pub fn changed_between(before: &Snapshot, after: &Snapshot) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = after
        .iter()
        .filter(|(path, stamp)| before.get(*path) != Some(stamp))
        .map(|(path, stamp)| (path.clone(), stamp.untracked))
        .collect();
    out.extend(before.keys().filter(|p| !after.contains_key(*p)).map(|p| (p.clone(), false)));
    out
}

/// The changed files `writer` may not write.
pub fn violations(root: &Path, writer: &Writer<'_>, changed: &[(String, bool)]) -> Vec<Violation> {
    changed
        .iter()
        .filter_map(|(path, untracked)| match may_write(root, Path::new(path), writer) {
            Decision::Allow => None,
            Decision::Deny { rule } => Some(Violation { path: path.clone(), rule, untracked: *untracked }),
        })
        .collect()
}

/// Undo violations: remove new files, restore tracked (or staged) ones from
/// HEAD in both the index and the work tree.
/// Returns the paths it could not revert, with why.
pub fn revert(root: &Path, violations: &[Violation]) -> Vec<(String, String)> {
    let mut failed = Vec::new();
    for v in violations {
        let result = if v.untracked {
            std::fs::remove_file(root.join(&v.path)).map_err(|e| e.to_string())
        } else {
            // From HEAD, index and work tree both: a write the command also
            // staged (`git add -f`) must not survive in the index.
            troupe_project::git::command(root)
                .args(["restore", "--source=HEAD", "--staged", "--worktree", "--", &v.path])
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    if o.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&o.stderr).trim().to_string()) }
                })
        };
        if let Err(e) = result {
            failed.push((v.path.clone(), e));
        }
    }
    failed
}

/// The message for the agent.
pub fn message(violations: &[Violation], reverted: bool, failed: &[(String, String)]) -> String {
    let mut text = format!(
        "troupe ownership (post-run check): this command changed {} file(s) outside your ownership{}:",
        violations.len(),
        if reverted { "; troupe reverted them" } else { "; restore them and change only files you own" }
    );
    for v in violations {
        text.push_str(&format!("\n- {}: {}", v.path, v.rule));
    }
    for (path, why) in failed {
        text.push_str(&format!("\n(could not revert {path}: {why})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use troupe_core::role::Role;

    use super::*;

    fn git(root: &Path, args: &[&str]) {
        let ok = Command::new("git").arg("-C").arg(root).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_builder_is_caught_and_reverted_outside_its_group() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q"]);
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/billing.rs"), "old\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"]);
        std::fs::write(root.join("src/other.rs"), "someone else's work in progress\n").unwrap();

        let before = snapshot(root).unwrap();
        // What a build script might do behind the hook's back.
        std::fs::write(root.join("src/auth.rs"), "mine\n").unwrap();
        std::fs::write(root.join("src/billing.rs"), "not mine\n").unwrap();
        std::fs::write(root.join("src/stray.rs"), "not mine either\n").unwrap();
        let after = snapshot(root).unwrap();

        let changed = changed_between(&before, &after);
        let owned = vec!["src/auth.rs".to_string()];
        let writer = Writer { role: Role::Builder, feature: Some("f"), owned_files: &owned, agent_name: None };
        let found = violations(root, &writer, &changed);
        let paths: Vec<_> = found.iter().map(|v| v.path.as_str()).collect();
        assert_eq!(
            paths,
            ["src/billing.rs", "src/stray.rs"],
            "the other file changed before the command is not blamed"
        );
        assert!(revert(root, &found).is_empty());
        assert_eq!(std::fs::read_to_string(root.join("src/billing.rs")).unwrap(), "old\n");
        assert!(!root.join("src/stray.rs").exists());
        assert!(root.join("src/auth.rs").exists() && root.join("src/other.rs").exists());
        assert!(message(&found, true, &[]).contains("src/billing.rs: src/billing.rs is not in this Builder's group"));
    }

    #[test]
    fn a_write_staged_in_the_same_command_is_reverted_in_the_index_too() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join(".gitignore"), "local.json\n").unwrap();
        std::fs::write(root.join("keep.txt"), "old\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"]);
        let before = snapshot(root).unwrap();
        std::fs::write(root.join("keep.txt"), "forged\n").unwrap();
        std::fs::write(root.join("local.json"), "{\"disableAllHooks\": true}").unwrap();
        git(root, &["add", "-f", "keep.txt", "local.json"]);
        let after = snapshot(root).unwrap();
        let owned: Vec<String> = vec![];
        let writer = Writer { role: Role::Builder, feature: Some("f"), owned_files: &owned, agent_name: None };
        let found = violations(root, &writer, &changed_between(&before, &after));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(revert(root, &found).is_empty());
        assert_eq!(std::fs::read_to_string(root.join("keep.txt")).unwrap(), "old\n");
        let staged =
            Command::new("git").arg("-C").arg(root).args(["diff", "--cached", "--name-only"]).output().unwrap();
        assert!(staged.stdout.is_empty(), "{}", String::from_utf8_lossy(&staged.stdout));
        assert!(!root.join("local.json").exists());
    }

    #[test]
    fn outside_a_git_repository_the_check_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(snapshot(tmp.path()).unwrap_err().contains("git status failed"));
    }
}
