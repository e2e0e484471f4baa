//! One turn of a conversation with an agent (`ask`, `workflow`, `adhoc`):
//! spawn the prepared agent, show its tool calls as they happen, stop it on
//! Ctrl-C, and gather what a caller reports — the answer, the tool calls with
//! whether each succeeded, the refusals troupe gave it and the engine's stats.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use troupe_core::event::{AgentEvent, ParsedOutput};
use troupe_engine::supervisor::{Body, StopMode, spawn};
use troupe_gate::denials::{Denial, Follower};
use troupe_lead::driver::launch::cleanup;

use super::launch::Prepared;
use crate::error::{CliError, CliResult};

/// A tool call the agent made.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ToolCall {
    /// The tool's name as the engine calls it.
    pub name: String,
    /// Its arguments.
    pub input: Value,
    /// Whether it succeeded (`None`: no result was seen).
    pub ok: Option<bool>,
}

/// What a turn left.
#[derive(Debug)]
pub(crate) struct Turn {
    /// How the engine ended.
    pub outcome: ParsedOutput,
    /// Its tool calls in order.
    pub tool_calls: Vec<ToolCall>,
    /// troupe's refusals of this agent during the turn (hooks and gateway).
    pub denials: Vec<Denial>,
    /// Whether Ctrl-C stopped it.
    pub interrupted: bool,
}

impl Turn {
    /// Whether the agent ended with a success.
    pub fn ok(&self) -> bool {
        self.outcome.kind == troupe_core::event::ResultType::Success
    }

    /// The error of a failed turn of `who` (`the adhoc agent`), with where its log is.
    pub fn failure(&self, who: &str, agent: &str) -> CliError {
        let message = self.outcome.error_message.clone().unwrap_or_else(|| self.outcome.kind.as_str().to_string());
        CliError::user(format!("{who} {agent} ended with {message}"))
            .with_hint(format!("its full log: troupe agent logs {agent}"))
    }

    /// The exit status of a command that ran this turn: 130 interrupted, 0
    /// success, 1 failed (`--json`: the document said why), else the error.
    pub fn exit(&self, json: bool, who: &str, agent: &str) -> CliResult<std::process::ExitCode> {
        use std::process::ExitCode;
        if self.interrupted {
            Ok(ExitCode::from(130))
        } else if self.ok() {
            Ok(ExitCode::SUCCESS)
        } else if json {
            Ok(ExitCode::from(1))
        } else {
            Err(self.failure(who, agent))
        }
    }

    /// The refusals as `--json` documents show them: `tool`, `reason`.
    pub fn denials_json(&self) -> Vec<Value> {
        self.denials.iter().map(|d| serde_json::json!({"tool": d.what, "reason": d.reason})).collect()
    }
}

/// Show a tool call on stderr as it starts (escaped: the model chose it).
pub(crate) fn show_tool(name: &str, input: &Value) {
    let call = crate::commands::lead::progress::tool_call(name, input);
    crate::output::note(&format!("  → {}", crate::output::escape(&call)));
}

/// Print the agent's answer on stdout: as it is for a program, escaped for a terminal.
pub(crate) fn print_answer(text: &str) {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        crate::output::print_line(&crate::output::escape(text));
    } else {
        crate::output::print_line(text);
    }
}

/// `--engine` and `--model` of the commands that talk to one agent.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineChoice {
    /// Engine id (claude, gemini, codex, opencode, scripted or a custom one).
    #[arg(long)]
    pub engine: Option<String>,
    /// Model id; default: the role tier's model for the engine.
    #[arg(long)]
    pub model: Option<String>,
}

/// Run `prepared` to its end in the project at `root`. `on_tool` is told of
/// each tool call as it starts (a display); the per-run files are removed
/// afterwards.
pub(crate) fn run(root: &Path, prepared: Prepared, on_tool: &dyn Fn(&str, &Value)) -> CliResult<Turn> {
    run_events(root, prepared, &|event| {
        if let AgentEvent::ToolUse { name, input, .. } = event {
            on_tool(name, input);
        }
    })
}

/// [`run`], telling `on_event` of every event of the agent as it comes (the
/// chat REPL streams the answer's text and the tool calls with it).
pub(crate) fn run_events(root: &Path, prepared: Prepared, on_event: &dyn Fn(&AgentEvent)) -> CliResult<Turn> {
    let Prepared { spec, sink, grace, agent_id, .. } = prepared;
    let mut denials = Follower::start(root);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal("cannot start the async runtime").with_source(&e))?;
    let result = rt.block_on(async move {
        // Ctrl-C is ours from before the agent starts (see `agent run`).
        let mut signals = Interrupts::install()?;
        let mut handle = spawn(spec, sink).map_err(|e| CliError::user(e.to_string()).with_source(&e))?;
        let mut rx = handle.records().expect("a new handle's records");
        let mut calls: Vec<(String, ToolCall)> = Vec::new();
        let mut interrupts = 0;
        loop {
            tokio::select! {
                r = rx.recv() => {
                    let Some(record) = r else { break };
                    match &record.body {
                        Body::Event { event } => {
                            on_event(event);
                            match event {
                                AgentEvent::ToolUse { id, name, input, .. } => calls.push((
                                    id.clone(),
                                    ToolCall { name: name.clone(), input: input.clone(), ok: None },
                                )),
                                AgentEvent::ToolResult { id, ok, .. } => {
                                    if let Some((_, call)) = calls.iter_mut().rev().find(|(i, _)| i == id) {
                                        call.ok = Some(*ok);
                                    }
                                }
                                _ => {}
                            }
                        }
                        Body::Exited { .. } => break,
                        _ => {}
                    }
                }
                _ = signals.recv() => {
                    interrupts += 1;
                    handle.stop(if interrupts == 1 { StopMode::Graceful(grace) } else { StopMode::Force });
                }
            }
        }
        let outcome = handle.wait().await;
        Ok::<_, CliError>((outcome.output, calls.into_iter().map(|(_, c)| c).collect(), interrupts > 0))
    });
    cleanup(root, [&agent_id]);
    let (outcome, tool_calls, interrupted) = result?;
    let denials = denials.poll().into_iter().filter(|d| d.agent == agent_id).collect();
    Ok(Turn { outcome, tool_calls, denials, interrupted })
}

/// Ctrl-C and SIGTERM, taken from before an agent starts: either stops it
/// gracefully, a second one at once.
pub(crate) struct Interrupts {
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
}

impl Interrupts {
    /// Install both handlers (inside a tokio runtime).
    pub(crate) fn install() -> CliResult<Interrupts> {
        use tokio::signal::unix::{SignalKind, signal};
        let sigint =
            signal(SignalKind::interrupt()).map_err(|e| CliError::internal("cannot handle Ctrl-C").with_source(&e))?;
        let sigterm =
            signal(SignalKind::terminate()).map_err(|e| CliError::internal("cannot handle SIGTERM").with_source(&e))?;
        Ok(Interrupts { sigint, sigterm })
    }

    /// The next Ctrl-C or SIGTERM.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.sigint.recv() => {}
            _ = self.sigterm.recv() => {}
        }
    }
}
