//! A hook call that opens the store is its agent's heartbeat (troupe-store's
//! `lease`), but a renewal is a write transaction, and a teammate's hooks
//! run on every tool call. Like the gateway's calls (`troupe_gateway::lease`),
//! they renew at most six times a lease: when the agent's last renewal from
//! a hook is older than a sixth of the lease. That is still long before the
//! lease ends, so skipping a renewal never lets a working agent's lease pass.
//!
//! When the last renewal was is the modification time of a file per agent
//! under `.troupe/state/cache/lease-beats/`, set before each renewal (a
//! failed one waits for the next beat, as the gateway's does). The store
//! stays the truth about the lease; the file only says when this project's
//! hooks last asked for one, so a lost or damaged file means one more
//! renewal, never one fewer.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use troupe_core::layout::Layout;

/// Whether `agent`'s lease of `lease` is due for renewal by a hook at
/// `now`; when it is, the beat is recorded as of `now`.
pub(super) fn due(layout: &Layout, agent: &str, lease: Duration, now: SystemTime) -> bool {
    let Some(file) = beat_file(layout, agent) else { return true };
    let last = std::fs::metadata(&file).and_then(|m| m.modified()).ok();
    // A beat from the future (a clock set back) is no reason to skip.
    if last.and_then(|at| now.duration_since(at).ok()).is_some_and(|ago| !troupe_store::lease::renewal_due(lease, ago))
    {
        return false;
    }
    let _ = record(&file, now);
    true
}

/// `.troupe/state/cache/lease-beats/<agent>`, or `None` for an id that is no
/// plain file name (such an agent renews on every call).
fn beat_file(layout: &Layout, agent: &str) -> Option<PathBuf> {
    let plain = !agent.is_empty()
        && !agent.starts_with('.')
        && agent.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| layout.state_dir().join("cache/lease-beats").join(agent))
}

fn record(file: &Path, now: SystemTime) -> std::io::Result<()> {
    let open = || std::fs::File::options().write(true).create(true).truncate(false).open(file);
    let f = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(file.parent().unwrap_or(file))?;
            open()?
        }
        other => other?,
    };
    f.set_modified(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_due_at_most_six_times_a_lease_and_a_lost_beat_renews() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let lease = Duration::from_secs(60);
        let t0 = SystemTime::now();
        assert!(due(&layout, "builder-g1-1", lease, t0), "no beat yet");
        assert!(!due(&layout, "builder-g1-1", lease, t0 + Duration::from_secs(9)), "a burst costs one write");
        assert!(due(&layout, "builder-g1-2", lease, t0), "each agent its own beat");
        assert!(due(&layout, "builder-g1-1", lease, t0 + Duration::from_secs(10)));
        assert!(due(&layout, "builder-g1-1", lease, t0), "a clock set back renews");
        std::fs::remove_dir_all(layout.state_dir().join("cache")).unwrap();
        assert!(due(&layout, "builder-g1-1", lease, t0), "a lost beat renews");
        assert!(due(&layout, "../escape", lease, t0) && due(&layout, "../escape", lease, t0), "no file for it");
        assert!(!dir.path().join(".troupe/state/escape").exists());
    }
}
