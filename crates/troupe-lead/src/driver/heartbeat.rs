//! Quality gates that run inside a teammate's engine (its Stop hook, its
//! `board_complete` through the gateway) keep the engine silent for as long as
//! the project's tests take, which may be longer than the hang timeout. The
//! gate runner touches `.troupe/state/heartbeats/<agent>` while it runs
//! (troupe-gate); this turns each newer heartbeat into activity, so a teammate
//! waiting for its gate is never taken for a hung one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

/// The heartbeat files of one project, and the last beat seen of each.
#[derive(Debug)]
pub struct Heartbeats {
    dir: PathBuf,
    seen: HashMap<String, SystemTime>,
}

impl Heartbeats {
    /// Start after every beat already on disk: those are not this run's.
    pub fn start(dir: PathBuf) -> Heartbeats {
        let mut h = Heartbeats { dir, seen: HashMap::new() };
        h.beats();
        h
    }

    /// Agents that beat since the last call.
    pub fn beats(&mut self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut fresh = Vec::new();
        for entry in entries.flatten() {
            let (Ok(name), Ok(meta)) = (entry.file_name().into_string(), entry.metadata()) else { continue };
            let Ok(at) = meta.modified() else { continue };
            if self.seen.insert(name.clone(), at).is_none_or(|before| at > before) {
                fresh.push(name);
            }
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_beats_after_the_start_count() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("builder-1");
        std::fs::write(&old, b"").unwrap();
        let mut h = Heartbeats::start(dir.path().to_path_buf());
        assert!(h.beats().is_empty(), "a beat from before the run");
        std::fs::write(dir.path().join("auditor-7"), b"").unwrap();
        assert_eq!(h.beats(), ["auditor-7"]);
        assert!(h.beats().is_empty(), "each beat counts once");
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(later).unwrap();
        assert_eq!(h.beats(), ["builder-1"]);
        let gone = Heartbeats::start(dir.path().join("missing")).beats();
        assert!(gone.is_empty());
    }
}
