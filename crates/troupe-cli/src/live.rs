//! The live display of a run on stderr, shared by the Lead's commands and
//! `troupe agent run`: one plain line per step, and on a terminal a footer
//! that ticks — the run's elapsed time, each running teammate (role, engine,
//! elapsed time, last tool call) and each running quality gate (the command
//! that runs now, `Test python3 -m unittest -q 12s`, and its elapsed time).
//!
//! A thread of its own redraws the footer every quarter second and follows
//! the project's denial log (`troupe_gate::denials`), so a refusal is shown as
//! it happens whichever engine's hook gave it, even while the run itself
//! waits. Piped, the same lines are printed without the footer.

use std::collections::{BTreeMap, HashSet};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use troupe_gate::denials::{Denial, Follower};

use crate::output::{escape, paint_err, term_width};

/// How often the footer is redrawn and the denial log read.
const TICK: Duration = Duration::from_millis(250);

/// `7s`, `1m05s`, `2h03m`: elapsed time as the footer shows it.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

struct Teammate {
    role: String,
    engine: String,
    started: Instant,
    tool: Option<String>,
    /// A quality gate its engine runs (its Stop hook, a `board_complete`):
    /// the command, and since when this display has seen it beat.
    gate: Option<(String, Instant)>,
}

/// A heartbeat this recent means the gate still runs (it beats every 5 s).
const BEAT_FRESH: Duration = Duration::from_secs(7);

struct Gate {
    /// The step that runs now: its label and command.
    what: String,
    /// Since when the gate runs.
    started: Instant,
    /// Since when its current step runs.
    step_started: Instant,
}

struct State {
    enabled: bool,
    tty: bool,
    started: Instant,
    /// `feature: ` when several runs share stderr.
    prefix: String,
    teammates: BTreeMap<String, Teammate>,
    gates: BTreeMap<u64, Gate>,
    /// Every teammate this display has shown: the denial log is the
    /// project's, and another run's denials are not this one's.
    known: HashSet<String>,
    denials: Option<Follower>,
    /// `.troupe/state/heartbeats/`, where gates run by engines beat.
    heartbeats: Option<std::path::PathBuf>,
    /// The footer on screen, if any.
    shown: Option<String>,
}

impl State {
    fn footer(&self) -> Option<String> {
        if !self.tty || (self.teammates.is_empty() && self.gates.is_empty()) {
            return None;
        }
        let mut parts = vec![elapsed(self.started.elapsed())];
        for (id, t) in &self.teammates {
            let doing = match (&t.gate, &t.tool) {
                (Some((command, since)), _) => format!(" gate {command} {}", elapsed(since.elapsed())),
                (None, Some(tool)) => format!(" {tool}"),
                (None, None) => String::new(),
            };
            parts.push(format!("{id} {} {} {}{doing}", t.role, t.engine, elapsed(t.started.elapsed())));
        }
        for g in self.gates.values() {
            parts.push(format!("{} {}", g.what, elapsed(g.step_started.elapsed())));
        }
        Some(fit(&parts.join(" │ "), term_width().saturating_sub(1)))
    }

    fn draw(&mut self, err: &mut impl Write) {
        let footer = self.footer();
        if footer == self.shown {
            return;
        }
        let _ = write!(err, "\r\x1b[K");
        if let Some(f) = &footer {
            let _ = write!(err, "{}", paint_err(f, "2"));
        }
        let _ = err.flush();
        self.shown = footer;
    }

    fn line(&mut self, text: &str) {
        if !self.enabled {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.shown.take().is_some() {
            let _ = write!(err, "\r\x1b[K");
        }
        let at = self.started.elapsed().as_secs_f64();
        let _ = writeln!(err, "{:>6.1}s  {}{text}", at, self.prefix);
        self.draw(&mut err);
    }

    /// Note which teammates wait for a gate their engine runs, by its heartbeat.
    fn read_heartbeats(&mut self) {
        let Some(dir) = &self.heartbeats else { return };
        for (id, t) in self.teammates.iter_mut() {
            // Agent ids never repeat, so a fresh beat is this teammate's.
            let beat = troupe_gate::heartbeat::read(&dir.join(id))
                .filter(|b| b.at.elapsed().is_ok_and(|age| age < BEAT_FRESH));
            match beat {
                None => t.gate = None,
                Some(b) if t.gate.is_none() => {
                    t.gate = Some((if b.command.is_empty() { "running".into() } else { b.command }, Instant::now()));
                }
                Some(_) => {}
            }
        }
    }

    fn follow_denials(&mut self) {
        let Some(follower) = &mut self.denials else { return };
        let fresh: Vec<Denial> = follower.poll().into_iter().filter(|d| self.known.contains(&d.agent)).collect();
        for d in fresh {
            // Agent-chosen text (a tool name, a path in the reason): escaped.
            let (agent, what, reason) = (escape(&d.agent), escape(&d.what), escape(&d.reason));
            self.line(&paint_err(&format!("denied {agent} {what}: {reason}"), "33"));
        }
    }
}

/// `text` cut to `width` characters, ending in `…` when cut.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The display; dropping it stops its thread and clears the footer.
pub struct Live {
    state: Arc<Mutex<State>>,
    /// Dropped to stop the ticker at once (it waits on the other end).
    stop: Option<std::sync::mpsc::Sender<()>>,
    ticker: Option<JoinHandle<()>>,
}

impl Live {
    /// A display on stderr that prints nothing when `enabled` is false; with
    /// `root`, the denials of its teammates in that project are shown.
    pub fn start(enabled: bool, root: Option<&Path>) -> Live {
        Live::with(enabled, std::io::stderr().is_terminal(), String::new(), root)
    }

    /// The display of one of several runs sharing stderr: each line names
    /// `feature`, and there is no footer (the runs would draw over each other).
    pub fn for_feature(enabled: bool, feature: &str, root: Option<&Path>) -> Live {
        Live::with(enabled, false, format!("{}: ", paint_err(feature, "1")), root)
    }

    /// A display whose footer is drawn as on a terminal when `tty` (tests say so).
    pub(crate) fn with(enabled: bool, tty: bool, prefix: String, root: Option<&Path>) -> Live {
        let state = Arc::new(Mutex::new(State {
            enabled,
            tty,
            started: Instant::now(),
            prefix,
            teammates: BTreeMap::new(),
            gates: BTreeMap::new(),
            known: HashSet::new(),
            denials: root.filter(|_| enabled).map(Follower::start),
            heartbeats: root.map(|r| troupe_core::layout::Layout::new(r).heartbeats_dir()),
            shown: None,
        }));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let ticker = enabled.then(|| {
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                    s.follow_denials();
                    if s.tty {
                        s.read_heartbeats();
                    }
                    s.draw(&mut std::io::stderr().lock());
                }
            })
        });
        Live { state, stop: Some(stop), ticker }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The footer as it would be drawn now.
    #[cfg(test)]
    pub(crate) fn footer(&self) -> Option<String> {
        self.state().footer()
    }

    /// Whether anything is printed.
    pub fn enabled(&self) -> bool {
        self.state().enabled
    }

    /// Print one line (above the footer).
    pub fn line(&self, text: &str) {
        self.state().line(text);
    }

    /// A teammate started (or was resumed): its clock starts now.
    pub fn teammate(&self, id: &str, role: &str, engine: &str) {
        let mut s = self.state();
        s.known.insert(id.to_string());
        let t = Teammate { role: role.into(), engine: engine.into(), started: Instant::now(), tool: None, gate: None };
        s.teammates.insert(id.to_string(), t);
    }

    /// The engine a teammate runs on, once known.
    pub fn engine(&self, id: &str, engine: &str) {
        if let Some(t) = self.state().teammates.get_mut(id) {
            t.engine = engine.to_string();
        }
    }

    /// A teammate's last tool call, shown in the footer.
    pub fn tool(&self, id: &str, call: &str) {
        let mut s = self.state();
        if let Some(t) = s.teammates.get_mut(id) {
            t.tool = Some(call.to_string());
        }
        s.draw(&mut std::io::stderr().lock());
    }

    /// A teammate stopped running; how long it ran.
    pub fn teammate_ended(&self, id: &str) -> Option<Duration> {
        let mut s = self.state();
        let t = s.teammates.remove(id)?;
        s.draw(&mut std::io::stderr().lock());
        Some(t.started.elapsed())
    }

    /// A quality gate started; `what` names its first step.
    pub fn gate(&self, run: u64, what: &str) {
        let now = Instant::now();
        self.state().gates.insert(run, Gate { what: what.to_string(), started: now, step_started: now });
    }

    /// The next step of gate `run` runs now: the footer shows it, and its clock.
    pub fn gate_step(&self, run: u64, what: &str) {
        let mut s = self.state();
        if let Some(g) = s.gates.get_mut(&run)
            && g.what != what
        {
            g.what = what.to_string();
            g.step_started = Instant::now();
        }
        s.draw(&mut std::io::stderr().lock());
    }

    /// A quality gate ended; how long it ran.
    pub fn gate_ended(&self, run: u64) -> Option<Duration> {
        self.state().gates.remove(&run).map(|g| g.started.elapsed())
    }

    /// Show the denials logged since the last tick, then clear the footer:
    /// the run is over.
    pub fn finish(&self) {
        let mut s = self.state();
        s.follow_denials();
        s.teammates.clear();
        s.gates.clear();
        s.draw(&mut std::io::stderr().lock());
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_cuts_read_well() {
        assert_eq!(elapsed(Duration::from_millis(12_900)), "12s");
        assert_eq!(elapsed(Duration::from_secs(65)), "1m05s");
        assert_eq!(elapsed(Duration::from_secs(2 * 3600 + 180)), "2h03m");
        assert_eq!(fit("abcdef", 6), "abcdef");
        assert_eq!(fit("abcdefg", 6), "abcde…");
    }

    #[test]
    fn the_footer_lists_teammates_and_gates_and_only_on_a_terminal() {
        let live = Live::with(false, true, String::new(), None);
        assert!(live.state().footer().is_none(), "nothing runs");
        live.teammate("builder-1", "Builder", "claude");
        live.tool("builder-1", "Write src/a.rs");
        live.gate(3, "Test python3 -m unittest -q");
        let footer = live.state().footer().unwrap();
        assert!(footer.starts_with("0s │ builder-1 Builder claude 0s Write src/a.rs │ Test python3"), "{footer}");
        // The gate's next step replaces the first: the footer names what runs now.
        live.gate_step(3, "Lint ruff check .");
        let footer = live.state().footer().unwrap();
        assert!(footer.ends_with("│ Lint ruff check . 0s"), "{footer}");
        assert!(!footer.contains("unittest"), "a step that ended is not shown: {footer}");
        assert!(live.teammate_ended("builder-1").is_some());
        assert!(live.gate_ended(3).is_some());
        assert!(live.state().footer().is_none());
        // A gate its engine runs shows in its entry, from the heartbeat file.
        let dir = tempfile::tempdir().unwrap();
        let live = Live::with(false, true, String::new(), Some(dir.path()));
        live.teammate("builder-2", "Builder", "gemini");
        let beats = troupe_core::layout::Layout::new(dir.path()).heartbeats_dir();
        std::fs::create_dir_all(&beats).unwrap();
        // The sandbox's empty file at launch is no running gate.
        std::fs::write(beats.join("builder-2"), "").unwrap();
        live.state().read_heartbeats();
        assert!(!live.footer().unwrap().contains("gate"), "{:?}", live.footer());
        std::fs::write(beats.join("builder-2"), "pytest -q").unwrap();
        live.state().read_heartbeats();
        let footer = live.footer().unwrap();
        assert!(footer.ends_with("builder-2 Builder gemini 0s gate pytest -q 0s"), "{footer}");
        let piped = Live::with(false, false, String::new(), None);
        piped.teammate("builder-1", "Builder", "claude");
        assert!(piped.state().footer().is_none(), "piped output has no footer");
    }
}
