//! `troupe ask`: sub-agent mode (seed 004). One question to an agent under a
//! role, one answer on stdout; with `--json` one document other programs
//! orchestrate with. Every tool call goes through troupe's hooks and gateway,
//! as for any teammate, so the role's policy holds.

use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::commands::agent::{launch, role, turn};
use crate::error::CliResult;
use crate::output::print_json;

/// Ask an agent one question and print its answer. The role is any built-in
/// teammate role or any role the project's skills define; the default is the
/// coordinator, which reads but never writes. Exit status: 0 when the agent
/// answered, 1 when it failed, 130 when interrupted. With `--json`: one
/// document with the answer, role, engine, model, turns, cost, tool calls and
/// denials (also on failure).
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The role to ask as (built-in, or a role of the skills' `allowedRoles`).
    #[arg(long, default_value = "coordinator")]
    pub role: String,
    #[command(flatten)]
    pub choice: turn::EngineChoice,
    /// Turn limit, where the engine has one.
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// The question; read from standard input when omitted or `-`.
    pub prompt: Option<String>,
}

pub fn run(g: &GlobalArgs, args: AskArgs) -> CliResult<ExitCode> {
    let prompt = launch::read_prompt(args.prompt.as_deref())?;
    let project = crate::project::find(g)?;
    let role = role::resolve(&project, &args.role)?;
    let prepared = launch::prepare(
        &project,
        launch::Request {
            role: Some(role),
            engine: args.choice.engine,
            model: args.choice.model,
            max_turns: args.max_turns,
            prompt,
            ..launch::Request::default()
        },
    )?;
    let (agent, role, engine, model) =
        (prepared.agent_id.clone(), prepared.role.to_string(), prepared.engine.clone(), prepared.model.clone());
    // Tool calls on stderr, only for a person watching: a calling program reads stdout alone.
    let show = !g.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let turn = turn::run(project.root(), prepared, &|name, input| {
        if show {
            turn::show_tool(name, input);
        }
    })?;
    let out = &turn.outcome;
    let ok = turn.ok();
    if g.json {
        let stats = out.stats.as_ref();
        print_json(&json!({
            "ok": ok,
            "answer": out.result,
            "role": role,
            "engine": engine,
            "model": model,
            "agent": agent,
            "session": out.session_id,
            "outcome": out.kind.as_str(),
            "error": out.error_message,
            "turns": stats.map(|s| s.num_turns),
            "cost_usd": stats.map(|s| s.total_cost_usd),
            "duration_ms": stats.map(|s| s.duration_ms),
            "tool_calls": turn.tool_calls,
            "denials": turn.denials_json(),
        }));
    } else if ok {
        turn::print_answer(out.result.as_deref().unwrap_or_default());
    }
    turn.exit(g.json, &format!("the {role} agent"), &agent)
}
