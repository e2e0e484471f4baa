//! Deciding a teammate's plan (seed 003 B3): the one writer of the
//! `plan_decision` message that answers a `plan`, for every way a person or
//! program decides (the HTTP API's approve and reject, a future `troupe
//! approve`). The Lead's policy sends the same body
//! ([`troupe_core::approval::PlanDecision`]).

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
