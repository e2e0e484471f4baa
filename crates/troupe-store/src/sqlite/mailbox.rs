//! The mailbox on SQLite. A broadcast is fanned out at send time into one row per
//! recipient, so every recipient has its own delivery and read state and the
//! inbox is a single index range.

use rusqlite::{OptionalExtension, Transaction, params};
use serde_json::json;

use super::rows::{self, MESSAGE_COLS};
use super::{SqliteStore, now_us, record};
use crate::error::{Context, Result, StoreError};
use crate::event::{NewEvent, kind};
use crate::message::{BROADCAST, MAX_PRIORITY, MIN_PRIORITY, Message, NewMessage};
use crate::traits::Mailbox;

impl Mailbox for SqliteStore {
    fn send(&self, message: NewMessage) -> Result<Vec<Message>> {
        check(&message)?;
        self.write("send a message", |tx| send_in(tx, &message, sent_event))
    }

    fn inbox(&self, agent: &str, unread_only: bool) -> Result<Vec<Message>> {
        self.write("read an inbox", |tx| {
            let now = now_us();
            // Unread messages are a superset of undelivered ones, so this marks
            // exactly the undelivered messages about to be returned.
            tx.prepare_cached("UPDATE messages SET delivered_at = ?2 WHERE recipient = ?1 AND delivered_at IS NULL")
                .and_then(|mut s| s.execute(params![agent, now]))
                .op("mark messages delivered")?;
            let unread = if unread_only { " AND read_at IS NULL" } else { "" };
            tx.prepare_cached(&format!(
                "SELECT {MESSAGE_COLS} FROM messages WHERE recipient = ?1{unread} ORDER BY priority DESC, id"
            ))
            .and_then(|mut s| s.query_map([agent], rows::message)?.collect())
            .op("read an inbox")
        })
    }

    fn mark_read(&self, agent: &str, ids: &[i64]) -> Result<usize> {
        self.write("mark messages read", |tx| {
            let now = now_us();
            let mut changed = 0;
            for &id in ids {
                let recipient: String = tx
                    .prepare_cached("SELECT recipient FROM messages WHERE id = ?1")
                    .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
                    .op("find a message")?
                    .ok_or(StoreError::MessageNotFound(id))?;
                if recipient != agent {
                    return Err(StoreError::NotRecipient { id, agent: agent.into(), recipient });
                }
                changed += tx
                    .prepare_cached(
                        "UPDATE messages SET read_at = ?2, delivered_at = coalesce(delivered_at, ?2) \
                         WHERE id = ?1 AND read_at IS NULL",
                    )
                    .and_then(|mut s| s.execute(params![id, now]))
                    .op("mark a message read")?;
            }
            Ok(changed)
        })
    }

    fn message(&self, id: i64) -> Result<Message> {
        self.read("read a message", |c| {
            c.prepare_cached(&format!("SELECT {MESSAGE_COLS} FROM messages WHERE id = ?1"))
                .and_then(|mut s| s.query_row([id], rows::message).optional())
                .op("read a message")?
                .ok_or(StoreError::MessageNotFound(id))
        })
    }

    fn thread(&self, id: i64) -> Result<Vec<Message>> {
        self.read("read a thread", |c| {
            let thread: i64 = c
                .prepare_cached("SELECT thread FROM messages WHERE id = ?1")
                .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
                .op("read a thread")?
                .ok_or(StoreError::MessageNotFound(id))?;
            c.prepare_cached(&format!("SELECT {MESSAGE_COLS} FROM messages WHERE thread = ?1 ORDER BY id"))
                .and_then(|mut s| s.query_map([thread], rows::message)?.collect())
                .op("read a thread")
        })
    }
}

/// Send `message` inside transaction `tx`, each copy recorded with the event
/// `event` makes of it (the mailbox's `message_sent`, or plan mode's).
pub(crate) fn send_in(
    tx: &Transaction<'_>,
    message: &NewMessage,
    event: fn(&Message) -> NewEvent,
) -> Result<Vec<Message>> {
    let now = now_us();
    let parent_thread: Option<i64> = match message.in_reply_to {
        Some(parent) => Some(
            tx.prepare_cached("SELECT thread FROM messages WHERE id = ?1")
                .and_then(|mut s| s.query_row([parent], |r| r.get(0)).optional())
                .op("find the replied-to message")?
                .ok_or(StoreError::MessageNotFound(parent))?,
        ),
        None => None,
    };
    let broadcast = message.to == BROADCAST;
    let recipients: Vec<String> = if broadcast {
        tx.prepare_cached(
            "SELECT id FROM agents WHERE status NOT IN ('DONE', 'FAILED') AND id <> ?1 ORDER BY started_at, id",
        )
        .and_then(|mut s| s.query_map([&message.from], |r| r.get(0))?.collect())
        .op("list broadcast recipients")?
    } else {
        vec![message.to.clone()]
    };
    let mut insert = tx
        .prepare_cached(&format!(
            "INSERT INTO messages (sender, recipient, broadcast, priority, kind, body, in_reply_to, thread, \
                 created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(?8, 0), ?9) RETURNING {MESSAGE_COLS}"
        ))
        .op("send a message")?;
    let mut thread = parent_thread;
    let mut sent = Vec::with_capacity(recipients.len());
    for to in recipients {
        let mut m = insert
            .query_row(
                params![
                    message.from,
                    to,
                    broadcast,
                    message.priority,
                    message.kind.as_str(),
                    message.body,
                    message.in_reply_to,
                    thread,
                    now
                ],
                rows::message,
            )
            .op("send a message")?;
        if thread.is_none() {
            // The first message of a thread is its own root; the copies of a
            // broadcast share the first copy's thread.
            tx.prepare_cached("UPDATE messages SET thread = id WHERE id = ?1")
                .and_then(|mut s| s.execute([m.id]))
                .op("start a thread")?;
            thread = Some(m.id);
        }
        m.thread = thread.unwrap_or(m.id);
        record(tx, now, &event(&m))?;
        sent.push(m);
    }
    Ok(sent)
}

/// Refuse a message with a priority out of range or without both parties.
pub(crate) fn check(message: &NewMessage) -> Result<()> {
    if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&message.priority) {
        return Err(StoreError::InvalidPriority(message.priority));
    }
    if message.from.trim().is_empty() || message.to.trim().is_empty() {
        return Err(StoreError::MissingParty);
    }
    Ok(())
}

/// The `message_sent` event of one delivered copy.
pub(crate) fn sent_event(m: &Message) -> NewEvent {
    let data = json!({
        "to": m.to, "broadcast": m.broadcast, "kind": m.kind.as_str(),
        "priority": m.priority, "in_reply_to": m.in_reply_to, "thread": m.thread,
    });
    NewEvent { kind: kind::MESSAGE_SENT.into(), actor: Some(m.from.clone()), subject: Some(m.id.to_string()), data }
}
