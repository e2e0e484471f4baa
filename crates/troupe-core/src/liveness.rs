//! When an agent that prints nothing counts as hung: one rule for the Lead's
//! machine (its teammates) and for the supervisor of `troupe agent run`.
//!
//! Silence means different things at different moments. Before its first
//! output an agent CLI is starting up, which takes seconds on a loaded
//! machine; while a tool call it made has not returned, the tool is working
//! (a test suite, a long build); otherwise its model turn is in flight, and
//! silence past the hang timeout is a hang. Each moment has its own limit,
//! never shorter than the hang timeout.
//!
//! ```
//! use std::time::Duration;
//! use troupe_core::liveness::{QuietLimits, Quiet};
//!
//! let limits = QuietLimits { hang: 2, startup: 120, tool: 600 };
//! assert_eq!(limits.limit(Quiet::of(false, 0)), 120);
//! assert_eq!(limits.limit(Quiet::of(true, 1)), 600);
//! assert_eq!(limits.limit(Quiet::of(true, 0)), 2);
//! ```

/// What a quiet agent is doing, as far as its output tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiet {
    /// It has printed nothing since its process started: it is starting up.
    Starting,
    /// A tool call it made has not returned yet: the tool is working.
    InTool,
    /// Neither: its model turn is in flight.
    Thinking,
}

impl Quiet {
    /// The state of an agent that has (`output_seen`) or has not printed
    /// anything since its process started, with `tools_running` tool calls
    /// not yet returned.
    pub fn of(output_seen: bool, tools_running: u32) -> Quiet {
        match (output_seen, tools_running) {
            (false, _) => Quiet::Starting,
            (true, 0) => Quiet::Thinking,
            (true, _) => Quiet::InTool,
        }
    }
}

/// How long an agent may stay quiet in each [`Quiet`] state: `[team]
/// hang_timeout_*`, `startup_timeout_*` and `tool_timeout_*`. Generic over
/// the duration type so that the sans-IO machine (jiff) and the supervisor
/// (std) share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietLimits<D> {
    /// Silence of an agent whose model turn is in flight.
    pub hang: D,
    /// The start-up allowance, before the first output.
    pub startup: D,
    /// The allowance of a tool call that has not returned.
    pub tool: D,
}

impl<D: Ord + Copy> QuietLimits<D> {
    /// The longest silence allowed in state `q`: the hang timeout, or the
    /// state's own allowance when that is longer.
    pub fn limit(&self, q: Quiet) -> D {
        match q {
            Quiet::Starting => self.hang.max(self.startup),
            Quiet::InTool => self.hang.max(self.tool),
            Quiet::Thinking => self.hang,
        }
    }

    /// The same limits in another duration type.
    pub fn map<E>(self, f: impl Fn(D) -> E) -> QuietLimits<E> {
        QuietLimits { hang: f(self.hang), startup: f(self.startup), tool: f(self.tool) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(limits: QuietLimits<u32>, output_seen: bool, tools: u32, expected: u32) {
        assert_eq!(limits.limit(Quiet::of(output_seen, tools)), expected, "seen {output_seen}, tools {tools}");
    }

    #[test]
    fn each_state_has_its_allowance_and_none_is_below_the_hang_timeout() {
        let l = QuietLimits { hang: 10, startup: 100, tool: 50 };
        check(l, false, 0, 100);
        // Before any output a tool cannot have been seen: start-up wins.
        check(l, false, 2, 100);
        check(l, true, 1, 50);
        check(l, true, 3, 50);
        check(l, true, 0, 10);
        // Allowances shorter than the hang timeout do not shorten it.
        let short = QuietLimits { hang: 10, startup: 0, tool: 1 };
        check(short, false, 0, 10);
        check(short, true, 1, 10);
    }
}
