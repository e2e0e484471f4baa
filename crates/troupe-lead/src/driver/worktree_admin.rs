//! A linked worktree's administrative files, read and written as git itself
//! does (gitrepository-layout(5): the worktree's `.git` file names its folder
//! `worktrees/<id>` in the repository, whose `gitdir` file names the
//! worktree's `.git` file back and whose `HEAD` is the worktree's own), so
//! that moving a worktree beside itself, putting its branch in its `HEAD`,
//! telling whether a reset worktree needs `git clean` (its index read) and
//! removing a worktree at the run's end cost no git process: the Lead does
//! these for every group it opens and closes, and a git process is about
//! 2.5 ms of CPU before it does anything.
//!
//! Anything unusual is left to git: a locked worktree, one with submodules
//! (git refuses to move those), a `HEAD` in a reftable repository, a folder
//! whose files do not read as expected. The caller then runs `git worktree
//! move` or `git symbolic-ref`, which refuse, or not, as they always did.

use std::collections::HashSet;
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

/// The commit the branch `name` (a full ref name) points at, read from its
/// loose ref file in the repository of the worktree at `worktree` (a ref
/// git wrote as a file holds the id and a newline; a loose ref is the one
/// git reads before the packed ones). `None` when there is no such file or
/// it holds anything else (a symbolic ref, a packed-only ref): the caller
/// asks git.
pub(super) fn loose_ref(worktree: &Path, name: &str) -> Option<String> {
    let admin = admin_dir(worktree)?;
    let common = admin.join(std::fs::read_to_string(admin.join("commondir")).ok()?.trim_end());
    if !name.starts_with("refs/heads/") || name.split('/').any(|part| part.is_empty() || part.starts_with('.')) {
        return None;
    }
    let text = std::fs::read_to_string(common.join(name)).ok()?;
    let id = text.strip_suffix('\n')?;
    ((id.len() == 40 || id.len() == 64) && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

/// Remove the worktree at `path` and its folder in the repository, as `git
/// worktree remove --force --force` does (a run's end removes every spare
/// and leftover this way: one process each, twice with the `prune` after
/// it, on the Lead's path). `false`, with nothing changed, when this is
/// not a case it handles: no worktree git's files describe as read here,
/// a locked one, a repository folder that does not name it back. A
/// failure part way leaves the rest to the caller's `git worktree remove`.
pub(super) fn remove(path: &Path) -> bool {
    let Some(admin) = admin_dir(path) else { return false };
    if admin.join("locked").exists() || admin.parent().and_then(Path::file_name) != Some("worktrees".as_ref()) {
        return false;
    }
    let Ok(back) = std::fs::read_to_string(admin.join("gitdir")) else { return false };
    let named = admin.join(back.trim_end()).canonicalize().ok();
    if named.is_none() || named != path.join(".git").canonicalize().ok() {
        return false;
    }
    std::fs::remove_dir_all(path).is_ok() && std::fs::remove_dir_all(&admin).is_ok()
}

/// After a reset (`git reset --hard`), whether what `git clean -fdx` would
/// remove from the worktree at `path` is at most folders that hold no file
/// (the sandbox makes a teammate's build-output folders, `target/` and the
/// like, before it starts): those are removed here, and `true` says the
/// worktree now holds exactly what git tracks, so no `git clean` process
/// (a walk of the tree with the ignore rules) is needed. Anything else git
/// does not track (a file, ignored or not; a nested repository) is left to
/// `git clean`: `false`. Also `false`, with nothing removed, whenever it
/// cannot tell: an index it does not read (git's index versions 2 to 4,
/// SHA-1 ids), a sparse checkout, a split index, a folder it cannot read.
pub(super) fn clean_but_empty_folders(path: &Path) -> bool {
    let Some(admin) = admin_dir(path) else { return false };
    if admin.join("info").join("sparse-checkout").exists() {
        return false;
    }
    let common = match std::fs::read_to_string(admin.join("commondir")) {
        Ok(named) => admin.join(named.trim_end()),
        Err(_) => return false,
    };
    // SHA-256 ids (another entry size), and a split index (its shared part
    // lives in the common folder): left to git.
    let config = std::fs::read_to_string(common.join("config")).unwrap_or_default().to_ascii_lowercase();
    if config.contains("objectformat") {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(&common) else { return false };
    if entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("sharedindex.")) {
        return false;
    }
    let Some(tracked) = std::fs::read(admin.join("index")).ok().and_then(|bytes| index_paths(&bytes)) else {
        return false;
    };
    let mut folders: HashSet<&[u8]> = HashSet::new();
    for p in &tracked {
        let mut end = p.len();
        while let Some(slash) = p[..end].iter().rposition(|&b| b == b'/') {
            if !folders.insert(&p[..slash]) {
                break;
            }
            end = slash;
        }
    }
    let tracked: HashSet<&[u8]> = tracked.iter().map(Vec::as_slice).collect();
    let mut empty = Vec::new();
    if !untracked_only_empty(path, b"", &tracked, &folders, &mut empty) {
        return false;
    }
    empty.iter().all(|dir| std::fs::remove_dir_all(dir).is_ok())
}

/// Walk `dir` (`rel` inside the worktree): `false` at the first entry git
/// does not track that is not a folder holding no file; those folders are
/// added to `empty`.
fn untracked_only_empty(
    dir: &Path,
    rel: &[u8],
    tracked: &HashSet<&[u8]>,
    folders: &HashSet<&[u8]>,
    empty: &mut Vec<PathBuf>,
) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let name = entry.file_name();
        if rel.is_empty() && name == ".git" {
            continue;
        }
        let mut path = rel.to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name.as_bytes());
        if tracked.contains(path.as_slice()) {
            continue;
        }
        let Ok(kind) = entry.file_type() else { return false };
        if !kind.is_dir() {
            return false;
        }
        if folders.contains(path.as_slice()) {
            if !untracked_only_empty(&entry.path(), &path, tracked, folders, empty) {
                return false;
            }
        } else if holds_no_file(&entry.path()) {
            empty.push(entry.path());
        } else {
            return false;
        }
    }
    true
}

/// Whether the folder at `dir` holds nothing but folders, at any depth.
fn holds_no_file(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.into_iter().all(|e| {
        e.is_ok_and(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != ".git" && holds_no_file(&e.path()))
    })
}

/// The paths of every entry of git's index file `bytes` (index versions 2
/// to 4, SHA-1 ids; gitindex(5)), `None` when it does not read as one.
fn index_paths(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let word = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    if bytes.get(..4)? != b"DIRC" {
        return None;
    }
    let (version, count) = (word(4)?, word(8)?);
    if !(2..=4).contains(&version) {
        return None;
    }
    // Each entry: times, ids and sizes (40 bytes), the object id (20),
    // the flags (2), extended flags (2, version 3 and up, when flagged).
    const FIXED: usize = 62;
    let (mut at, mut paths, mut last) = (12usize, Vec::with_capacity(count as usize), Vec::new());
    for _ in 0..count {
        let flags = u16::from_be_bytes(bytes.get(at + 60..at + 62)?.try_into().ok()?);
        let mut name_at = at + FIXED;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return None;
            }
            name_at += 2;
        }
        let name = if version == 4 {
            // How many bytes of the previous path to drop (git's varint), then the rest.
            let (mut strip, mut i) = (0usize, name_at);
            let mut c = *bytes.get(i)?;
            i += 1;
            strip = strip.checked_add(usize::from(c & 127))?;
            while c & 128 != 0 {
                c = *bytes.get(i)?;
                i += 1;
                strip = strip.checked_add(1)?.checked_mul(128)?.checked_add(usize::from(c & 127))?;
            }
            let rest_len = bytes.get(i..)?.iter().position(|&b| b == 0)?;
            let mut name = last.get(..last.len().checked_sub(strip)?)?.to_vec();
            name.extend_from_slice(&bytes[i..i + rest_len]);
            at = i + rest_len + 1;
            name
        } else {
            let len = bytes.get(name_at..)?.iter().position(|&b| b == 0)?;
            let name = bytes[name_at..name_at + len].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 bytes.
            at += (name_at - at + len + 8) & !7;
            name
        };
        last.clone_from(&name);
        paths.push(name);
    }
    Some(paths)
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
    fn a_reset_worktree_needs_no_clean_when_it_holds_only_empty_folders_git_does_not_track() {
        let (d, _root) = repo_with_worktree();
        let wt = d.path().join("wts/.spare-0");
        std::fs::create_dir_all(wt.join("src/deep")).unwrap();
        std::fs::write(wt.join("src/deep/b.txt"), "b").unwrap();
        std::fs::write(wt.join(".gitignore"), "*.log\n").unwrap();
        run(&wt, &["add", "-A"]);
        run(&wt, &["commit", "-q", "-m", "more"]);
        assert!(clean_but_empty_folders(&wt), "as committed");
        // Folders holding no file, as the sandbox makes them: removed here.
        for dir in ["target", "src/__pycache__", "node_modules/.cache", "src/deep/x/y"] {
            std::fs::create_dir_all(wt.join(dir)).unwrap();
        }
        assert!(clean_but_empty_folders(&wt));
        assert!(!wt.join("target").exists() && !wt.join("node_modules").exists());
        assert!(!wt.join("src/__pycache__").exists() && !wt.join("src/deep/x").exists());
        assert!(wt.join("src/deep/b.txt").exists());
        assert_eq!(run(&wt, &["status", "--porcelain", "--ignored"]), "");
        // Anything else `git clean -fdx` removes is left to it, nothing removed here.
        for extra in ["new.txt", "src/build.log", "target/debug/out", "src/deep/x/.keep"] {
            std::fs::create_dir_all(wt.join(extra).parent().unwrap()).unwrap();
            std::fs::create_dir_all(wt.join("empty")).unwrap();
            std::fs::write(wt.join(extra), "x").unwrap();
            assert!(!clean_but_empty_folders(&wt), "{extra}");
            assert!(wt.join(extra).exists() && wt.join("empty").exists(), "{extra}: nothing removed");
            run(&wt, &["clean", "-q", "-f", "-d", "-x"]);
            assert!(clean_but_empty_folders(&wt), "{extra} cleaned");
        }
        // A nested repository: left to git.
        run(&wt, &["init", "-q", "nested"]);
        assert!(!clean_but_empty_folders(&wt), "nested repository");
        std::fs::remove_dir_all(wt.join("nested")).unwrap();
        // Index versions 3 (an extended flag) and 4 (paths prefix-compressed) read too.
        std::fs::write(wt.join("src/deep/c.txt"), "c").unwrap();
        run(&wt, &["add", "-N", "src/deep/c.txt"]);
        std::fs::create_dir_all(wt.join("target")).unwrap();
        assert!(clean_but_empty_folders(&wt), "version 3");
        assert!(!wt.join("target").exists());
        run(&wt, &["update-index", "--index-version", "4"]);
        std::fs::create_dir_all(wt.join("src/deep/z")).unwrap();
        assert!(clean_but_empty_folders(&wt), "version 4");
        assert!(!wt.join("src/deep/z").exists());
        std::fs::write(wt.join("src/deep/d.txt"), "d").unwrap();
        assert!(!clean_but_empty_folders(&wt), "version 4, an untracked file");
        std::fs::remove_file(wt.join("src/deep/d.txt")).unwrap();
        // A sparse checkout, or an index not read here: left to `git clean`.
        let admin = admin_dir(&wt).unwrap();
        std::fs::create_dir_all(admin.join("info")).unwrap();
        std::fs::write(admin.join("info/sparse-checkout"), "/*\n").unwrap();
        std::fs::create_dir_all(wt.join("target")).unwrap();
        assert!(!clean_but_empty_folders(&wt), "sparse checkout");
        assert!(wt.join("target").exists(), "nothing removed");
        std::fs::remove_file(admin.join("info/sparse-checkout")).unwrap();
        std::fs::write(admin.join("index"), "not an index").unwrap();
        assert!(!clean_but_empty_folders(&wt), "unreadable index");
    }

    #[test]
    fn the_index_reads_as_git_lists_it_in_every_version() {
        let (d, _root) = repo_with_worktree();
        let wt = d.path().join("wts/.spare-0");
        for (i, name) in ["z.txt", "a/b/c.txt", "a/b/cd.txt", "a/bé.txt", "a-b.txt", "long/"].iter().enumerate() {
            let long = format!("{}/{}.txt", "m".repeat(200), "n".repeat(200));
            let name = if name.ends_with('/') { format!("{name}{long}") } else { name.to_string() };
            std::fs::create_dir_all(wt.join(&name).parent().unwrap()).unwrap();
            std::fs::write(wt.join(&name), i.to_string()).unwrap();
        }
        run(&wt, &["add", "-A"]);
        std::fs::write(wt.join("itа.txt"), "intent").unwrap();
        run(&wt, &["add", "-N", "itа.txt"]);
        for version in ["2", "3", "4"] {
            if version != "3" {
                run(&wt, &["update-index", "--index-version", version]);
            }
            let listed = run(&wt, &["-c", "core.quotePath=false", "ls-files"]);
            let admin = admin_dir(&wt).unwrap();
            let read = index_paths(&std::fs::read(admin.join("index")).unwrap()).unwrap();
            let read: Vec<String> = read.into_iter().map(|p| String::from_utf8(p).unwrap()).collect();
            assert_eq!(read.join("\n"), listed, "version {version}");
        }
    }

    #[test]
    fn a_worktree_is_removed_as_git_removes_it_unless_locked_or_not_named_back() {
        let (d, root) = repo_with_worktree();
        let wt = d.path().join("wts/.spare-0");
        let admin = admin_dir(&wt).unwrap();
        std::fs::write(wt.join("untracked.txt"), "x").unwrap();
        run(&root, &["worktree", "lock", &wt.to_string_lossy()]);
        assert!(!remove(&wt), "locked");
        run(&root, &["worktree", "unlock", &wt.to_string_lossy()]);
        // A repository folder that names another worktree back is not this one's.
        let other = d.path().join("wts/other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::copy(wt.join(".git"), other.join(".git")).unwrap();
        assert!(!remove(&other), "not named back");
        assert!(other.exists() && wt.exists() && admin.exists());
        std::fs::remove_dir_all(&other).unwrap();
        assert!(remove(&wt));
        assert!(!wt.exists() && !admin.exists());
        let list = run(&root, &["worktree", "list", "--porcelain"]);
        assert_eq!(list.matches("worktree ").count(), 1, "only the main tree:\n{list}");
        assert!(!remove(&wt), "gone");
    }

    #[test]
    fn a_branchs_commit_is_read_from_its_loose_ref_or_left_to_git() {
        let (d, root) = repo_with_worktree();
        let wt = d.path().join("wts/.spare-0");
        run(&wt, &["checkout", "-q", "-b", "troupe/f/G1"]);
        std::fs::write(wt.join("g.txt"), "g").unwrap();
        run(&wt, &["add", "-A"]);
        run(&wt, &["commit", "-q", "-m", "g"]);
        let head = run(&wt, &["rev-parse", "HEAD"]);
        assert_eq!(loose_ref(&wt, "refs/heads/troupe/f/G1").as_deref(), Some(head.as_str()));
        assert_eq!(loose_ref(&wt, "refs/heads/troupe/f/none"), None);
        assert_eq!(loose_ref(&wt, "refs/heads/../HEAD"), None, "only a branch's own file");
        // Packed: no loose file, so git is asked.
        run(&root, &["pack-refs", "--all"]);
        assert_eq!(loose_ref(&wt, "refs/heads/troupe/f/G1"), None);
        assert_eq!(run(&root, &["rev-parse", "refs/heads/troupe/f/G1"]), head);
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
