//! Chat sessions on SQLite ([`crate::session`]).

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, Row, params_from_iter};

use super::{SqliteStore, now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::session::{COLS, ChatSession, NewSession, Raw, messages_json, saved_event, summary_flag};
use crate::traits::ChatSessions;

fn raw(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        name: r.get(1)?,
        role: r.get(2)?,
        engine: r.get(3)?,
        model: r.get(4)?,
        engine_session: r.get(5)?,
        parent: r.get(6)?,
        summary: r.get(7)?,
        messages: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

fn one(c: &rusqlite::Connection, id: i64) -> Result<ChatSession> {
    c.prepare_cached(&format!("SELECT {COLS} FROM chat_sessions WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id], raw).optional())
        .op("read a chat session")?
        .ok_or(StoreError::SessionNotFound(id))?
        .session()
}

/// The saved columns in the order both statements bind them (after the id, before the time).
fn values(s: &NewSession) -> [Value; 8] {
    [
        s.name.clone().into(),
        s.role.clone().into(),
        s.engine.clone().into(),
        s.model.clone().into(),
        s.engine_session.clone().into(),
        s.parent.into(),
        summary_flag(s).into(),
        messages_json(s).into(),
    ]
}

impl ChatSessions for SqliteStore {
    fn create_session(&self, s: NewSession) -> Result<ChatSession> {
        self.write("save a chat session", |tx| {
            let now = now_us();
            tx.prepare_cached(
                "INSERT INTO chat_sessions (name, role, engine, model, engine_session, parent, summary, messages, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
            )
            .and_then(|mut st| st.execute(params_from_iter(values(&s).into_iter().chain([now.into()]))))
            .op("save a chat session")?;
            let id = tx.last_insert_rowid();
            record(tx, now, &saved_event(id, &s))?;
            one(tx, id)
        })
    }

    fn update_session(&self, id: i64, s: NewSession) -> Result<ChatSession> {
        self.write("save a chat session", |tx| {
            let now = now_us();
            let bound = std::iter::once(id.into()).chain(values(&s)).chain([now.into()]);
            let changed = tx
                .prepare_cached(
                    "UPDATE chat_sessions SET name = ?2, role = ?3, engine = ?4, model = ?5, engine_session = ?6, \
                     parent = ?7, summary = ?8, messages = ?9, updated_at = ?10 WHERE id = ?1",
                )
                .and_then(|mut st| st.execute(params_from_iter(bound)))
                .op("save a chat session")?;
            if changed == 0 {
                return Err(StoreError::SessionNotFound(id));
            }
            record(tx, now, &saved_event(id, &s))?;
            one(tx, id)
        })
    }

    fn session(&self, id: i64) -> Result<ChatSession> {
        self.read("read a chat session", |c| one(c, id))
    }

    fn sessions(&self) -> Result<Vec<ChatSession>> {
        self.read("list chat sessions", |c| {
            let raws: Vec<Raw> = c
                .prepare_cached(&format!("SELECT {COLS} FROM chat_sessions ORDER BY updated_at DESC, id DESC"))
                .and_then(|mut s| s.query_map([], raw)?.collect())
                .op("list chat sessions")?;
            raws.into_iter().map(Raw::session).collect()
        })
    }
}
