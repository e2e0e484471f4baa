//! The mailbox's values: messages between agents, with priorities and threads.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The recipient that addresses every registered agent except the sender.
pub const BROADCAST: &str = "*";

/// The lowest priority.
pub const MIN_PRIORITY: u8 = 1;
/// The highest priority: an interrupt the recipient should read first.
pub const MAX_PRIORITY: u8 = 5;
/// The priority of a message sent without one.
pub const DEFAULT_PRIORITY: u8 = 3;

/// What a message is for. Gates and the Lead act on the kind, never on the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// Free text between agents.
    Text,
    /// The Lead asks an agent to finish and exit.
    ShutdownRequest,
    /// An agent answers a shutdown request.
    ShutdownResponse,
    /// An agent submits a plan for approval.
    Plan,
    /// The approver's decision on a plan.
    PlanDecision,
    /// The Lead tells an agent about a recovery it performed.
    RecoveryNotice,
    /// A reminder to an agent that went quiet.
    Nudge,
    /// Review findings (CPF).
    Findings,
}

impl MessageKind {
    /// Every kind, in declaration order.
    pub const ALL: [MessageKind; 8] = [
        MessageKind::Text,
        MessageKind::ShutdownRequest,
        MessageKind::ShutdownResponse,
        MessageKind::Plan,
        MessageKind::PlanDecision,
        MessageKind::RecoveryNotice,
        MessageKind::Nudge,
        MessageKind::Findings,
    ];

    /// The name used in the database, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Text => "text",
            MessageKind::ShutdownRequest => "shutdown_request",
            MessageKind::ShutdownResponse => "shutdown_response",
            MessageKind::Plan => "plan",
            MessageKind::PlanDecision => "plan_decision",
            MessageKind::RecoveryNotice => "recovery_notice",
            MessageKind::Nudge => "nudge",
            MessageKind::Findings => "findings",
        }
    }
}

impl fmt::Display for MessageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message kind name that is not one troupe knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown message kind `{0}` (expected text, shutdown_request, shutdown_response, plan, plan_decision, \
     recovery_notice, nudge or findings)"
)]
pub struct UnknownMessageKind(pub String);

impl FromStr for MessageKind {
    type Err = UnknownMessageKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MessageKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| UnknownMessageKind(s.to_string()))
    }
}

/// A message as one recipient sees it. A broadcast is stored once per
/// recipient, so each recipient has its own delivery and read state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Unique id.
    pub id: i64,
    /// The sender's agent id.
    pub from: String,
    /// The recipient's agent id.
    pub to: String,
    /// True when the message was sent to [`BROADCAST`].
    pub broadcast: bool,
    /// 1 (lowest) to 5 (highest).
    pub priority: u8,
    /// What the message is for.
    pub kind: MessageKind,
    /// The text.
    pub body: String,
    /// The message this one answers.
    pub in_reply_to: Option<i64>,
    /// The id of the first message of the thread (its own id when it starts one).
    pub thread: i64,
    /// When it was sent.
    pub created_at: Timestamp,
    /// When it was first listed in the recipient's inbox.
    pub delivered_at: Option<Timestamp>,
    /// When the recipient marked it read.
    pub read_at: Option<Timestamp>,
}

/// What is needed to send a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The sender's agent id.
    pub from: String,
    /// An agent id, or [`BROADCAST`].
    pub to: String,
    /// 1 (lowest) to 5 (highest).
    pub priority: u8,
    /// What it is for.
    pub kind: MessageKind,
    /// The text.
    pub body: String,
    /// The message it answers; must exist.
    pub in_reply_to: Option<i64>,
}

impl NewMessage {
    /// A text message at the default priority.
    pub fn text(from: impl Into<String>, to: impl Into<String>, body: impl Into<String>) -> Self {
        NewMessage {
            from: from.into(),
            to: to.into(),
            priority: DEFAULT_PRIORITY,
            kind: MessageKind::Text,
            body: body.into(),
            in_reply_to: None,
        }
    }
}
