//! Plan mode on SQLite (schema `V8_PLANS`): a plan-mode message is a mailbox
//! message plus its row in `plan_modes`, written in one transaction; the
//! gate and the pending plans are reads over the mailbox.

use rusqlite::{OptionalExtension, params};

use super::mailbox::{check, send_in};
use super::rows::{self, MESSAGE_COLS};
use super::{SqliteStore, now_us};
use crate::approval::{PlanGate, check_plan_mode, gate_of, plan_mode_event};
use crate::error::{Context, Result, StoreError};
use crate::message::{Message, NewMessage};
use crate::traits::PlanApprovals;

/// Each plan an agent sent after message `?2`, with the body of a decision
/// answering it (one row per decision; none: NULL).
pub(crate) const PLANS_SINCE: &str = "SELECT p.id, d.body FROM messages p \
     LEFT JOIN messages d ON d.in_reply_to = p.id AND d.kind = 'plan_decision' \
     WHERE p.kind = 'plan' AND p.sender = ?1 AND p.id > ?2 ORDER BY p.id, d.id";

/// The plans no decision answers, oldest first.
pub(crate) fn pending_sql() -> String {
    let cols = MESSAGE_COLS.split(", ").map(|c| format!("p.{c}")).collect::<Vec<_>>().join(", ");
    format!(
        "SELECT {cols} FROM messages p WHERE p.kind = 'plan' AND NOT EXISTS \
         (SELECT 1 FROM messages d WHERE d.in_reply_to = p.id AND d.kind = 'plan_decision') ORDER BY p.id"
    )
}

impl PlanApprovals for SqliteStore {
    fn send_plan_mode(&self, message: NewMessage) -> Result<Message> {
        check(&message)?;
        check_plan_mode(&message)?;
        self.write("send a plan-mode message", |tx| {
            let m = send_in(tx, &message, plan_mode_event)?.pop().ok_or(StoreError::MissingParty)?;
            tx.prepare_cached("INSERT INTO plan_modes (message, agent, created_at) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![m.id, m.to, now_us()]))
                .op("mark a message plan mode")?;
            Ok(m)
        })
    }

    fn plan_gate(&self, agent: &str) -> Result<Option<PlanGate>> {
        self.read("read a plan gate", |c| {
            let request = c
                .prepare_cached(&format!(
                    "SELECT {MESSAGE_COLS} FROM messages WHERE id = \
                     (SELECT max(message) FROM plan_modes WHERE agent = ?1)"
                ))
                .and_then(|mut s| s.query_row([agent], rows::message).optional())
                .op("read a plan gate")?;
            let Some(request) = request else { return Ok(None) };
            let plans: Vec<(i64, Option<String>)> = c
                .prepare_cached(PLANS_SINCE)
                .and_then(|mut s| s.query_map(params![agent, request.id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
                .op("read a plan gate")?;
            Ok(Some(gate_of(request, plans)))
        })
    }

    fn pending_plans(&self) -> Result<Vec<Message>> {
        self.read("list pending plans", |c| {
            c.prepare_cached(&pending_sql())
                .and_then(|mut s| s.query_map([], rows::message)?.collect())
                .op("list pending plans")
        })
    }
}
