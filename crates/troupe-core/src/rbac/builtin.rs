//! One policy, two enforcement points: the engines' own built-in tools (Claude
//! Code's `Write`, Gemini's `run_shell_command`, Codex's `apply_patch`, ...)
//! never pass through the gateway, so the PreToolUse hook asks
//! [`check_builtin_tool`] instead, and the same skills decide.
//!
//! Each built-in tool maps to a capability written as a pattern in skills:
//! `builtin__read`, `builtin__write`, `builtin__shell`, `builtin__web`,
//! `builtin__task`, `builtin__todo`, and `builtin__other` for tools this table
//! does not know (so a new engine tool is denied until a skill allows
//! `builtin__other` or `builtin__*`).
//!
//! ```
//! use std::collections::BTreeMap;
//! use troupe_core::rbac::{check_builtin_tool, policy::Policy, skill::Skill};
//!
//! let skill = Skill::parse("---\nid: c\nallowedRoles: [coordinator]\nallowedTools: [builtin__read]\n---\n").unwrap();
//! let policy = Policy::build(vec![skill], &BTreeMap::new()).unwrap();
//! assert!(check_builtin_tool(&policy, "coordinator", "Read").is_allowed());
//! assert!(!check_builtin_tool(&policy, "coordinator", "Write").is_allowed());
//! ```

use super::names::SEPARATOR;
use super::policy::{Decision, Policy, RoleCheck};

/// The name the gateway is registered under in each engine's MCP config, so
/// its tools reach the engine as `mcp__troupe__<server>__<tool>`.
pub const GATEWAY_MCP_NAME: &str = "troupe";

/// A capability of built-in tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Reading files and searching the tree.
    Read,
    /// Creating, editing, patching files.
    Write,
    /// Running commands.
    Shell,
    /// Fetching or searching the web.
    Web,
    /// Spawning sub-agents.
    Task,
    /// The engine's todo list / plan.
    Todo,
    /// Anything else.
    Other,
}

impl Capability {
    /// The pattern skills write for it: `builtin__write`, ...
    pub fn pattern(self) -> &'static str {
        match self {
            Capability::Read => "builtin__read",
            Capability::Write => "builtin__write",
            Capability::Shell => "builtin__shell",
            Capability::Web => "builtin__web",
            Capability::Task => "builtin__task",
            Capability::Todo => "builtin__todo",
            Capability::Other => "builtin__other",
        }
    }
}

/// The capability of an engine's built-in tool, for Claude Code, Gemini CLI,
/// Codex and OpenCode tool names.
pub fn builtin_capability(engine_tool_name: &str) -> Capability {
    match engine_tool_name {
        // Claude Code
        // Skills and MCP resources load text for the model, like a read.
        "Read"
        | "Glob"
        | "Grep"
        | "LS"
        | "NotebookRead"
        | "Skill"
        | "SlashCommand"
        | "ListMcpResourcesTool"
        | "ReadMcpResourceTool" => Capability::Read,
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => Capability::Write,
        "Bash" | "BashOutput" | "KillShell" | "KillBash" => Capability::Shell,
        "WebFetch" | "WebSearch" => Capability::Web,
        "Task" | "Agent" => Capability::Task,
        "TodoWrite" | "ExitPlanMode" => Capability::Todo,
        // Gemini CLI
        // `activate_skill` loads a skill's text, like Claude Code's Skill.
        "read_file"
        | "read_many_files"
        | "list_directory"
        | "glob"
        | "search_file_content"
        | "grep_search"
        | "activate_skill" => Capability::Read,
        "write_file" | "replace" => Capability::Write,
        "run_shell_command" => Capability::Shell,
        "web_fetch" | "google_web_search" => Capability::Web,
        "write_todos" => Capability::Todo,
        // Codex
        "apply_patch" => Capability::Write,
        "exec_command" | "shell" | "local_shell" | "write_stdin" => Capability::Shell,
        "web_search" => Capability::Web,
        "update_plan" => Capability::Todo,
        "view_image" | "list_dir" => Capability::Read,
        // OpenCode
        // `skill` loads a skill's text, like Claude Code's Skill.
        "read" | "list" | "grep" | "skill" => Capability::Read,
        "write" | "edit" | "patch" | "multiedit" => Capability::Write,
        "bash" => Capability::Shell,
        "webfetch" | "websearch" | "codesearch" => Capability::Web,
        "task" => Capability::Task,
        "todowrite" | "todoread" => Capability::Todo,
        _ => Capability::Other,
    }
}

/// May `role` use the engine's built-in tool `engine_tool_name`? MCP tools
/// (`mcp__<server>__<tool>`) are checked as `<server>__<tool>`, except the
/// gateway's own, which the gateway checks itself on every call.
pub fn check_builtin_tool(policy: &Policy, role: &str, engine_tool_name: &str) -> Decision {
    check_builtin_tool_with(policy.role_check(role), role, engine_tool_name)
}

/// [`check_builtin_tool`] on `role`'s compiled check alone (see
/// [`Policy::role_check`]), as a hook reads it from the skills cache.
pub fn check_builtin_tool_with(check: Option<&RoleCheck>, role: &str, engine_tool_name: &str) -> Decision {
    if let Some(rest) = engine_tool_name.strip_prefix("mcp__") {
        if let Some(tool) = rest.strip_prefix(GATEWAY_MCP_NAME).and_then(|r| r.strip_prefix(SEPARATOR)) {
            // Visible only if the gateway let it through; it enforces on every call.
            if !tool.is_empty() {
                return Decision::Allow;
            }
        }
        return RoleCheck::decide(check, role, rest);
    }
    RoleCheck::decide(check, role, builtin_capability(engine_tool_name).pattern())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::rbac::policy::DenyReason;
    use crate::rbac::skill::Skill;

    fn policy() -> Policy {
        let skills = [
            "id: b\nallowedRoles: [builder]\nallowedTools: [builtin__*]",
            "id: c\nallowedRoles: [coordinator]\nallowedTools: [builtin__read, builtin__todo, filesystem__read_file]",
        ];
        let skills = skills.iter().map(|s| Skill::parse(&format!("---\n{s}\n---\n")).unwrap()).collect();
        Policy::build(skills, &BTreeMap::new()).unwrap()
    }

    #[test]
    fn every_engine_write_and_shell_tool_is_denied_to_the_coordinator() {
        let p = policy();
        let writes = [
            "Write",
            "Edit",
            "MultiEdit",
            "NotebookEdit",
            "write_file",
            "replace",
            "apply_patch",
            "write",
            "edit",
            "patch",
        ];
        let shells = ["Bash", "run_shell_command", "exec_command", "shell", "bash"];
        for tool in writes.iter().chain(&shells) {
            assert!(!check_builtin_tool(&p, "coordinator", tool).is_allowed(), "{tool}");
            assert!(check_builtin_tool(&p, "builder", tool).is_allowed(), "{tool}");
        }
        // Loading a skill is a read on every engine that has a skill tool.
        let reads = ["Read", "Grep", "read_file", "grep_search", "read", "TodoWrite", "update_plan"];
        for tool in reads.iter().chain(&["Skill", "activate_skill", "skill"]) {
            assert!(check_builtin_tool(&p, "coordinator", tool).is_allowed(), "{tool}");
        }
    }

    #[test]
    fn unknown_tools_are_other_and_mcp_tools_use_the_policy() {
        let p = policy();
        assert_eq!(builtin_capability("SomethingNew"), Capability::Other);
        assert!(!check_builtin_tool(&p, "coordinator", "SomethingNew").is_allowed());
        assert!(check_builtin_tool(&p, "builder", "SomethingNew").is_allowed());
        assert!(check_builtin_tool(&p, "coordinator", "mcp__filesystem__read_file").is_allowed());
        assert!(!check_builtin_tool(&p, "coordinator", "mcp__filesystem__write_file").is_allowed());
        assert!(check_builtin_tool(&p, "coordinator", "mcp__troupe__filesystem__write_file").is_allowed());
        assert!(matches!(check_builtin_tool(&p, "ghost", "Read"), Decision::Deny(DenyReason::UnknownRole(_))));
    }
}
