//! `troupe msg …`: messages between agents (priority 1–5, reply threading).

use std::process::ExitCode;

use clap::Subcommand;
use troupe_store::Message;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod inbox;
mod send;
pub(crate) mod wake;

#[derive(Debug, Subcommand)]
pub enum MsgCommand {
    /// Send a message to an agent, or to every agent with `*`.
    Send(send::SendArgs),
    /// Show an agent's messages, most urgent first, then oldest first.
    Inbox(inbox::InboxArgs),
}

pub fn run(g: &GlobalArgs, cmd: MsgCommand) -> CliResult<ExitCode> {
    match cmd {
        MsgCommand::Send(a) => send::run(g, a),
        MsgCommand::Inbox(a) => inbox::run(g, a),
    }
}

/// One message as a row of the inbox table: unread marker, id, priority,
/// kind, sender, when (human), the body on one line (after the reply marker).
pub(crate) fn message_row(m: &Message, now: jiff::Timestamp) -> Vec<String> {
    let unread = if m.read_at.is_none() { "*" } else { " " };
    let reply = m.in_reply_to.map(|r| format!("(re {r}) ")).unwrap_or_default();
    let body = m.body.split_whitespace().collect::<Vec<_>>().join(" ");
    vec![
        unread.to_string(),
        m.id.to_string(),
        format!("p{}", m.priority),
        m.kind.as_str().to_string(),
        m.from.clone(),
        crate::output::ago(m.created_at, now),
        format!("{reply}{body}"),
    ]
}
