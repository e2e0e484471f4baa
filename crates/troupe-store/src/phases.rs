//! Where a long write spends its time, phase by phase: the plan-import bench
//! reads it to say which of checking ids, building rows, inserting,
//! rebuilding indexes and committing to cut next. Off unless a caller
//! [`record`]s on its thread, so a mark elsewhere costs one thread-local read.

use std::cell::RefCell;
use std::time::{Duration, Instant};

/// One phase: its name, and the wall and CPU time it took.
pub type Phase = (&'static str, Duration, Duration);

thread_local! {
    static MARKS: RefCell<Option<(Instant, Duration, Vec<Phase>)>> = const { RefCell::new(None) };
}

/// Run `f` and return, with its value, the phases it passed on this thread,
/// each named by the mark that ends it.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, Vec<Phase>) {
    MARKS.with(|m| *m.borrow_mut() = Some((Instant::now(), thread_cpu(), Vec::new())));
    let value = f();
    let marks = MARKS.with(|m| m.borrow_mut().take()).map(|(_, _, v)| v).unwrap_or_default();
    (value, marks)
}

/// End the current phase, naming it (nothing unless [`record`] is running).
pub(crate) fn mark(phase: &'static str) {
    MARKS.with(|m| {
        if let Some((wall, cpu, marks)) = m.borrow_mut().as_mut() {
            let (now, ran) = (Instant::now(), thread_cpu());
            marks.push((phase, now - *wall, ran.saturating_sub(*cpu)));
            (*wall, *cpu) = (now, ran);
        }
    });
}

/// The time this thread has run on a CPU (Linux's schedstat; zero where it
/// cannot be read): on a machine shared with other work, wall time is mostly
/// waiting for a core, and this is what the code itself cost.
pub fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(text.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0))
}
