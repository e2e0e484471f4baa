//! Chat sessions (`troupe chat`, seed 004): a conversation with an agent,
//! saved by a person and resumed, forked, compressed or exported later.
//!
//! A session is one row: who the agent was (role, engine, model), the
//! engine's own session id when it has one (so a resume continues the
//! engine's conversation), and the messages in order as JSON. A compressed
//! session is a new row marked `summary` whose `parent` is the original; a
//! fork is a new row with the original as `parent`. Originals are never
//! changed by either.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The event a saved session appends (data: `id`, `name`, `messages`).
pub const SESSION_EVENT: &str = "chat_session_saved";

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `user`, `assistant` or `summary` (a compressed conversation's summary).
    pub role: String,
    /// What was said.
    pub text: String,
    /// The tools the assistant called during this message, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

impl ChatMessage {
    /// A message of `role` with no tool calls.
    pub fn new(role: &str, text: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), text: text.into(), tools: Vec::new() }
    }
}

/// A session as saved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewSession {
    /// A name a person gave it.
    pub name: Option<String>,
    /// The role the agent had when it was saved.
    pub role: String,
    /// The engine id.
    pub engine: String,
    /// The model, when one was chosen.
    pub model: Option<String>,
    /// The engine's own session id, to continue it.
    pub engine_session: Option<String>,
    /// The session this one was forked or compressed from.
    pub parent: Option<i64>,
    /// Whether this session is a compressed summary of its parent.
    pub summary: bool,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatSession {
    /// Its number, unique in the store.
    pub id: i64,
    /// When it was first saved.
    pub created_at: Timestamp,
    /// When it was last saved.
    pub updated_at: Timestamp,
    /// What was saved.
    #[serde(flatten)]
    pub session: NewSession,
}

/// The columns both backends select, in order.
pub(crate) const COLS: &str =
    "id, name, role, engine, model, engine_session, parent, summary, messages, created_at, updated_at";

/// A row's columns as both backends read them, before they are checked.
pub(crate) struct Raw {
    pub id: i64,
    pub name: Option<String>,
    pub role: String,
    pub engine: String,
    pub model: Option<String>,
    pub engine_session: Option<String>,
    pub parent: Option<i64>,
    pub summary: i64,
    pub messages: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Raw {
    /// The session the row holds; a column that does not read back is an error naming it.
    pub(crate) fn session(self) -> crate::Result<ChatSession> {
        let bad = |column: &'static str, e: &dyn std::fmt::Display| crate::StoreError::BadValue {
            column,
            detail: e.to_string(),
        };
        let ts = |us: i64| Timestamp::from_microsecond(us).map_err(|e| bad("timestamp", &e));
        Ok(ChatSession {
            id: self.id,
            created_at: ts(self.created_at)?,
            updated_at: ts(self.updated_at)?,
            session: NewSession {
                name: self.name,
                role: self.role,
                engine: self.engine,
                model: self.model,
                engine_session: self.engine_session,
                parent: self.parent,
                summary: self.summary != 0,
                messages: serde_json::from_str(&self.messages).map_err(|e| bad("messages", &e))?,
            },
        })
    }
}

/// The summary flag as stored (an integer on both backends).
pub(crate) fn summary_flag(s: &NewSession) -> i64 {
    i64::from(s.summary)
}

/// The messages as stored.
pub(crate) fn messages_json(s: &NewSession) -> String {
    serde_json::to_string(&s.messages).expect("messages serialise")
}

/// The event a save appends.
pub(crate) fn saved_event(id: i64, s: &NewSession) -> crate::NewEvent {
    crate::NewEvent {
        kind: SESSION_EVENT.into(),
        actor: None,
        subject: Some(format!("session:{id}")),
        data: serde_json::json!({"id": id, "name": s.name, "messages": s.messages.len(), "parent": s.parent}),
    }
}
