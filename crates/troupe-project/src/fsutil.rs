//! Small filesystem helpers with the guarantees troupe relies on.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Write `contents` to `path` so that readers see either the old file or the new
/// one, never a half-written file: write a temporary file in the same folder,
/// flush it to disk, then rename it over `path`. Creates missing parent folders.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), unique()));
    let result = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        if let Ok(meta) = fs::metadata(path) {
            // Keep the permissions of the file being replaced.
            let _ = fs::set_permissions(&tmp, meta.permissions());
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Write `contents` to `path` only if no file is there yet. Returns `true` when
/// it wrote. Used by `troupe init` so that a user's file is never overwritten.
pub fn write_new(path: &Path, contents: &[u8]) -> io::Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    write_atomic(path, contents)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/file.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let entries: Vec<_> = fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn write_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        assert!(write_new(&p, b"mine").unwrap());
        assert!(!write_new(&p, b"theirs").unwrap());
        assert_eq!(fs::read_to_string(&p).unwrap(), "mine");
    }
}
