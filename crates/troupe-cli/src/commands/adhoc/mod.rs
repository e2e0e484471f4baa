//! `troupe adhoc`: the full-access mode of seed 004, for investigating and
//! fixing what a workflow could not. The agent runs under the `adhoc` role
//! (its tools come from the skills that name it), and a workflow's failure
//! context (`--context`) is put into its instructions.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use troupe_core::role::TeamRole;

use crate::cli::GlobalArgs;
use crate::commands::agent::{launch, role, turn};
use crate::commands::workflow::context::WorkflowContext;
use crate::error::{CliError, CliResult};
use crate::output::print_json;

pub(crate) mod approval;

/// The role adhoc mode runs under.
pub const ADHOC: &str = "adhoc";

/// Investigate or fix something with the `adhoc` role's tools; `--context`
/// hands it a failed workflow's context. A call rated at or above `[adhoc]
/// approve_from` (default high: shell commands, database changes; critical:
/// `rm -rf`, forced pushes, ...) waits for a person: the terminal asks
/// `approve Bash "rm -rf build"? [y/N/always]` (answers are read from standard
/// input), or `troupe approve`/`reject` answers it. Exit status: 0 when the
/// agent finished, 1 when it failed.
#[derive(Debug, Args)]
pub struct AdhocArgs {
    /// A context file a failed workflow saved (`.troupe/context/<time>-<skill>.json`).
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    #[command(flatten)]
    pub choice: turn::EngineChoice,
    /// The task; with `--context` alone, "investigate and fix the failure"; else read from standard input.
    pub task: Option<String>,
}

pub fn run(g: &GlobalArgs, args: AdhocArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let context = args.context.as_deref().map(WorkflowContext::load).transpose()?;
    let task = match (&args.task, &context) {
        (None, Some(_)) => "Investigate the failure described above and fix it.".to_string(),
        (task, _) => launch::read_prompt(task.as_deref())?,
    };
    // Held calls are answered from standard input when the task did not come from it.
    let answers_from_stdin = args.task.is_some() || context.is_some();
    let policy = role::policy(&project)?;
    if policy.role(ADHOC).is_none() {
        return Err(CliError::user("no skill defines the adhoc role").with_hint(
            "a skill with `allowedRoles: [adhoc]` and the tools it may use (for full access `allowedTools: [\"*\"]`)",
        ));
    }
    let prompt = match &context {
        Some(c) => format!("{}\n{task}", c.instructions()),
        None => task,
    };
    let prepared = launch::prepare(
        &project,
        launch::Request {
            role: Some(TeamRole::Skill(ADHOC.into())),
            engine: args.choice.engine,
            model: args.choice.model,
            prompt,
            env: vec![(approval::APPROVALS_ENV.to_string(), "1".to_string())],
            ..launch::Request::default()
        },
    )?;
    let agent = prepared.agent_id.clone();
    let approvals = crate::commands::board::open_store_in(&project)?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Not joined: it may wait on a line of input when the agent is gone.
    std::thread::spawn({
        let (agent, done) = (agent.clone(), done.clone());
        move || {
            let mut lines = std::io::stdin().lines().map_while(Result::ok);
            let mut none = std::iter::empty();
            let answers: &mut dyn Iterator<Item = String> = if answers_from_stdin { &mut lines } else { &mut none };
            approval::answer_loop(approvals.as_ref(), &agent, answers, &done);
        }
    });
    let turn = turn::run(project.root(), prepared, &|name, input| {
        if !g.json {
            turn::show_tool(name, input);
        }
    });
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let turn = turn?;
    let ok = turn.ok();
    if g.json {
        print_json(&json!({
            "ok": ok,
            "agent": agent,
            "context": args.context,
            "answer": turn.outcome.result,
            "tool_calls": turn.tool_calls,
            "denials": turn.denials_json(),
        }));
    } else if let Some(answer) = &turn.outcome.result {
        turn::print_answer(answer);
    }
    turn.exit(g.json, "the adhoc agent", &agent)
}
