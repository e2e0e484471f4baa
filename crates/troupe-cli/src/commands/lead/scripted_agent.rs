//! `troupe scripted-agent`: the built-in scripted engine as a child process.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use troupe_scripted::{Identity, Outbox, Script, ToolCall, run};
use troupe_store::{NewMessage, Store, TaskStatus};

use crate::cli::GlobalArgs;
use crate::commands::adhoc::approval::chain;
use crate::error::{CliError, CliResult};

/// Run as a scripted teammate (the `scripted` engine): perform the script's
/// actions for this agent and print normalised events. Identity comes from the
/// TROUPE_* environment the Lead sets.
#[derive(Debug, Args)]
pub struct ScriptedAgentArgs {
    /// The script file.
    #[arg(long)]
    pub script: PathBuf,
    /// Which turn to play: 0 on the first run, one more per resume.
    #[arg(long, default_value_t = 0)]
    pub turn: usize,
}

struct StoreOutbox {
    root: PathBuf,
    feature: Option<String>,
}

impl StoreOutbox {
    fn store(&self) -> Result<Box<dyn Store>, String> {
        troupe_scripted::open_store(&self.root)
    }
}

impl Outbox for StoreOutbox {
    fn send(&mut self, from: &str, to: &str, kind: &str, body: &str) -> Result<(), String> {
        let msg = NewMessage { kind: kind.parse().map_err(|e| format!("{e}"))?, ..NewMessage::text(from, to, body) };
        self.store()?.send(msg).map(|_| ()).map_err(|e| e.to_string())
    }

    fn complete(&mut self, agent: &str, task: &str) -> Result<(), String> {
        let store = self.store()?;
        let id = match &self.feature {
            Some(f) if !task.contains('/') => format!("{f}/{task}"),
            _ => task.to_string(),
        };
        let t = store.task(&id).map_err(|e| chain(&e))?;
        if t.status != TaskStatus::InProgress {
            store.claim(&id, agent).map_err(|e| chain(&e))?;
        }
        store.complete(&id, agent).map(|_| ()).map_err(|e| chain(&e))
    }

    /// Through the gateway's own dispatch (policy, rate limits, audit), as
    /// `troupe mcp serve` would answer the engine's call.
    fn call_tool(&mut self, who: &Identity, call: &ToolCall) -> Result<String, String> {
        let layout = troupe_core::layout::Layout::new(&self.root);
        let setup = troupe_gateway::Setup::load(&layout).map_err(|e| e.to_string())?;
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::from(self.store()?);
        let gateway = troupe_gateway::Gateway::from_setup(setup, Some(store));
        let session = crate::commands::mcp::serve::session(who.agent.clone(), who.role.clone(), false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let result = runtime.block_on(gateway.call(&session, &call.name, Some(call.args.clone())));
        let text = serde_json::to_string(&result.content).unwrap_or_default();
        match result.is_error {
            Some(true) => Err(text),
            _ => Ok(text),
        }
    }
}

pub fn run_agent(_g: &GlobalArgs, args: ScriptedAgentArgs) -> CliResult<ExitCode> {
    let script = Script::load(&args.script).map_err(|e| {
        CliError::config(e.to_string()).with_hint("see `troupe-lead`'s scripted module docs for the format")
    })?;
    let who = Identity::from_env();
    let mut outbox = StoreOutbox { root: who.project.clone(), feature: who.feature.clone() };
    let code = run(&script, &who, args.turn, &mut outbox, &mut std::io::stdout().lock());
    Ok(ExitCode::from(code as u8))
}
