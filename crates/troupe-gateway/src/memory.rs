//! Role memory on disk: `.troupe/memory/<role>.memory.md`, rewritten whole
//! (temp file + rename) under an exclusive `flock` on a lock file beside it, so
//! two gateways saving at once both keep their entries.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use troupe_core::rbac::memory::{MemoryEntry, MemoryFile, MemoryType, normalize_content};
use troupe_core::rbac::names;

/// A memory operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The file or its lock could not be used.
    #[error("memory file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The role name cannot be a file name.
    #[error(transparent)]
    Name(#[from] names::NameError),
}

/// The memory folder of one project.
#[derive(Debug, Clone)]
pub struct MemoryDir {
    dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MemoryError + '_ {
    move |source| MemoryError::Io { path: path.to_path_buf(), source }
}

impl MemoryDir {
    /// Memories under `dir` (`.troupe/memory`).
    pub fn new(dir: impl Into<PathBuf>) -> MemoryDir {
        MemoryDir { dir: dir.into() }
    }

    /// The file of `role`.
    pub fn path(&self, role: &str) -> Result<PathBuf, MemoryError> {
        names::validate_role_name(role)?;
        Ok(self.dir.join(format!("{role}.memory.md")))
    }

    fn lock(&self, role: &str) -> Result<Flock<std::fs::File>, MemoryError> {
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let path = self.dir.join(format!(".{role}.memory.lock"));
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io(&path))?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| MemoryError::Io { path, source: std::io::Error::from(errno) })
    }

    /// Reads `role`'s memory (empty when it has none).
    pub fn read(&self, role: &str) -> Result<MemoryFile, MemoryError> {
        let path = self.path(role)?;
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(MemoryFile::parse(role, &text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MemoryFile::new(role)),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Appends one entry to `role`'s memory and returns it.
    pub fn save(
        &self,
        role: &str,
        kind: MemoryType,
        content: &str,
        tags: Vec<String>,
    ) -> Result<MemoryEntry, MemoryError> {
        let path = self.path(role)?;
        let _lock = self.lock(role)?;
        let mut file = self.read(role)?;
        let now = troupe_project::now();
        let now = format!("{now:.3}");
        let entry = MemoryEntry {
            id: new_id(&file),
            kind,
            content: normalize_content(content),
            created_at: Some(now.clone()),
            tags,
        };
        file.entries.push(entry.clone());
        troupe_project::fsutil::write_atomic(&path, file.render(&now).as_bytes()).map_err(io(&path))?;
        Ok(entry)
    }
}

/// A fresh `mem_xxxxxx` id not used in `file`.
fn new_id(file: &MemoryFile) -> String {
    let mut seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
            ^ u128::from(std::process::id()) << 64;
    loop {
        // xorshift on the clock and pid: unique enough within one file, which is all that is needed.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let id = format!("mem_{:06x}", (seed as u32) & 0xff_ffff);
        if !file.entries.iter().any(|e| e.id == id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_keep_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let memory = MemoryDir::new(dir.path());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let memory = memory.clone();
                std::thread::spawn(move || {
                    for j in 0..10 {
                        memory.save("builder", MemoryType::Fact, &format!("fact {i}-{j}"), vec![]).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let file = memory.read("builder").unwrap();
        assert_eq!(file.entries.len(), 80);
        let text = std::fs::read_to_string(dir.path().join("builder.memory.md")).unwrap();
        assert!(text.starts_with("# Memory: builder\n\n> Last modified: "), "{text}");
        assert!(text.contains("> Total entries: 80\n"));
    }

    #[test]
    fn hostile_role_names_never_become_paths() {
        let memory = MemoryDir::new("/tmp/x");
        assert!(memory.path("../etc").is_err());
        assert!(memory.path("a/b").is_err());
    }
}
