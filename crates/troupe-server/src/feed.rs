//! How event streams learn that the store's event log grew. The writers are
//! often other processes (the Lead, teammates' gateways), so no in-process
//! notification can be relied on: one follower per server waits on the store
//! (`EventLog::wait_for_event`: LISTEN/NOTIFY on PostgreSQL, an indexed look
//! every few ms on SQLite), reads the newest event id and publishes it on a watch channel;
//! every stream then reads what it has not seen from the log itself (never
//! from memory, so nothing is lost across a reconnect or a restart).
//! This process's own writes [`EventFeed::poke`] the poller to skip the wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use troupe_store::Store;

/// The longest wait for the log to grow while a stream is connected (the
/// store wakes the wait sooner when it does).
pub const POLL_BUSY: Duration = Duration::from_millis(500);
/// The same while nobody listens (keeps an idle server nearly free).
pub const POLL_IDLE: Duration = Duration::from_millis(500);

/// The newest event id of the store's log, kept fresh while anyone listens.
pub struct EventFeed {
    store: Arc<dyn Store>,
    latest: watch::Sender<i64>,
    poke: Arc<Notify>,
    started: AtomicBool,
}

impl EventFeed {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        EventFeed { store, latest: watch::channel(0).0, poke: Arc::new(Notify::new()), started: AtomicBool::new(false) }
    }

    /// A receiver whose value is the newest event id seen; it changes when
    /// the log grows. Starts the poller on first use (inside a tokio runtime).
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        if !self.started.swap(true, Ordering::SeqCst) {
            tokio::spawn(poll(self.store.clone(), self.latest.clone(), self.poke.clone()));
        }
        self.latest.subscribe()
    }

    /// Look at the log now rather than at the next poll (after a write).
    pub fn poke(&self) {
        self.poke.notify_one();
    }
}

async fn poll(store: Arc<dyn Store>, latest: watch::Sender<i64>, poke: Arc<Notify>) {
    let mut last = 0i64;
    loop {
        let s = store.clone();
        let after = last;
        // Only the newest id matters: skip to the end of what is new in pages.
        let newest = tokio::task::spawn_blocking(move || newest_id(s.as_ref(), after)).await;
        match newest {
            Ok(Ok(id)) if id > last => {
                last = id;
                latest.send_replace(id);
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot read the event log"),
            _ => {}
        }
        // While a stream is connected: the store's own wait, woken by NOTIFY
        // on PostgreSQL and by a look every 10 ms on SQLite. While nobody
        // listens: a plain sleep. A poke (this process wrote) cuts either short.
        let (s, seen, busy) = (store.clone(), last, latest.receiver_count() > 0);
        let wait = async move {
            if busy {
                let _ = tokio::task::spawn_blocking(move || s.wait_for_event(seen, POLL_BUSY)).await;
            } else {
                tokio::time::sleep(POLL_IDLE).await
            }
        };
        tokio::select! {
            _ = wait => {}
            _ = poke.notified() => {}
        }
    }
}

/// The newest event id, reading the log forward from `after` (an id known to exist).
pub(crate) fn newest_id(store: &dyn Store, mut after: i64) -> troupe_store::Result<i64> {
    const PAGE: u32 = 1000;
    loop {
        let page = store.events_since(after, PAGE)?;
        match page.last() {
            Some(e) => after = e.id,
            None => return Ok(after),
        }
        if page.len() < PAGE as usize {
            return Ok(after);
        }
    }
}
