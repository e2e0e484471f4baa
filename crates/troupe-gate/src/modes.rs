//! Plan mode and delegate mode (seed 003 B3, B5) as troupe enforces them in
//! the hooks: which calls each holds, the reason the agent is told, and the
//! instructions it is given, with troupe's tools named as its engine names
//! them (`troupe_core::tools`, the gateway's own table).
//!
//! Delegate mode is in the teammate's environment ([`DELEGATE_ENV`]) and
//! decided by [`crate::decide`] with the other pure gates. Plan mode is in
//! the store (a message sent in plan mode, the plans since and their
//! decisions): the CLI's hook reads it there and asks [`plan_mode`].

use troupe_core::tools::{self, McpNaming};

use crate::decide::Answer;
use crate::tools::ToolCall;

/// Set (`1`) in the environment of a teammate in delegate mode: the hooks
/// refuse its writes and commands, the gateway its file locks.
pub const DELEGATE_ENV: &str = "TROUPE_DELEGATE";

/// The reason every held call of an agent in plan mode starts with.
pub const PLAN_MODE_REASON: &str = "plan mode: submit your plan with request_plan_approval and wait for approval";

/// Whether `value` of [`DELEGATE_ENV`] turns delegate mode on (anything but
/// empty, `0`, `false`, `no` and `off`).
pub fn delegate_on(value: Option<&str>) -> bool {
    value.map(str::trim).is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "" | "0" | "false" | "no" | "off"))
}

/// Whether plan or delegate mode holds a call: it writes files or runs a command.
pub fn holds(call: &ToolCall) -> bool {
    matches!(call, ToolCall::Write { .. } | ToolCall::Shell { .. })
}

/// A delegate's call `tool`: refused when it writes or runs a command.
pub fn delegate(call: &ToolCall, tool: &str) -> Answer {
    if !holds(call) {
        return Answer::Pass;
    }
    Answer::Deny(format!(
        "delegate mode: a coordinator does not write files or run commands ({tool} refused). Create a board task \
         ({}) and assign it to a teammate ({}), or ask one with {}.",
        tools::BOARD_CREATE,
        tools::BOARD_ASSIGN,
        tools::SEND_MESSAGE
    ))
}

/// The call `tool` of an agent in plan mode whose plan is not approved;
/// `detail` says where its plan stands.
pub fn plan_mode(call: &ToolCall, tool: &str, detail: &str) -> Answer {
    if !holds(call) {
        return Answer::Pass;
    }
    Answer::Deny(format!("{PLAN_MODE_REASON} ({tool} refused: {detail})"))
}

/// What an agent asked for a plan first is told, with the tool named as its
/// engine names it: plan only, submit, wait, revise when rejected.
pub fn plan_mode_instructions(naming: McpNaming) -> String {
    let submit = tools::engine_tool_name(naming, tools::REQUEST_PLAN_APPROVAL);
    let read = tools::engine_tool_name(naming, tools::READ_MESSAGES);
    format!(
        "Plan mode: make a plan only, do not implement it yet. When the plan is ready, submit it with the tool \
         `{submit}` (argument `plan`: the steps, one per line) and wait for the decision. Until a plan is approved, \
         troupe refuses your file writes and shell commands. If the plan is rejected, revise it by the reason given \
         and submit it again; a decision that arrives later is a plan_decision message (`{read}`)."
    )
}

/// The coordinator's instructions in delegate mode (seed 003 B5), with the
/// board and messaging tools named as its engine names them.
pub fn delegate_instructions(naming: McpNaming) -> String {
    let name = |t| tools::engine_tool_name(naming, t);
    format!(
        "Delegate mode: you are the coordinator. Do not edit files or run commands yourself: troupe refuses your \
         file writes, shell commands and file locks. Delegate instead: analyse the work, split it into tasks, \
         create each on the board with `{}`, assign it to a teammate with `{}`, follow progress with `{}`, and \
         talk to teammates with `{}` and `{}`. Focus on analysing, splitting, assigning and reviewing.",
        name(tools::BOARD_CREATE),
        name(tools::BOARD_ASSIGN),
        name(tools::BOARD_LIST),
        name(tools::SEND_MESSAGE),
        name(tools::READ_MESSAGES),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write() -> ToolCall {
        ToolCall::Write { tool: "Write".into(), paths: vec!["a.rs".into()] }
    }

    #[test]
    fn both_modes_hold_writes_and_commands_only() {
        let shell = ToolCall::Shell { command: "ls".into(), dir: None };
        for call in [write(), shell] {
            assert!(matches!(delegate(&call, "X"), Answer::Deny(r) if r.starts_with("delegate mode:")));
            assert!(
                matches!(plan_mode(&call, "X", "no plan yet"), Answer::Deny(r) if r.starts_with(PLAN_MODE_REASON) && r.contains("no plan yet"))
            );
        }
        for call in [ToolCall::Other, ToolCall::Skill { name: "s".into() }] {
            assert_eq!(delegate(&call, "Read"), Answer::Pass);
            assert_eq!(plan_mode(&call, "Read", ""), Answer::Pass);
        }
    }

    #[test]
    fn the_environment_turns_delegate_mode_on() {
        for on in ["1", "true", "yes"] {
            assert!(delegate_on(Some(on)), "{on}");
        }
        for off in [None, Some(""), Some("0"), Some("false"), Some("OFF"), Some("no")] {
            assert!(!delegate_on(off), "{off:?}");
        }
    }

    #[test]
    fn instructions_name_the_tools_as_each_engine_does() {
        let claude = plan_mode_instructions(McpNaming::Claude);
        assert!(claude.contains("`mcp__troupe__troupe__request_plan_approval`"), "{claude}");
        assert!(plan_mode_instructions(McpNaming::Gemini).contains("`mcp_troupe_troupe__request_plan_approval`"));
        let d = delegate_instructions(McpNaming::OpenCode);
        for t in [tools::BOARD_CREATE, tools::BOARD_ASSIGN, tools::BOARD_LIST, tools::SEND_MESSAGE] {
            assert!(d.contains(&format!("`troupe_troupe__{t}`")), "{d}");
        }
    }
}
