//! Running one engine process as a teammate: spawned in its own process
//! group with the `TROUPE_*` environment, its stdout normalised into events
//! that go to `.troupe/state/logs/<agent>.jsonl`, to subscribers and to an
//! [`AgentSink`]; silence longer than the hang timeout is reported; stopping
//! escalates SIGINT → SIGTERM → SIGKILL on the whole group; when the leader
//! exits, whatever is left of its group is killed, so no grandchild outlives
//! the agent.

mod birth;
pub mod guard;
mod record;
mod signal;
mod sink;
mod store_sink;
mod wrote;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{broadcast, mpsc};
use troupe_core::event::{AgentEvent, ParsedOutput};
use troupe_core::liveness::{Quiet, QuietLimits};

pub use record::{Body, Record, WrittenFile};
pub use signal::{Grace, StopMode, group_alive, is_agent_process, signal_group, stop_group_blocking};
pub use sink::{AgentInfo, AgentSink, NoSink};
pub use store_sink::{StoreSink, THINKING_EVENT};

use crate::args::Invocation;
use crate::parse::Normaliser;

/// Everything needed to start one agent.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Agent id (`TROUPE_AGENT_ID`).
    pub agent_id: String,
    /// Role (`TROUPE_ROLE`).
    pub role: String,
    /// Feature (`TROUPE_FEATURE`).
    pub feature: Option<String>,
    /// Task (`TROUPE_TASK_ID`).
    pub task_id: Option<String>,
    /// Project root (`TROUPE_PROJECT`).
    pub project: PathBuf,
    /// Working directory.
    pub cwd: PathBuf,
    /// Engine id, for the log and the sink.
    pub engine: String,
    /// Model, for the log and the sink.
    pub model: Option<String>,
    /// The command line.
    pub invocation: Invocation,
    /// Extra environment.
    pub env: Vec<(OsString, OsString)>,
    /// Where to append the log (`.troupe/state/logs/<agent>.jsonl`).
    pub log_path: Option<PathBuf>,
    /// Report the agent unresponsive after this much silence: the hang
    /// timeout, or before its first output the start-up allowance, or while a
    /// tool call of its runs the tool allowance ([`troupe_core::liveness`],
    /// the rule the Lead's machine follows too). `None`: never.
    pub quiet_limits: Option<QuietLimits<Duration>>,
    /// The Landlock ruleset its whole process tree runs in (`None`: none,
    /// which only `troupe agent run --bare` and `[sandbox] required = false`
    /// on a kernel without Landlock ask for).
    pub sandbox: Option<crate::sandbox::Policy>,
}

/// A spawn that failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The executable could not be started.
    #[error("cannot start `{program}`: {source}")]
    Start {
        /// The executable.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The sandbox could not be set up; the agent was not started.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The log file could not be opened.
    #[error("cannot open agent log {path}: {source}")]
    Log {
        /// The log path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// How an agent's run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The parsed outcome (what the store records; `result` is the completion report).
    pub output: ParsedOutput,
    /// Exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// The last part of its standard error.
    pub stderr_tail: String,
}

/// Keeps the last `STDERR_TAIL` bytes of stderr for error messages.
const STDERR_TAIL: usize = 8 * 1024;

/// How many records the lossless subscriber may fall behind before the
/// supervisor stops reading the agent's output (and the agent, writing into a
/// full pipe, waits too): back-pressure, never loss.
const RECORDS_IN_FLIGHT: usize = 1024;

/// Every record of one agent from the `spawned` one on, none skipped: while
/// its holder is behind, the supervisor waits. Drop it to stop waiting.
pub struct Records(mpsc::Receiver<Arc<Record>>);

impl Records {
    /// The next record; `None` once the agent's run is over and every record
    /// was read.
    pub async fn recv(&mut self) -> Option<Arc<Record>> {
        self.0.recv().await
    }

    /// The next record if one is waiting.
    pub fn try_recv(&mut self) -> Option<Arc<Record>> {
        self.0.try_recv().ok()
    }
}

/// A running agent.
pub struct AgentHandle {
    id: String,
    pid: u32,
    events: broadcast::Sender<Arc<Record>>,
    from_start: Option<Records>,
    stop: mpsc::UnboundedSender<StopMode>,
    done: tokio::task::JoinHandle<Outcome>,
}

impl AgentHandle {
    /// The agent id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The process id, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Records from now on, for a live display that may skip some when it
    /// falls behind (the log file has them all).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Record>> {
        self.events.subscribe()
    }

    /// Every record from the `spawned` one on, none skipped (see [`Records`]);
    /// available once. Whoever takes it must read it until it ends (or drop
    /// it): the agent's output is read no faster than this is.
    pub fn records(&mut self) -> Option<Records> {
        self.from_start.take()
    }

    /// Asks the supervisor to stop the agent.
    pub fn stop(&self, mode: StopMode) {
        let _ = self.stop.send(mode);
    }

    /// A sender that stops the agent from elsewhere (a signal handler).
    pub fn stopper(&self) -> mpsc::UnboundedSender<StopMode> {
        self.stop.clone()
    }

    /// Waits for the run to end. Records nobody took ([`AgentHandle::records`])
    /// are dropped first, so the supervisor never waits for a reader that is
    /// not there.
    pub async fn wait(self) -> Outcome {
        let AgentHandle { done, from_start, .. } = self;
        drop(from_start);
        match done.await {
            Ok(o) => o,
            Err(e) => Outcome {
                output: {
                    let mut o = ParsedOutput::new(troupe_core::event::ResultType::Error);
                    o.error_message = Some(format!("supervisor task failed: {e}"));
                    o
                },
                exit_code: None,
                signal: None,
                stderr_tail: String::new(),
            },
        }
    }
}

/// Shared between the reader task and the supervising task.
struct Emitter {
    agent: String,
    seq: Mutex<u64>,
    log: Mutex<Option<std::io::BufWriter<std::fs::File>>>,
    tx: broadcast::Sender<Arc<Record>>,
    /// The lossless subscriber ([`Records`]); sending waits while it is full.
    lossless: mpsc::Sender<Arc<Record>>,
    /// What its output said so far, for the hang rule.
    liveness: Mutex<Liveness>,
}

/// When the agent last printed anything, and what that tells of its silence.
struct Liveness {
    last_activity: Instant,
    /// An event of its session was seen (lines before it are start-up).
    output_seen: bool,
    /// Its tool calls that have not returned yet.
    tools_running: u32,
}

impl Emitter {
    /// Number, log and publish a record; waits while the lossless subscriber is behind.
    async fn emit(&self, body: Body) {
        let record = self.record(body);
        // An error means the subscriber was dropped: nobody waits for records any more.
        let _ = self.lossless.send(record).await;
    }

    /// Like [`Emitter::emit`], for the first record, when the channel is empty;
    /// written to the log only with `log` (the child wrote it there itself).
    fn emit_first(&self, record: Record, log: bool) {
        let record = self.publish(record, log);
        let _ = self.lossless.try_send(record);
    }

    fn record(&self, body: Body) -> Arc<Record> {
        let record = Record { seq: 0, ts: jiff::Timestamp::now(), agent: self.agent.clone(), body };
        self.publish(record, true)
    }

    /// Number `record`, log it (with `log`) and send it to the live subscribers.
    fn publish(&self, mut record: Record, log: bool) -> Arc<Record> {
        let mut seq = self.seq.lock().expect("seq");
        record.seq = *seq;
        let record = Arc::new(record);
        *seq += 1;
        if let Some(w) = self.log.lock().expect("log").as_mut().filter(|_| log) {
            let mut line = serde_json::to_vec(&*record).unwrap_or_default();
            line.push(b'\n');
            if let Err(e) = w.write_all(&line) {
                tracing::warn!(agent = %self.agent, "cannot write agent log: {e}");
            }
        }
        let _ = self.tx.send(record.clone());
        record
    }

    fn flush(&self) {
        if let Some(w) = self.log.lock().expect("log").as_mut() {
            let _ = w.flush();
        }
    }

    fn touch(&self) {
        self.liveness.lock().expect("activity").last_activity = Instant::now();
    }

    /// Count `event` into what the agent's silence means.
    fn observe(&self, event: &AgentEvent) {
        let mut l = self.liveness.lock().expect("activity");
        match event {
            AgentEvent::Raw { .. } => return,
            AgentEvent::ToolUse { .. } => l.tools_running += 1,
            // An engine may print a result without its call (Codex, for items
            // it reports only once completed).
            AgentEvent::ToolResult { .. } => l.tools_running = l.tools_running.saturating_sub(1),
            _ => {}
        }
        l.output_seen = true;
    }

    fn silent_for(&self) -> Duration {
        self.liveness.lock().expect("activity").last_activity.elapsed()
    }

    /// How long it has been quiet, and how long it may be in its state.
    fn silence(&self, limits: &QuietLimits<Duration>) -> (Duration, Duration) {
        let l = self.liveness.lock().expect("activity");
        (l.last_activity.elapsed(), limits.limit(Quiet::of(l.output_seen, l.tools_running)))
    }
}

/// Starts the agent. Must be called inside a tokio runtime.
pub fn spawn(spec: SpawnSpec, sink: Arc<dyn AgentSink>) -> Result<AgentHandle, SpawnError> {
    let log = match &spec.log_path {
        Some(path) => {
            let open = || -> std::io::Result<std::fs::File> {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::OpenOptions::new().create(true).append(true).open(path)
            };
            Some(std::io::BufWriter::new(open().map_err(|source| SpawnError::Log { path: path.clone(), source })?))
        }
        None => None,
    };
    let inv = &spec.invocation;
    let mut cmd = tokio::process::Command::new(&inv.program);
    cmd.args(&inv.args)
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("TROUPE_AGENT_ID", &spec.agent_id)
        .env("TROUPE_ROLE", &spec.role)
        .env("TROUPE_FEATURE", spec.feature.as_deref().unwrap_or(""))
        .env("TROUPE_TASK_ID", spec.task_id.as_deref().unwrap_or(""))
        .env("TROUPE_PROJECT", &spec.project)
        .stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: signals reach the engine and everything it started,
        // and a Ctrl-C at troupe's terminal does not hit the agent directly.
        .process_group(0)
        .kill_on_drop(true);
    // The child lists its group with the guardian and writes its `spawned`
    // record itself, before it executes (see `birth`): there is no instant in
    // which it runs unguarded or unrecorded, whenever this process dies.
    let mut command = vec![inv.program.clone()];
    command.extend(inv.args.iter().cloned());
    let spawned = |pid| Body::Spawned {
        engine: spec.engine.clone(),
        model: spec.model.clone(),
        format: Some(inv.format.name().to_string()),
        pid,
        command: command.clone(),
    };
    let first = Record {
        seq: 0,
        ts: jiff::Timestamp::now(),
        agent: spec.agent_id.clone(),
        body: spawned(birth::placeholder()),
    };
    let log_line = log.as_ref().and_then(|w| {
        use std::os::fd::AsRawFd;
        birth::LogLine::new(w.get_ref().as_raw_fd(), &serde_json::to_vec(&first).ok()?)
    });
    let logged_by_child = log_line.is_some();
    let log_len = log.as_ref().and_then(|w| w.get_ref().metadata().ok()).map(|m| m.len());
    let pids = birth::PidPipe::new().map_err(|source| SpawnError::Start { program: inv.program.clone(), source })?;
    birth::announce(cmd.as_std_mut(), guard::input_fd(), log_line, &pids);
    // Built here, enforced in the child before exec (after its announcement);
    // kept until the spawn is done.
    let prepared = match &spec.sandbox {
        Some(policy) => {
            let prepared = policy.prepare()?;
            prepared.apply_to(&mut cmd);
            cmd.envs(policy.env());
            Some(prepared)
        }
        None => None,
    };
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(source) => {
            // The child may have announced itself before its exec failed.
            if let Some(pid) = pids.child_pid() {
                guard::unwatch(pid);
            }
            if let Some(mut w) = log.filter(|w| w.get_ref().metadata().ok().map(|m| m.len()) != log_len) {
                let mut outcome = ParsedOutput::new(troupe_core::event::ResultType::Error);
                outcome.error_message = Some(format!("cannot start `{}`: {source}", inv.program));
                let end = Record {
                    seq: 1,
                    ts: jiff::Timestamp::now(),
                    agent: spec.agent_id.clone(),
                    body: Body::Exited { exit_code: None, signal: None, outcome },
                };
                let mut line = serde_json::to_vec(&end).unwrap_or_default();
                line.push(b'\n');
                let _ = w.write_all(&line).and_then(|()| w.flush());
            }
            return Err(SpawnError::Start { program: inv.program.clone(), source });
        }
    };
    drop(prepared);
    drop(pids);
    let pid = child.id().unwrap_or(0);
    guard::watch(pid);
    let (tx, _) = broadcast::channel(4096);
    let (lossless, from_start) = mpsc::channel(RECORDS_IN_FLIGHT);
    let emitter = Arc::new(Emitter {
        agent: spec.agent_id.clone(),
        seq: Mutex::new(0),
        log: Mutex::new(log),
        tx: tx.clone(),
        lossless,
        liveness: Mutex::new(Liveness { last_activity: Instant::now(), output_seen: false, tools_running: 0 }),
    });
    tracing::info!(agent = %spec.agent_id, engine = %spec.engine, model = ?spec.model, pid, "agent started");
    emitter.emit_first(Record { body: spawned(pid), ..first }, !logged_by_child);
    emitter.flush();
    sink.started(&AgentInfo {
        id: spec.agent_id.clone(),
        role: spec.role.clone(),
        engine: spec.engine.clone(),
        model: spec.model.clone(),
        feature: spec.feature.clone(),
        task: spec.task_id.clone(),
        pid,
    });

    if let (Some(text), Some(mut stdin)) = (inv.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let untold = wrote::Untold::new(inv.format, spec.cwd.clone());
    let reader = tokio::spawn(read_stdout(stdout, inv.format, untold, emitter.clone(), sink.clone()));
    let stderr_task = tokio::spawn(read_stderr(stderr));
    let (stop_tx, stop_rx) = mpsc::unbounded_channel();
    let id = spec.agent_id.clone();
    let done = tokio::spawn(supervise(child, pid, spec, emitter, sink, reader, stderr_task, stop_rx));
    Ok(AgentHandle { id, pid, events: tx, from_start: Some(Records(from_start)), stop: stop_tx, done })
}

async fn read_stdout(
    mut out: tokio::process::ChildStdout,
    format: crate::parse::StreamFormat,
    mut untold: wrote::Untold,
    emitter: Arc<Emitter>,
    sink: Arc<dyn AgentSink>,
) -> Normaliser {
    let mut n = Normaliser::new(format);
    let mut buf = vec![0u8; 64 * 1024];
    // What the stream told us so far: whether the session id was reported, and
    // the model, which labels the thinking blocks the sink records.
    let mut seen = (false, None::<String>);
    let mut parsed: Vec<AgentEvent> = Vec::new();
    let handle = |e: &AgentEvent, seen: &mut (bool, Option<String>), parsed: &mut Vec<AgentEvent>| {
        match e {
            AgentEvent::Init { session_id, model } => {
                if let (Some(s), false) = (session_id, seen.0) {
                    sink.session(&emitter.agent, s);
                    seen.0 = true;
                }
                if model.is_some() {
                    seen.1.clone_from(model);
                }
                sink.usage(&emitter.agent, e);
            }
            AgentEvent::Usage(_) => sink.usage(&emitter.agent, e),
            AgentEvent::Thinking { text } if !text.trim().is_empty() => {
                sink.thinking(&emitter.agent, text, seen.1.as_deref());
            }
            _ => {}
        }
        emitter.observe(e);
        parsed.push(e.clone());
    };
    loop {
        match out.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                emitter.touch();
                n.push(&buf[..k], |e| handle(e, &mut seen, &mut parsed));
                for event in parsed.drain(..) {
                    emit_event(&emitter, &mut untold, event).await;
                    // Handing records to a slow subscriber is progress too (see `supervise`).
                    emitter.touch();
                }
                emitter.flush();
            }
        }
    }
    n.finish(|e| handle(e, &mut seen, &mut parsed));
    for event in parsed.drain(..) {
        emit_event(&emitter, &mut untold, event).await;
    }
    emitter.flush();
    n
}

/// Log and publish `event`, then, when it ended a call whose stream does not
/// carry its change, what the call's files hold.
async fn emit_event(emitter: &Emitter, untold: &mut wrote::Untold, event: AgentEvent) {
    let wrote = untold.observe(&event);
    emitter.emit(Body::Event { event }).await;
    if let Some(body) = wrote {
        emitter.emit(body).await;
    }
}

async fn read_stderr(mut err: tokio::process::ChildStderr) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(k) = err.read(&mut buf).await {
        if k == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..k]);
        if tail.len() > 2 * STDERR_TAIL {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    }
    let start = tail.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&tail[start..]).into_owned()
}

#[allow(clippy::too_many_arguments)]
async fn supervise(
    mut child: tokio::process::Child,
    pid: u32,
    spec: SpawnSpec,
    emitter: Arc<Emitter>,
    sink: Arc<dyn AgentSink>,
    reader: tokio::task::JoinHandle<Normaliser>,
    stderr_task: tokio::task::JoinHandle<String>,
    mut stop_rx: mpsc::UnboundedReceiver<StopMode>,
) -> Outcome {
    let started = Instant::now();
    let mut cancelled = false;
    let mut reported_hang = false;
    // The next escalation step: (signal, when).
    let mut pending: Vec<(Signal, Instant)> = Vec::new();
    let tick = spec.quiet_limits.map(|l| (l.hang / 4).clamp(Duration::from_millis(20), Duration::from_secs(1)));
    let mut ticker = tokio::time::interval(tick.unwrap_or(Duration::from_secs(3600)));
    let status = loop {
        let next_step = pending.first().map(|(_, at)| *at);
        tokio::select! {
            status = child.wait() => break status,
            Some(mode) = stop_rx.recv() => {
                cancelled = true;
                let now = Instant::now();
                pending = match mode {
                    StopMode::Force => vec![(Signal::SIGKILL, now)],
                    StopMode::Graceful(g) => vec![
                        (Signal::SIGINT, now),
                        (Signal::SIGTERM, now + g.interrupt),
                        (Signal::SIGKILL, now + g.interrupt + g.terminate),
                    ],
                };
            }
            _ = sleep_until_opt(next_step) => {
                let (sig, _) = pending.remove(0);
                emitter.emit(Body::Stopping { signal: sig.as_str().to_string() }).await;
                emitter.flush();
                if let Err(e) = signal_group(pid, sig) {
                    tracing::warn!(agent = %spec.agent_id, "cannot send {sig} to process group {pid}: {e}");
                }
            }
            _ = ticker.tick(), if spec.quiet_limits.is_some() => {
                let Some(limits) = spec.quiet_limits else { continue };
                let (silent, limit) = emitter.silence(&limits);
                if silent >= limit && !reported_hang {
                    reported_hang = true;
                    tracing::warn!(agent = %spec.agent_id, silent_ms = silent.as_millis() as u64, "agent unresponsive");
                    emitter.emit(Body::Unresponsive { silent_ms: silent.as_millis() as u64 }).await;
                    emitter.flush();
                    sink.unresponsive(&spec.agent_id, silent);
                } else if silent < limit {
                    reported_hang = false;
                }
            }
        }
    };
    // The leader is gone: whatever it left running in its group goes too, so
    // no grandchild outlives the agent (and none keeps our pipes open).
    let _ = signal_group(pid, Signal::SIGKILL);
    // And whatever it started in a session of its own (Claude Code's Bash
    // tool does that), found by the identity the supervisor gave it.
    kill_escaped(&spec.agent_id, &spec.project);
    guard::unwatch(pid);
    // Its temporary folder is its alone and nothing of it runs any more (the
    // guardian, which removes it if this process dies first, forgets it).
    if let Some(tmp) = spec.sandbox.as_ref().and_then(|s| s.tmp.as_ref()) {
        let _ = std::fs::remove_dir_all(tmp);
        guard::forget(tmp);
    }
    // The reader ends at the end of the pipe; something that escaped the group
    // may hold it open, so a reader that has made no progress for 5 s is given
    // up on. One that still hands records to a slow subscriber is not stuck.
    let mut reader = reader;
    let normaliser = loop {
        match tokio::time::timeout(Duration::from_secs(5), &mut reader).await {
            Ok(Ok(n)) => break Some(n),
            Ok(Err(_)) => break None,
            Err(_) if emitter.silent_for() < Duration::from_secs(5) => continue,
            Err(_) => {
                reader.abort();
                break None;
            }
        }
    };
    let stderr_tail =
        tokio::time::timeout(Duration::from_secs(2), stderr_task).await.ok().and_then(Result::ok).unwrap_or_default();
    let (exit_code, signal) = match &status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            (s.code(), s.signal())
        }
        Err(_) => (None, None),
    };
    let elapsed = started.elapsed().as_millis() as u64;
    let mut output = match &normaliser {
        Some(n) => n.outcome(exit_code, cancelled, elapsed),
        None => troupe_core::event::RunSummary::new().finish(exit_code, cancelled, elapsed),
    };
    if output.kind == troupe_core::event::ResultType::Error && !stderr_tail.trim().is_empty() {
        let last = stderr_tail.trim().lines().last().unwrap_or_default().to_string();
        let msg = output.error_message.get_or_insert_with(String::new);
        if !msg.contains(&last) {
            msg.push_str(&format!(": {last}"));
        }
    }
    tracing::info!(agent = %spec.agent_id, outcome = output.kind.as_str(), ?exit_code, ?signal, "agent ended");
    emitter.emit(Body::Exited { exit_code, signal, outcome: output.clone() }).await;
    emitter.flush();
    sink.finished(&spec.agent_id, &output);
    Outcome { output, exit_code, signal, stderr_tail }
}

/// SIGKILL every process whose environment names agent `agent` of `project`
/// (see [`is_agent_process`]): descendants that left its process group.
fn kill_escaped(agent: &str, project: &std::path::Path) {
    for pid in signal::agent_processes(|id, p| id == agent && p == project) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
