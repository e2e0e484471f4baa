//! The Lead's own signals. SIGINT (Ctrl-C) and SIGTERM (what `kill`, systemd,
//! a container runtime or a CI runner sends) end a run the same graceful way:
//! the machine hears `Interrupted`, asks every teammate to stop, keeps its
//! records and leaves the run resumable. A second signal of either kind
//! forces: every teammate still running is killed at once instead of given
//! its grace to save its session.
//!
//! The handlers are installed before any teammate starts, so that no signal
//! meant for troupe can kill it while its teammates run on unrecorded.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use super::DriverError;
use super::teammate::Report;
use crate::machine::Event;

/// The signals received while a run goes on; dropping it stops listening
/// (tokio keeps the handlers, so a late signal is ignored, never fatal).
pub(crate) struct Signals {
    task: tokio::task::JoinHandle<()>,
    seen: watch::Receiver<u32>,
}

impl Signals {
    /// Listen for SIGINT and SIGTERM: the first becomes the machine's
    /// `Interrupted` through `tx`, each one is counted for [`Signals::forced`].
    pub(crate) fn install(tx: mpsc::UnboundedSender<Report>) -> Result<Self, DriverError> {
        let mut int = signal(SignalKind::interrupt()).map_err(DriverError::Signal)?;
        let mut term = signal(SignalKind::terminate()).map_err(DriverError::Signal)?;
        let (count, seen) = watch::channel(0u32);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(()) = int.recv() => {}
                    Some(()) = term.recv() => {}
                    else => break,
                }
                count.send_modify(|n| *n += 1);
                if *count.borrow() == 1 {
                    let _ = tx.send(Report::Lead(Event::Interrupted));
                }
            }
        });
        Ok(Signals { task, seen })
    }

    /// Whether the end of the run is to stop its teammates by force: a second
    /// signal after the one that interrupted it, or any signal once the run
    /// ended by itself (nothing else will read the first one).
    pub(crate) fn forced(&self, interrupted: bool) -> Forced {
        Forced { seen: self.seen.clone(), threshold: if interrupted { 2 } else { 1 } }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Asked while the end of a run waits for its teammates: has the user insisted?
#[derive(Clone)]
pub(crate) struct Forced {
    seen: watch::Receiver<u32>,
    threshold: u32,
}

impl Forced {
    /// Always or never forced, whatever arrives (tests of the stop itself).
    #[cfg(test)]
    pub(crate) fn fixed(forced: bool) -> Self {
        // A receiver still reads the last value once its sender is gone.
        Forced { seen: watch::channel(0).1, threshold: if forced { 0 } else { u32::MAX } }
    }

    /// Whether enough signals arrived.
    pub(crate) fn now(&self) -> bool {
        *self.seen.borrow() >= self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The only test in this binary that signals its own process: signals
    /// are process-wide, and tokio keeps its handlers once installed.
    #[tokio::test]
    async fn sigterm_interrupts_like_sigint_and_a_second_signal_forces() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let signals = Signals::install(tx).unwrap();
        assert!(!signals.forced(false).now(), "nothing arrived yet");
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
        let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap();
        assert!(matches!(first, Some(Report::Lead(Event::Interrupted))), "{first:?}");
        // The signal that interrupted the run does not force its end, but a
        // run that ended by itself is forced by it.
        assert!(!signals.forced(true).now());
        assert!(signals.forced(false).now());
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !signals.forced(true).now() {
            assert!(Instant::now() < deadline, "the second signal was never counted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(rx.try_recv().is_err(), "one interruption only: {:?}", rx.try_recv());
    }
}
