//! Session markers: which skills a session invoked and whether it changed code.
//!
//! They live in a per-user state directory (`$TROUPE_STATE_DIR`, else
//! `$XDG_STATE_HOME/troupe/markers`, else `~/.local/state/troupe/markers`),
//! created with mode 0700 and checked on every use: a real directory (not a
//! symlink), owned by this user, not readable by others. Seed 001's shared
//! `/tmp/claude-praxis-markers/` let any local user forge or delete markers; this
//! does not. One folder per session key, one empty file per marker, so
//! concurrent hooks of one session never overwrite each other's markers.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const CODE_SESSION: &str = "code-session";
const SKILL_PREFIX: &str = "skill.";

/// What a session has done so far, as far as the gates care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// Skills invoked (names without plugin prefixes).
    pub skills: BTreeSet<String>,
    /// True once a code file was written (seed 001's `code-session` marker).
    pub code_session: bool,
}

impl SessionState {
    /// True when `skill` was invoked in this session.
    pub fn has_skill(&self, skill: &str) -> bool {
        self.skills.contains(skill)
    }
}

/// A marker operation that failed; names the path and what was checked.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// No directory could be chosen.
    #[error("no state directory: neither TROUPE_STATE_DIR, XDG_STATE_HOME nor HOME is set")]
    NoHome,
    /// The directory is not safe to trust.
    #[error("the marker directory {} is unsafe: {why}", path.display())]
    Unsafe {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A filesystem call failed.
    #[error("cannot {action} {}", path.display())]
    Io {
        /// What troupe tried.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
}

/// The markers directory of this user.
#[derive(Debug, Clone)]
pub struct MarkerStore {
    dir: PathBuf,
}

/// Where markers live, from the environment (`lookup` reads a variable).
pub fn default_dir(lookup: impl Fn(&str) -> Option<String>) -> Result<PathBuf, MarkerError> {
    let non_empty = |k: &str| lookup(k).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("TROUPE_STATE_DIR") {
        return Ok(PathBuf::from(dir).join("markers"));
    }
    if let Some(dir) = non_empty("XDG_STATE_HOME") {
        return Ok(PathBuf::from(dir).join("troupe/markers"));
    }
    non_empty("HOME").map(|h| PathBuf::from(h).join(".local/state/troupe/markers")).ok_or(MarkerError::NoHome)
}

impl MarkerStore {
    /// Open (creating with mode 0700 if needed) the markers directory `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<MarkerStore, MarkerError> {
        let dir = dir.into();
        if fs::symlink_metadata(&dir).is_err() {
            if let Some(parent) = dir.parent() {
                fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(|source| MarkerError::Io {
                    action: "create the state directory",
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            match fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(MarkerError::Io { action: "create the marker directory", path: dir, source });
                }
            }
        }
        check_private(&dir)?;
        Ok(MarkerStore { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn session_dir(&self, key: &str) -> PathBuf {
        self.dir.join(encode(key))
    }

    /// The state of session `key` (empty when it has no markers yet).
    pub fn load(&self, key: &str) -> Result<SessionState, MarkerError> {
        let dir = self.session_dir(key);
        let mut state = SessionState::default();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(state),
            Err(source) => return Err(MarkerError::Io { action: "read the session markers in", path: dir, source }),
        };
        for entry in entries {
            let entry = entry.map_err(|source| MarkerError::Io {
                action: "read the session markers in",
                path: dir.clone(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == CODE_SESSION {
                state.code_session = true;
            } else if let Some(skill) = name.strip_prefix(SKILL_PREFIX) {
                state.skills.insert(decode(skill));
            }
        }
        Ok(state)
    }

    /// Record that session `key` invoked `skill`.
    pub fn mark_skill(&self, key: &str, skill: &str) -> Result<(), MarkerError> {
        self.touch(key, &format!("{SKILL_PREFIX}{}", encode(skill)))
    }

    /// Record that session `key` wrote a code file.
    pub fn mark_code_session(&self, key: &str) -> Result<(), MarkerError> {
        self.touch(key, CODE_SESSION)
    }

    fn touch(&self, key: &str, name: &str) -> Result<(), MarkerError> {
        let dir = self.session_dir(key);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let meta = fs::symlink_metadata(&dir).map_err(|source| MarkerError::Io {
                    action: "inspect",
                    path: dir.clone(),
                    source,
                })?;
                if !meta.is_dir() {
                    return Err(MarkerError::Unsafe { path: dir, why: "it is not a directory".into() });
                }
            }
            Err(source) => return Err(MarkerError::Io { action: "create the session markers", path: dir, source }),
        }
        let path = dir.join(name);
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| MarkerError::Io { action: "write the marker", path: path.clone(), source })?;
        // Touch the folder so its age is the session's last activity.
        let _ = fs::File::open(&dir).and_then(|f| f.set_modified(SystemTime::now()));
        Ok(())
    }

    /// Keep `bytes` under `name` for session `key` (the post-run check's snapshots).
    pub fn save_note(&self, key: &str, name: &str, bytes: &[u8]) -> Result<(), MarkerError> {
        let note = format!("note.{}", encode(name));
        self.touch(key, &note)?;
        let path = self.session_dir(key).join(note);
        fs::write(&path, bytes).map_err(|source| MarkerError::Io { action: "write the note", path, source })
    }

    /// Take back (read and remove) the note `name` of session `key`.
    pub fn take_note(&self, key: &str, name: &str) -> Option<Vec<u8>> {
        let path = self.session_dir(key).join(format!("note.{}", encode(name)));
        let bytes = fs::read(&path).ok()?;
        let _ = fs::remove_file(&path);
        Some(bytes)
    }

    /// Remove every marker of session `key` (SessionEnd).
    pub fn clear(&self, key: &str) -> Result<(), MarkerError> {
        let dir = self.session_dir(key);
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(MarkerError::Io { action: "remove the session markers", path: dir, source }),
        }
    }

    /// Remove sessions whose last marker is older than `max_age`; returns how many.
    pub fn sweep(&self, max_age: Duration, now: SystemTime) -> Result<usize, MarkerError> {
        let entries = fs::read_dir(&self.dir).map_err(|source| MarkerError::Io {
            action: "read",
            path: self.dir.clone(),
            source,
        })?;
        let mut removed = 0;
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let age = meta.modified().ok().and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
            if meta.is_dir() && age > max_age && fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Refuse a marker directory another user could write or swap.
fn check_private(dir: &Path) -> Result<(), MarkerError> {
    let unsafe_ = |why: String| MarkerError::Unsafe { path: dir.to_path_buf(), why };
    let meta = fs::symlink_metadata(dir).map_err(|source| MarkerError::Io {
        action: "inspect",
        path: dir.to_path_buf(),
        source,
    })?;
    if meta.file_type().is_symlink() {
        return Err(unsafe_("it is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Err(unsafe_("it is not a directory".into()));
    }
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me {
        return Err(unsafe_(format!("it is owned by uid {}, not by this user (uid {me})", meta.uid())));
    }
    if meta.mode() & 0o077 != 0 {
        // Ours, but too open: close it rather than refuse.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|source| MarkerError::Io {
            action: "make private",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

/// A session key or skill name as a safe file name: `[A-Za-z0-9_-]` kept, every
/// other byte as `%XX` (so `.`, `/` and `..` can never escape the folder).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() { "%".into() } else { out }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_per_session() {
        let tmp = tempfile::tempdir().unwrap();
        let store = MarkerStore::open(tmp.path().join("state/markers")).unwrap();
        let mode = fs::metadata(store.dir()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(store.load("s1").unwrap(), SessionState::default());
        store.mark_skill("s1", "code-quality-rules").unwrap();
        store.mark_code_session("s1").unwrap();
        store.mark_skill("../s2", "a/b").unwrap();
        let s1 = store.load("s1").unwrap();
        assert!(s1.code_session && s1.has_skill("code-quality-rules"));
        let s2 = store.load("../s2").unwrap();
        assert!(s2.has_skill("a/b") && !s2.code_session);
        assert!(!tmp.path().join("state/s2").exists(), "a key never escapes the folder");
        store.clear("s1").unwrap();
        assert_eq!(store.load("s1").unwrap(), SessionState::default());
        assert_eq!(store.sweep(Duration::from_secs(3600), SystemTime::now()).unwrap(), 0);
        let later = SystemTime::now() + Duration::from_secs(7200);
        assert_eq!(store.sweep(Duration::from_secs(3600), later).unwrap(), 1);
        assert_eq!(store.load("../s2").unwrap(), SessionState::default());
    }

    #[test]
    fn unsafe_directories_are_refused_or_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let err = MarkerStore::open(tmp.path().join("link")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        fs::set_permissions(&real, fs::Permissions::from_mode(0o777)).unwrap();
        MarkerStore::open(&real).unwrap();
        assert_eq!(fs::metadata(&real).unwrap().mode() & 0o777, 0o700);
        fs::write(tmp.path().join("file"), "").unwrap();
        assert!(MarkerStore::open(tmp.path().join("file")).unwrap_err().to_string().contains("not a directory"));
    }

    #[test]
    fn directory_from_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(default_dir(env(&[("HOME", "/h")])).unwrap(), PathBuf::from("/h/.local/state/troupe/markers"));
        assert_eq!(
            default_dir(env(&[("HOME", "/h"), ("XDG_STATE_HOME", "/x")])).unwrap(),
            PathBuf::from("/x/troupe/markers")
        );
        assert_eq!(default_dir(env(&[("TROUPE_STATE_DIR", "/t")])).unwrap(), PathBuf::from("/t/markers"));
        assert!(default_dir(env(&[])).is_err());
    }
}
