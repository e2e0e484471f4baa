//! The post-run ownership check: what a hook cannot see in a shell command
//! (a script, a build step, `python -c`) shows up in `git status`. Around each
//! shell command of a teammate, the hook snapshots the changed files (path,
//! size, modification time) before and after; files that changed during the
//! command and that the teammate may not write are violations — reported to the
//! agent, and reverted when `[gates] revert_violations` is set.
//!
//! The snapshot sees what `git status` alone does not: files git ignores
//! (`.claude/settings.local.json` is ignored in many projects), the parts of
//! `.git/` that make git run commands (`config` with its `core.fsmonitor`,
//! and `hooks/`), and a commit made inside the command (`HEAD` moved: the
//! files of that commit count as changed). Small files in those protected
//! places are kept in the snapshot so that a revert can put them back.
//!
//! Comparing snapshots taken around one command (rather than the whole
//! worktree at the end) keeps parallel Builders in one worktree from being
//! blamed for each other's files, except for a file another teammate changes
//! during the same few seconds.
//!
//! A sandboxed teammate's writes outside its ownership never land: the kernel
//! refuses them with EACCES. [`sandbox_refusals`] finds those refusals in the
//! command's output so that they are reported (to the agent and the audit
//! log) like the writes that did land.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use troupe_core::ownership::{Decision, Writer, may_write};

/// The largest protected file a snapshot keeps a copy of.
const KEEP_MAX: u64 = 64 * 1024;

/// Folders where a change matters even when git ignores it; small files
/// there are kept in the snapshot so that a revert can put them back.
const PROTECTED: [&str; 6] = [".git/", ".claude/", ".gemini/", ".codex/", ".opencode/", ".troupe/"];

/// How many files of an ignored protected folder one snapshot stamps.
const IGNORED_FOLDER_MAX: usize = 200;

/// A changed file's state: enough to tell whether it changed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Size in bytes (`None`: deleted).
    pub len: Option<u64>,
    /// Modification time, nanoseconds since the epoch.
    pub mtime: Option<u128>,
    /// True when git does not track it (new, ignored, or inside `.git/`).
    pub untracked: bool,
    /// Its text, for a small file in a protected folder: what a revert writes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// The changed files of a worktree, by path relative to the root, and the
/// commit `HEAD` names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Changed, untracked, ignored and `.git/` files.
    pub files: BTreeMap<String, Stamp>,
    /// `HEAD`'s commit (`None` before the first commit).
    #[serde(default)]
    pub head: Option<String>,
}

/// A file that changed during one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Relative to the root.
    pub path: String,
    /// True when git does not track it (before and after).
    pub untracked: bool,
    /// Its stamp before the command (`None`: it was not in the snapshot).
    pub before: Option<Stamp>,
    /// The commit `HEAD` named before the command, when the command committed this file.
    pub committed_over: Option<String>,
}

/// A write outside the teammate's ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What changed.
    pub change: Change,
    /// The ownership rule that refuses it.
    pub rule: String,
}

impl Violation {
    /// Relative to the root.
    pub fn path(&self) -> &str {
        &self.change.path
    }
}

fn protected(path: &str) -> bool {
    PROTECTED.iter().any(|p| path.starts_with(p)) && !path.starts_with(".troupe/state/")
}

fn stamp(root: &Path, path: &str, untracked: bool) -> Stamp {
    let meta = std::fs::symlink_metadata(root.join(path)).ok();
    let mtime = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos());
    let len = meta.as_ref().map(|m| m.len());
    let kept = (protected(path) && meta.as_ref().is_some_and(|m| m.is_file() && m.len() <= KEEP_MAX))
        .then(|| std::fs::read_to_string(root.join(path)).ok())
        .flatten();
    Stamp { len, mtime, untracked, kept }
}

/// The `n`-th space-separated field of a porcelain v2 entry and everything after it.
fn field_from(entry: &[u8], n: usize) -> Option<&[u8]> {
    entry.splitn(n + 1, |b| *b == b' ').nth(n)
}

/// `git status` of `root` (ignored files included), `.git/config` and
/// `.git/hooks/`, stamped. Errors name the git failure.
pub fn snapshot(root: &Path) -> Result<Snapshot, String> {
    let out = troupe_project::git::command(root)
        .args([
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--untracked-files=all",
            "--ignored=matching",
            "--no-renames",
        ])
        .output()
        .map_err(|e| format!("cannot run git status: {e}"))?;
    if !out.status.success() {
        return Err(format!("git status failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let mut snap = Snapshot::default();
    for entry in out.stdout.split(|b| *b == 0) {
        let (path, untracked) = match entry.first() {
            Some(b'#') => {
                if let Some(oid) = entry.strip_prefix(b"# branch.oid ")
                    && oid != b"(initial)"
                {
                    snap.head = Some(String::from_utf8_lossy(oid).into_owned());
                }
                continue;
            }
            Some(b'1') => (field_from(entry, 8), false),
            Some(b'u') => (field_from(entry, 10), false),
            Some(b'?') => (entry.get(2..), true),
            Some(b'!') => (entry.get(2..), true),
            _ => continue,
        };
        let Some(path) = path.map(|p| String::from_utf8_lossy(p).into_owned()) else { continue };
        if entry.first() == Some(&b'!') {
            if path.starts_with(".troupe/state/") {
                continue;
            }
            if let Some(dir) = path.strip_suffix('/') {
                // A whole ignored folder is a build output, unless it is a
                // protected one: then its files are stamped one by one.
                if protected(&path) {
                    for file in files_under(root, dir) {
                        let s = stamp(root, &file, true);
                        snap.files.insert(file, s);
                    }
                }
                continue;
            }
        }
        let s = stamp(root, &path, untracked);
        snap.files.insert(path, s);
    }
    let git = root.join(".git");
    if git.is_dir() {
        let mut inside = vec![".git/config".to_string()];
        if let Ok(hooks) = std::fs::read_dir(git.join("hooks")) {
            for e in hooks.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                // git never runs a `.sample`.
                if !name.ends_with(".sample") {
                    inside.push(format!(".git/hooks/{name}"));
                }
            }
        }
        for path in inside {
            if root.join(&path).symlink_metadata().is_ok() {
                let s = stamp(root, &path, true);
                snap.files.insert(path, s);
            }
        }
    }
    Ok(snap)
}

/// The files beneath `dir` (relative to `root`), at most [`IGNORED_FOLDER_MAX`].
fn files_under(root: &Path, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_string()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&d)) else { continue };
        for e in entries.flatten() {
            if out.len() >= IGNORED_FOLDER_MAX {
                return out;
            }
            let rel = format!("{d}/{}", e.file_name().to_string_lossy());
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(rel),
                Ok(_) => out.push(rel),
                Err(_) => {}
            }
        }
    }
    out
}

/// Files that changed between two snapshots (new, changed again, or back to
/// clean); when `HEAD` moved, the files of the commits made in between too.
pub fn changed_between(root: &Path, before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let mut out: Vec<Change> = after
        .files
        .iter()
        .filter(|(path, stamp)| before.files.get(*path) != Some(stamp))
        .map(|(path, stamp)| Change {
            path: path.clone(),
            untracked: stamp.untracked && before.files.get(path).is_none_or(|b| b.untracked),
            before: before.files.get(path).cloned(),
            committed_over: None,
        })
        .collect();
    out.extend(before.files.iter().filter(|(p, _)| !after.files.contains_key(*p)).map(|(p, s)| Change {
        path: p.clone(),
        untracked: s.untracked,
        before: Some(s.clone()),
        committed_over: None,
    }));
    if let (Some(old), Some(new)) = (&before.head, &after.head)
        && old != new
    {
        for path in committed(root, old, new) {
            match out.iter_mut().find(|c| c.path == path) {
                Some(c) => c.committed_over = Some(old.clone()),
                None => out.push(Change { path, untracked: false, before: None, committed_over: Some(old.clone()) }),
            }
        }
    }
    out
}

/// The files commits between `old` and `new` changed.
fn committed(root: &Path, old: &str, new: &str) -> Vec<String> {
    let Ok(out) =
        troupe_project::git::command(root).args(["diff", "--name-only", "-z", "--no-renames", old, new, "--"]).output()
    else {
        return Vec::new();
    };
    out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect()
}

/// The changed files `writer` may not write.
pub fn violations(root: &Path, writer: &Writer<'_>, changed: &[Change]) -> Vec<Violation> {
    changed
        .iter()
        .filter_map(|change| match may_write(root, Path::new(&change.path), writer) {
            Decision::Allow => None,
            Decision::Deny { rule } => Some(Violation { change: change.clone(), rule }),
        })
        .collect()
}

/// True when the kernel refuses this process a write to `path` (relative to
/// `root`) although the file's mode lets its owner write it. A teammate's
/// hooks run in its sandbox, so such a file was changed by someone else
/// during the command: the Lead appending its decisions or marking a task
/// done, another teammate in the same tree. Without a sandbox nothing is
/// refused and every change stays the teammate's. The file is opened for
/// writing and closed: nothing is written. A deleted file cannot be probed
/// and stays the teammate's; a file made read-only (which a teammate may do
/// after writing it) is not taken as refused.
pub fn refused_to_this_process(root: &Path, path: &str) -> bool {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let full = root.join(path);
    let Ok(meta) = std::fs::symlink_metadata(&full) else { return false };
    if !meta.is_file() || meta.permissions().mode() & 0o200 == 0 {
        return false;
    }
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    match std::fs::OpenOptions::new().write(true).custom_flags(flags.bits()).open(&full) {
        Ok(_) => false,
        Err(e) => matches!(
            nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)),
            nix::errno::Errno::EACCES | nix::errno::Errno::EROFS
        ),
    }
}

fn git_ok(root: &Path, args: &[&str]) -> Result<(), String> {
    let out = troupe_project::git::command(root).args(args).output().map_err(|e| e.to_string())?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_string()) }
}

/// Undo violations: put back what the snapshot kept, remove new files,
/// restore tracked (or staged) ones from HEAD — or from the commit before,
/// when the command committed them — in both the index and the work tree.
/// Returns the paths it could not revert, with why.
pub fn revert(root: &Path, violations: &[Violation]) -> Vec<(String, String)> {
    let mut failed = Vec::new();
    for v in violations {
        let c = &v.change;
        let file = root.join(&c.path);
        let result = if let Some(old) = &c.committed_over {
            // The commit stays in the history; its change leaves the work tree and the index.
            git_ok(root, &["restore", &format!("--source={old}"), "--staged", "--worktree", "--", &c.path]).or_else(
                |_| {
                    git_ok(root, &["rm", "-q", "--cached", "--ignore-unmatch", "--", &c.path])?;
                    std::fs::remove_file(&file).or_else(ignore_missing).map_err(|e| e.to_string())
                },
            )
        } else if !c.untracked {
            // From HEAD, index and work tree both: a write the command also
            // staged (`git add -f`) must not survive in the index.
            git_ok(root, &["restore", "--source=HEAD", "--staged", "--worktree", "--", &c.path])
        } else {
            match c.before.as_ref().map(|b| &b.kept) {
                Some(Some(text)) => std::fs::write(&file, text).map_err(|e| e.to_string()),
                Some(None) => Err("git does not track it and troupe kept no copy of it".to_string()),
                None => std::fs::remove_file(&file).or_else(ignore_missing).map_err(|e| e.to_string()),
            }
        };
        if let Err(e) = result {
            failed.push((c.path.clone(), e));
        }
    }
    failed
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) }
}

/// The message for the agent.
pub fn message(violations: &[Violation], reverted: bool, failed: &[(String, String)]) -> String {
    let mut text = format!(
        "troupe ownership (post-run check): this command changed {} file(s) outside your ownership{}:",
        violations.len(),
        if reverted { "; troupe reverted them" } else { "; restore them and change only files you own" }
    );
    for v in violations {
        text.push_str(&format!("\n- {}: {}", v.path(), v.rule));
        if let Some(old) = &v.change.committed_over {
            text.push_str(&format!(" (committed; the commit after {} still holds it)", short(old)));
        }
    }
    for (path, why) in failed {
        text.push_str(&format!("\n(could not revert {path}: {why})"));
    }
    text
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// How many refusal lines one report carries.
const REFUSALS_MAX: usize = 20;

/// The lines of a shell command's output (any string in `tool_response`) in
/// which the kernel refused a write: EACCES ("Permission denied"), EXDEV
/// (a rename across the sandbox's folders), and EROFS / EBUSY (spec.yaml,
/// bound read-only for a teammate given its spec folder). Deduplicated, at
/// most 20, each at most 300 characters.
pub fn sandbox_refusals(tool_response: &Value) -> Vec<String> {
    fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            Value::Object(m) => m.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut texts = Vec::new();
    strings(tool_response, &mut texts);
    let mut found: Vec<String> = Vec::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        const REFUSED: [&str; 4] =
            ["Permission denied", "Invalid cross-device link", "Read-only file system", "Device or resource busy"];
        if !REFUSED.iter().any(|r| line.contains(r)) {
            continue;
        }
        let line: String = line.trim().chars().take(300).collect();
        if !found.contains(&line) {
            found.push(line);
        }
        if found.len() == REFUSALS_MAX {
            break;
        }
    }
    found
}

/// The message for the agent when the sandbox refused writes.
pub fn refusal_message(lines: &[String]) -> String {
    let mut text = String::from(
        "troupe sandbox: the kernel refused writes of this command (EACCES) — you may write only the files you \
         own, your engine's state and your temporary folder ($TMPDIR); nothing else was changed:",
    );
    for line in lines {
        text.push_str(&format!("\n- {line}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use troupe_core::role::Role;

    use super::*;

    fn git(root: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q"]);
        for (path, text) in files {
            if let Some(dir) = Path::new(path).parent() {
                std::fs::create_dir_all(root.join(dir)).unwrap();
            }
            std::fs::write(root.join(path), text).unwrap();
        }
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "init"]);
        tmp
    }

    fn found(root: &Path, before: &Snapshot, owned: &[String]) -> Vec<Violation> {
        let after = snapshot(root).unwrap();
        let writer = Writer { role: Role::Builder, feature: Some("f"), owned_files: owned, agent_name: None };
        violations(root, &writer, &changed_between(root, before, &after))
    }

    fn paths(found: &[Violation]) -> Vec<&str> {
        found.iter().map(Violation::path).collect()
    }

    #[test]
    fn a_builder_is_caught_and_reverted_outside_its_group() {
        let tmp = repo(&[("src/billing.rs", "old\n")]);
        let root = tmp.path();
        std::fs::write(root.join("src/other.rs"), "someone else's work in progress\n").unwrap();

        let before = snapshot(root).unwrap();
        // What a build script might do behind the hook's back.
        std::fs::write(root.join("src/auth.rs"), "mine\n").unwrap();
        std::fs::write(root.join("src/billing.rs"), "not mine\n").unwrap();
        std::fs::write(root.join("src/stray.rs"), "not mine either\n").unwrap();
        let found = found(root, &before, &["src/auth.rs".to_string()]);
        assert_eq!(
            paths(&found),
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
        let tmp = repo(&[(".gitignore", "local.json\n"), ("keep.txt", "old\n")]);
        let root = tmp.path();
        let before = snapshot(root).unwrap();
        std::fs::write(root.join("keep.txt"), "forged\n").unwrap();
        std::fs::write(root.join("local.json"), "{\"disableAllHooks\": true}").unwrap();
        git(root, &["add", "-f", "keep.txt", "local.json"]);
        let found = found(root, &before, &[]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(revert(root, &found).is_empty());
        assert_eq!(std::fs::read_to_string(root.join("keep.txt")).unwrap(), "old\n");
        let staged =
            Command::new("git").arg("-C").arg(root).args(["diff", "--cached", "--name-only"]).output().unwrap();
        assert!(staged.stdout.is_empty(), "{}", String::from_utf8_lossy(&staged.stdout));
        assert!(!root.join("local.json").exists());
    }

    #[test]
    fn git_ignored_settings_are_caught_and_put_back() {
        // Many projects ignore Claude's local settings (or the whole `.claude/`):
        // `git status` alone never shows the C1 write there.
        let tmp = repo(&[(".gitignore", ".claude/\nbuild/\n"), ("a.txt", "a\n")]);
        let root = tmp.path();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::write(root.join(".claude/settings.local.json"), "{}\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        let before = snapshot(root).unwrap();
        std::fs::write(root.join(".claude/settings.local.json"), "{\"disableAllHooks\": true}").unwrap();
        std::fs::write(root.join(".claude/settings.json"), "{\"disableAllHooks\": true}").unwrap();
        std::fs::write(root.join("build/out.o"), "a build output").unwrap();
        let found = found(root, &before, &[]);
        assert_eq!(paths(&found), [".claude/settings.json", ".claude/settings.local.json"]);
        assert!(revert(root, &found).is_empty());
        assert_eq!(std::fs::read_to_string(root.join(".claude/settings.local.json")).unwrap(), "{}\n");
        assert!(!root.join(".claude/settings.json").exists());
        assert!(root.join("build/out.o").exists(), "an ignored build folder is nobody's violation");
    }

    #[test]
    fn git_config_and_hooks_are_caught_and_put_back() {
        let tmp = repo(&[("a.txt", "a\n")]);
        let root = tmp.path();
        let config = std::fs::read_to_string(root.join(".git/config")).unwrap();
        let before = snapshot(root).unwrap();
        git(root, &["config", "core.fsmonitor", "sh -c 'touch /tmp/planted'"]);
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\ntouch /tmp/planted\n").unwrap();
        let found = found(root, &before, &[]);
        assert_eq!(paths(&found), [".git/config", ".git/hooks/pre-commit"]);
        assert!(found[0].rule.contains(".git/"), "{}", found[0].rule);
        assert!(revert(root, &found).is_empty());
        assert_eq!(std::fs::read_to_string(root.join(".git/config")).unwrap(), config);
        assert!(!root.join(".git/hooks/pre-commit").exists());
    }

    #[test]
    fn files_committed_by_the_command_are_caught_and_taken_out_of_the_work_tree_and_index() {
        let tmp = repo(&[("victim.txt", "old\n"), ("mine.txt", "m\n")]);
        let root = tmp.path();
        let before = snapshot(root).unwrap();
        std::fs::write(root.join("victim.txt"), "forged\n").unwrap();
        std::fs::write(root.join("planted.txt"), "new\n").unwrap();
        std::fs::write(root.join("mine.txt"), "mine\n").unwrap();
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "sneak"]);
        let found = found(root, &before, &["mine.txt".to_string()]);
        assert_eq!(paths(&found), ["planted.txt", "victim.txt"]);
        assert!(found.iter().all(|v| v.change.committed_over == before.head));
        assert!(message(&found, true, &[]).contains("(committed; the commit after"));
        assert!(revert(root, &found).is_empty());
        assert_eq!(std::fs::read_to_string(root.join("victim.txt")).unwrap(), "old\n");
        assert!(!root.join("planted.txt").exists());
        assert_eq!(std::fs::read_to_string(root.join("mine.txt")).unwrap(), "mine\n");
    }

    #[test]
    fn the_kernels_refusals_are_found_in_the_commands_output() {
        let response = serde_json::json!({
            "stdout": "",
            "stderr": "bash: line 1: .claude/settings.local.json: Permission denied\nfatal: Unable to create '/p/.git/index.lock': Permission denied\nbash: line 1: .claude/settings.local.json: Permission denied",
            "interrupted": false,
        });
        let lines = sandbox_refusals(&response);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(refusal_message(&lines).contains("- bash: line 1: .claude/settings.local.json: Permission denied"));
        assert!(
            sandbox_refusals(&serde_json::json!("Exit code 1\nmv: cannot move 'a' to 'b': Invalid cross-device link"))
                .len()
                == 1
        );
        let ro = serde_json::json!(
            "bash: line 1: spec.yaml: Read-only file system\nmv: cannot move 'x' to 'spec.yaml': Device or resource busy"
        );
        assert_eq!(sandbox_refusals(&ro).len(), 2);
        assert!(sandbox_refusals(&serde_json::json!({"stdout": "all tests pass"})).is_empty());
    }

    #[test]
    fn only_the_kernels_refusal_makes_a_change_someone_elses() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("open.md"), "x").unwrap();
        std::fs::write(dir.path().join("locked.md"), "x").unwrap();
        std::fs::set_permissions(dir.path().join("locked.md"), std::fs::Permissions::from_mode(0o444)).unwrap();
        std::os::unix::fs::symlink("open.md", dir.path().join("link.md")).unwrap();
        // Unsandboxed, nothing is refused; a read-only file, a link and a
        // deleted file are never taken as refused; the probe writes nothing.
        for path in ["open.md", "locked.md", "link.md", "gone.md"] {
            assert!(!refused_to_this_process(dir.path(), path), "{path}");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join("open.md")).unwrap(), "x");
    }

    #[test]
    fn outside_a_git_repository_the_check_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(snapshot(tmp.path()).unwrap_err().contains("git status failed"));
    }
}
