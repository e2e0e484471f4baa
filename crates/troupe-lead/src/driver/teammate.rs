//! Running one teammate process through troupe-engine's supervisor (its own
//! process group, nothing of it left once it ends, its normalised events in
//! `.troupe/state/logs/<agent>.jsonl` as `troupe agent logs` reads them), and
//! reporting back as Lead events.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use troupe_core::event::{AgentEvent, ResultType};
use troupe_engine::args::Invocation;
use troupe_engine::ledger::LaunchLedger;
use troupe_engine::supervisor::{self, Body, NoSink, SpawnSpec, StopMode};

use crate::driver::launch::Launch;
use crate::machine::{AgentId, Ending, Event, RunStats};

/// What the driver hears from a running teammate.
#[derive(Debug)]
pub enum Report {
    /// A Lead event.
    Lead(Event),
    /// Its process runs: its id (for the registry and the end of the run) and
    /// its supervisor's stopper (for a forced stop).
    Started(AgentId, u32, UnboundedSender<StopMode>),
    /// A normalised event, for logs and progress displays.
    Agent(AgentId, AgentEvent),
    /// Something the user should know that the run does not depend on (a
    /// registry write that failed).
    Note(String),
    /// A step of the quality gate `run` starts now.
    GateStep(u64, troupe_core::config::GateStep),
    /// A model turn for the usage ledger.
    Usage(troupe_store::NewUsage),
}

/// Where launch `turn` of `req`'s teammate, started as `l`, books its model
/// turns in run `run` of the usage ledger (the Lead's and a worker's alike).
pub(crate) fn ledger(
    req: &crate::machine::SpawnRequest,
    l: &Launch,
    run: &str,
    turn: usize,
    prices: Arc<troupe_core::usage::PriceTable>,
) -> LaunchLedger {
    let context = troupe_store::UsageContext {
        run: run.to_string(),
        feature: Some(req.context.feature.clone()),
        phase: Some(req.engine_phase.clone()),
        task: req.tasks.first().cloned(),
        agent: req.id.clone(),
        role: req.role.as_str().to_string(),
        engine: l.engine.clone(),
    };
    LaunchLedger::new(context, &format!("{run}/{turn}"), l.model.clone(), prices)
}

/// Start `launch` for `id` in `cwd`; events flow to `tx` until the process
/// ends, its model turns as `ledger` books them. Events other than tool calls reach the machine at most once per
/// `activity_every` (a fraction of the hang timeout, so a teammate that talks
/// is never taken for hung), from the first event of the engine's session on.
pub fn start(
    id: AgentId,
    launch: Launch,
    cwd: PathBuf,
    log: PathBuf,
    tx: UnboundedSender<Report>,
    activity_every: Duration,
    mut ledger: LaunchLedger,
) {
    tokio::spawn(async move {
        let started = Instant::now();
        let env_var = |key: &str| launch.env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let spec = SpawnSpec {
            agent_id: id.clone(),
            role: env_var("TROUPE_ROLE").unwrap_or_default(),
            feature: env_var("TROUPE_FEATURE"),
            task_id: env_var("TROUPE_TASK_ID"),
            project: env_var("TROUPE_PROJECT").map(PathBuf::from).unwrap_or_else(|| cwd.clone()),
            cwd: cwd.clone(),
            engine: launch.engine.clone(),
            model: launch.model.clone(),
            invocation: Invocation {
                program: launch.program.display().to_string(),
                args: launch.args.clone(),
                stdin: launch.stdin.clone(),
                format: launch.format,
                ignored: Vec::new(),
                env: Vec::new(),
            },
            env: launch.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect(),
            log_path: Some(log),
            // The machine keeps the hang timers: it hears every activity below.
            quiet_limits: None,
            sandbox: launch.sandbox.clone(),
        };
        // The registry is the driver's bookkeeper's (batched on one thread), not the supervisor's.
        let mut handle = match supervisor::spawn(spec, Arc::new(NoSink)) {
            Ok(h) => h,
            Err(e) => {
                let error = format!("cannot start {} ({}): {e}", launch.engine, launch.program.display());
                let _ = tx.send(Report::Lead(Event::SpawnFailed { id, error }));
                return;
            }
        };
        let _ = tx.send(Report::Started(id.clone(), handle.pid(), handle.stopper()));
        let _ = tx.send(Report::Lead(Event::TeammateStarted { id: id.clone() }));
        let mut records = handle.records().expect("a new handle's records");
        // Tool calls and their results always reach the Lead (hang timer, last
        // tool, the calls still running) and the observer;
        // other events only refresh the hang timer, at most once per
        // `activity_every`, so that chatty streams do not crowd the driver's queue.
        let mut last_activity: Option<Instant> = None;
        // Lines troupe does not read before the engine's session starts (Claude
        // Code's SessionStart hook status, printed before it connects its MCP
        // servers) are start-up, not output: the machine's start-up allowance
        // lasts until the first event of the session.
        let mut session = false;
        loop {
            let Some(record) = records.recv().await else { break };
            let e = match &record.body {
                Body::Event { event } => event,
                Body::Exited { .. } => break,
                _ => continue,
            };
            let tool = match e {
                AgentEvent::ToolUse { name, .. } => Some(name.clone()),
                _ => None,
            };
            if let Some(row) = ledger.observe(e) {
                if let Some(warning) = troupe_engine::ledger::unknown_price_warning(&row) {
                    let _ = tx.send(Report::Note(warning));
                }
                let _ = tx.send(Report::Usage(row));
            }
            session |= !matches!(e, AgentEvent::Raw { .. });
            let is_tool = matches!(e, AgentEvent::ToolUse { .. } | AgentEvent::ToolResult { .. });
            if matches!(e, AgentEvent::ToolResult { .. }) {
                // Never throttled: the machine counts the calls still running.
                last_activity = Some(Instant::now());
                let _ = tx.send(Report::Lead(Event::TeammateToolDone { id: id.clone() }));
            } else if session && (tool.is_some() || last_activity.is_none_or(|t| t.elapsed() >= activity_every)) {
                last_activity = Some(Instant::now());
                let _ = tx.send(Report::Lead(Event::TeammateActivity { id: id.clone(), tool }));
            }
            if is_tool {
                let _ = tx.send(Report::Agent(id.clone(), e.clone()));
            }
        }
        let outcome = handle.wait().await;
        let out = outcome.output;
        let stats = RunStats {
            num_turns: out.stats.as_ref().map(|s| s.num_turns).unwrap_or(0),
            duration_ms: out.stats.as_ref().map(|s| s.duration_ms).unwrap_or(started.elapsed().as_millis() as u64),
            total_cost_usd: out.stats.as_ref().map(|s| s.total_cost_usd).filter(|c| *c > 0.0),
            session_id: out.session_id.clone(),
        };
        let event = if out.kind == ResultType::Success {
            // The driver adds its `report` call and CPF file; the machine picks.
            let ending = Ending { text: out.result.clone(), ..Ending::default() };
            Event::TeammateEnded { id, ending: Box::new(ending), stats }
        } else {
            let mut error = out.error_message.clone().unwrap_or_else(|| out.kind.as_str().to_string());
            let tail = troupe_scripted::tail(outcome.stderr_tail.trim(), 5);
            if !tail.is_empty() && !error.contains(tail.as_str()) {
                error.push_str(&format!(" (stderr: {tail})"));
            }
            Event::TeammateExited { id, error, stats }
        };
        let _ = tx.send(Report::Lead(event));
    });
}
