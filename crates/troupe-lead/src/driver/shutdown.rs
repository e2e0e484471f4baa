//! Stopping a teammate (seed 003 B4): graceful, then forced.
//!
//! Graceful: a `shutdown_request` goes to the teammate's mailbox, nothing
//! more. A teammate that reads the request answers with the gateway's
//! `respond_shutdown`; the answer reaches the machine through
//! [`watch`](super::watch) as `ShutdownAnswered`. When to force (an approval,
//! or the `[shutdown] timeout_seconds` deadline) is the machine's decision and
//! its timer: it comes back here as a forced stop. A process that ends by
//! itself takes its process group with it (the supervisor's rule).
//!
//! Forced: through the supervisor's [`AgentHandle`](troupe_engine::supervisor::AgentHandle)
//! stopper: SIGINT and SIGTERM to its process group at once, SIGKILL after
//! [`KILL_GRACE`], so that nothing it started stays behind.

use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use troupe_engine::supervisor::{Grace, StopMode};
use troupe_store::{AgentStatus, Mailbox, MessageKind, NewMessage, Registry};

use crate::driver::bookkeeper::Bookkeeper;
use crate::driver::plan_io;
use crate::machine::AgentId;

/// From SIGTERM to SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(3);

/// How often the end of a run looks whether its teammates' groups are gone.
const POLL: Duration = Duration::from_millis(100);

/// The text of the request in the teammate's mailbox.
pub(crate) const REQUEST: &str =
    "The Lead asks you to stop. Answer with respond_shutdown: approve, or refuse with a reason.";

/// Carry out `Command::ShutDown` for `id`, whose supervisor is `stopper` when
/// its process runs: the request (graceful), or the signals (forced).
pub(crate) fn shut_down(books: &Bookkeeper, stopper: Option<&UnboundedSender<StopMode>>, id: AgentId, force: bool) {
    books.store(move |store| {
        let _ = store.set_status(&id, AgentStatus::ShuttingDown);
        if !force {
            let request = NewMessage {
                kind: MessageKind::ShutdownRequest,
                ..NewMessage::text(plan_io::LEAD, id.clone(), REQUEST)
            };
            let _ = store.send(request);
        }
    });
    if let (true, Some(stopper)) = (force, stopper) {
        force_stop(stopper);
    }
}

/// The signals of a forced stop, sent by the teammate's supervisor. A stop
/// decided before the process ran is carried out here once it does.
pub(crate) fn force_stop(stopper: &UnboundedSender<StopMode>) {
    let _ = stopper.send(StopMode::Graceful(Grace { interrupt: Duration::ZERO, terminate: KILL_GRACE }));
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

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_engine::supervisor::{self, NoSink, SpawnSpec};

    /// A supervised `sh -c script` in its own process group.
    fn supervised(script: &str, dir: &std::path::Path) -> supervisor::AgentHandle {
        let spec = SpawnSpec {
            agent_id: "builder-1".into(),
            role: "builder".into(),
            feature: None,
            task_id: None,
            project: dir.to_path_buf(),
            cwd: dir.to_path_buf(),
            engine: "custom".into(),
            model: None,
            invocation: troupe_engine::args::Invocation {
                program: "sh".into(),
                args: vec!["-c".into(), script.into()],
                stdin: None,
                format: troupe_engine::parse::StreamFormat::Text,
                ignored: Vec::new(),
                env: Vec::new(),
            },
            env: Vec::new(),
            log_path: None,
            hang_timeout: None,
            // The stop path is under test, not the sandbox.
            sandbox: None,
        };
        supervisor::spawn(spec, std::sync::Arc::new(NoSink)).unwrap()
    }

    #[tokio::test]
    async fn a_forced_stop_goes_through_the_supervisor_and_ends_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let handle = supervised("sleep 30 & wait", dir.path());
        let pid = handle.pid();
        force_stop(&handle.stopper());
        let outcome = tokio::time::timeout(Duration::from_secs(10), handle.wait()).await.unwrap();
        assert!(outcome.signal.is_some(), "ended by a signal: {outcome:?}");
        // Its `sleep` went with it (init reaps it, so poll for a moment).
        let gone = Instant::now() + Duration::from_secs(5);
        while troupe_engine::supervisor::group_alive(pid) && Instant::now() < gone {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!troupe_engine::supervisor::group_alive(pid), "its `sleep` went with it");
    }

    #[tokio::test]
    async fn a_forced_stop_kills_what_ignores_the_polite_signals() {
        let dir = tempfile::tempdir().unwrap();
        let handle = supervised("trap '' INT TERM; sleep 30 & wait; sleep 30", dir.path());
        // Let the shell install its traps before the signals come.
        tokio::time::sleep(Duration::from_millis(200)).await;
        force_stop(&handle.stopper());
        let outcome = tokio::time::timeout(Duration::from_secs(20), handle.wait()).await.unwrap();
        assert_eq!(outcome.signal, Some(9), "SIGINT and SIGTERM were ignored: SIGKILL after the grace");
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
}
