//! `troupe chat`: the interactive REPL of seed 004. A person talks with an
//! agent under a role, switches roles and models, and saves, resumes, forks,
//! compresses and exports sessions (kept in the store). Each line is one turn
//! through troupe's hooks and gateway, launched as `troupe ask` launches.

use std::process::ExitCode;

use clap::Args;
use rustyline::error::ReadlineError;

use crate::cli::GlobalArgs;
use crate::commands::agent::{launch, role, turn};
use crate::error::{CliError, CliResult};
use crate::output::{note, print_line};

mod export;
mod picker;
mod sessions;
mod slash;
mod state;

use slash::Line;
use state::{Chat, report};

/// Talk with an agent under a role: answers stream as they come, with the
/// tool calls it makes; `/help` lists the commands (roles, skills, tools,
/// model, status, sessions). Ctrl-C stops the turn in progress, Ctrl-D
/// leaves. Every turn goes through troupe's hooks and gateway, so the role's
/// policy holds. Sessions are saved in the project's store.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The role to start in (built-in, or a role of the skills' `allowedRoles`).
    #[arg(long, default_value = "coordinator")]
    pub role: String,
    #[command(flatten)]
    pub choice: turn::EngineChoice,
    /// List the saved sessions and exit.
    #[arg(long)]
    pub sessions: bool,
    /// Start by resuming saved session ID.
    #[arg(long, value_name = "ID")]
    pub resume: Option<i64>,
}

pub fn run(g: &GlobalArgs, args: ChatArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let store = crate::commands::board::open_store_in(&project)?;
    if args.sessions {
        sessions::list(store.as_ref(), g.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let role = role::resolve(&project, &args.role)?;
    let history = project.layout().state_dir().join("chat_history");
    let mut chat = Chat {
        project,
        store,
        role,
        engine: args.choice.engine,
        model: args.choice.model,
        agent_id: launch::new_agent_id("chat"),
        messages: Vec::new(),
        engine_session: None,
        introduced: None,
        replay: false,
        saved: None,
        name: None,
        parent: None,
    };
    if let Some(id) = args.resume {
        chat.resume(id)?;
    }
    let config = rustyline::Config::builder().auto_add_history(true).max_history_size(1000).map_err(readline)?.build();
    let mut editor = rustyline::DefaultEditor::with_config(config).map_err(readline)?;
    let _ = editor.load_history(&history);
    note(&format!(
        "troupe chat as {} (engine {}); /help lists the commands, Ctrl-D leaves",
        chat.role.as_str(),
        chat.engine_id()?
    ));
    loop {
        match editor.readline(&format!("{}> ", chat.role.as_str())) {
            Ok(line) => match slash::parse(&line) {
                Ok(Line::Quit) => break,
                Ok(line) => {
                    if let Err(e) = dispatch(&mut chat, line) {
                        report(&e);
                    }
                }
                Err(message) => note(&format!("error: {message}")),
            },
            // Ctrl-C at the prompt clears the line, as in a shell.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(readline(e)),
        }
    }
    let _ = editor.save_history(&history);
    if !chat.messages.is_empty() && chat.saved.is_none() {
        note("the conversation was not saved (/save saves it)");
    }
    Ok(ExitCode::SUCCESS)
}

fn readline(e: ReadlineError) -> CliError {
    CliError::internal("the line editor failed").with_source(&e)
}

/// Do what one parsed line asks.
fn dispatch(chat: &mut Chat, line: Line) -> CliResult<()> {
    match line {
        Line::Empty | Line::Quit => {}
        Line::Say(text) => {
            chat.ask(&text, true, false)?;
        }
        Line::Help => print_line(slash::HELP),
        Line::Roles(Some(name)) => chat.switch_role(&name)?,
        Line::Roles(None) => {
            let policy = role::policy(&chat.project)?;
            let mut names: Vec<String> =
                ["architect", "auditor", "builder", "coordinator", "inspector", "task-generator"]
                    .into_iter()
                    .map(str::to_string)
                    .collect();
            names.extend(policy.roles().keys().filter(|r| r.as_str() != "lead").cloned());
            names.sort();
            names.dedup();
            let at = names.iter().position(|n| n == chat.role.as_str()).unwrap_or(0);
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                let picked = picker::pick(&names, at)
                    .map_err(|e| CliError::internal("cannot read the arrow keys").with_source(&e))?;
                if let Some(i) = picked {
                    chat.switch_role(&names[i])?;
                }
            } else {
                for n in &names {
                    print_line(&format!("{} {n}", if n == chat.role.as_str() { "*" } else { " " }));
                }
            }
        }
        Line::Skills => {
            let policy = role::policy(&chat.project)?;
            let skills = policy.skills_for_role(chat.role.as_str());
            if skills.is_empty() {
                print_line(&format!("no skill names the role {}", chat.role.as_str()));
            }
            for s in skills {
                print_line(&format!("{}  {}", s.id, s.description.trim()));
            }
        }
        Line::Tools => {
            let tools = chat.tools_of(chat.role.as_str())?;
            print_line(&format!("{} tools for {}:", tools.len(), chat.role.as_str()));
            for t in tools {
                print_line(&format!("  {t}"));
            }
        }
        Line::Model(None) => {
            print_line(&format!("model: {}", chat.model.as_deref().unwrap_or("(the engine's default for the role)")))
        }
        Line::Model(Some(m)) => {
            print_line(&format!("model: {} → {m}", chat.model.as_deref().unwrap_or("(default)")));
            chat.model = Some(m);
        }
        Line::Status => {
            let tools = chat.tools_of(chat.role.as_str())?.len();
            let session = match (chat.saved, &chat.engine_session) {
                (Some(id), Some((_, s))) => format!("{id} (engine session {s})"),
                (Some(id), None) => id.to_string(),
                (None, Some((_, s))) => format!("not saved (engine session {s})"),
                (None, None) => "not saved".to_string(),
            };
            print_line(&format!("role:    {}", chat.role.as_str()));
            print_line(&format!("engine:  {}", chat.engine_id()?));
            print_line(&format!("model:   {}", chat.model.as_deref().unwrap_or("(default)")));
            print_line(&format!("tools:   {tools}"));
            print_line(&format!("session: {session}, {} messages", chat.messages.len()));
            print_line(&format!("cost:    ${:.4} so far (agent {})", chat.cost()?, chat.agent_id));
        }
        Line::Save(name) => chat.save(name)?,
        Line::Sessions => sessions::list(chat.store.as_ref(), false)?,
        Line::Resume(id) => chat.resume(id)?,
        Line::Compress(id) => chat.compress(id)?,
        Line::Fork(id, at) => chat.fork(id, at)?,
        Line::Export(id, format) => chat.export(id, format)?,
    }
    Ok(())
}
