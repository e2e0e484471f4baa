//! The denial log (`.troupe/state/denials.jsonl`): every refusal troupe gives
//! a teammate — a hook's deny or block on any engine, the gateway's refused
//! tool call, the scripted engine's refused write — appended as one JSON line
//! by the process that refused it.
//!
//! It is the one source live displays read denials from: a real engine runs
//! its hooks in its own process, and each engine words a refused tool call
//! differently in its stream (when it reports it at all), so the Lead cannot
//! learn of them from the stream. A line is short and written with one
//! `write` on a file opened for appending, so writers of parallel teammates
//! never interleave within a line; a reader keeps its offset and reads only
//! complete lines.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The most characters of a reason kept in the log (displays show one line).
const REASON_CHARS: usize = 400;

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Denial {
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The teammate refused (`TROUPE_AGENT_ID`).
    pub agent: String,
    /// What it tried: the tool's name, or `stop` / `task-completed`.
    pub what: String,
    /// Why, as the teammate was told (first line, clipped).
    pub reason: String,
}

impl Denial {
    /// A denial of `what` to `agent` now, its reason cut to one short line.
    pub fn now(agent: &str, what: &str, reason: &str) -> Denial {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let first = reason.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        let reason = if first.chars().count() > REASON_CHARS {
            format!("{}…", first.chars().take(REASON_CHARS).collect::<String>())
        } else {
            first.to_string()
        };
        Denial { at_ms, agent: agent.to_string(), what: what.to_string(), reason }
    }
}

/// Append `denial` to the log of the project at `root`, when `root` is a
/// troupe project whose state folder exists. A log that cannot be written
/// changes no decision: the refusal stands, only the display misses it.
pub fn record(root: &Path, denial: &Denial) {
    let layout = troupe_core::layout::Layout::new(root);
    if !layout.state_dir().is_dir() {
        return;
    }
    let Ok(mut line) = serde_json::to_string(denial) else { return };
    line.push('\n');
    let file = std::fs::OpenOptions::new().create(true).append(true).open(layout.denials_file());
    if let Ok(mut file) = file {
        // One write: appends of parallel writers do not interleave within it.
        let _ = file.write_all(line.as_bytes());
    }
}

/// A reader of the log that returns each denial appended after it started once.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Follower {
    /// Follow the log of the project at `root`, from its current end: earlier
    /// denials belong to earlier runs.
    pub fn start(root: &Path) -> Follower {
        let path = troupe_core::layout::Layout::new(root).denials_file();
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Follower { path, offset, partial: Vec::new() }
    }

    /// Denials appended since the last call, oldest first. Lines that are not
    /// a denial are skipped; a line still being written waits for the next call.
    pub fn poll(&mut self) -> Vec<Denial> {
        let Ok(mut file) = std::fs::File::open(&self.path) else { return Vec::new() };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Truncated or replaced: start over at its beginning.
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        let Ok(n) = file.take(len - self.offset).read_to_end(&mut buf) else { return Vec::new() };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else { return Vec::new() };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        complete.split(|b| *b == b'\n').filter_map(|line| serde_json::from_slice(line).ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_see_each_later_denial_once_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), &Denial::now("builder-1", "Write", "no project: nothing written"));
        assert!(!dir.path().join(".troupe").exists(), "outside a project nothing is written");
        std::fs::create_dir_all(dir.path().join(".troupe/state")).unwrap();
        record(dir.path(), &Denial::now("builder-1", "Write", "before the start"));
        let mut f = Follower::start(dir.path());
        assert!(f.poll().is_empty(), "a denial from before the start is not this run's");
        record(dir.path(), &Denial::now("builder-2", "Edit", "troupe ownership: no\nsecond line"));
        let log = dir.path().join(".troupe/state/denials.jsonl");
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(b"{\"at_ms\":1,\"agent\":\"b\",").unwrap();
        let seen = f.poll();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!((seen[0].agent.as_str(), seen[0].what.as_str()), ("builder-2", "Edit"));
        assert_eq!(seen[0].reason, "troupe ownership: no", "one line");
        file.write_all(b"\"what\":\"stop\",\"reason\":\"r\"}\nnot json\n").unwrap();
        let seen = f.poll();
        assert_eq!(seen.iter().map(|d| d.agent.as_str()).collect::<Vec<_>>(), ["b"], "the rest of a partial line");
        assert!(f.poll().is_empty());
        let long = Denial::now("a", "Bash", &"x".repeat(1000));
        assert_eq!(long.reason.chars().count(), REASON_CHARS + 1);
    }
}
