//! The mailbox on PostgreSQL, as on SQLite: a broadcast is fanned out at send
//! time into one row per recipient.

use super::rows::{self, MESSAGE_COLS, all, get as col};
use super::{PgStore, Tx, now_us, record};
use crate::error::{Result, StoreError};
use crate::event::NewEvent;
use crate::message::{BROADCAST, Message, NewMessage};
use crate::sqlite::mailbox::{check, sent_event};
use crate::traits::Mailbox;

impl Mailbox for PgStore {
    fn send(&self, message: NewMessage) -> Result<Vec<Message>> {
        check(&message)?;
        self.write("send a message", |tx| send_in(tx, &message, sent_event))
    }

    fn inbox(&self, agent: &str, unread_only: bool) -> Result<Vec<Message>> {
        self.write("read an inbox", |tx| {
            // Unread messages are a superset of undelivered ones, so this marks
            // exactly the undelivered messages about to be returned.
            tx.exec(
                "mark messages delivered",
                "UPDATE messages SET delivered_at = $2 WHERE recipient = $1 AND delivered_at IS NULL",
                &[&agent, &now_us()],
            )?;
            let unread = if unread_only { " AND read_at IS NULL" } else { "" };
            let sql =
                format!("SELECT {MESSAGE_COLS} FROM messages WHERE recipient = $1{unread} ORDER BY priority DESC, id");
            all(tx.query("read an inbox", &sql, &[&agent])?, rows::message)
        })
    }

    fn mark_read(&self, agent: &str, ids: &[i64]) -> Result<usize> {
        self.write("mark messages read", |tx| {
            let now = now_us();
            let mut changed = 0;
            for &id in ids {
                let recipient: String = tx
                    .opt("find a message", "SELECT recipient FROM messages WHERE id = $1", &[&id])?
                    .map(|r| col(&r, 0))
                    .transpose()?
                    .ok_or(StoreError::MessageNotFound(id))?;
                if recipient != agent {
                    return Err(StoreError::NotRecipient { id, agent: agent.into(), recipient });
                }
                changed += tx.exec(
                    "mark a message read",
                    "UPDATE messages SET read_at = $2, delivered_at = coalesce(delivered_at, $2) \
                     WHERE id = $1 AND read_at IS NULL",
                    &[&id, &now],
                )? as usize;
            }
            Ok(changed)
        })
    }

    fn message(&self, id: i64) -> Result<Message> {
        self.read("read a message", |tx| {
            let sql = format!("SELECT {MESSAGE_COLS} FROM messages WHERE id = $1");
            tx.opt("read a message", &sql, &[&id])?
                .map(|r| rows::message(&r))
                .transpose()?
                .ok_or(StoreError::MessageNotFound(id))
        })
    }

    fn thread(&self, id: i64) -> Result<Vec<Message>> {
        self.read("read a thread", |tx| {
            let thread: i64 = tx
                .opt("read a thread", "SELECT thread FROM messages WHERE id = $1", &[&id])?
                .map(|r| col(&r, 0))
                .transpose()?
                .ok_or(StoreError::MessageNotFound(id))?;
            let sql = format!("SELECT {MESSAGE_COLS} FROM messages WHERE thread = $1 ORDER BY id");
            all(tx.query("read a thread", &sql, &[&thread])?, rows::message)
        })
    }
}

/// Send `message` inside transaction `tx`, each copy recorded with the event
/// `event` makes of it (the mailbox's `message_sent`, or plan mode's).
pub(crate) fn send_in(tx: &mut Tx<'_>, message: &NewMessage, event: fn(&Message) -> NewEvent) -> Result<Vec<Message>> {
    let now = now_us();
    let mut thread: Option<i64> = match message.in_reply_to {
        Some(parent) => Some(
            tx.opt("find the replied-to message", "SELECT thread FROM messages WHERE id = $1", &[&parent])?
                .map(|r| col::<i64>(&r, 0))
                .transpose()?
                .ok_or(StoreError::MessageNotFound(parent))?,
        ),
        None => None,
    };
    let broadcast = message.to == BROADCAST;
    let recipients: Vec<String> = if broadcast {
        let rows = tx.query(
            "list broadcast recipients",
            r#"SELECT id FROM agents WHERE status NOT IN ('DONE', 'FAILED') AND id <> $1
                       ORDER BY started_at, id COLLATE "C""#,
            &[&message.from],
        )?;
        all(rows, |r| col(r, 0))?
    } else {
        vec![message.to.clone()]
    };
    let mut sent = Vec::with_capacity(recipients.len());
    for to in recipients {
        // The first message of a thread is its own root; the copies of a
        // broadcast share the first copy's thread.
        let id: i64 =
            col(&tx.one("number a message", "SELECT nextval(pg_get_serial_sequence('messages', 'id'))", &[])?, 0)?;
        let row = tx.one(
                    "send a message",
                    &format!(
                        "INSERT INTO messages (id, sender, recipient, broadcast, priority, kind, body, in_reply_to, \
                         thread, created_at) VALUES ($10, $1, $2, $3, $4, $5, $6, $7, coalesce($8::bigint, $10::bigint), $9) \
                         RETURNING {MESSAGE_COLS}"
                    ),
                    &[
                        &message.from,
                        &to,
                        &i64::from(broadcast),
                        &i64::from(message.priority),
                        &message.kind.as_str(),
                        &message.body,
                        &message.in_reply_to,
                        &thread,
                        &now,
                        &id,
                    ],
                )?;
        let m = rows::message(&row)?;
        thread = Some(m.thread);
        record(tx, now, &event(&m))?;
        sent.push(m);
    }
    Ok(sent)
}
