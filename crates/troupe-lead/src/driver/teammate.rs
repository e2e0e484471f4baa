//! Running one teammate process: spawn in its own process group, stream its
//! stdout through the normaliser, log it, and report back as Lead events.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc::UnboundedSender;
use troupe_core::event::{AgentEvent, ResultType, RunSummary};
use troupe_engine::parse::Normaliser;

use crate::driver::launch::{Format, Launch};
use crate::machine::{AgentId, Event, RunStats};

/// What the driver hears from a running teammate.
#[derive(Debug)]
pub enum Report {
    /// A Lead event.
    Lead(Event),
    /// The process id, for shutting it down.
    Pid(AgentId, u32),
    /// A normalised event, for logs and progress displays.
    Agent(AgentId, AgentEvent),
}

/// Start `launch` for `id` in `cwd`; events flow to `tx` until the process ends.
pub fn start(id: AgentId, launch: Launch, cwd: PathBuf, log: PathBuf, tx: UnboundedSender<Report>) {
    tokio::spawn(async move {
        let started = Instant::now();
        let mut cmd = Command::new(&launch.program);
        cmd.args(&launch.args)
            .current_dir(&cwd)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(if launch.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let error = format!("cannot start {} ({}): {e}", launch.engine, launch.program.display());
                let _ = tx.send(Report::Lead(Event::SpawnFailed { id, error }));
                return;
            }
        };
        if let Some(pid) = child.id() {
            let _ = tx.send(Report::Pid(id.clone(), pid));
        }
        let _ = tx.send(Report::Lead(Event::TeammateStarted { id: id.clone() }));
        if let (Some(text), Some(mut stdin)) = (launch.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                let _ = stdin.write_all(text.as_bytes()).await;
            });
        }
        let stderr = child.stderr.take().map(|s| {
            tokio::spawn(async move {
                let mut buf = String::new();
                let mut lines = BufReader::new(s).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    if buf.len() < 16 * 1024 {
                        buf.push_str(&l);
                        buf.push('\n');
                    }
                }
                buf
            })
        });
        let mut logfile = tokio::fs::OpenOptions::new().create(true).append(true).open(&log).await.ok();
        let fmt = launch.format;
        let mut normaliser = match fmt {
            Format::Stream(f) => Some(Normaliser::new(f)),
            Format::Troupe => None,
        };
        let mut summary = RunSummary::new();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        // Tool calls always reach the Lead (hang timer, last tool) and the observer;
        // other events only refresh the hang timer, at most once a second, so that
        // chatty streams do not crowd the driver's queue.
        let mut last_activity: Option<Instant> = None;
        let mut emit = |e: &AgentEvent, summary: &mut RunSummary| {
            summary.observe(e);
            let tool = match e {
                AgentEvent::ToolUse { name, .. } => Some(name.clone()),
                _ => None,
            };
            let is_tool = matches!(e, AgentEvent::ToolUse { .. } | AgentEvent::ToolResult { .. });
            if tool.is_some() || last_activity.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1)) {
                last_activity = Some(Instant::now());
                let _ = tx.send(Report::Lead(Event::TeammateActivity { id: id.clone(), tool }));
            }
            if is_tool {
                let _ = tx.send(Report::Agent(id.clone(), e.clone()));
            }
        };
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(f) = logfile.as_mut() {
                let _ = f.write_all(line.as_bytes()).await;
                let _ = f.write_all(b"\n").await;
            }
            match normaliser.as_mut() {
                Some(n) => {
                    let mut events = Vec::new();
                    n.push(format!("{line}\n").as_bytes(), |e| events.push(e.clone()));
                    for e in &events {
                        emit(e, &mut summary);
                    }
                }
                None => {
                    let e = serde_json::from_str::<AgentEvent>(&line)
                        .unwrap_or_else(|_| AgentEvent::Raw { data: serde_json::Value::String(line.clone()) });
                    emit(&e, &mut summary);
                }
            }
        }
        if let Some(n) = normaliser.as_mut() {
            let mut events = Vec::new();
            n.finish(|e| events.push(e.clone()));
            for e in &events {
                emit(e, &mut summary);
            }
        }
        let status = child.wait().await.ok();
        let stderr_text = match stderr {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        let code = status.and_then(|s| s.code());
        let out = summary.finish(code, code.is_none(), started.elapsed().as_millis() as u64);
        let stats = RunStats {
            num_turns: out.stats.as_ref().map(|s| s.num_turns).unwrap_or(0),
            duration_ms: out.stats.as_ref().map(|s| s.duration_ms).unwrap_or(started.elapsed().as_millis() as u64),
            total_cost_usd: out.stats.as_ref().map(|s| s.total_cost_usd).filter(|c| *c > 0.0),
            session_id: out.session_id.clone(),
        };
        let event = if out.kind == ResultType::Success {
            Event::TeammateFinished { id, report: out.result.clone(), stats }
        } else {
            let mut error = out.error_message.clone().unwrap_or_else(|| out.kind.as_str().to_string());
            let tail = crate::scripted::tail(stderr_text.trim(), 5);
            if !tail.is_empty() {
                error.push_str(&format!(" (stderr: {tail})"));
            }
            Event::TeammateExited { id, error, stats }
        };
        let _ = tx.send(Report::Lead(event));
    });
}

/// Signal a teammate's whole process group: SIGTERM, then SIGKILL after `grace`
/// (at once with `force`).
pub fn stop(pid: u32, force: bool, grace: std::time::Duration) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let group = Pid::from_raw(pid as i32);
    if force {
        let _ = killpg(group, Signal::SIGKILL);
        return;
    }
    let _ = killpg(group, Signal::SIGTERM);
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        let _ = killpg(group, Signal::SIGKILL);
    });
}
