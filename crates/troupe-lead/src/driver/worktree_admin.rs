//! A linked worktree's administrative files, read and written as git itself
//! does (gitrepository-layout(5): the worktree's `.git` file names its folder
//! `worktrees/<id>` in the repository, whose `gitdir` file names the
//! worktree's `.git` file back and whose `HEAD` is the worktree's own), so
//! that moving a worktree beside itself or putting its branch in its `HEAD`
//! costs no git process: the Lead does both for every group it opens and
//! closes, and a git process is about 2.5 ms of CPU before it does anything.
//!
//! Anything unusual is left to git: a locked worktree, one with submodules
//! (git refuses to move those), a `HEAD` in a reftable repository, a folder
//! whose files do not read as expected. The caller then runs `git worktree
//! move` or `git symbolic-ref`, which refuse, or not, as they always did.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The worktree's folder in the repository (`<common dir>/worktrees/<id>`),
/// read from the `gitdir:` line of its `.git` file.
pub(super) fn admin_dir(worktree: &Path) -> Option<PathBuf> {
    let file = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let named = file.lines().next()?.strip_prefix("gitdir: ")?.trim_end();
    let dir = worktree.join(named);
    dir.is_dir().then_some(dir)
}

/// The worktree's id (what `worktrees/<id>/HEAD` names its `HEAD` by in the
/// repository's ref namespace).
pub(super) fn id(worktree: &Path) -> Option<String> {
    Some(admin_dir(worktree)?.file_name()?.to_string_lossy().into_owned())
}

/// Move the worktree at `from` to `to`, a new name in the same folder, as
/// `git worktree move` does: rename the folder, then point the repository's
/// `gitdir` file at its new place (absolute or relative, as it was: a
/// sibling's path differs only in its last folder). The worktree's own `.git`
/// file names the repository and stays valid. `false`, with nothing changed,
/// when this is not a case it handles (the caller runs git).
pub(super) fn move_to(from: &Path, to: &Path) -> bool {
    let (Some(name), Some(new), true) = (from.file_name(), to.file_name(), from.parent() == to.parent()) else {
        return false;
    };
    let Some(admin) = admin_dir(from) else { return false };
    // git refuses to move a locked worktree, and one whose submodules may
    // name it by an absolute path.
    if admin.join("locked").exists() || admin.join("modules").exists() || to.exists() {
        return false;
    }
    let Ok(back) = std::fs::read_to_string(admin.join("gitdir")) else { return false };
    let back = back.trim_end();
    let old_tail = format!("/{}/.git", name.to_string_lossy());
    let Some(head) = back.strip_suffix(&old_tail) else { return false };
    let moved = format!("{head}/{}/.git\n", new.to_string_lossy());
    if std::fs::rename(from, to).is_err() {
        return false;
    }
    if write_atomic(&admin.join("gitdir"), moved.as_bytes()).is_err() {
        // Back where git's files say it is.
        let _ = std::fs::rename(to, from);
        return false;
    }
    true
}

/// Put `branch` (a full ref name) in the worktree's `HEAD`, as `git
/// symbolic-ref HEAD <branch>` does in a repository whose refs are files
/// (`files`: what `git rev-parse --show-ref-format` said): under git's lock
/// file, renamed into place. `false` when the lock is taken or a write fails.
pub(super) fn point_head(worktree: &Path, branch: &str) -> bool {
    let Some(admin) = admin_dir(worktree) else { return false };
    write_atomic(&admin.join("HEAD"), format!("ref: {branch}\n").as_bytes()).is_ok()
}

/// Write `bytes` to `path` the way git writes a ref: into `<path>.lock`
/// (created only if absent, which is git's lock), then renamed over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut lock_name = path.as_os_str().to_owned();
    lock_name.push(".lock");
    let lock = PathBuf::from(lock_name);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&lock)?;
    let written = file.write_all(bytes).and_then(|()| std::fs::rename(&lock, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&lock);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(root: &Path, args: &[&str]) -> String {
        super::super::test_git(root, &[], args)
    }

    fn repo_with_worktree() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("r");
        std::fs::create_dir(&root).unwrap();
        run(&root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "a").unwrap();
        run(&root, &["add", "-A"]);
        run(&root, &["commit", "-q", "-m", "start"]);
        let wt = d.path().join("wts").join(".spare-0");
        std::fs::create_dir_all(wt.parent().unwrap()).unwrap();
        run(&root, &["worktree", "add", "-q", "--detach", &wt.to_string_lossy(), "HEAD"]);
        (d, root)
    }

    #[test]
    fn a_moved_worktree_is_where_git_lists_it_and_works_there() {
        let (d, root) = repo_with_worktree();
        let (from, to) = (d.path().join("wts/.spare-0"), d.path().join("wts/G1"));
        assert_eq!(id(&from).as_deref(), Some("-spare-0"));
        assert!(move_to(&from, &to));
        assert!(!from.exists());
        let list = run(&root, &["worktree", "list", "--porcelain"]);
        assert!(list.contains(&format!("worktree {}", to.canonicalize().unwrap().display())), "{list}");
        assert!(!list.contains("prunable"), "{list}");
        // What `git worktree prune` would remove stays: the worktree is whole.
        run(&root, &["worktree", "prune"]);
        assert_eq!(run(&to, &["rev-parse", "--show-toplevel"]), to.canonicalize().unwrap().to_string_lossy());
        run(&root, &["update-ref", "refs/heads/b", "HEAD"]);
        assert!(point_head(&to, "refs/heads/b"));
        assert_eq!(run(&to, &["symbolic-ref", "HEAD"]), "refs/heads/b");
        assert_eq!(run(&to, &["status", "--porcelain"]), "");
        // And git can move it back and remove it.
        run(&root, &["worktree", "move", &to.to_string_lossy(), &from.to_string_lossy()]);
        run(&root, &["worktree", "remove", &from.to_string_lossy()]);
    }

    #[test]
    fn a_locked_worktree_or_a_taken_name_is_left_to_git() {
        let (d, root) = repo_with_worktree();
        let (from, to) = (d.path().join("wts/.spare-0"), d.path().join("wts/G1"));
        std::fs::create_dir(&to).unwrap();
        assert!(!move_to(&from, &to), "the name is taken");
        std::fs::remove_dir(&to).unwrap();
        run(&root, &["worktree", "lock", &from.to_string_lossy()]);
        assert!(!move_to(&from, &to), "locked");
        assert!(from.exists() && !to.exists());
        assert!(!move_to(&from, &d.path().join("elsewhere")), "not a sibling");
        assert!(!move_to(&d.path().join("wts/none"), &to), "no worktree");
    }
}
