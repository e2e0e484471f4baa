//! Waking a live agent (`troupe team`) that sits idle at its prompt: one
//! bracketed paste of a short notice, then Enter. Its prompt hook answers
//! the notice with the messages themselves and marks them read
//! (`commands/hook/delivery.rs`), which is the proof that it arrived; a
//! notice not read in time is retried, at most [`MAX_RETRIES`] times.
//!
//! An agent at work gets no keystrokes at all: its hooks hand it the
//! messages at its next prompt or when it stops. Idle or at work is the
//! registry's status, which those hooks keep, never the pane's text.

use std::time::{Duration, Instant};

use troupe_core::layout::Layout;
use troupe_store::{AgentStatus, Message, Store};

use crate::commands::team::member;
use crate::commands::team::tmux::Tmux;

/// How many times a notice that did not arrive is pasted again.
pub(crate) const MAX_RETRIES: u32 = 3;

/// How long a notice has to arrive before it is retried
/// (`TROUPE_NOTICE_TIMEOUT_MS` overrides).
const NOTICE_TIMEOUT: Duration = Duration::from_secs(5);

/// What became of a message to a live agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Wake {
    /// It was at work: its hooks deliver the message, no notice was pasted.
    Busy,
    /// It was idle; the notice arrived (the hook marked the message read) after this many pastes.
    Delivered(u32),
    /// It was idle, and no notice arrived after every retry: the message waits in its inbox.
    NotDelivered,
}

/// Wakes the live agent `message` is for, if it has a pane and sits idle.
/// `None` for an agent that is not a running team agent.
pub(crate) fn wake(store: &dyn Store, layout: &Layout, message: &Message) -> Option<Wake> {
    wake_when(store, layout, message, AgentStatus::Ready)
}

/// [`wake`], with `idle` the status that says the agent sits at its prompt:
/// `READY`, or `SHUTTING_DOWN` for an idle agent `troupe kill` marked so
/// before it asked.
pub(crate) fn wake_when(store: &dyn Store, layout: &Layout, message: &Message, idle: AgentStatus) -> Option<Wake> {
    let m = member(layout, &message.to)?;
    if !troupe_engine::supervisor::group_alive(m.pid) {
        return None;
    }
    let timeout = std::env::var("TROUPE_NOTICE_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(NOTICE_TIMEOUT, Duration::from_millis);
    let tmux = Tmux::new(m.socket);
    for paste in 1..=1 + MAX_RETRIES {
        match store.agent(&message.to).map(|a| a.status) {
            Ok(status) if status == idle => {}
            // At work (or ending): its hooks deliver, and no keystroke may interrupt it.
            _ if read(store, message) => return Some(Wake::Delivered(paste - 1)),
            _ => return Some(Wake::Busy),
        }
        let waiting = store.inbox(&message.to, true).map(|i| i.len()).unwrap_or(1).max(1);
        if tmux.paste_and_enter(&m.pane, &troupe_gate::delivery::notice(waiting)).is_err() {
            return Some(Wake::NotDelivered);
        }
        if until(timeout, || read(store, message)) {
            return Some(Wake::Delivered(paste));
        }
        // A TUI that swallowed the Enter still holds the notice: press it again first.
        let _ = tmux.enter(&m.pane);
        if until(timeout / 4, || read(store, message)) {
            return Some(Wake::Delivered(paste));
        }
    }
    Some(Wake::NotDelivered)
}

fn read(store: &dyn Store, message: &Message) -> bool {
    store.message(message.id).is_ok_and(|m| m.read_at.is_some())
}

/// Polls `done` every 25 ms until it holds or `timeout` passed.
fn until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
