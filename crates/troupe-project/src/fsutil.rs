//! Small filesystem helpers with the guarantees troupe relies on.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Write `contents` to `path` so that readers see either the old file or the new
/// one, never a half-written file: write a temporary file in the same folder,
/// flush it to disk, then rename it over `path`. Creates missing parent folders.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_via_temp(path, contents, None)
}

/// [`write_atomic`] for a secret: the file is readable by its owner only
/// (mode 0600) from the moment it exists, whatever it replaces.
pub fn write_atomic_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_via_temp(path, contents, Some(0o600))
}

fn write_via_temp(path: &Path, contents: &[u8], mode: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), unique()));
    let result = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(mode.unwrap_or(0o666)).open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        if mode.is_none()
            && let Ok(meta) = fs::metadata(path)
        {
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
    fn a_private_write_is_the_owners_alone_even_over_a_readable_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic_private(&p, b"secret").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "secret");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
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
