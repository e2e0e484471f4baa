//! `troupe scripted-agent`: the built-in scripted engine as a child process.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use troupe_lead::scripted::{Identity, Outbox, Script, run};
use troupe_store::{NewMessage, Store, TaskStatus};

use crate::cli::GlobalArgs;
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
        troupe_lead::scripted::open_store(&self.root)
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
        let t = store.task(&id).map_err(|e| e.to_string())?;
        if t.status != TaskStatus::InProgress {
            store.claim(&id, agent).map_err(|e| e.to_string())?;
        }
        store.complete(&id, agent).map(|_| ()).map_err(|e| e.to_string())
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
