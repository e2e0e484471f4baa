//! `troupe msg …`: messages between agents (priority 1–5, reply threading).

use std::process::ExitCode;

use clap::Subcommand;
use troupe_store::Message;

use crate::cli::GlobalArgs;
use crate::error::CliResult;

mod inbox;
mod send;

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

/// One message as a line: id, priority, kind, sender, reply marker, body.
pub(crate) fn message_line(m: &Message) -> String {
    let unread = if m.read_at.is_none() { "*" } else { " " };
    let reply = m.in_reply_to.map(|r| format!(" (re {r})")).unwrap_or_default();
    let (from, body) = (crate::output::escape(&m.from), crate::output::escape(&m.body));
    format!("{unread}{:<6} p{} {:<17} {:<14}{reply} {body}", m.id, m.priority, m.kind.as_str(), from)
}
