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
            let Ok(name) = entry.file_name().into_string() else { continue };
            // An empty file is no beat (`troupe_gate::heartbeat`): counted, the
            // sandbox's launch-time file would end a start-up allowance before
            // the teammate printed anything.
            let Some(beat) = troupe_gate::heartbeat::read(&entry.path()) else { continue };
            if self.seen.insert(name.clone(), beat.at).is_none_or(|before| beat.at > before) {
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
        std::fs::write(&old, b"sh check.sh").unwrap();
        let mut h = Heartbeats::start(dir.path().to_path_buf());
        assert!(h.beats().is_empty(), "a beat from before the run");
        std::fs::write(dir.path().join("auditor-7"), b"sh check.sh").unwrap();
        assert_eq!(h.beats(), ["auditor-7"]);
        assert!(h.beats().is_empty(), "each beat counts once");
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(later).unwrap();
        assert_eq!(h.beats(), ["builder-1"]);
        let gone = Heartbeats::start(dir.path().join("missing")).beats();
        assert!(gone.is_empty());
    }

    #[test]
    fn a_heartbeat_file_made_empty_at_launch_is_no_beat_until_a_gate_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = Heartbeats::start(dir.path().to_path_buf());
        let file = dir.path().join("inspector-1");
        std::fs::write(&file, b"").unwrap();
        assert!(h.beats().is_empty(), "the sandbox made it; nothing ran");
        std::fs::write(&file, b"sh check.sh").unwrap();
        assert_eq!(h.beats(), ["inspector-1"]);
    }
}
