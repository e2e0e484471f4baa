//! The compiled role policy kept in memory by a long-lived process (the
//! hook answerer, which calls [`keep_in_memory`]); a one-shot hook keeps
//! nothing.
//!
//! An entry is the checks built for a project under a key (the skills'
//! stamps and the role settings, as the cache file's), kept only for a
//! settled key. It is reused in two ways:
//! - while the project's skills [`Watch`] has seen nothing: no `stat` at
//!   all. The watch (inotify on the skills folder and each skill's folder)
//!   is armed before the stamps are taken, so any change made after them
//!   is queued by the kernel before the call that made it returns, and the
//!   next lookup sees it. A skill reached through a symbolic link, whose
//!   target a watch would not cover, gets no watch;
//! - else under the stamps' key, like the cache file but without reading
//!   it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nix::libc;

use super::Checks;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Keep compiled role policies in memory in this process from now on: for
/// a process that answers many hook calls.
pub fn keep_in_memory() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether this process keeps them.
pub(super) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Projects remembered at once; one process serves one or a few.
const PROJECTS: usize = 8;

struct Entry {
    root: PathBuf,
    key: u64,
    /// The role settings the checks were built with (serialized).
    roles: Vec<u8>,
    checks: Arc<Checks>,
    watch: Option<Watch>,
}

static KEPT: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn kept() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The checks kept for `root` and `roles` when its skills folder `skills`
/// is watched and nothing changed there since they were built.
pub(super) fn unchanged(root: &Path, skills: &Path, roles: &[u8]) -> Option<Arc<Checks>> {
    let mut kept = kept();
    let entry = kept.iter_mut().find(|e| e.root == root)?;
    let watch = entry.watch.as_ref()?;
    if entry.roles != roles {
        return None;
    }
    if watch.unchanged(skills) {
        return Some(entry.checks.clone());
    }
    // Something changed: the stamps decide from now on, until a new watch.
    entry.watch = None;
    None
}

/// The checks kept for `root` under the stamps' `key`; `watch`, armed
/// before those stamps were taken, is then kept with them.
pub(super) fn get(root: &Path, key: u64, watch: &mut Option<Watch>) -> Option<Arc<Checks>> {
    let mut kept = kept();
    let entry = kept.iter_mut().find(|e| e.root == root && e.key == key)?;
    if watch.is_some() {
        entry.watch = watch.take();
    }
    Some(entry.checks.clone())
}

/// Keep `checks`, built under `key` from `roles`, for `root`.
pub(super) fn put(root: &Path, key: u64, roles: Vec<u8>, checks: &Arc<Checks>, watch: Option<Watch>) {
    let mut kept = kept();
    kept.retain(|e| e.root != root);
    if kept.len() >= PROJECTS {
        kept.remove(0);
    }
    kept.push(Entry { root: root.to_path_buf(), key, roles, checks: checks.clone(), watch });
}

/// Whether the checks kept for `root` are watched (tests).
#[cfg(test)]
pub(super) fn watched(root: &Path) -> bool {
    kept().iter().any(|e| e.root == root && e.watch.is_some())
}

/// An inotify watch on a skills folder and on each skill's folder in it.
pub(super) struct Watch {
    fd: OwnedFd,
    /// The skills folder's device and inode when armed: a folder put in its
    /// place (or an ancestor renamed) is another folder, which no watch covers.
    folder: (u64, u64),
}

/// What changes a skills folder: skills added, removed, renamed; the folder itself going.
const FOLDER_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW;

/// What changes a skill: any file in its folder written, replaced, removed.
const SKILL_EVENTS: u32 = FOLDER_EVENTS | libc::IN_MODIFY | libc::IN_ATTRIB | libc::IN_CLOSE_WRITE;

impl Watch {
    /// Watch `dir` and each folder in it; `None` when that cannot be done
    /// exactly (no inotify, too many watches, an entry or a SKILL.md that
    /// is a symbolic link).
    pub(super) fn arm(dir: &Path) -> Option<Watch> {
        // SAFETY: plain system call; the descriptor is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The folder first: a skill added while its neighbours are armed is an event.
        add(&fd, dir, FOLDER_EVENTS)?;
        for entry in std::fs::read_dir(dir).ok()? {
            let entry = entry.ok()?;
            let kind = entry.file_type().ok()?;
            if kind.is_symlink() {
                return None;
            }
            if !kind.is_dir() {
                continue;
            }
            let folder = entry.path();
            add(&fd, &folder, SKILL_EVENTS)?;
            if std::fs::symlink_metadata(folder.join("SKILL.md")).is_ok_and(|m| m.file_type().is_symlink()) {
                return None;
            }
        }
        let meta = std::fs::metadata(dir).ok()?;
        Some(Watch { fd, folder: (meta.dev(), meta.ino()) })
    }

    /// Whether nothing changed in the watched skills since armed (`dir`
    /// still the folder watched, no event queued).
    fn unchanged(&self, dir: &Path) -> bool {
        let mut buf = [0u8; 4096];
        // SAFETY: `buf` is valid for writes of its length.
        let read = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        let quiet = read < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
        quiet && std::fs::metadata(dir).is_ok_and(|m| (m.dev(), m.ino()) == self.folder)
    }
}

fn add(fd: &OwnedFd, path: &Path, mask: u32) -> Option<()> {
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let watch = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
    (watch >= 0).then_some(())
}
