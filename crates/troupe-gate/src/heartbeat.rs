//! The heartbeat file of a gate that runs inside a teammate's engine
//! (`.troupe/state/heartbeats/<agent>`): the one writer and the one reader of
//! its format, so the Lead's watcher and the live display agree on what a
//! beat is.
//!
//! A beat is the file rewritten with the running gate's command. An empty
//! file is no beat: the sandbox creates each teammate's at launch so that
//! Landlock can grant it, before any gate runs.

use std::path::Path;
use std::time::SystemTime;

/// One beat read from disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The gate's command (its first line), as the gate wrote it.
    pub command: String,
    /// When it was written.
    pub at: SystemTime,
}

/// Beat now: the file holds `command`, which live displays show.
pub fn beat(file: &Path, command: &str) {
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Rewriting the file is the portable way to move its mtime forward.
    let _ = std::fs::write(file, command.as_bytes());
}

/// The last beat in `file`; `None` when it is missing, unreadable or empty.
pub fn read(file: &Path) -> Option<Beat> {
    let at = std::fs::metadata(file).ok()?.modified().ok()?;
    let text = std::fs::read_to_string(file).ok()?;
    let command = text.lines().next().unwrap_or_default().trim();
    (!text.is_empty()).then(|| Beat { command: command.to_string(), at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_no_beat_and_a_written_one_names_its_command() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("heartbeats/builder-1");
        assert_eq!(read(&file), None, "missing");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"").unwrap();
        assert_eq!(read(&file), None, "made empty at launch by the sandbox");
        beat(&file, "sh check.sh\nsecond line");
        assert_eq!(read(&file).unwrap().command, "sh check.sh");
    }
}
