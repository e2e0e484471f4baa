//! Quality gates (seed 003 B2): run the configured shell command when a task is
//! about to complete or a teammate is about to go idle, and read its exit code
//! exactly as the seed's table says: 0 allows, 2 refuses (the agent is told to
//! fix what failed, with the tail of the output), anything else is an error of
//! the gate itself, which allows with a warning.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use troupe_core::config::QualityGate;

/// Lines of output kept for the agent.
const TAIL_LINES: usize = 40;
/// Characters of output kept for the agent.
const TAIL_CHARS: usize = 4000;
/// How often a running gate touches its agent's heartbeat file.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

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

/// How a gate run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateResult {
    /// Exit 0: allowed.
    Passed,
    /// Exit 2: refused.
    Failed {
        /// The command.
        command: String,
        /// The end of its output.
        tail: String,
    },
    /// Any other end (another exit code, a signal, a timeout, a command that
    /// could not start): allowed with a warning.
    Errored {
        /// The command.
        command: String,
        /// What happened.
        detail: String,
        /// The end of its output.
        tail: String,
    },
}

impl GateResult {
    /// True unless the gate refused.
    pub fn allows(&self) -> bool {
        !matches!(self, GateResult::Failed { .. })
    }

    /// The message for the agent (refusal) or the user (warning); `None` when passed.
    pub fn message(&self, gate: QualityGate) -> Option<String> {
        let what = match gate {
            QualityGate::OnIdle => "before going idle",
            QualityGate::OnTaskCompleted => "before completing the task",
        };
        match self {
            GateResult::Passed => None,
            GateResult::Failed { command, tail } => Some(format!(
                "troupe quality gate {} refused {what}: `{command}` failed (exit 2). Fix what failed, then try again.\n\n{tail}",
                gate.key()
            )),
            GateResult::Errored { command, detail, tail } => Some(format!(
                "troupe quality gate {} could not decide {what} (`{command}`: {detail}); allowed with this warning.{}",
                gate.key(),
                if tail.is_empty() { String::new() } else { format!("\n\n{tail}") }
            )),
        }
    }
}

/// Run `command` with `sh -c` in `cwd`, output captured, killed after `timeout`.
/// In a troupe project, while it runs, the agent's heartbeat file
/// (`.troupe/state/heartbeats/<agent>`) is touched every few seconds.
pub fn run_gate(command: &str, cwd: &Path, env: &GateEnv, timeout: Duration) -> GateResult {
    run_gate_beating(command, cwd, env, timeout, HEARTBEAT_EVERY)
}

/// The heartbeat file of the agent in `env`, when `cwd` is a troupe project
/// and the agent id is a plain name.
fn heartbeat_file(cwd: &Path, env: &GateEnv) -> Option<std::path::PathBuf> {
    let agent = env.agent_id.as_deref().filter(|a| troupe_core::layout::is_valid_agent_id(a))?;
    let layout = troupe_core::layout::Layout::new(cwd);
    layout.state_dir().is_dir().then(|| layout.heartbeats_dir().join(agent))
}

fn beat(file: &Path) {
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Rewriting the file is the portable way to move its mtime forward.
    let _ = std::fs::write(file, b"");
}

fn run_gate_beating(command: &str, cwd: &Path, env: &GateEnv, timeout: Duration, every: Duration) -> GateResult {
    let heartbeat = heartbeat_file(cwd, env);
    let errored = |detail: String, tail: String| GateResult::Errored { command: command.into(), detail, tail };
    let (mut reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return errored(format!("cannot create a pipe: {e}"), String::new()),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return errored(format!("cannot create a pipe: {e}"), String::new()),
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
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return errored(format!("cannot start sh: {e}"), String::new()),
    };
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
            beat(file);
            last_beat = Some(Instant::now());
        }
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
                break Err(format!("timed out after {}s and was killed", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("cannot wait for it: {e}")),
        }
    };
    let output = collector.join().unwrap_or_default();
    let tail = tail(&String::from_utf8_lossy(&output));
    match status {
        Ok(s) if s.code() == Some(0) => GateResult::Passed,
        Ok(s) if s.code() == Some(2) => GateResult::Failed { command: command.into(), tail },
        Ok(s) => match s.code() {
            Some(code) => errored(format!("exit {code}"), tail),
            None => errored("killed by a signal".into(), tail),
        },
        Err(detail) => errored(detail, tail),
    }
}

/// The last lines of `output`, at most [`TAIL_LINES`] lines and [`TAIL_CHARS`] characters.
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

    fn run(command: &str) -> GateResult {
        let env = GateEnv { agent_id: Some("b1".into()), last_task_id: Some("1.2".into()), ..Default::default() };
        run_gate(command, Path::new("/"), &env, Duration::from_secs(5))
    }

    #[test]
    fn a_running_gate_keeps_its_agents_heartbeat_fresh() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe/state")).unwrap();
        let env = GateEnv { agent_id: Some("builder-g1-3".into()), ..Default::default() };
        let started = std::time::SystemTime::now();
        let every = Duration::from_millis(100);
        // A gate that writes when it ends: the last beat happened while it ran.
        let result = run_gate_beating("sleep 0.45; date > ended", dir.path(), &env, Duration::from_secs(5), every);
        assert_eq!(result, GateResult::Passed);
        let file = dir.path().join(".troupe/state/heartbeats/builder-g1-3");
        let beat = std::fs::metadata(&file).unwrap().modified().unwrap();
        let ended = std::fs::metadata(dir.path().join("ended")).unwrap().modified().unwrap();
        assert!(beat >= started + Duration::from_millis(250), "beats went on while the gate ran");
        assert!(beat <= ended);
        // Outside a troupe project, or for an id that is not a plain name: no file.
        let bad = GateEnv { agent_id: Some("../escape".into()), ..Default::default() };
        run_gate_beating("true", dir.path(), &bad, Duration::from_secs(5), every);
        assert!(!dir.path().join(".troupe/state/escape").exists());
        let plain = tempfile::tempdir().unwrap();
        run_gate_beating("true", plain.path(), &env, Duration::from_secs(5), every);
        assert!(!plain.path().join(".troupe").exists());
    }

    #[test]
    fn the_seeds_exit_code_table() {
        assert_eq!(run("true"), GateResult::Passed);
        assert_eq!(
            run("echo \"$TROUPE_AGENT_ID $TROUPE_LAST_TASK_ID\" >&2; exit 2"),
            GateResult::Failed {
                command: "echo \"$TROUPE_AGENT_ID $TROUPE_LAST_TASK_ID\" >&2; exit 2".into(),
                tail: "b1 1.2".into()
            }
        );
        let GateResult::Errored { detail, tail, .. } = run("echo oops; exit 1") else { panic!() };
        assert_eq!((detail.as_str(), tail.as_str()), ("exit 1", "oops"));
        assert!(run("exit 1").allows());
        assert!(!run("exit 2").allows());
    }

    #[test]
    fn timeouts_kill_the_whole_group() {
        let started = Instant::now();
        let r = run_gate("sleep 30 & sleep 30", Path::new("/"), &GateEnv::default(), Duration::from_millis(200));
        assert!(matches!(&r, GateResult::Errored { detail, .. } if detail.contains("timed out")), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn tails_are_bounded() {
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = tail(&long);
        assert!(t.starts_with("line 60") && t.ends_with("line 99"), "{t}");
        assert_eq!(tail(&"x".repeat(10_000)).len(), TAIL_CHARS);
        let msg =
            GateResult::Failed { command: "make".into(), tail: "boom".into() }.message(QualityGate::OnTaskCompleted);
        assert!(msg.unwrap().contains("`make` failed (exit 2)"));
    }
}
