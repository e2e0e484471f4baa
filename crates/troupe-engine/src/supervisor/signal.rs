//! Signalling a whole process group, with escalation.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Grace periods between the signals of a graceful stop: SIGINT, then
/// SIGTERM after `interrupt`, then SIGKILL after `terminate` more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    /// Wait after SIGINT.
    pub interrupt: Duration,
    /// Wait after SIGTERM.
    pub terminate: Duration,
}

impl Grace {
    /// Splits an overall timeout (seed 003 B4: 30 s) into halves.
    pub fn from_total(total: Duration) -> Self {
        Grace { interrupt: total / 2, terminate: total - total / 2 }
    }
}

impl Default for Grace {
    fn default() -> Self {
        Grace::from_total(Duration::from_secs(30))
    }
}

/// How to stop an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// SIGINT, SIGTERM, SIGKILL with these grace periods.
    Graceful(Grace),
    /// SIGKILL at once (`--force`).
    Force,
}

/// Sends `signal` to process group `pgid`; a group that is already gone is not an error.
pub fn signal_group(pgid: u32, signal: Signal) -> Result<(), Errno> {
    match killpg(Pid::from_raw(pgid as i32), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether any process of group `pgid` still exists.
pub fn group_alive(pgid: u32) -> bool {
    // Signal 0 checks existence; EPERM means it exists but is not ours.
    !matches!(killpg(Pid::from_raw(pgid as i32), None), Err(Errno::ESRCH))
}

/// Stops group `pgid` from a process that is not its parent (`troupe agent
/// stop`): escalates until the group is gone. Returns the last signal sent.
pub fn stop_group_blocking(pgid: u32, mode: StopMode) -> Result<Option<Signal>, Errno> {
    let steps: Vec<(Signal, Duration)> = match mode {
        StopMode::Force => vec![(Signal::SIGKILL, Duration::from_secs(5))],
        StopMode::Graceful(g) => {
            vec![
                (Signal::SIGINT, g.interrupt),
                (Signal::SIGTERM, g.terminate),
                (Signal::SIGKILL, Duration::from_secs(5)),
            ]
        }
    };
    let mut last = None;
    for (sig, wait) in steps {
        if !group_alive(pgid) {
            return Ok(last);
        }
        signal_group(pgid, sig)?;
        last = Some(sig);
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if !group_alive(pgid) {
                return Ok(last);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(last)
}

/// Whether process `pid` is the agent `agent_id` of the project at `project`,
/// as the supervisor started it: its environment (which the supervisor set and
/// `/proc/<pid>/environ` shows as it was at exec) names both. A recycled pid
/// belongs to a process that does not, so a recorded pid never stops a
/// stranger.
pub fn is_agent_process(pid: u32, agent_id: &str, project: &std::path::Path) -> bool {
    identity(pid).is_some_and(|(id, p)| id == agent_id && p == project)
}

/// The agent id and project in the environment of process `pid`
/// (`TROUPE_AGENT_ID`, `TROUPE_PROJECT`), when it names both.
pub(super) fn identity(pid: u32) -> Option<(String, std::path::PathBuf)> {
    use std::os::unix::ffi::OsStrExt;
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let mut id = None;
    let mut project = None;
    for var in environ.split(|b| *b == 0) {
        if let Some(v) = var.strip_prefix(b"TROUPE_AGENT_ID=") {
            id = Some(String::from_utf8_lossy(v).into_owned());
        } else if let Some(v) = var.strip_prefix(b"TROUPE_PROJECT=") {
            project = Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(v)));
        }
    }
    Some((id.filter(|i| !i.is_empty())?, project?))
}

/// Every process but this one whose environment names an agent `named`
/// accepts: an agent's descendants, including those that left its process
/// group (an engine may run a tool in a session of its own).
pub(super) fn agent_processes(named: impl Fn(&str, &std::path::Path) -> bool) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| identity(*pid).is_some_and(|(id, project)| named(&id, &project)))
        .collect()
}
