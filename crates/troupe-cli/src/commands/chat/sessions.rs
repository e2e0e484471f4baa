//! The session commands of the REPL (`/save`, `/sessions`, `/resume`,
//! `/compress`, `/fork`, `/export`) and `troupe chat --sessions`: sessions
//! live in the store ([`troupe_store::ChatSessions`]).

use serde_json::json;
use troupe_store::{ChatMessage, ChatSession, NewSession, Store};

use super::slash::Format;
use super::state::Chat;
use crate::commands::board::store_error;
use crate::error::{CliError, CliResult};
use crate::output::{ago, print_json, print_line, print_table};

/// The prompt a `/compress` turn sends with the conversation.
const COMPRESS: &str = "Summarise the conversation below for someone who will continue it: the question, what \
                        was found or decided, and what is still open. Answer with the summary only.";

impl Chat {
    /// The conversation as it would be saved.
    fn snapshot(&self) -> CliResult<NewSession> {
        let engine = match &self.engine_session {
            Some((e, _)) => e.clone(),
            None => self.engine_id()?,
        };
        Ok(NewSession {
            name: self.name.clone(),
            role: self.role.as_str().to_string(),
            engine,
            model: self.model.clone(),
            engine_session: self.engine_session.as_ref().map(|(_, s)| s.clone()),
            parent: self.parent,
            summary: false,
            messages: self.messages.clone(),
        })
    }

    /// `/save [name]`: the first save creates the session, later ones update it.
    pub(crate) fn save(&mut self, name: Option<String>) -> CliResult<()> {
        if name.is_some() {
            self.name = name;
        }
        let saved = match self.saved {
            Some(id) => self.store.update_session(id, self.snapshot()?),
            None => self.store.create_session(self.snapshot()?),
        }
        .map_err(store_error)?;
        self.saved = Some(saved.id);
        print_line(&format!("saved session {} ({} messages)", saved.id, saved.session.messages.len()));
        Ok(())
    }

    /// `/resume <id>`: continue a session; its engine session where the engine
    /// has one, else the conversation is replayed to the engine next turn.
    pub(crate) fn resume(&mut self, id: i64) -> CliResult<()> {
        let s = self.store.session(id).map_err(store_error)?;
        self.load(&s);
        self.saved = Some(s.id);
        let how = match &self.engine_session {
            Some((engine, session)) => format!("continuing {engine} session {session}"),
            None => "its conversation is replayed to the engine with your next message".to_string(),
        };
        print_line(&format!(
            "resumed session {} ({} messages, role {}); {how}",
            s.id,
            s.session.messages.len(),
            self.role.as_str()
        ));
        Ok(())
    }

    /// Make `s` the conversation in progress.
    fn load(&mut self, s: &ChatSession) {
        let x = &s.session;
        if let Some(role) = self.role_named(&x.role) {
            self.role = role;
        }
        self.model = x.model.clone().or(self.model.take());
        self.messages = x.messages.clone();
        self.name = x.name.clone();
        self.parent = x.parent;
        self.engine_session = x.engine_session.clone().map(|sid| (x.engine.clone(), sid));
        self.introduced = self.engine_session.as_ref().map(|_| x.role.clone());
        self.replay = self.engine_session.is_none() && !self.messages.is_empty();
    }

    /// `/fork <id> [--at N]`: a new session of the first N messages (all by
    /// default), continued here by replaying them.
    pub(crate) fn fork(&mut self, id: i64, at: Option<usize>) -> CliResult<()> {
        let s = self.store.session(id).map_err(store_error)?;
        let len = s.session.messages.len();
        let at = at.unwrap_or(len);
        if at > len {
            return Err(CliError::user(format!("session {id} has {len} messages; cannot fork at {at}"))
                .with_hint(format!("--at takes 0 to {len}")));
        }
        let mut new = s.session.clone();
        new.messages.truncate(at);
        new.parent = Some(id);
        new.summary = false;
        // The engine's session holds all of the original: a fork starts over from the kept messages.
        new.engine_session = None;
        let fork = self.store.create_session(new).map_err(store_error)?;
        self.load(&fork);
        self.saved = Some(fork.id);
        print_line(&format!("forked session {id} at {at} messages into session {}; continuing it here", fork.id));
        Ok(())
    }

    /// `/compress <id>`: the engine summarises session `id` into a new session
    /// marked as a summary; the original stays as it was.
    pub(crate) fn compress(&mut self, id: i64) -> CliResult<()> {
        let s = self.store.session(id).map_err(store_error)?;
        if s.session.messages.is_empty() {
            return Err(CliError::user(format!("session {id} has no messages to compress")));
        }
        let prompt = super::state::replayed(&s.session.messages, COMPRESS);
        let turn = self.ask(&prompt, false, true)?;
        let summary = turn.outcome.result.clone().filter(|t| !t.trim().is_empty() && turn.ok());
        let Some(summary) = summary else {
            return Err(CliError::user(format!("the engine gave no summary of session {id}"))
                .with_hint(format!("its log: troupe agent logs {}", self.agent_id)));
        };
        let new = NewSession {
            name: s.session.name.clone().map(|n| format!("{n} (summary)")),
            parent: Some(id),
            summary: true,
            engine_session: None,
            messages: vec![ChatMessage::new("summary", summary)],
            ..s.session.clone()
        };
        let saved = self.store.create_session(new).map_err(store_error)?;
        print_line(&format!(
            "compressed session {id} ({} messages) into session {} (a summary; the original is kept)",
            s.session.messages.len(),
            saved.id
        ));
        Ok(())
    }

    /// `/export <id> <format>`: write the session to `.troupe/exports/session-<id>.<ext>`.
    pub(crate) fn export(&self, id: i64, format: Format) -> CliResult<()> {
        let s = self.store.session(id).map_err(store_error)?;
        let dir = self.project.layout().troupe_dir().join("exports");
        let path = dir.join(format!("session-{id}.{}", format.ext()));
        troupe_project::fsutil::write_atomic(&path, super::export::render(&s, format).as_bytes())
            .map_err(|e| CliError::user(format!("cannot write {}", path.display())).with_source(&e))?;
        print_line(&format!("exported session {id} to {}", path.display()));
        Ok(())
    }
}

/// The saved sessions as a table, or one JSON document (`troupe chat --sessions`, `/sessions`).
pub(crate) fn list(store: &dyn Store, json: bool) -> CliResult<()> {
    let sessions = store.sessions().map_err(store_error)?;
    if json {
        let doc: Vec<_> = sessions
            .iter()
            .map(|s| {
                let x = &s.session;
                json!({"id": s.id, "name": x.name, "role": x.role, "engine": x.engine, "model": x.model,
                       "messages": x.messages.len(), "parent": x.parent, "summary": x.summary,
                       "engine_session": x.engine_session, "created_at": s.created_at, "updated_at": s.updated_at})
            })
            .collect();
        print_json(&json!({"sessions": doc}));
        return Ok(());
    }
    if sessions.is_empty() {
        print_line("no saved sessions; `/save [name]` in `troupe chat` saves one");
        return Ok(());
    }
    let now = jiff::Timestamp::now();
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|s| {
            let x = &s.session;
            let from = match (x.parent, x.summary) {
                (Some(p), true) => format!("summary of {p}"),
                (Some(p), false) => format!("fork of {p}"),
                (None, _) => String::new(),
            };
            vec![
                s.id.to_string(),
                x.name.clone().unwrap_or_default(),
                x.role.clone(),
                x.engine.clone(),
                x.messages.len().to_string(),
                ago(s.updated_at, now),
                from,
            ]
        })
        .collect();
    print_table(&["ID", "NAME", "ROLE", "ENGINE", "MESSAGES", "SAVED", "FROM"], &rows, &[0, 4]);
    Ok(())
}
