//! `troupe workflow`: the restricted mode of seed 004. An agent under the
//! `orchestrator` role, whose skills give it only the gateway's
//! `list_skills`, `get_skill` and `run_script`, carries out a task by running
//! skill scripts. When a script fails, the failure context is saved for
//! `troupe adhoc --context` (`--on-failure` says what happens next).

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;
use troupe_core::role::TeamRole;
use troupe_store::NewEvent;

use crate::cli::GlobalArgs;
use crate::commands::agent::{launch, role, turn};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json};

pub(crate) mod context;

use context::WorkflowContext;

/// The role a workflow runs under.
pub const ORCHESTRATOR: &str = "orchestrator";

/// What the orchestrator role may do besides the three workflow tools: nothing.
const FORBIDDEN: [&str; 5] = ["builtin__write", "builtin__shell", "builtin__web", "builtin__task", "builtin__other"];

/// Carry out a task with skill scripts only, under the `orchestrator` role
/// (list_skills, get_skill, run_script). When a script fails, its context is
/// saved to `.troupe/context/<time>-<skill>.json`. Exit status: 0 when the
/// task completed, 1 when it failed.
#[derive(Debug, Args)]
pub struct WorkflowArgs {
    /// List the skills the orchestrator may use, with their scripts, and exit.
    #[arg(long)]
    pub list: bool,
    /// After a failed script: `prompt` prints the adhoc command to run, `auto`
    /// runs adhoc mode with the context at once, `exit` only exits non-zero.
    #[arg(long, value_enum, default_value_t = OnFailure::Prompt)]
    pub on_failure: OnFailure,
    #[command(flatten)]
    pub choice: turn::EngineChoice,
    /// The task; read from standard input when omitted or `-`.
    pub task: Option<String>,
}

/// What a failed workflow does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnFailure {
    /// Print `troupe adhoc --context <file>` and exit 1.
    Prompt,
    /// Escalate to adhoc mode with the context.
    Auto,
    /// Exit 1.
    Exit,
}

fn orchestrator(project: &troupe_project::Project) -> CliResult<troupe_core::rbac::policy::Policy> {
    let policy = role::policy(project)?;
    let hint = "a skill with `allowedRoles: [orchestrator]` and `allowedTools: [troupe__list_skills, \
                troupe__get_skill, troupe__run_script]` defines it; skills with scripts/ name orchestrator in \
                their allowedRoles";
    if policy.role(ORCHESTRATOR).is_none() {
        return Err(CliError::user("no skill defines the orchestrator role a workflow runs under").with_hint(hint));
    }
    if let Some(cap) = FORBIDDEN.iter().find(|c| policy.check_tool(ORCHESTRATOR, c).is_allowed()) {
        return Err(CliError::user(format!("the orchestrator role may use {cap}: a workflow runs skill scripts only"))
            .with_hint(format!(
                "remove {cap} (or a pattern matching it) from the skills of the orchestrator role; {hint}"
            )));
    }
    Ok(policy)
}

fn list(g: &GlobalArgs, project: &troupe_project::Project) -> CliResult<ExitCode> {
    let policy = orchestrator(project)?;
    let dir = project.layout().skills_dir();
    let skills: Vec<_> = policy
        .skills_for_role(ORCHESTRATOR)
        .into_iter()
        .map(|s| (s.id.clone(), s.description.clone(), troupe_gateway::scripts::scripts_of(&dir, &s.id)))
        .collect();
    if g.json {
        let doc: Vec<_> =
            skills.iter().map(|(id, d, scripts)| json!({"id": id, "description": d, "scripts": scripts})).collect();
        print_json(&json!({"role": ORCHESTRATOR, "skills": doc}));
    } else {
        let rows: Vec<Vec<String>> =
            skills.into_iter().map(|(id, d, scripts)| vec![id, scripts.join(", "), d]).collect();
        crate::output::print_table(&["SKILL", "SCRIPTS", "DESCRIPTION"], &rows, &[]);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(g: &GlobalArgs, args: WorkflowArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    if args.list {
        return list(g, &project);
    }
    let task = launch::read_prompt(args.task.as_deref())?;
    orchestrator(&project)?;
    let store = crate::commands::board::open_store_in(&project)?;
    // The log's position before the agent starts: its script runs come after.
    let started = store
        .append_event(NewEvent {
            kind: "workflow_started".into(),
            actor: None,
            subject: None,
            data: json!({"task": task}),
        })
        .map_err(crate::commands::board::store_error)?;
    let prompt = format!(
        "{task}\n\nCarry this out with your skills' scripts: list_skills, get_skill, then run_script. If a script \
         fails, stop and say what failed."
    );
    let prepared = launch::prepare(
        &project,
        launch::Request {
            role: Some(TeamRole::Skill(ORCHESTRATOR.into())),
            engine: args.choice.engine.clone(),
            model: args.choice.model.clone(),
            prompt,
            ..launch::Request::default()
        },
    )?;
    let agent = prepared.agent_id.clone();
    let turn = turn::run(project.root(), prepared, &|name, input| {
        if !g.json {
            turn::show_tool(name, input);
        }
    })?;
    let mut runs = Vec::new();
    let mut after = started.id;
    loop {
        let page = store.events_since(after, 500).map_err(crate::commands::board::store_error)?;
        let Some(last) = page.last() else { break };
        after = last.id;
        runs.extend(
            page.into_iter().filter(|e| {
                e.kind == troupe_gateway::scripts::SCRIPT_EVENT && e.actor.as_deref() == Some(agent.as_str())
            }),
        );
    }
    let now = jiff::Timestamp::now();
    let summary = turn.outcome.result.clone();
    let failure = runs.iter().rev().find_map(|e| WorkflowContext::from_run(&e.data, summary.clone(), now));
    let saved = failure.as_ref().map(|c| c.save(&project.layout().troupe_dir(), now)).transpose()?;
    let ok = turn.ok() && saved.is_none();
    let escalate = saved.is_some() && args.on_failure == OnFailure::Auto;
    // Escalated, adhoc's document is the one JSON document printed.
    if g.json && !escalate {
        print_json(&json!({
            "ok": ok,
            "agent": agent,
            "answer": turn.outcome.result,
            "scripts": runs.iter().map(|e| &e.data).collect::<Vec<_>>(),
            "denials": turn.denials_json(),
            "context": saved,
        }));
    } else if !g.json
        && !escalate
        && let Some(answer) = &turn.outcome.result
    {
        turn::print_answer(answer);
    }
    let Some(path) = saved.filter(|_| !turn.interrupted) else {
        return turn.exit(g.json, "the workflow agent", &agent);
    };
    let shown = path.strip_prefix(project.root()).unwrap_or(&path).display().to_string();
    match args.on_failure {
        OnFailure::Prompt if !g.json => note(&format!(
            "a script failed; its context is in {shown}\ninvestigate with: troupe adhoc --context {shown}"
        )),
        OnFailure::Auto => {
            note(&format!("a script failed; its context is in {shown}; escalating to adhoc mode"));
            let adhoc = crate::commands::adhoc::AdhocArgs { task: None, context: Some(path), choice: args.choice };
            return crate::commands::adhoc::run(g, adhoc);
        }
        _ => {}
    }
    Ok(ExitCode::from(1))
}
