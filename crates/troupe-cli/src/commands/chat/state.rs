//! One conversation of `troupe chat`: the role, engine and model its next
//! turn runs with, what was said, and the engine session that continues it.
//! Every turn is a launch like `troupe ask`'s (`agent::launch::prepare`,
//! `agent::turn`), so troupe's hooks and gateway enforce the role each turn.

use std::cell::RefCell;
use std::collections::BTreeSet;

use troupe_core::event::AgentEvent;
use troupe_core::rbac::builtin::Capability;
use troupe_core::role::TeamRole;
use troupe_project::Project;
use troupe_store::{ChatMessage, Store, UsageFilter};

use crate::commands::agent::{launch, role, turn};
use crate::error::{CliError, CliResult};
use crate::output::{escape, note, print_line};

/// The built-in tool capabilities a role may be granted.
const CAPABILITIES: [Capability; 7] = [
    Capability::Read,
    Capability::Write,
    Capability::Shell,
    Capability::Web,
    Capability::Task,
    Capability::Todo,
    Capability::Other,
];

/// A conversation in progress.
pub(crate) struct Chat {
    pub project: Project,
    pub store: Box<dyn Store>,
    pub role: TeamRole,
    /// `--engine`, or what the config resolves when `None`.
    pub engine: Option<String>,
    pub model: Option<String>,
    /// One agent id for the whole REPL: its turns share a usage run and a log.
    pub agent_id: String,
    pub messages: Vec<ChatMessage>,
    /// The engine's session and the engine it belongs to, continued by the next turn.
    pub engine_session: Option<(String, String)>,
    /// The role whose instructions the engine session has already seen.
    pub introduced: Option<String>,
    /// The next turn replays `messages` (a resumed or forked session the engine cannot continue).
    pub replay: bool,
    /// The stored session this conversation saves to, with its name and parent.
    pub saved: Option<i64>,
    pub name: Option<String>,
    pub parent: Option<i64>,
}

/// What a turn's prompt is: the conversation so far when it must be replayed, then the line.
pub(crate) fn replayed(messages: &[ChatMessage], line: &str) -> String {
    let mut out = String::from("The conversation so far (continue it):\n\n");
    for m in messages {
        out.push_str(&format!("[{}]\n{}\n\n", m.role, m.text.trim_end()));
    }
    out.push_str(&format!("[user]\n{line}"));
    out
}

impl Chat {
    /// The tools a turn of `role` is offered: built-in capabilities its skills
    /// grant, and the gateway's tools it may call (as the gateway lists them).
    pub(crate) fn tools_of(&self, role: &str) -> CliResult<BTreeSet<String>> {
        let (gateway, _) = crate::commands::mcp::gateway(&self.project, false)?;
        let mut out: BTreeSet<String> = CAPABILITIES
            .iter()
            .map(|c| c.pattern())
            .filter(|p| gateway.policy.check_tool(role, p).is_allowed())
            .map(str::to_string)
            .collect();
        let rt = crate::commands::mcp::runtime()?;
        out.extend(rt.block_on(async {
            let names = gateway.visible_names(role).await;
            gateway.backends.shutdown().await;
            names
        }));
        Ok(out)
    }

    /// Switch to role `name`, saying which tools the next turn gains and loses.
    pub(crate) fn switch_role(&mut self, name: &str) -> CliResult<()> {
        let to = role::resolve(&self.project, name)?;
        if to == self.role {
            print_line(&format!("already {}", to.as_str()));
            return Ok(());
        }
        let before = self.tools_of(self.role.as_str())?;
        let after = self.tools_of(to.as_str())?;
        let gained: Vec<&str> = after.difference(&before).map(String::as_str).collect();
        let lost: Vec<&str> = before.difference(&after).map(String::as_str).collect();
        print_line(&format!("role: {} → {} ({} tools)", self.role.as_str(), to.as_str(), after.len()));
        if !gained.is_empty() {
            print_line(&format!("  now offered: {}", gained.join(", ")));
        }
        if !lost.is_empty() {
            print_line(&format!("  no longer offered: {}", lost.join(", ")));
        }
        if gained.is_empty() && lost.is_empty() {
            print_line("  the same tools as before");
        }
        self.role = to;
        Ok(())
    }

    /// The usage ledger's cost of this REPL's turns so far.
    pub(crate) fn cost(&self) -> CliResult<f64> {
        let filter = UsageFilter { agent: Some(self.agent_id.clone()), ..UsageFilter::default() };
        let rows = self.store.usage(&filter).map_err(crate::commands::board::store_error)?;
        Ok(rows.iter().fold(0.0, |sum, r| sum + r.usage.cost_usd))
    }

    /// The engine a turn would run now: `--engine`, else the project's choice for the role.
    pub(crate) fn engine_id(&self) -> CliResult<String> {
        launch::engine_id(&self.project, &self.role, self.engine.as_deref())
    }

    /// One turn: `prompt` to the agent under the current role, its text and
    /// tool calls shown as they come. `record` keeps the exchange in the
    /// conversation (a `/compress` summary is not part of it).
    pub(crate) fn ask(&mut self, prompt: &str, record: bool, fresh: bool) -> CliResult<turn::Turn> {
        let engine = self.engine_id()?;
        let resume = match (&self.engine_session, fresh) {
            (Some((e, s)), false) if *e == engine => Some(s.clone()),
            _ => None,
        };
        let text = if self.replay && !fresh { replayed(&self.messages, prompt) } else { prompt.to_string() };
        // The role's instructions once per engine session and role: a
        // continued session has them, unless the role changed since.
        let raw_prompt = resume.is_some() && self.introduced.as_deref() == Some(self.role.as_str());
        let prepared = launch::prepare(
            &self.project,
            launch::Request {
                role: Some(self.role.clone()),
                engine: self.engine.clone(),
                model: self.model.clone(),
                id: Some(self.agent_id.clone()),
                prompt: text,
                resume: resume.clone(),
                raw_prompt,
                ..launch::Request::default()
            },
        )?;
        let used = prepared.engine.clone();
        let shown = RefCell::new(String::new());
        let turn = turn::run_events(self.project.root(), prepared, &|event| match event {
            AgentEvent::Text { text } if !text.trim().is_empty() => {
                print_line(&escape(text.trim_end()));
                let mut s = shown.borrow_mut();
                s.push_str(text);
                s.push('\n');
            }
            AgentEvent::ToolUse { name, input, .. } => turn::show_tool(name, input),
            _ => {}
        })?;
        let shown = shown.into_inner();
        let answer = turn.outcome.result.clone().unwrap_or_else(|| shown.trim_end().to_string());
        if shown.trim().is_empty() && !answer.trim().is_empty() {
            print_line(&escape(&answer));
        }
        if turn.interrupted {
            note("(interrupted)");
        } else if !turn.ok() {
            note(&format!("the turn failed: {}", turn.failure("the agent", &self.agent_id).message));
        }
        // A turn that failed without a word is not part of the conversation.
        if record && (turn.ok() || !answer.trim().is_empty()) {
            self.messages.push(ChatMessage::new("user", prompt));
            let mut reply = ChatMessage::new("assistant", answer);
            reply.tools = turn.tool_calls.iter().map(|c| c.name.clone()).collect();
            self.messages.push(reply);
            self.replay = false;
            if let Some(session) = &turn.outcome.session_id {
                self.engine_session = Some((used, session.clone()));
                self.introduced = Some(self.role.as_str().to_string());
            } else {
                // An engine without sessions hears the conversation again next turn.
                self.engine_session = None;
                self.replay = true;
            }
        }
        Ok(turn)
    }

    /// The role named by a stored session, if the project still defines it.
    pub(crate) fn role_named(&self, name: &str) -> Option<TeamRole> {
        match role::resolve(&self.project, name) {
            Ok(r) => Some(r),
            Err(e) => {
                note(&format!("warning: {}; keeping the role {}", e.message, self.role.as_str()));
                None
            }
        }
    }
}

/// A message for a slash command that failed, without leaving the REPL.
pub(crate) fn report(e: &CliError) {
    note(&format!("error: {}", e.message));
    if let Some(hint) = &e.hint {
        note(&format!("hint: {hint}"));
    }
}
