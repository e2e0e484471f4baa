//! Quality gates: the one runner behind every gate of troupe (a hook's Stop and
//! TaskCompleted, `troupe board complete`, the gateway's `board_complete`, the
//! Lead's group and final gates, `troupe release`). Each command is a
//! [`GateStep`] that says how its exit code is read:
//!
//! - a command of steering's Common Commands ([`GateRule::Tests`]) is a test
//!   suite: 0 allows, any other end refuses (pytest's 1, `cargo test`'s 101, a
//!   timeout);
//! - a command the user wrote in `[gates]` ([`GateRule::Hook`]) follows seed
//!   003 B2: 0 allows, 2 refuses, anything else allows with a warning.
//!
//! Either way, a command that cannot run at all (exit 126 or 127, "command not
//! found", Python's "No module named X", uv's "Failed to spawn") is a problem of
//! the environment: [`GateResult::Unrunnable`], reported to the user, never
//! sent back to an agent to fix.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use troupe_core::config::{GateRule, GateStep, QualityGate};

/// Lines of output kept for the agent.
const TAIL_LINES: usize = 40;
/// Characters of output kept for the agent.
const TAIL_CHARS: usize = 4000;
/// How often a running gate touches its agent's heartbeat file, unless the
/// teammate's `TROUPE_HEARTBEAT_MS` says otherwise.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// The heartbeat interval: `TROUPE_HEARTBEAT_MS` of the teammate whose hook
/// runs the gate (set by the Lead to fit its hang timeout), else 5 s.
fn heartbeat_every() -> Duration {
    std::env::var(crate::teammate::env::HEARTBEAT_MS)
        .ok()
        .and_then(|ms| ms.parse().ok())
        .filter(|&ms: &u64| ms > 0)
        .map_or(HEARTBEAT_EVERY, Duration::from_millis)
}

/// The environment a gate command sees (seed 003's `SYNAPSE_*`, under troupe's prefix).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateEnv {
    /// `TROUPE_AGENT_ID`
    pub agent_id: Option<String>,
    /// `TROUPE_AGENT_NAME`
    pub agent_name: Option<String>,
    /// `TROUPE_LAST_TASK_ID`
    pub last_task_id: Option<String>,
    /// `TROUPE_STATUS_FROM`
    pub status_from: Option<String>,
    /// `TROUPE_STATUS_TO`
    pub status_to: Option<String>,
}

/// One command's run that did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRun {
    /// Where the command came from: `Test`, `Lint`, or a `[gates]` key.
    pub label: String,
    /// The command.
    pub command: String,
    /// How it ended (`exit 1`, `timed out after 600s and was killed`, ...).
    pub detail: String,
    /// The end of its output.
    pub tail: String,
}

impl GateRun {
    /// Where the user fixes the command itself.
    fn source(&self) -> String {
        if self.label.starts_with("gates.") {
            format!("`{}` in .troupe/config.toml", self.label)
        } else {
            format!("the {} command of .troupe/steering/tech.md (Common Commands)", self.label)
        }
    }

    fn with_tail(&self, text: String) -> String {
        if self.tail.is_empty() { text } else { format!("{text}\n\n{}", self.tail) }
    }
}

/// How a gate run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateResult {
    /// Every command passed: allowed.
    Passed,
    /// A command failed (a test command's non-zero exit, a `[gates]`
    /// command's exit 2): refused, the agent fixes what failed.
    Failed(GateRun),
    /// A `[gates]` command ended otherwise (another exit code, a signal, a
    /// timeout): allowed with a warning.
    Errored(GateRun),
    /// A command could not run at all: a problem of the environment for the
    /// user, allowed with a warning by hooks, escalated by the Lead.
    Unrunnable(GateRun),
}

impl GateResult {
    /// True unless the gate refused.
    pub fn allows(&self) -> bool {
        !matches!(self, GateResult::Failed(_))
    }

    /// The message for the agent (refusal) or the user (warning); `None` when passed.
    pub fn message(&self, gate: QualityGate) -> Option<String> {
        let what = match gate {
            QualityGate::OnIdle => "before going idle",
            QualityGate::OnTaskCompleted => "before completing the task",
        };
        let key = gate.key();
        match self {
            GateResult::Passed => None,
            GateResult::Failed(r) => Some(r.with_tail(format!(
                "troupe quality gate {key} refused {what}: {} `{}` failed ({}). Fix what failed, then try again.",
                r.label, r.command, r.detail
            ))),
            GateResult::Errored(r) => Some(r.with_tail(format!(
                "troupe quality gate {key} could not decide {what} ({} `{}`: {}); allowed with this warning.",
                r.label, r.command, r.detail
            ))),
            GateResult::Unrunnable(r) => Some(r.with_tail(format!(
                "troupe quality gate {key} could not run its {} command `{}` ({}): a problem of the environment, \
                 not of the code; allowed with this warning. The user fixes {} or installs what it needs.",
                r.label,
                r.command,
                r.detail,
                r.source()
            ))),
        }
    }
}

/// The process groups of the gate commands this process runs now, and whether
/// it is stopping (then no new command starts).
static RUNNING: Mutex<(Vec<u32>, bool)> = Mutex::new((Vec::new(), false));

/// Who is told of each gate command's process group when it starts and ends
/// (the `troupe` binary's guardian, which kills the groups still listed when
/// this process dies — a Ctrl-C at the terminal, a killed hook — so a test
/// suite never outlives the troupe that started it). This crate cannot start
/// the guardian itself: it lives with the agent supervisor.
static WATCHER: OnceLock<GroupWatcher> = OnceLock::new();

/// Who hears of gate commands' process groups (see [`watch_groups_with`]).
#[derive(Debug, Clone, Copy)]
pub struct GroupWatcher {
    /// Called before a gate command starts (the guardian starts then, not after).
    pub ready: fn(),
    /// Called with the process group of a gate command that started.
    pub watch: fn(u32),
    /// Called with the process group of a gate command that is gone.
    pub unwatch: fn(u32),
}

/// Set once per process, before any gate runs.
pub fn watch_groups_with(watcher: GroupWatcher) {
    let _ = WATCHER.set(watcher);
}

/// Kill every gate command this process runs (each whole process group) and
/// start no new one: for a program whose work ended (a run interrupted by
/// Ctrl-C) while gates still run on other threads. Without it, troupe would
/// wait for a test suite nobody needs any more, or leave it running. The
/// gates end as [`GateResult`]s of a killed command, which nobody reads.
pub fn kill_running() {
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    running.1 = true;
    for pgid in &running.0 {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(*pgid as i32), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Run `steps` in order with `sh -c` in `cwd`, each killed after `timeout`,
/// stopping at the first that does not pass. In a troupe project, while a
/// command runs, the agent's heartbeat file (`.troupe/state/heartbeats/<agent>`)
/// is touched every few seconds.
pub fn run_steps(steps: &[GateStep], cwd: &Path, env: &GateEnv, timeout: Duration) -> GateResult {
    run_steps_with(steps, cwd, env, timeout, |_| {})
}

/// [`run_steps`], telling `starting` about each step just before it runs
/// (progress displays show the command that runs now).
pub fn run_steps_with(
    steps: &[GateStep],
    cwd: &Path,
    env: &GateEnv,
    timeout: Duration,
    mut starting: impl FnMut(&GateStep),
) -> GateResult {
    for step in steps {
        starting(step);
        let result = run_step(step, cwd, env, timeout);
        if result != GateResult::Passed {
            return result;
        }
    }
    GateResult::Passed
}

/// Run one step; see [`run_steps`].
pub fn run_step(step: &GateStep, cwd: &Path, env: &GateEnv, timeout: Duration) -> GateResult {
    judge(step, run_beating(&step.command, cwd, env, timeout, heartbeat_every()))
}

/// How a command ended, before its rule reads it.
#[derive(Debug)]
struct Ended {
    /// `Ok(exit code or None for a signal)`, or why it could not run or finish.
    status: Result<Option<i32>, Stopped>,
    output: String,
}

#[derive(Debug)]
enum Stopped {
    /// `sh` itself could not start.
    NotStarted(String),
    /// Killed after the timeout, or lost while waiting.
    Aborted(String),
}

fn judge(step: &GateStep, ended: Ended) -> GateResult {
    let run = |detail: String| GateRun {
        label: step.label.clone(),
        command: step.command.clone(),
        detail,
        tail: tail(&ended.output),
    };
    let detail = match &ended.status {
        Ok(Some(0)) => return GateResult::Passed,
        Ok(Some(code)) if cannot_run(Some(*code), &ended.output) => {
            return GateResult::Unrunnable(run(format!("exit {code}")));
        }
        Ok(Some(code)) => format!("exit {code}"),
        Ok(None) => "killed by a signal".to_string(),
        Err(Stopped::NotStarted(why)) => return GateResult::Unrunnable(run(why.clone())),
        Err(Stopped::Aborted(why)) => why.clone(),
    };
    match step.rule {
        GateRule::Tests => GateResult::Failed(run(detail)),
        GateRule::Hook if ended.status.as_ref().is_ok_and(|c| *c == Some(2)) => GateResult::Failed(run(detail)),
        GateRule::Hook => GateResult::Errored(run(detail)),
    }
}

/// Whether a command that ended with `code` and printed `output` could not run
/// at all: the shell's "not executable" (126) and "not found" (127), a missing
/// command inside a script, Python's `-m` on a module that is not installed
/// (`python3: No module named pytest`, unquoted; an import error in a test,
/// `ModuleNotFoundError: No module named 'app'`, is the code's), uv's `Failed to spawn`.
pub fn cannot_run(code: Option<i32>, output: &str) -> bool {
    if matches!(code, Some(126 | 127)) {
        return true;
    }
    output.lines().map(str::trim).any(|line| {
        line.ends_with(": command not found")
            || (line.starts_with("sh: ") && line.ends_with(": not found"))
            || line.starts_with("error: Failed to spawn: ")
            || line
                .split_once("No module named ")
                .is_some_and(|(before, name)| !name.starts_with(['\'', '"']) && !before.trim_end().ends_with("Error:"))
    })
}

/// The heartbeat file of the agent in `env`, when its project (the
/// teammate's `TROUPE_PROJECT`, else the first folder from `cwd` up that
/// holds `.troupe/`, as for every hook) is a troupe project and the agent
/// id is a plain name. A Builder's hook gates in its own worktree, which has
/// no state folder: its heartbeat is the project's, where the Lead watches.
fn heartbeat_file(cwd: &Path, env: &GateEnv) -> Option<PathBuf> {
    let agent = env.agent_id.as_deref().filter(|a| troupe_core::layout::is_valid_agent_id(a))?;
    let project = crate::run::project_root(&|name| std::env::var(name).ok(), cwd)?;
    let layout = troupe_core::layout::Layout::new(&project);
    layout.state_dir().is_dir().then(|| layout.heartbeats_dir().join(agent))
}

fn run_beating(command: &str, cwd: &Path, env: &GateEnv, timeout: Duration, every: Duration) -> Ended {
    let heartbeat = heartbeat_file(cwd, env);
    let not_started = |why: String| Ended { status: Err(Stopped::NotStarted(why)), output: String::new() };
    let (mut reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return not_started(format!("cannot create a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return not_started(format!("cannot create a pipe: {e}")),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(cwd).stdin(Stdio::null()).stdout(writer).stderr(writer2);
    // Its own process group, so a timeout kills everything it started.
    cmd.process_group(0);
    for (key, value) in [
        ("TROUPE_AGENT_ID", &env.agent_id),
        ("TROUPE_AGENT_NAME", &env.agent_name),
        ("TROUPE_LAST_TASK_ID", &env.last_task_id),
        ("TROUPE_STATUS_FROM", &env.status_from),
        ("TROUPE_STATUS_TO", &env.status_to),
    ] {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    if let Some(w) = WATCHER.get() {
        (w.ready)();
    }
    // Started and listed under one lock, so `kill_running` never misses it.
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    if running.1 {
        return not_started("troupe is stopping".into());
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return not_started(format!("cannot start sh in {}: {e}", cwd.display())),
    };
    running.0.push(child.id());
    drop(running);
    if let Some(w) = WATCHER.get() {
        (w.watch)(child.id());
    }
    drop(cmd); // closes our copies of the pipe's write end
    let collector = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = reader.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let mut last_beat: Option<Instant> = None;
    let status = loop {
        if let Some(file) = &heartbeat
            && last_beat.is_none_or(|t| t.elapsed() >= every)
        {
            crate::heartbeat::beat(file, command);
            last_beat = Some(Instant::now());
        }
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status.code()),
            Ok(None) if started.elapsed() >= timeout => {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
                break Err(Stopped::Aborted(format!("timed out after {}s and was killed", timeout.as_secs())));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(Stopped::Aborted(format!("cannot wait for it: {e}"))),
        }
    };
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).0.retain(|g| *g != child.id());
    if let Some(w) = WATCHER.get() {
        (w.unwatch)(child.id());
    }
    let output = collector.join().unwrap_or_default();
    Ended { status, output: String::from_utf8_lossy(&output).into_owned() }
}

/// The last lines of `output`, at most `TAIL_LINES` lines and `TAIL_CHARS` characters.
pub fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.trim_end().lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let text = lines[start..].join("\n");
    let count = text.chars().count();
    if count <= TAIL_CHARS { text } else { text.chars().skip(count - TAIL_CHARS).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(command: &str, rule: GateRule) -> GateStep {
        let label = if rule == GateRule::Tests { "Test" } else { "gates.on_idle" };
        GateStep { label: label.into(), command: command.into(), rule }
    }

    fn run(command: &str, rule: GateRule) -> GateResult {
        let env = GateEnv { agent_id: Some("b1".into()), last_task_id: Some("1.2".into()), ..Default::default() };
        run_step(&step(command, rule), Path::new("/"), &env, Duration::from_secs(5))
    }

    fn run_of(label: &str, command: &str, detail: &str, tail: &str) -> GateRun {
        GateRun { label: label.into(), command: command.into(), detail: detail.into(), tail: tail.into() }
    }

    #[test]
    fn a_running_gate_keeps_its_agents_heartbeat_fresh() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe/state")).unwrap();
        let env = GateEnv { agent_id: Some("builder-g1-3".into()), ..Default::default() };
        let started = std::time::SystemTime::now();
        let every = Duration::from_millis(100);
        // A gate that writes when it ends: the last beat happened while it ran.
        let ended = run_beating("sleep 0.45; date > ended", dir.path(), &env, Duration::from_secs(5), every);
        assert_eq!(ended.status.unwrap(), Some(0));
        let file = dir.path().join(".troupe/state/heartbeats/builder-g1-3");
        let beat = std::fs::metadata(&file).unwrap().modified().unwrap();
        let ended = std::fs::metadata(dir.path().join("ended")).unwrap().modified().unwrap();
        assert!(beat >= started + Duration::from_millis(250), "beats went on while the gate ran");
        assert!(beat <= ended);
        // Outside a troupe project, or for an id that is not a plain name: no file.
        let bad = GateEnv { agent_id: Some("../escape".into()), ..Default::default() };
        run_beating("true", dir.path(), &bad, Duration::from_secs(5), every);
        assert!(!dir.path().join(".troupe/state/escape").exists());
        let plain = tempfile::tempdir().unwrap();
        run_beating("true", plain.path(), &env, Duration::from_secs(5), every);
        assert!(!plain.path().join(".troupe").exists());
    }

    #[test]
    fn a_hook_command_follows_the_seeds_exit_code_table() {
        let hook = GateRule::Hook;
        assert_eq!(run("true", hook), GateResult::Passed);
        let command = "echo \"$TROUPE_AGENT_ID $TROUPE_LAST_TASK_ID\" >&2; exit 2";
        assert_eq!(run(command, hook), GateResult::Failed(run_of("gates.on_idle", command, "exit 2", "b1 1.2")));
        assert_eq!(
            run("echo oops; exit 1", hook),
            GateResult::Errored(run_of("gates.on_idle", "echo oops; exit 1", "exit 1", "oops"))
        );
        assert!(run("exit 1", hook).allows());
        assert!(!run("exit 2", hook).allows());
    }

    #[test]
    fn a_test_command_refuses_on_any_failure() {
        // pytest's 1 and `cargo test`'s 101 were "allowed with a warning" by the hooks.
        for code in [1, 2, 101] {
            let r = run(&format!("echo FAILED; exit {code}"), GateRule::Tests);
            assert_eq!(
                r,
                GateResult::Failed(run_of(
                    "Test",
                    &format!("echo FAILED; exit {code}"),
                    &format!("exit {code}"),
                    "FAILED"
                ))
            );
            assert!(!r.allows());
        }
        let msg = run("exit 101", GateRule::Tests).message(QualityGate::OnTaskCompleted).unwrap();
        assert!(msg.contains("Test `exit 101` failed (exit 101)"), "{msg}");
        // A test failing on an import of the code under test is the code's.
        let r = run("echo \"E   ModuleNotFoundError: No module named 'calc'\"; exit 2", GateRule::Tests);
        assert!(matches!(r, GateResult::Failed(_)), "{r:?}");
    }

    #[test]
    fn a_command_that_cannot_run_is_the_environments_problem() {
        for (command, rule) in [
            ("no-such-tool-for-troupe --version", GateRule::Tests),
            ("no-such-tool-for-troupe --version", GateRule::Hook),
            ("echo '/usr/bin/python3: No module named pytest' >&2; exit 1", GateRule::Tests),
            ("echo 'error: Failed to spawn: `pytest`' >&2; exit 2", GateRule::Hook),
            ("echo 'sh: 1: jest: not found'; exit 1", GateRule::Tests),
            ("echo 'bash: line 1: jest: command not found'; exit 1", GateRule::Tests),
        ] {
            let r = run(command, rule);
            let GateResult::Unrunnable(run) = &r else { panic!("{command}: {r:?}") };
            assert_eq!(run.command, command);
            assert!(r.allows(), "a hook never sends it back to the agent");
            let msg = r.message(QualityGate::OnIdle).unwrap();
            assert!(msg.contains("a problem of the environment"), "{msg}");
        }
        let msg = run("no-such-tool-for-troupe", GateRule::Tests).message(QualityGate::OnIdle).unwrap();
        assert!(msg.contains("its Test command `no-such-tool-for-troupe` (exit 127)"), "{msg}");
        assert!(msg.contains(".troupe/steering/tech.md") && msg.contains("not found"), "{msg}");
        let msg = run("no-such-tool-for-troupe", GateRule::Hook).message(QualityGate::OnIdle).unwrap();
        assert!(msg.contains("`gates.on_idle` in .troupe/config.toml"), "{msg}");
    }

    #[test]
    fn steps_run_in_order_until_one_does_not_pass() {
        let dir = tempfile::tempdir().unwrap();
        let steps = [
            GateStep { label: "Test".into(), command: "echo t >> ran".into(), rule: GateRule::Tests },
            GateStep { label: "Lint".into(), command: "echo l >> ran; exit 1".into(), rule: GateRule::Tests },
            GateStep { label: "Build".into(), command: "echo b >> ran".into(), rule: GateRule::Tests },
        ];
        let r = run_steps(&steps, dir.path(), &GateEnv::default(), Duration::from_secs(5));
        assert!(matches!(&r, GateResult::Failed(run) if run.label == "Lint"), "{r:?}");
        assert_eq!(std::fs::read_to_string(dir.path().join("ran")).unwrap(), "t\nl\n");
        assert_eq!(run_steps(&steps[..1], dir.path(), &GateEnv::default(), Duration::from_secs(5)), GateResult::Passed);
    }

    #[test]
    fn timeouts_kill_the_whole_group() {
        let started = Instant::now();
        let slow = step("sleep 30 & sleep 30", GateRule::Hook);
        let r = run_step(&slow, Path::new("/"), &GateEnv::default(), Duration::from_millis(200));
        assert!(matches!(&r, GateResult::Errored(run) if run.detail.contains("timed out")), "{r:?}");
        let slow = step("sleep 30 & sleep 30", GateRule::Tests);
        let r = run_step(&slow, Path::new("/"), &GateEnv::default(), Duration::from_millis(200));
        assert!(matches!(&r, GateResult::Failed(run) if run.detail.contains("timed out")), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn tails_are_bounded() {
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = tail(&long);
        assert!(t.starts_with("line 60") && t.ends_with("line 99"), "{t}");
        assert_eq!(tail(&"x".repeat(10_000)).len(), TAIL_CHARS);
        let msg = GateResult::Failed(run_of("gates.on_task_completed", "make", "exit 2", "boom"))
            .message(QualityGate::OnTaskCompleted);
        assert!(msg.unwrap().contains("gates.on_task_completed `make` failed (exit 2)"));
    }
}
