//! Stopping a teammate (seed 003 B4): graceful, then forced.
//!
//! Graceful: a `shutdown_request` goes to the teammate's mailbox, and its
//! process gets up to `[shutdown] timeout_seconds` to end. A teammate that
//! reads the request answers with the gateway's `respond_shutdown`; the answer
//! reaches the machine through [`watch`](super::watch) as `ShutdownAnswered`,
//! and an approval comes back here as a forced stop (a refusal changes nothing
//! here: the timeout still ends in signals). Once its main process has ended,
//! or the time is up, its process group gets SIGTERM, then SIGKILL after
//! [`KILL_GRACE`], so that nothing it started stays behind.
//!
//! Forced: the signals at once. With `graceful_enabled = false` every stop is
//! forced. The timing lives here; what to stop, and when to force, is the
//! machine's decision.

use std::time::{Duration, Instant};

use troupe_core::config::ShutdownConfig;
use troupe_store::{AgentStatus, Mailbox, MessageKind, NewMessage, Registry};

use crate::driver::bookkeeper::Bookkeeper;
use crate::driver::{plan_io, teammate};
use crate::machine::AgentId;

/// From SIGTERM to SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(3);

/// How often a graceful stop looks whether the process has ended.
const POLL: Duration = Duration::from_millis(100);

/// The text of the request in the teammate's mailbox.
pub(crate) const REQUEST: &str =
    "The Lead asks you to stop. Answer with respond_shutdown: approve, or refuse with a reason.";

/// Carry out `Command::ShutDown` for `id`, whose process is `pid` when known.
pub(crate) fn shut_down(books: &Bookkeeper, pid: Option<u32>, id: AgentId, force: bool, config: &ShutdownConfig) {
    let graceful = !force && config.graceful_enabled;
    books.store(move |store| {
        let _ = store.set_status(&id, AgentStatus::ShuttingDown);
        if graceful {
            let request = NewMessage {
                kind: MessageKind::ShutdownRequest,
                ..NewMessage::text(plan_io::LEAD, id.clone(), REQUEST)
            };
            let _ = store.send(request);
        }
    });
    if let Some(pid) = pid {
        signal(pid, force, config);
    }
}

/// The signals of a stop, for a process whose id is known: at once when forced,
/// else once it has ended by itself or the shutdown timeout is up. A stop
/// decided before the process id was known is carried out here when it arrives.
pub(crate) fn signal(pid: u32, force: bool, config: &ShutdownConfig) {
    if force || !config.graceful_enabled {
        teammate::stop(pid, false, KILL_GRACE);
        return;
    }
    let timeout = Duration::from_secs(config.timeout_seconds);
    tokio::spawn(async move {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline && alive(pid) {
            tokio::time::sleep(POLL).await;
        }
        // Ended by itself: what it started may still run. Timed out: forced.
        teammate::stop(pid, false, KILL_GRACE);
    });
}

/// The end of a run (finished, escalated or interrupted): SIGTERM to every
/// teammate's process group still there, SIGKILL to what is left after
/// [`KILL_GRACE`]: an engine gets a moment to save its session, and no
/// process outlives `troupe`.
pub(crate) async fn stop_all(groups: &[u32]) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    use troupe_engine::supervisor::group_alive;
    for &g in groups {
        let _ = killpg(Pid::from_raw(g as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline && groups.iter().any(|&g| group_alive(g)) {
        tokio::time::sleep(POLL).await;
    }
    for &g in groups {
        let _ = killpg(Pid::from_raw(g as i32), Signal::SIGKILL);
    }
}

/// Whether the process `pid` still exists (a zombie counts until the
/// teammate's runner reaps it, right after its output ends).
fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sigterm_ends_a_process_group_and_it_is_then_no_longer_alive() {
        let mut child = tokio::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pid = child.id().unwrap();
        assert!(alive(pid));
        teammate::stop(pid, false, KILL_GRACE);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
        assert!(!status.success(), "ended by SIGTERM");
        assert!(!alive(pid));
    }

    #[tokio::test]
    async fn the_end_of_a_run_terminates_every_group_and_kills_what_ignores_it() {
        let mut polite = tokio::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let mut stubborn = tokio::process::Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 30 & wait; sleep 30"])
            .process_group(0)
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let groups = [polite.id().unwrap(), stubborn.id().unwrap()];
        let reap = tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            (polite.wait().await.unwrap().signal(), stubborn.wait().await.unwrap().signal())
        });
        let started = Instant::now();
        stop_all(&groups).await;
        assert!(started.elapsed() >= KILL_GRACE, "waited for the group that ignored SIGTERM");
        let signals = tokio::time::timeout(Duration::from_secs(5), reap).await.unwrap().unwrap();
        assert_eq!(signals, (Some(15), Some(9)));
        // The orphaned `sleep` of the stubborn group is reaped by init, not by us.
        let gone = Instant::now() + Duration::from_secs(5);
        while groups.iter().any(|&g| troupe_engine::supervisor::group_alive(g)) && Instant::now() < gone {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(groups.iter().all(|&g| !troupe_engine::supervisor::group_alive(g)));
    }

    #[tokio::test]
    async fn sigkill_follows_when_sigterm_is_ignored() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 30 & wait; sleep 30"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        teammate::stop(pid, false, Duration::from_millis(300));
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "SIGTERM was ignored: SIGKILL after the grace");
    }
}
