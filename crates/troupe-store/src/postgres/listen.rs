//! Wake-ups by LISTEN/NOTIFY: one listening connection per store, on a
//! thread of its own, keeps the newest event id the server announced (each
//! writer NOTIFYs `troupe_events` with its newest id as it commits) and
//! wakes every waiter at once. Waiters of any number share it: none holds a
//! connection while it waits, and none polls.
//!
//! The thread LISTENs before it reads the newest id, so no event falls in
//! between; when its connection breaks it connects again and reads the
//! newest id again (a NOTIFY sent meanwhile is covered by that read). A
//! writer's NOTIFY is part of its transaction, so every commit that wrote
//! events is announced; the thread still reads the newest id again whenever
//! half a second passes without one, for a writer that announces after its
//! commit (a troupe from before the NOTIFY moved into the transaction, on
//! the same database) and died in between. It ends soon after its store is dropped.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The newest event id announced (`None` until the listener has read it),
/// and how many announcements came (a waiter held by an id still in flight
/// waits for the next one, whatever its id).
#[derive(Default)]
pub(crate) struct Newest {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    id: Option<i64>,
    notes: u64,
}

/// How long the listener blocks between looks at whether its store is gone.
const LOOK: Duration = Duration::from_millis(500);

impl Newest {
    /// Wait until an id greater than `after` was announced, or `timeout` passed.
    pub(crate) fn wait(&self, after: i64, timeout: Duration) -> bool {
        self.wait_until(timeout, |s| s.id.is_some_and(|n| n > after))
    }

    /// How many announcements came so far.
    pub(crate) fn notes(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).notes
    }

    /// Wait until an announcement after the first `seen`, or `timeout` passed.
    pub(crate) fn wait_note(&self, seen: u64, timeout: Duration) -> bool {
        self.wait_until(timeout, |s| s.notes > seen)
    }

    fn wait_until(&self, timeout: Duration, done: impl Fn(&State) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if done(&state) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    fn announce(&self, newest: i64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.notes += 1;
        if state.id.is_none_or(|n| newest > n) {
            state.id = Some(newest);
        }
        self.changed.notify_all();
    }
}

/// Start the listener thread for `newest`, connecting with `config` and
/// `tls`; it runs while `newest` has another owner.
pub(crate) fn start(newest: &Arc<Newest>, config: postgres::Config, tls: MakeRustlsConnect) {
    let weak = Arc::downgrade(newest);
    let _ = std::thread::Builder::new().name("troupe-pg-listen".into()).spawn(move || listen(&weak, &config, &tls));
}

fn listen(weak: &Weak<Newest>, config: &postgres::Config, tls: &MakeRustlsConnect) {
    while weak.strong_count() > 0 {
        // Errors end this connection; the next one reads the newest id again.
        if let Ok(mut client) = config.connect(tls.clone()) {
            let _ = follow(weak, &mut client);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn follow(weak: &Weak<Newest>, client: &mut postgres::Client) -> Result<(), postgres::Error> {
    client.batch_execute("LISTEN troupe_events")?;
    loop {
        // First after LISTEN, then whenever a look passes without a notification.
        let newest: i64 = client.query_one("SELECT coalesce(max(id), 0) FROM events", &[])?.get(0);
        let Some(n) = weak.upgrade() else { return Ok(()) };
        if n.state.lock().unwrap_or_else(|p| p.into_inner()).id != Some(newest) {
            n.announce(newest);
        }
        drop(n);
        {
            // Ends after a look without a notification.
            let mut notifications = client.notifications();
            let mut batch = notifications.timeout_iter(LOOK);
            while let Some(note) = batch.next()? {
                let Some(n) = weak.upgrade() else { return Ok(()) };
                if let Ok(id) = note.payload().parse::<i64>() {
                    n.announce(id);
                }
            }
        }
        if weak.strong_count() == 0 {
            return Ok(());
        }
        if client.is_closed() {
            return Ok(());
        }
    }
}
