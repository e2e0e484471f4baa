//! Where a long write spends its time, phase by phase: the plan-import bench
//! reads it to say which of parsing the stored plan, checking ids, building
//! rows, inserting, rebuilding indexes and committing to cut next. Off unless
//! a caller [`record`]s on its thread, so a mark costs one thread-local read.

use std::cell::RefCell;
use std::time::{Duration, Instant};

thread_local! {
    static MARKS: RefCell<Option<(Instant, Vec<(&'static str, Duration)>)>> = const { RefCell::new(None) };
}

/// Run `f` and return, with its value, the time between the marks it passed
/// on this thread: each phase named by the mark that ends it.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, Vec<(&'static str, Duration)>) {
    MARKS.with(|m| *m.borrow_mut() = Some((Instant::now(), Vec::new())));
    let value = f();
    let marks = MARKS.with(|m| m.borrow_mut().take()).map(|(_, v)| v).unwrap_or_default();
    (value, marks)
}

/// End the current phase, naming it (nothing unless [`record`] is running).
pub(crate) fn mark(phase: &'static str) {
    MARKS.with(|m| {
        if let Some((since, marks)) = m.borrow_mut().as_mut() {
            let now = Instant::now();
            marks.push((phase, now - *since));
            *since = now;
        }
    });
}
