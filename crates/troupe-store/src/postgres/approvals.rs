//! Plan mode on PostgreSQL, as on SQLite ([`crate::sqlite::approvals`]).

use super::mailbox::send_in;
use super::rows::{self, MESSAGE_COLS, all, get};
use super::{PgStore, now_us};
use crate::approval::{PlanGate, check_plan_mode, gate_of, plan_mode_event};
use crate::error::{Result, StoreError};
use crate::message::{Message, NewMessage};
use crate::sqlite::approvals::{PLANS_SINCE, pending_sql};
use crate::sqlite::mailbox::check;
use crate::traits::PlanApprovals;

impl PlanApprovals for PgStore {
    fn send_plan_mode(&self, message: NewMessage) -> Result<Message> {
        check(&message)?;
        check_plan_mode(&message)?;
        self.write("send a plan-mode message", |tx| {
            let m = send_in(tx, &message, plan_mode_event)?.pop().ok_or(StoreError::MissingParty)?;
            tx.exec(
                "mark a message plan mode",
                "INSERT INTO plan_modes (message, agent, created_at) VALUES ($1, $2, $3)",
                &[&m.id, &m.to, &now_us()],
            )?;
            Ok(m)
        })
    }

    fn plan_gate(&self, agent: &str) -> Result<Option<PlanGate>> {
        self.read("read a plan gate", |tx| {
            let sql = format!(
                "SELECT {MESSAGE_COLS} FROM messages WHERE id = (SELECT max(message) FROM plan_modes WHERE agent = $1)"
            );
            let Some(row) = tx.opt("read a plan gate", &sql, &[&agent])? else { return Ok(None) };
            let request = rows::message(&row)?;
            let sql = PLANS_SINCE.replace("?1", "$1").replace("?2", "$2");
            let plans =
                all(tx.query("read a plan gate", &sql, &[&agent, &request.id])?, |r| Ok((get(r, 0)?, get(r, 1)?)))?;
            Ok(Some(gate_of(request, plans)))
        })
    }

    fn pending_plans(&self) -> Result<Vec<Message>> {
        self.read("list pending plans", |tx| all(tx.query("list pending plans", &pending_sql(), &[])?, rows::message))
    }
}
