use std::process::ExitCode;

use clap::Args;

use super::message_row;
use crate::cli::GlobalArgs;
use crate::commands::board::{AGENT_ENV, open_store, require_agent, store_error};
use crate::error::CliResult;
use crate::output::{note, print_json, print_table};

/// Show an agent's messages, most urgent first, then oldest first (`*` marks unread).
#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Whose inbox.
    #[arg(long, env = AGENT_ENV, hide_env_values = true)]
    pub agent: Option<String>,
    /// Only messages not yet marked read.
    #[arg(long)]
    pub unread: bool,
    /// Mark the listed messages read.
    #[arg(long)]
    pub mark_read: bool,
}

pub fn run(g: &GlobalArgs, args: InboxArgs) -> CliResult<ExitCode> {
    let agent = require_agent(args.agent, "msg inbox")?;
    let store = open_store(g)?;
    let messages = store.inbox(&agent, args.unread).map_err(store_error)?;
    if args.mark_read && !messages.is_empty() {
        let ids: Vec<i64> = messages.iter().map(|m| m.id).collect();
        store.mark_read(&agent, &ids).map_err(store_error)?;
    }
    if g.json {
        print_json(&messages);
    } else if messages.is_empty() {
        note(&format!(
            "no {}messages for {agent}; `troupe msg send {agent} \"<text>\"` sends one",
            if args.unread { "unread " } else { "" }
        ));
    } else {
        let now = jiff::Timestamp::now();
        let rows: Vec<Vec<String>> = messages.iter().map(|m| message_row(m, now)).collect();
        print_table(&["", "ID", "PRI", "KIND", "FROM", "SENT", "MESSAGE"], &rows, &[1]);
    }
    Ok(ExitCode::SUCCESS)
}
