//! Chat sessions on PostgreSQL, as on SQLite ([`crate::sqlite::sessions`]).

use postgres::Row;

use super::rows::get;
use super::{Param, PgStore, Tx, now_us, record};
use crate::error::{Result, StoreError};
use crate::session::{COLS, ChatSession, NewSession, Raw, messages_json, saved_event, summary_flag};
use crate::traits::ChatSessions;

fn raw(r: &Row) -> Result<Raw> {
    Ok(Raw {
        id: get(r, 0)?,
        name: get(r, 1)?,
        role: get(r, 2)?,
        engine: get(r, 3)?,
        model: get(r, 4)?,
        engine_session: get(r, 5)?,
        parent: get(r, 6)?,
        summary: get(r, 7)?,
        messages: get(r, 8)?,
        created_at: get(r, 9)?,
        updated_at: get(r, 10)?,
    })
}

fn one(tx: &mut Tx<'_>, id: i64) -> Result<ChatSession> {
    let sql = format!("SELECT {COLS} FROM chat_sessions WHERE id = $1");
    let row = tx.opt("read a chat session", &sql, &[&id])?.ok_or(StoreError::SessionNotFound(id))?;
    raw(&row)?.session()
}

impl ChatSessions for PgStore {
    fn create_session(&self, s: NewSession) -> Result<ChatSession> {
        self.write("save a chat session", |tx| {
            let (now, flag, messages) = (now_us(), summary_flag(&s), messages_json(&s));
            let values =
                [&s.name as Param<'_>, &s.role, &s.engine, &s.model, &s.engine_session, &s.parent, &flag, &messages];
            let bound: Vec<Param<'_>> = values.into_iter().chain([&now as Param<'_>]).collect();
            let row = tx.one(
                "save a chat session",
                "INSERT INTO chat_sessions (name, role, engine, model, engine_session, parent, summary, messages, \
                 created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING id",
                &bound,
            )?;
            let id: i64 = get(&row, 0)?;
            record(tx, now, &saved_event(id, &s))?;
            one(tx, id)
        })
    }

    fn update_session(&self, id: i64, s: NewSession) -> Result<ChatSession> {
        self.write("save a chat session", |tx| {
            let (now, flag, messages) = (now_us(), summary_flag(&s), messages_json(&s));
            let values =
                [&s.name as Param<'_>, &s.role, &s.engine, &s.model, &s.engine_session, &s.parent, &flag, &messages];
            let bound: Vec<Param<'_>> =
                std::iter::once(&id as Param<'_>).chain(values).chain([&now as Param<'_>]).collect();
            let changed = tx.exec(
                "save a chat session",
                "UPDATE chat_sessions SET name = $2, role = $3, engine = $4, model = $5, engine_session = $6, \
                 parent = $7, summary = $8, messages = $9, updated_at = $10 WHERE id = $1",
                &bound,
            )?;
            if changed == 0 {
                return Err(StoreError::SessionNotFound(id));
            }
            record(tx, now, &saved_event(id, &s))?;
            one(tx, id)
        })
    }

    fn session(&self, id: i64) -> Result<ChatSession> {
        self.read("read a chat session", |tx| one(tx, id))
    }

    fn sessions(&self) -> Result<Vec<ChatSession>> {
        self.read("list chat sessions", |tx| {
            let sql = format!("SELECT {COLS} FROM chat_sessions ORDER BY updated_at DESC, id DESC");
            tx.query("list chat sessions", &sql, &[])?.iter().map(|r| raw(r)?.session()).collect()
        })
    }
}
