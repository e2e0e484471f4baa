//! Reading PostgreSQL rows back into values, with the columns SQLite's
//! readers use ([`crate::sqlite::rows`]), so both backends select alike.

use jiff::Timestamp;
use postgres::Row;
use postgres::types::FromSql;

use crate::a2a::A2aTask;
use crate::agent::Agent;
use crate::audit::AuditRecord;
use crate::error::{Context, Result, StoreError};
use crate::event::Event;
use crate::message::Message;
use crate::task::Task;

pub(crate) use crate::sqlite::rows::{AGENT_COLS, AUDIT_COLS, EVENT_COLS, MESSAGE_COLS, TASK_COLS};

/// The columns [`a2a_task`] reads, in order.
pub(crate) const A2A_COLS: &str = "id, context_id, state, body, created_at, updated_at, seq, last_event";

pub(crate) fn get<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T> {
    row.try_get(idx).op("read a row")
}

fn bad(column: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::BadValue { column, detail: detail.to_string() }
}

pub(crate) fn ts(row: &Row, idx: usize) -> Result<Timestamp> {
    Timestamp::from_microsecond(get(row, idx)?).map_err(|e| bad("timestamp", e))
}

fn ts_opt(row: &Row, idx: usize) -> Result<Option<Timestamp>> {
    get::<Option<i64>>(row, idx)?.map(|us| Timestamp::from_microsecond(us).map_err(|e| bad("timestamp", e))).transpose()
}

fn parsed<T: std::str::FromStr>(row: &Row, idx: usize, column: &'static str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    get::<&str>(row, idx)?.parse().map_err(|e| bad(column, e))
}

fn json<T: serde::de::DeserializeOwned>(row: &Row, idx: usize, column: &'static str) -> Result<T> {
    serde_json::from_str(get::<&str>(row, idx)?).map_err(|e| bad(column, e))
}

fn small<T: TryFrom<i64>>(row: &Row, idx: usize, column: &'static str) -> Result<Option<T>> {
    get::<Option<i64>>(row, idx)?
        .map(|v| T::try_from(v).map_err(|_| bad(column, format!("{v} is out of range"))))
        .transpose()
}

/// A task from a row selected with [`TASK_COLS`].
pub(crate) fn task(row: &Row) -> Result<Task> {
    Ok(Task {
        id: get(row, 0)?,
        subject: get(row, 1)?,
        description: get(row, 2)?,
        status: parsed(row, 3, "status")?,
        assignee: get(row, 4)?,
        created_by: get(row, 5)?,
        blocked_by: json(row, 6, "blocked_by")?,
        blocked: get::<i64>(row, 7)? > 0,
        feature: get(row, 8)?,
        wave: small(row, 9, "wave")?,
        group: get(row, 10)?,
        files: json(row, 11, "files")?,
        created_at: ts(row, 12)?,
        updated_at: ts(row, 13)?,
        completed_at: ts_opt(row, 14)?,
    })
}

/// A message from a row selected with [`MESSAGE_COLS`].
pub(crate) fn message(row: &Row) -> Result<Message> {
    Ok(Message {
        id: get(row, 0)?,
        from: get(row, 1)?,
        to: get(row, 2)?,
        broadcast: get::<i64>(row, 3)? != 0,
        priority: small(row, 4, "priority")?.ok_or_else(|| bad("priority", "missing"))?,
        kind: parsed(row, 5, "kind")?,
        body: get(row, 6)?,
        in_reply_to: get(row, 7)?,
        thread: get(row, 8)?,
        created_at: ts(row, 9)?,
        delivered_at: ts_opt(row, 10)?,
        read_at: ts_opt(row, 11)?,
    })
}

/// An agent from a row selected with [`AGENT_COLS`].
pub(crate) fn agent(row: &Row) -> Result<Agent> {
    Ok(Agent {
        id: get(row, 0)?,
        name: get(row, 1)?,
        role: get(row, 2)?,
        engine: get(row, 3)?,
        model: get(row, 4)?,
        feature: get(row, 5)?,
        task: get(row, 6)?,
        pid: small(row, 7, "pid")?,
        status: parsed(row, 8, "status")?,
        session_id: get(row, 9)?,
        started_at: ts(row, 10)?,
        last_event_at: ts(row, 11)?,
        host: get(row, 12)?,
        lease_until: ts_opt(row, 13)?,
    })
}

/// An event from a row selected with [`EVENT_COLS`].
pub(crate) fn event(row: &Row) -> Result<Event> {
    Ok(Event {
        id: get(row, 0)?,
        at: ts(row, 1)?,
        kind: get(row, 2)?,
        actor: get(row, 3)?,
        subject: get(row, 4)?,
        data: json(row, 5, "data")?,
    })
}

/// An audit record from a row selected with [`AUDIT_COLS`].
pub(crate) fn audit(row: &Row) -> Result<AuditRecord> {
    let signature = match get::<Option<&str>>(row, 9)? {
        Some(text) => Some(serde_json::from_str(text).map_err(|e| bad("thinking_signature", e))?),
        None => None,
    };
    Ok(AuditRecord {
        id: get(row, 0)?,
        at: ts(row, 1)?,
        agent: get(row, 2)?,
        role: get(row, 3)?,
        tool: get(row, 4)?,
        decision: parsed(row, 5, "decision")?,
        reason: get(row, 6)?,
        duration_ms: small(row, 7, "duration_ms")?,
        argument_shape: json(row, 8, "argument_shape")?,
        thinking_signature: signature,
    })
}

/// An A2A task from a row selected with [`A2A_COLS`].
pub(crate) fn a2a_task(row: &Row) -> Result<A2aTask> {
    Ok(A2aTask {
        id: get(row, 0)?,
        context_id: get(row, 1)?,
        state: get(row, 2)?,
        body: json(row, 3, "body")?,
        created_at: ts(row, 4)?,
        updated_at: ts(row, 5)?,
        seq: get(row, 6)?,
        last_event: get(row, 7)?,
    })
}

/// Every row through `read`.
pub(crate) fn all<T>(rows: Vec<Row>, read: impl Fn(&Row) -> Result<T>) -> Result<Vec<T>> {
    rows.iter().map(read).collect()
}
