//! run-feature: `troupe run <feature>` (the real Lead, in its own process),
//! followed through the event log (a status update per stage, the plan as an
//! artifact when it reaches the board) and through its final report (design.md
//! and the commits as artifacts; COMPLETED, or FAILED with the escalation).
//! CancelTask stops it the way Ctrl-C does: the Lead asks its teammates to
//! shut down, then signals them.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use a2a::*;
use futures::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use troupe_core::layout::{Layout, is_valid_feature_name};
use troupe_core::role::Role;
use troupe_store::event::kind;

use super::{keys, meta_str, task_meta, text_of};
use crate::a2a::A2a;
use crate::a2a::follow::{events, task_stream};
use crate::a2a::tasks::{blocking, internal, set_artifact, set_status};

/// How long a canceled run may take to stop after Ctrl-C before it is
/// signalled harder (the Lead's own shutdown of its teammates fits in it).
const CANCEL_GRACE: Duration = Duration::from_secs(60);
/// How many lines of the run's stderr a failure quotes from.
const STDERR_LINES: usize = 20;

/// A run-feature request.
pub struct Args {
    feature: String,
    description: Option<String>,
    engine: Option<String>,
}

impl Args {
    /// The feature from `x-troupe-feature`, the text as its description.
    pub fn parse(message: &Message, request: Option<&HashMap<String, Value>>) -> Result<Args, A2AError> {
        let feature = meta_str(message, request, keys::FEATURE).ok_or_else(|| {
            A2AError::invalid_params(format!("run-feature needs the feature's name in `{}`", keys::FEATURE))
        })?;
        if !is_valid_feature_name(&feature) {
            return Err(A2AError::invalid_params(format!(
                "`{feature}` is not a feature name: lowercase letters, digits, '-', '_' or '.', at most 64 characters"
            )));
        }
        let engine = meta_str(message, request, keys::ENGINE);
        if let Some(e) = &engine
            && !troupe_core::layout::is_valid_agent_id(e)
        {
            return Err(A2AError::invalid_params(format!("`{e}` is not an engine id")));
        }
        let text = text_of(message).trim().to_string();
        Ok(Args { feature, description: (!text.is_empty()).then_some(text), engine })
    }

    /// Record the request on the task.
    pub fn describe(&self, task: &mut Task) {
        let meta = task.metadata.get_or_insert_with(HashMap::new);
        meta.insert(keys::FEATURE.into(), json!(self.feature));
        if let Some(e) = &self.engine {
            meta.insert(keys::ENGINE.into(), json!(e));
        }
    }
}

/// A run this process started.
#[derive(Clone)]
pub struct RunHandle {
    pid: u32,
    canceled: Arc<AtomicBool>,
}

/// The stage a teammate's role stands for.
fn stage(role: &str) -> Option<&'static str> {
    match role.parse::<Role>().ok()? {
        Role::Architect => Some("design"),
        Role::TaskGenerator => Some("plan"),
        Role::Builder => Some("build"),
        Role::Inspector | Role::Auditor => Some("review"),
        _ => None,
    }
}

impl A2a {
    /// Start `troupe run` in the project; the task is WORKING while it runs.
    pub async fn start_run(&self, task: Task, args: Args) -> Result<Task, A2AError> {
        let mut cmd = tokio::process::Command::new(&self.troupe);
        cmd.arg("--json").arg("-C").arg(&self.root).arg("run");
        if let Some(engine) = &args.engine {
            cmd.arg("--engine").arg(engine);
        }
        // `--` ends the options: a description that starts with '-' is text.
        cmd.arg("--").arg(&args.feature);
        if let Some(d) = &args.description {
            cmd.arg(d);
        }
        // Its own process group: a Ctrl-C at the server's terminal is the
        // server's, and a cancel reaches this run only.
        cmd.current_dir(&self.root).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                tracing::error!(error = %e, "cannot start troupe run");
                let why = "troupe run could not be started (see the server's log)".to_string();
                return self.change(&task.id, |t| vec![set_status(t, TaskState::Failed, why)]).await;
            }
        };
        let pid = child.id().unwrap_or_default();
        let handle = RunHandle { pid, canceled: Arc::new(AtomicBool::new(false)) };
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).insert(task.id.clone(), handle.clone());
        let feature = args.feature.clone();
        let note = format!("troupe run {feature} started");
        let (task, after) = {
            let t = self
                .change(&task.id, |t| {
                    t.metadata.get_or_insert_with(HashMap::new).insert(keys::PID.into(), json!(pid));
                    vec![set_status(t, TaskState::Working, note)]
                })
                .await?;
            let loaded = self.load(&t.id).await?;
            (loaded.0, loaded.1)
        };

        let a2a = self.me();
        let id = task.id.clone();
        tokio::spawn(async move {
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let report = tokio::spawn(async move {
                let mut out = String::new();
                if let Some(mut s) = stdout {
                    let _ = s.read_to_string(&mut out).await;
                }
                out
            });
            let tail = tokio::spawn(async move {
                let mut tail = VecDeque::new();
                if let Some(s) = stderr {
                    let mut lines = BufReader::new(s).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        if tail.len() == STDERR_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(line);
                    }
                }
                tail
            });
            let stages = tokio::spawn(a2a.clone().follow_stages(id.clone(), feature.clone(), after));
            let status = child.wait().await;
            stages.abort();
            let report = report.await.unwrap_or_default();
            let tail = tail.await.unwrap_or_default();
            a2a.finish_run(&id, &feature, &handle, status.ok(), &report, tail).await;
            a2a.runs.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        });
        Ok(task)
    }

    /// Status updates per stage, and the plan when it reaches the board.
    async fn follow_stages(self: Arc<Self>, id: String, feature: String, after: i64) {
        let mut log = Box::pin(events(&self.state, after, |e| {
            matches!(e.kind.as_str(), kind::AGENT_REGISTERED | kind::PLAN_IMPORTED)
        }));
        let mut current: Option<&'static str> = None;
        while let Some(Ok(event)) = log.next().await {
            if event.kind == kind::PLAN_IMPORTED {
                if event.data.get("feature").and_then(Value::as_str) != Some(feature.as_str()) {
                    continue;
                }
                let path = Layout::new(&self.root).tasks_file(&feature);
                let Ok(plan) = tokio::fs::read_to_string(&path).await else { continue };
                let _ = self
                    .change(&id, move |t| {
                        vec![set_artifact(
                            t,
                            "plan",
                            "tasks.yaml: the plan the Builders follow",
                            vec![Part::text(plan).with_media_type("text/plain")],
                        )]
                    })
                    .await;
                continue;
            }
            let Some(agent_id) = event.subject.clone() else { continue };
            let Ok(agent) = blocking(&self.store, move |s| s.agent(&agent_id)).await else { continue };
            if agent.feature.as_deref() != Some(feature.as_str()) {
                continue;
            }
            let Some(now) = stage(&agent.role) else { continue };
            if current == Some(now) {
                continue;
            }
            current = Some(now);
            let note = format!("stage: {now} ({} {} on {})", agent.role, agent.id, agent.engine);
            let _ = self
                .change(&id, move |t| {
                    if t.status.state.is_terminal() {
                        return vec![];
                    }
                    vec![set_status(t, TaskState::Working, note)]
                })
                .await;
        }
    }

    /// The run ended: its report decides the task's end.
    async fn finish_run(
        &self,
        id: &str,
        feature: &str,
        handle: &RunHandle,
        status: Option<std::process::ExitStatus>,
        report: &str,
        tail: VecDeque<String>,
    ) {
        let report: Option<Value> = serde_json::from_str(report).ok();
        let outcome = report.as_ref().and_then(|r| r.get("outcome")).and_then(Value::as_str).unwrap_or("");
        let design = tokio::fs::read_to_string(Layout::new(&self.root).design_file(feature)).await.ok();
        let commits = report.as_ref().and_then(|r| r.get("commits")).cloned().unwrap_or(json!([]));
        let escalation = report
            .as_ref()
            .and_then(|r| r.get("escalations"))
            .and_then(Value::as_array)
            .and_then(|all| all.first())
            .map(|e| {
                let part = |i: usize| e.get(i).and_then(Value::as_str).unwrap_or_default().to_string();
                format!("{} (next: {})", part(0), part(1))
            });
        let (state, note) = match outcome {
            "completed" => (TaskState::Completed, format!("{feature}: implementation complete")),
            "interrupted" if handle.canceled.load(Ordering::SeqCst) => {
                (TaskState::Canceled, format!("{feature}: the run was stopped (canceled by the client)"))
            }
            "refused" => (
                TaskState::Rejected,
                format!(
                    "{feature}: the Lead refused: {}",
                    report
                        .as_ref()
                        .and_then(|r| r.get("refused"))
                        .and_then(Value::as_str)
                        .unwrap_or("see troupe status")
                ),
            ),
            "escalated" => (TaskState::Failed, format!("{feature} needs you: {}", escalation.unwrap_or_default())),
            _ if report.as_ref().is_some_and(|r| r.get("error").is_some()) => {
                // `troupe run` refused before the Lead started (no spec and no
                // description, a bad engine): its error document says why.
                let error = &report.as_ref().map(|r| r["error"].clone()).unwrap_or_default();
                let text = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                let hint = text("hint");
                let hint = if hint.is_empty() { String::new() } else { format!(" (hint: {hint})") };
                (TaskState::Rejected, format!("{feature}: {}{hint}", text("message")))
            }
            other => {
                let why = if other.is_empty() {
                    let last = tail.iter().rev().find(|l| !l.trim().is_empty()).cloned().unwrap_or_default();
                    let code = status.and_then(|s| s.code()).map_or("a signal".to_string(), |c| format!("exit {c}"));
                    format!("troupe run ended with {code}: {last}")
                } else {
                    format!("the run ended {other}")
                };
                (TaskState::Failed, format!("{feature}: {why}"))
            }
        };
        let result = self
            .change(id, move |t| {
                let mut out = vec![];
                if let Some(design) = design {
                    out.push(set_artifact(
                        t,
                        "design",
                        "design.md, the Architect's design",
                        vec![Part::text(design).with_media_type("text/markdown")],
                    ));
                }
                if commits.as_array().is_some_and(|c| !c.is_empty()) {
                    out.push(set_artifact(
                        t,
                        "commits",
                        "The commits the run made, oldest first",
                        vec![Part::data(json!({"commits": commits}))],
                    ));
                }
                out.push(set_status(t, state, note));
                out
            })
            .await;
        if let Err(e) = result {
            tracing::error!(task = id, error = %e.message, "cannot record the end of a run");
        }
    }

    /// Stop the run like Ctrl-C, wait for it to end (harder signals after
    /// `CANCEL_GRACE`), and return the task as it ended.
    pub async fn cancel_run(&self, task: Task) -> Result<Task, A2AError> {
        let handle = self.runs.lock().unwrap_or_else(|p| p.into_inner()).get(&task.id).cloned();
        let Some(handle) = handle else {
            let feature = task_meta(&task, keys::FEATURE).unwrap_or_default();
            let mut e = A2AError::task_not_cancelable(&task.id);
            e.message = format!(
                "this server did not start the run of task {}: stop it where it runs (Ctrl-C), see `troupe status {feature}`",
                task.id
            );
            return Err(e);
        };
        handle.canceled.store(true, Ordering::SeqCst);
        let pid = Pid::from_raw(handle.pid as i32);
        let _ = kill(pid, Signal::SIGINT);
        let (snapshot, after) = self.load(&task.id).await?;
        let mut updates = task_stream(&self.state, snapshot, after);
        let ended = tokio::time::timeout(CANCEL_GRACE, async { while let Some(Ok(_)) = updates.next().await {} }).await;
        if ended.is_err() {
            tracing::warn!(task = %task.id, "the run did not stop after Ctrl-C: SIGTERM");
            let _ = kill(pid, Signal::SIGTERM);
        }
        let (task, _) = self.load(&task.id).await?;
        if task.status.state.is_terminal() { Ok(task) } else { Err(internal("the run is still stopping", &task.id)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_by_role() {
        assert_eq!(stage("architect"), Some("design"));
        assert_eq!(stage("task-generator"), Some("plan"));
        assert_eq!(stage("builder"), Some("build"));
        assert_eq!(stage("inspector"), Some("review"));
        assert_eq!(stage("auditor"), Some("review"));
        assert_eq!(stage("lead"), None);
        assert_eq!(stage("nobody"), None);
    }
}
