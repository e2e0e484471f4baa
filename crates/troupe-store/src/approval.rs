//! Deciding a teammate's plan (seed 003 B3): the one writer of the
//! `plan_decision` message that answers a `plan`, for every way a person or
//! program decides (the HTTP API's approve and reject, `troupe approve`). The
//! Lead's policy sends the same body ([`troupe_core::approval::PlanDecision`]).
//!
//! Plan mode ([`crate::PlanApprovals`]): a message sent in plan mode holds its
//! recipient's writes until a plan it sends afterwards is approved; its
//! [`PlanGate`] says where it stands.

use troupe_core::approval::PlanDecision;

use crate::error::StoreError;
use crate::message::{Message, MessageKind, NewMessage};
use crate::traits::Mailbox;

/// Why a plan could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The message is not a `plan`.
    #[error("message {0} is not a plan (only a teammate's `plan` message can be approved or rejected)")]
    NotAPlan(i64),
    /// A decision answers the plan already.
    #[error("plan {request} was already {} by `{by}`", if *.approved { "approved" } else { "rejected" })]
    AlreadyDecided {
        /// The plan.
        request: i64,
        /// The decision's verdict.
        approved: bool,
        /// Who decided.
        by: String,
    },
    /// A rejection needs a reason, the teammate's only guide to a better plan.
    #[error("a rejection needs a reason: what the teammate should change")]
    NoReason,
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Answer plan message `request` with a `plan_decision` to its sender, from
/// `decided_by`. A plan is decided once: a second decision is refused.
pub fn decide_plan(
    mailbox: &dyn Mailbox,
    request: i64,
    approved: bool,
    decided_by: &str,
    reason: &str,
) -> Result<Message, DecideError> {
    if !approved && reason.trim().is_empty() {
        return Err(DecideError::NoReason);
    }
    let plan = mailbox.message(request)?;
    if plan.kind != MessageKind::Plan {
        return Err(DecideError::NotAPlan(request));
    }
    let earlier = mailbox.thread(request)?.into_iter().find_map(|m| {
        let d = (m.kind == MessageKind::PlanDecision && m.in_reply_to == Some(request))
            .then(|| PlanDecision::parse(&m.body))??;
        Some((d, m.from))
    });
    if let Some((d, by)) = earlier {
        return Err(DecideError::AlreadyDecided { request, approved: d.approved, by });
    }
    let decision =
        PlanDecision { request_id: request, approved, decided_by: decided_by.to_string(), reason: reason.to_string() };
    let message = NewMessage {
        from: decided_by.to_string(),
        to: plan.from,
        priority: 4,
        kind: MessageKind::PlanDecision,
        body: decision.body(),
        in_reply_to: Some(request),
    };
    let mut sent = mailbox.send(message)?;
    sent.pop().ok_or(DecideError::Store(StoreError::MissingParty))
}

/// Where an agent in plan mode stands: its latest plan-mode request and
/// the plans it sent since, oldest first, each with its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanGate {
    /// The message that put the agent in plan mode.
    pub request: Message,
    /// `(plan message id, its decision)` for every plan sent since the request.
    pub plans: Vec<(i64, Option<PlanDecision>)>,
}

/// The state of a [`PlanGate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanState {
    /// No plan sent yet: writes wait for one.
    Planning,
    /// A plan waits for its decision.
    Submitted {
        /// The plan message.
        plan: i64,
    },
    /// The latest plan was rejected: the agent revises it and sends it again.
    Rejected {
        /// The plan message.
        plan: i64,
        /// The decision.
        decision: PlanDecision,
    },
    /// A plan was approved: writes go through.
    Approved {
        /// The plan message.
        plan: i64,
        /// The decision.
        decision: PlanDecision,
    },
}

impl PlanGate {
    /// The state: an approved plan wins, else the latest plan decides.
    pub fn state(&self) -> PlanState {
        let approved = self.plans.iter().find_map(|(id, d)| d.as_ref().filter(|d| d.approved).map(|d| (*id, d)));
        if let Some((plan, decision)) = approved {
            return PlanState::Approved { plan, decision: decision.clone() };
        }
        match self.plans.last() {
            None => PlanState::Planning,
            Some((plan, None)) => PlanState::Submitted { plan: *plan },
            Some((plan, Some(decision))) => PlanState::Rejected { plan: *plan, decision: decision.clone() },
        }
    }

    /// Whether the agent may write.
    pub fn approved(&self) -> bool {
        matches!(self.state(), PlanState::Approved { .. })
    }
}

/// Refuse a plan-mode message to more than one agent: each recipient has a
/// plan gate of its own, and a broadcast would hold every agent at once.
pub(crate) fn check_plan_mode(message: &NewMessage) -> crate::error::Result<()> {
    if message.to == crate::message::BROADCAST {
        return Err(StoreError::PlanModeBroadcast);
    }
    Ok(())
}

/// The `message_sent` event of a plan-mode message: the mailbox's, marked.
pub(crate) fn plan_mode_event(m: &Message) -> crate::event::NewEvent {
    let mut event = crate::sqlite::mailbox::sent_event(m);
    event.data["plan_mode"] = serde_json::Value::Bool(true);
    event
}

/// A gate from the rows both backends read: the request, and each plan since
/// with the body of a `plan_decision` answering it (a body that is not a
/// decision counts as none).
pub(crate) fn gate_of(request: Message, rows: Vec<(i64, Option<String>)>) -> PlanGate {
    let mut plans: Vec<(i64, Option<PlanDecision>)> = Vec::new();
    for (id, body) in rows {
        let decision = body.as_deref().and_then(PlanDecision::parse);
        match plans.iter_mut().find(|(p, _)| *p == id) {
            Some(entry) => entry.1 = entry.1.take().or(decision),
            None => plans.push((id, decision)),
        }
    }
    PlanGate { request, plans }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(plans: &[(i64, Option<bool>)]) -> PlanGate {
        let request = Message {
            id: 1,
            from: "user".into(),
            to: "b".into(),
            broadcast: false,
            priority: 3,
            kind: MessageKind::Text,
            body: "x".into(),
            in_reply_to: None,
            thread: 1,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            delivered_at: None,
            read_at: None,
        };
        let decision =
            |id, approved| PlanDecision { request_id: id, approved, decided_by: "ana".into(), reason: "r".into() };
        PlanGate { request, plans: plans.iter().map(|&(id, d)| (id, d.map(|a| decision(id, a)))).collect() }
    }

    #[test]
    fn the_state_follows_the_plans() {
        assert_eq!(gate(&[]).state(), PlanState::Planning);
        assert_eq!(gate(&[(2, None)]).state(), PlanState::Submitted { plan: 2 });
        assert!(matches!(gate(&[(2, Some(false))]).state(), PlanState::Rejected { plan: 2, .. }));
        assert_eq!(gate(&[(2, Some(false)), (3, None)]).state(), PlanState::Submitted { plan: 3 });
        assert!(gate(&[(2, Some(false)), (3, Some(true))]).approved());
        // An approved plan stays approved while a later one waits.
        assert!(gate(&[(2, Some(true)), (3, None)]).approved());
        assert!(!gate(&[(2, Some(false))]).approved());
    }
}
