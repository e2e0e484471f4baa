//! `troupe kill <agent> [-f]` (seed 003 B4): ask first, then stop. One path
//! for every agent troupe registered with a process (a team pane, `troupe
//! agent run`, a Lead teammate): a `shutdown_request` in its mailbox and
//! status SHUTTING_DOWN (a team agent idle at its prompt is woken to read
//! it, as `msg send` wakes it); its `respond_shutdown` answer decides. Approved:
//! SIGTERM, SIGKILL after 3 s. Refused: nothing is signalled and the reason
//! is the error. No answer within `[shutdown] timeout_seconds`: SIGTERM as
//! if approved. `-f`, or `graceful_enabled = false`, skips the question.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use troupe_engine::supervisor::{Grace, StopMode};
use troupe_store::{AgentStatus, Message, MessageKind, NewMessage, Store};

use crate::cli::GlobalArgs;
use crate::commands::board::{actor, open_store_in, store_error};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

/// From SIGTERM to SIGKILL (seed 003 B4).
const KILL_GRACE: Duration = Duration::from_secs(3);

/// How often the mailbox is read for the answer.
const POLL: Duration = Duration::from_millis(100);

/// The request the agent finds in its mailbox.
const REQUEST: &str = "You are asked to stop. Answer with respond_shutdown: approve (save your work first), \
or refuse with a reason.";

/// Stop an agent gracefully: it is asked (a shutdown_request) and may refuse;
/// with no answer within `[shutdown] timeout_seconds` it is stopped anyway.
#[derive(Debug, Args)]
pub struct KillArgs {
    /// The agent id.
    pub agent: String,
    /// Stop at once, without asking (SIGKILL).
    #[arg(long, short)]
    pub force: bool,
}

/// How the agent answered.
enum Answer {
    Approved,
    Refused(String),
    TimedOut,
}

pub fn run(g: &GlobalArgs, args: KillArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = open_store_in(&project)?;
    let (agent, pid) = super::stop::running(store.as_ref(), &args.agent)?;
    let shutdown = crate::project::load_config(&project)?.shutdown;
    let terminate = StopMode::Graceful(Grace { interrupt: Duration::ZERO, terminate: KILL_GRACE });
    let (mode, answer) = if args.force {
        (StopMode::Force, "forced")
    } else if !shutdown.graceful_enabled {
        (terminate, "graceful shutdown disabled")
    } else {
        let before = agent.status;
        store.set_status(&agent.id, AgentStatus::ShuttingDown).map_err(store_error)?;
        let request = ask(store.as_ref(), &agent.id)?;
        // A team agent idle at its prompt reads its mailbox only when woken, as `msg send` wakes it.
        if before == AgentStatus::Ready {
            let (layout, idle) = (project.layout(), AgentStatus::ShuttingDown);
            let _ = crate::commands::msg::wake::wake_when(store.as_ref(), layout, &request, idle);
        }
        match answer(store.as_ref(), &agent.id, request.id, shutdown.timeout())? {
            Answer::Approved => (terminate, "approved"),
            Answer::TimedOut => (terminate, "no answer"),
            Answer::Refused(reason) => {
                // It keeps working: it is no longer shutting down.
                store.set_status(&agent.id, before).map_err(store_error)?;
                return Err(CliError::user(format!("{} refused: {reason}", agent.id))
                    .with_hint(format!("troupe kill {} -f", agent.id)));
            }
        }
    };
    let signal = super::stop::stop(store.as_ref(), &agent, pid, mode)?;
    if g.json {
        print_json(&json!({"id": agent.id, "pid": pid, "answer": answer, "signal": signal, "stopped": true}));
    } else {
        note(&format!("stopped {} ({answer}; last signal {})", agent.id, signal.as_deref().unwrap_or("none")));
    }
    Ok(ExitCode::SUCCESS)
}

/// Send the request.
fn ask(store: &dyn Store, agent: &str) -> CliResult<Message> {
    let request =
        NewMessage { kind: MessageKind::ShutdownRequest, priority: 5, ..NewMessage::text(actor(), agent, REQUEST) };
    store
        .send(request)
        .map_err(store_error)?
        .into_iter()
        .next()
        .ok_or_else(|| CliError::internal(format!("the shutdown request to {agent} was not sent")))
}

/// Wait up to `timeout` for `agent`'s answer to request `id`.
fn answer(store: &dyn Store, agent: &str, id: i64, timeout: Duration) -> CliResult<Answer> {
    let deadline = Instant::now() + timeout;
    loop {
        let thread = store.thread(id).map_err(store_error)?;
        if let Some(reply) = thread
            .iter()
            .find(|m| m.kind == MessageKind::ShutdownResponse && m.in_reply_to == Some(id) && m.from == agent)
        {
            let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap_or_default();
            if body.get("approve").and_then(serde_json::Value::as_bool) == Some(true) {
                return Ok(Answer::Approved);
            }
            let reason = body.get("reason").and_then(serde_json::Value::as_str).unwrap_or(&reply.body);
            return Ok(Answer::Refused(reason.to_string()));
        }
        if Instant::now() >= deadline {
            return Ok(Answer::TimedOut);
        }
        std::thread::sleep(POLL);
    }
}
