//! Reading rows back into values. A value the schema's CHECKs should have kept
//! out is reported as a conversion error naming the column, never a panic.

use jiff::Timestamp;
use rusqlite::Row;
use rusqlite::types::Type;

use crate::agent::Agent;
use crate::audit::AuditRecord;
use crate::event::Event;
use crate::message::Message;
use crate::task::Task;

/// The columns [`task`] reads, in order.
pub const TASK_COLS: &str = "id, subject, description, status, assignee, created_by, blocked_by, open_blockers, \
     feature, wave, grp, files, created_at, updated_at, completed_at";

/// The columns [`message`] reads, in order.
pub const MESSAGE_COLS: &str =
    "id, sender, recipient, broadcast, priority, kind, body, in_reply_to, thread, created_at, delivered_at, read_at";

/// The columns [`agent`] reads, in order.
pub const AGENT_COLS: &str = "id, name, role, engine, model, feature, task, pid, status, session_id, started_at, last_event_at, host, lease_until";

/// The columns [`event`] reads, in order.
pub const EVENT_COLS: &str = "id, at, kind, actor, subject, data";

/// The columns [`audit`] reads, in order.
pub const AUDIT_COLS: &str =
    "id, at, agent, role, tool, decision, reason, duration_ms, argument_shape, thinking_signature";

fn bad(idx: usize, err: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(err))
}

pub(super) fn ts(row: &Row<'_>, idx: usize) -> rusqlite::Result<Timestamp> {
    let us: i64 = row.get(idx)?;
    Timestamp::from_microsecond(us).map_err(|e| bad(idx, e))
}

fn ts_opt(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<Timestamp>> {
    match row.get::<_, Option<i64>>(idx)? {
        Some(us) => Timestamp::from_microsecond(us).map(Some).map_err(|e| bad(idx, e)),
        None => Ok(None),
    }
}

fn parsed<T: std::str::FromStr>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let text = row.get_ref(idx)?.as_str().map_err(|e| bad(idx, e))?;
    text.parse().map_err(|e| bad(idx, e))
}

fn json_list(row: &Row<'_>, idx: usize) -> rusqlite::Result<Vec<String>> {
    // Borrowed: most lists are empty or short, and `available` reads thousands.
    let text = row.get_ref(idx)?.as_str().map_err(|e| bad(idx, e))?;
    if text == "[]" {
        return Ok(Vec::new());
    }
    serde_json::from_str(text).map_err(|e| bad(idx, e))
}

fn json_value(row: &Row<'_>, idx: usize) -> rusqlite::Result<serde_json::Value> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| bad(idx, e))
}

/// A task from a row selected with [`TASK_COLS`].
pub fn task(row: &Row<'_>) -> rusqlite::Result<Task> {
    Ok(Task {
        id: row.get(0)?,
        subject: row.get(1)?,
        description: row.get(2)?,
        status: parsed(row, 3)?,
        assignee: row.get(4)?,
        created_by: row.get(5)?,
        blocked_by: json_list(row, 6)?,
        blocked: row.get::<_, i64>(7)? > 0,
        feature: row.get(8)?,
        wave: row.get(9)?,
        group: row.get(10)?,
        files: json_list(row, 11)?,
        created_at: ts(row, 12)?,
        updated_at: ts(row, 13)?,
        completed_at: ts_opt(row, 14)?,
    })
}

/// A message from a row selected with [`MESSAGE_COLS`].
pub fn message(row: &Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        id: row.get(0)?,
        from: row.get(1)?,
        to: row.get(2)?,
        broadcast: row.get(3)?,
        priority: row.get(4)?,
        kind: parsed(row, 5)?,
        body: row.get(6)?,
        in_reply_to: row.get(7)?,
        thread: row.get(8)?,
        created_at: ts(row, 9)?,
        delivered_at: ts_opt(row, 10)?,
        read_at: ts_opt(row, 11)?,
    })
}

/// An agent from a row selected with [`AGENT_COLS`].
pub fn agent(row: &Row<'_>) -> rusqlite::Result<Agent> {
    Ok(Agent {
        id: row.get(0)?,
        name: row.get(1)?,
        role: row.get(2)?,
        engine: row.get(3)?,
        model: row.get(4)?,
        feature: row.get(5)?,
        task: row.get(6)?,
        pid: row.get(7)?,
        status: parsed(row, 8)?,
        session_id: row.get(9)?,
        started_at: ts(row, 10)?,
        last_event_at: ts(row, 11)?,
        host: row.get(12)?,
        lease_until: ts_opt(row, 13)?,
    })
}

/// An event from a row selected with [`EVENT_COLS`].
pub fn event(row: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: row.get(0)?,
        at: ts(row, 1)?,
        kind: row.get(2)?,
        actor: row.get(3)?,
        subject: row.get(4)?,
        data: json_value(row, 5)?,
    })
}

/// An audit record from a row selected with [`AUDIT_COLS`].
pub fn audit(row: &Row<'_>) -> rusqlite::Result<AuditRecord> {
    let signature = match row.get::<_, Option<String>>(9)? {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| bad(9, e))?),
        None => None,
    };
    Ok(AuditRecord {
        id: row.get(0)?,
        at: ts(row, 1)?,
        agent: row.get(2)?,
        role: row.get(3)?,
        tool: row.get(4)?,
        decision: parsed(row, 5)?,
        reason: row.get(6)?,
        duration_ms: row.get(7)?,
        argument_shape: json_value(row, 8)?,
        thinking_signature: signature,
    })
}
