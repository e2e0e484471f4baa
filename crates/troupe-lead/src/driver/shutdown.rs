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
use troupe_store::{AgentStatus, MessageKind, NewMessage};

use crate::driver::bookkeeper::Bookkeeper;
use crate::driver::plan_io;
use crate::driver::signals::Forced;
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
    // A request that cannot be sent is shown to the user; the machine's
    // shutdown deadline forces the stop either way.
    books.record(format!("cannot ask {id} to stop"), move |store| {
        store.set_status(&id, AgentStatus::ShuttingDown)?;
        if !force {
            let request = NewMessage {
                kind: MessageKind::ShutdownRequest,
                ..NewMessage::text(plan_io::LEAD, id.clone(), REQUEST)
            };
            store.send(request)?;
        }
        Ok(())
    });
    if let (true, Some(stopper)) = (force, stopper) {
        force_stop(stopper);
    }
}

/// The signals of a forced stop, sent by the teammate's supervisor. A stop
/// decided before the process ran is carried out here once it does.
pub(crate) fn force_stop(stopper: &UnboundedSender<StopMode>) {
    force_stop_within(stopper, KILL_GRACE);
}

/// [`force_stop`] with SIGKILL `grace` after SIGTERM (tests wait less than
/// the real [`KILL_GRACE`] for what ignores SIGTERM).
fn force_stop_within(stopper: &UnboundedSender<StopMode>, grace: Duration) {
    let _ = stopper.send(StopMode::Graceful(Grace { interrupt: Duration::ZERO, terminate: grace }));
}

/// The end of a run (finished, escalated or interrupted): every teammate
/// still running is stopped through its supervisor (SIGTERM at once, SIGKILL
/// after [`KILL_GRACE`]: an engine gets a moment to save its session), and the
/// run waits until its process `groups` are gone, so that no process outlives
/// `troupe`. Once the user insists (`forced`: a second SIGINT or SIGTERM),
/// whatever still runs is killed at once. Returns whether that happened.
pub(crate) async fn stop_all(stoppers: &[&UnboundedSender<StopMode>], groups: &[u32], forced: &Forced) -> bool {
    stop_all_within(stoppers, groups, forced, KILL_GRACE).await
}

/// [`stop_all`] with SIGKILL `grace` after SIGTERM.
async fn stop_all_within(
    stoppers: &[&UnboundedSender<StopMode>],
    groups: &[u32],
    forced: &Forced,
    grace: Duration,
) -> bool {
    use troupe_engine::supervisor::group_alive;
    for stopper in stoppers {
        force_stop_within(stopper, grace);
    }
    let mut killed = false;
    // The supervisor kills the rest of a group once its leader is gone; the
    // margin covers a machine too loaded to do it at once.
    let deadline = Instant::now() + grace + Duration::from_secs(2);
    while Instant::now() < deadline && groups.iter().any(|&g| group_alive(g)) {
        if !killed && forced.now() {
            killed = true;
            for stopper in stoppers {
                let _ = stopper.send(StopMode::Force);
            }
        }
        tokio::time::sleep(POLL).await;
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_engine::supervisor::{self, NoSink, SpawnSpec};

    /// The grace of these tests: what they check (SIGKILL comes only after
    /// it, to what ignored SIGTERM) holds for any grace, and the real 3 s
    /// made each test that waits for it take 3 s.
    const GRACE: Duration = Duration::from_millis(300);

    /// A supervised `sh -c script` in its own process group, as agent `id`
    /// (the supervisor also stops every process that names its agent).
    fn supervised(id: &str, script: &str, dir: &std::path::Path) -> supervisor::AgentHandle {
        let spec = SpawnSpec {
            agent_id: id.into(),
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
            quiet_limits: None,
            // The stop path is under test, not the sandbox.
            sandbox: None,
        };
        supervisor::spawn(spec, std::sync::Arc::new(NoSink)).unwrap()
    }

    #[tokio::test]
    async fn a_forced_stop_goes_through_the_supervisor_and_ends_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let handle = supervised("builder-1", "sleep 30 & wait", dir.path());
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
        let handle = supervised("builder-1", "trap '' INT TERM; sleep 30 & wait; sleep 30", dir.path());
        // Let the shell install its traps before the signals come.
        tokio::time::sleep(Duration::from_millis(200)).await;
        force_stop_within(&handle.stopper(), GRACE);
        let outcome = tokio::time::timeout(Duration::from_secs(20), handle.wait()).await.unwrap();
        assert_eq!(outcome.signal, Some(9), "SIGINT and SIGTERM were ignored: SIGKILL after the grace");
    }

    #[tokio::test]
    async fn the_end_of_a_run_terminates_every_group_and_kills_what_ignores_it() {
        let dir = tempfile::tempdir().unwrap();
        let polite = supervised("builder-1", "sleep 30 & wait", dir.path());
        let stubborn = supervised("builder-2", "trap '' INT TERM; sleep 30 & wait; sleep 30", dir.path());
        // Let the shell install its traps before the signals come.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let groups = [polite.pid(), stubborn.pid()];
        let stoppers = [polite.stopper(), stubborn.stopper()];
        let ends = tokio::spawn(async move { (polite.wait().await.signal, stubborn.wait().await.signal) });
        let started = Instant::now();
        stop_all_within(&stoppers.iter().collect::<Vec<_>>(), &groups, &Forced::fixed(false), GRACE).await;
        assert!(started.elapsed() >= GRACE, "waited for the group that ignored SIGTERM");
        assert!(groups.iter().all(|&g| !troupe_engine::supervisor::group_alive(g)), "no process of the run is left");
        let (polite, stubborn) = tokio::time::timeout(Duration::from_secs(5), ends).await.unwrap().unwrap();
        assert!(polite.is_some(), "the polite one ended by a signal");
        assert_eq!(stubborn, Some(9), "SIGINT and SIGTERM were ignored: SIGKILL after the grace");
    }

    #[tokio::test]
    async fn a_user_who_insists_has_what_ignores_the_polite_signals_killed_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let stubborn = supervised("builder-1", "trap '' INT TERM; sleep 30 & wait; sleep 30", dir.path());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let groups = [stubborn.pid()];
        let stoppers = [stubborn.stopper()];
        let ends = tokio::spawn(async move { stubborn.wait().await.signal });
        let killed = stop_all_within(&stoppers.iter().collect::<Vec<_>>(), &groups, &Forced::fixed(true), GRACE).await;
        assert!(killed, "the stop was forced");
        assert!(!troupe_engine::supervisor::group_alive(groups[0]), "no process of the run is left");
        assert_eq!(tokio::time::timeout(Duration::from_secs(5), ends).await.unwrap().unwrap(), Some(9));
    }
}
