//! The names of troupe's own gateway tools, and how each engine spells them.
//!
//! One source for the contract between what troupe tells a teammate and what it
//! accepts: the gateway serves these names (as `troupe__<tool>`), the role
//! prompts name them through [`engine_tool_name`], and the PreToolUse policy
//! reads an engine's spelling back with [`gateway_tool`].
//!
//! The gateway is registered in every engine's MCP config under
//! [`GATEWAY_MCP_NAME`] (`troupe`); the engines prefix its tools differently:
//!
//! | engine           | `board_complete` reaches the model as   |
//! |------------------|-----------------------------------------|
//! | Claude, Codex    | `mcp__troupe__troupe__board_complete`   |
//! | Gemini CLI       | `mcp_troupe_troupe__board_complete`     |
//! | OpenCode         | `troupe_troupe__board_complete`         |

use std::borrow::Cow;

use crate::rbac::GATEWAY_MCP_NAME;

/// The server prefix of troupe's own tools inside the gateway (`troupe__board_claim`).
pub const TROUPE_SERVER: &str = "troupe";

/// Send a message to another agent.
pub const SEND_MESSAGE: &str = "send_message";
/// Read the inbox.
pub const READ_MESSAGES: &str = "read_messages";
/// List tasks on the board.
pub const BOARD_LIST: &str = "board_list";
/// Claim a task.
pub const BOARD_CLAIM: &str = "board_claim";
/// Complete a task one holds.
pub const BOARD_COMPLETE: &str = "board_complete";
/// Create a task on the board.
pub const BOARD_CREATE: &str = "board_create";
/// Reserve a pending task for a teammate.
pub const BOARD_ASSIGN: &str = "board_assign";
/// Send a structured completion report to the Lead.
pub const REPORT: &str = "report";
/// Submit a plan for approval.
pub const REQUEST_PLAN_APPROVAL: &str = "request_plan_approval";
/// Answer a shutdown request.
pub const RESPOND_SHUTDOWN: &str = "respond_shutdown";
/// The agent's id, role, feature, task and tools.
pub const GET_CONTEXT: &str = "get_context";
/// The roles and which one may switch to.
pub const LIST_ROLES: &str = "list_roles";
/// The skills of the current role.
pub const LIST_SKILLS: &str = "list_skills";
/// Save a memory.
pub const SAVE_MEMORY: &str = "save_memory";
/// Search memories.
pub const RECALL_MEMORY: &str = "recall_memory";
/// Memory statistics.
pub const LIST_MEMORIES: &str = "list_memories";
/// One skill of the current role: its instructions and scripts.
pub const GET_SKILL: &str = "get_skill";
/// Run a script of one of the current role's skills (workflow mode).
pub const RUN_SCRIPT: &str = "run_script";

/// Lock a project file so that other agents' writes to it are denied.
pub const LOCK_FILE: &str = "lock_file";
/// Release a file lock one holds.
pub const UNLOCK_FILE: &str = "unlock_file";
/// The file locks held now.
pub const LIST_LOCKS: &str = "list_locks";

/// Every troupe tool the gateway serves, in its listing order.
pub const TROUPE_TOOLS: [&str; 21] = [
    SEND_MESSAGE,
    READ_MESSAGES,
    BOARD_LIST,
    BOARD_CLAIM,
    BOARD_COMPLETE,
    BOARD_CREATE,
    BOARD_ASSIGN,
    REPORT,
    REQUEST_PLAN_APPROVAL,
    RESPOND_SHUTDOWN,
    GET_CONTEXT,
    LIST_ROLES,
    LIST_SKILLS,
    SAVE_MEMORY,
    RECALL_MEMORY,
    LIST_MEMORIES,
    GET_SKILL,
    RUN_SCRIPT,
    LOCK_FILE,
    UNLOCK_FILE,
    LIST_LOCKS,
];

/// How an engine prefixes the tools of an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpNaming {
    /// `mcp__<server>__<tool>`: Claude Code, Codex, and the scripted and custom engines.
    Claude,
    /// `mcp_<server>_<tool>`: Gemini CLI.
    Gemini,
    /// `<server>_<tool>`: OpenCode.
    OpenCode,
}

impl McpNaming {
    /// The naming of the engine called `engine` in config (`claude`, `gemini`, ...);
    /// engines troupe does not know use Claude Code's.
    pub fn of_engine(engine: &str) -> McpNaming {
        match engine {
            "gemini" => McpNaming::Gemini,
            "opencode" => McpNaming::OpenCode,
            _ => McpNaming::Claude,
        }
    }
}

/// The gateway's own name of troupe tool `tool` (`troupe__board_complete`),
/// the name role policies and skills use.
pub fn gateway_name(tool: &str) -> String {
    format!("{TROUPE_SERVER}__{tool}")
}

/// Troupe tool `tool` (`board_complete`) as the model of an engine with
/// `naming` sees it.
pub fn engine_tool_name(naming: McpNaming, tool: &str) -> String {
    let (g, name) = (GATEWAY_MCP_NAME, gateway_name(tool));
    match naming {
        McpNaming::Claude => format!("mcp__{g}__{name}"),
        McpNaming::Gemini => format!("mcp_{g}_{name}"),
        McpNaming::OpenCode => format!("{g}_{name}"),
    }
}

/// An engine's name of a gateway tool in Claude Code's naming
/// (`mcp__troupe__<tool>`), the inverse of [`engine_tool_name`]; names that are
/// not the gateway's in that engine's naming are returned as they are.
pub fn gateway_tool(naming: McpNaming, tool: &str) -> Cow<'_, str> {
    let g = GATEWAY_MCP_NAME;
    let rest = match naming {
        McpNaming::Gemini => tool.strip_prefix("mcp_").and_then(|t| t.strip_prefix(g)?.strip_prefix('_')),
        McpNaming::OpenCode => tool.strip_prefix(g).and_then(|t| t.strip_prefix('_')),
        McpNaming::Claude => None,
    };
    match rest.filter(|r| !r.is_empty()) {
        Some(rest) => format!("mcp__{g}__{rest}").into(),
        None => tool.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_spells_the_gateway_tools_its_own_way_and_back() {
        let cases = [
            ("claude", "mcp__troupe__troupe__board_complete"),
            ("codex", "mcp__troupe__troupe__board_complete"),
            ("gemini", "mcp_troupe_troupe__board_complete"),
            ("opencode", "troupe_troupe__board_complete"),
            ("scripted", "mcp__troupe__troupe__board_complete"),
        ];
        for (engine, expected) in cases {
            let naming = McpNaming::of_engine(engine);
            let name = engine_tool_name(naming, BOARD_COMPLETE);
            assert_eq!(name, expected, "{engine}");
            assert_eq!(gateway_tool(naming, &name), "mcp__troupe__troupe__board_complete", "{engine}");
        }
        assert_eq!(gateway_tool(McpNaming::Gemini, "mcp_troupe_set_role"), "mcp__troupe__set_role");
        assert_eq!(gateway_tool(McpNaming::OpenCode, "bash"), "bash");
        assert_eq!(gateway_name(REPORT), "troupe__report");
    }
}
