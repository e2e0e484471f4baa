//! The skills `troupe init` writes for troupe's built-in roles, and the
//! templates of `troupe skill add --template`. They are ordinary SKILL.md
//! files: the user edits them like any other skill.

/// Tools every built-in role gets: messaging, context, reports, shutdown answers.
const TEAM: &str = "---
id: team-basics
displayName: Team basics
description: Messaging, context, completion reports and shutdown answers for every role.
allowedRoles: [\"*\"]
allowedTools:
  - troupe__send_message
  - troupe__read_messages
  - troupe__get_context
  - troupe__list_roles
  - troupe__list_skills
  - troupe__report
  - troupe__respond_shutdown
  - troupe__board_list
  - troupe__list_locks
---
Every teammate can message the team, read its mailbox, see its context and the
board, send a structured completion report, and answer a shutdown request.
";

/// One default skill per built-in role: (skill id, front matter after the id line, body).
const ROLES: [(&str, &str, &str); 9] = [
    (
        "lead",
        "displayName: Lead\ndescription: troupe itself; may use everything.\nallowedRoles: [lead]\nallowedTools: [\"*\"]\ngrants:\n  memory: all",
        "The Lead is troupe's own deterministic code; this skill exists so that\nthe Lead's identity has a policy like every other role.\n",
    ),
    (
        "architect",
        "displayName: Architect\ndescription: Writes design.md and research.md.\nallowedRoles: [architect]\nallowedTools:\n  - builtin__read\n  - builtin__write\n  - builtin__shell\n  - builtin__web\n  - builtin__todo\n  - builtin__task\n  - troupe__request_plan_approval\ngrants:\n  memory: isolated",
        "Design and research. File ownership limits what you may write.\n",
    ),
    (
        "auditor",
        "displayName: Auditor\ndescription: Merges Inspector findings into a verdict.\nallowedRoles: [auditor]\nallowedTools:\n  - builtin__read\n  - builtin__write\n  - builtin__shell\n  - builtin__todo\ngrants:\n  memory: isolated",
        "Read the Inspectors' findings and write the verdict.\n",
    ),
    (
        "task-generator",
        "displayName: TaskGenerator\ndescription: Writes tasks.yaml.\nallowedRoles: [task-generator]\nallowedTools:\n  - builtin__read\n  - builtin__write\n  - builtin__shell\n  - builtin__todo\ngrants:\n  memory: isolated",
        "Turn the design into tasks.yaml.\n",
    ),
    (
        "builder",
        "displayName: Builder\ndescription: Implements a group of tasks, test first.\nallowedRoles: [builder]\nallowedTools:\n  - builtin__*\n  - troupe__board_claim\n  - troupe__board_complete\n  - troupe__request_plan_approval\n  - troupe__lock_file\n  - troupe__unlock_file\ngrants:\n  memory: isolated",
        "Claim a task, write the failing test, make it pass, complete the task.\n",
    ),
    (
        "inspector",
        "displayName: Inspector\ndescription: Reviews from one perspective and writes CPF findings.\nallowedRoles: [inspector]\nallowedTools:\n  - builtin__read\n  - builtin__write\n  - builtin__shell\n  - builtin__todo\ngrants:\n  memory: isolated",
        "Review from your perspective; write findings in CPF.\n",
    ),
    (
        "coordinator",
        "displayName: Coordinator\ndescription: Delegate mode - distributes and reviews work, never writes files.\nallowedRoles: [coordinator]\nallowedTools:\n  - builtin__read\n  - builtin__todo\n  - troupe__board_create\n  - troupe__board_assign\ndeniedTools:\n  - builtin__write\n  - builtin__shell\n  - builtin__task\n  - troupe__lock_file\n  - troupe__unlock_file",
        "Coordinate through the board (list, create and assign tasks) and messages.\nYou cannot write files or run commands: ask a Builder.\n",
    ),
    (
        "orchestrator",
        "displayName: Orchestrator\ndescription: Workflow mode - skill scripts only.\nallowedRoles: [orchestrator]\nallowedTools:\n  - troupe__list_skills\n  - troupe__get_skill\n  - troupe__run_script\ndeniedTools:\n  - builtin__*\n  - troupe__send_message\n  - troupe__read_messages\n  - troupe__get_context\n  - troupe__list_roles\n  - troupe__report\n  - troupe__respond_shutdown\n  - troupe__board_list\n  - troupe__list_locks",
        "Carry out tasks with the scripts of your skills (list_skills, get_skill, run_script);\n`troupe workflow` saves a failed script's context for adhoc mode.\n",
    ),
    (
        "adhoc",
        "displayName: Adhoc\ndescription: Investigation and fixes with full access.\nallowedRoles: [adhoc]\nallowedTools: [\"*\"]\ngrants:\n  memory: isolated",
        "Full access for investigation; use it with care.\n",
    ),
];

/// The default skills as `(path relative to the project root, contents)`,
/// for `troupe init` to write when missing.
pub fn default_skill_files() -> Vec<(String, String)> {
    let mut files = vec![(".troupe/skills/team-basics/SKILL.md".to_string(), TEAM.to_string())];
    for (id, front, body) in ROLES {
        files.push((format!(".troupe/skills/{id}/SKILL.md"), format!("---\nid: {id}\n{front}\n---\n{body}")));
    }
    files
}

/// `troupe skill add --template`: (name, what it is for).
pub const SKILL_TEMPLATES: [(&str, &str); 6] = [
    ("basic", "an empty skill for one role: fill in allowedRoles and allowedTools"),
    ("browser-limited", "read-only web access, no file writes"),
    ("code-reviewer", "read code and run tests, no writes"),
    ("data-analyst", "read files and query a database server, with memory"),
    ("flight-booking", "one backend server's tools, nothing else"),
    ("personal-assistant", "messaging and memory across the team"),
];

/// The SKILL.md text of template `template` for a new skill `id`, or `None`
/// for an unknown template.
pub fn skill_template(template: &str, id: &str) -> Option<String> {
    let (roles, tools, extra, body) = match template {
        "basic" => ("[builder]", "[]", "", "Describe what this skill lets a role do.\n"),
        "browser-limited" => (
            "[researcher]",
            "\n  - builtin__web\n  - builtin__read",
            "deniedTools:\n  - builtin__write\n  - builtin__shell\n",
            "Browse and read; never write.\n",
        ),
        "code-reviewer" => (
            "[reviewer]",
            "\n  - builtin__read\n  - builtin__shell\n  - troupe__send_message",
            "deniedTools:\n  - builtin__write\n",
            "Review code, run the tests, report findings by message.\n",
        ),
        "data-analyst" => (
            "[analyst]",
            "\n  - builtin__read\n  - database__*",
            "grants:\n  memory: isolated\n",
            "Query the database server and keep notes in memory.\n",
        ),
        "flight-booking" => ("[booking-agent]", "\n  - flights__*", "", "Use the flights server only.\n"),
        "personal-assistant" => (
            "[assistant]",
            "\n  - troupe__send_message\n  - troupe__read_messages",
            "grants:\n  memory: team\n  memoryTeamRoles: [builder, architect]\n",
            "Keep the team's notes and relay messages.\n",
        ),
        _ => return None,
    };
    Some(format!(
        "---\nid: {id}\ndisplayName: {id}\ndescription: {template} skill\nallowedRoles: {roles}\nallowedTools: {tools}\n{extra}---\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::rbac::policy::Policy;
    use crate::rbac::skill::Skill;
    use crate::rbac::{check_builtin_tool, memory::MemoryPolicy};

    fn default_policy() -> Policy {
        let skills =
            default_skill_files().iter().map(|(p, t)| Skill::parse(t).unwrap_or_else(|e| panic!("{p}: {e}"))).collect();
        Policy::build(skills, &BTreeMap::new()).unwrap()
    }

    #[test]
    fn defaults_cover_every_built_in_role() {
        let p = default_policy();
        for role in crate::role::Role::ALL {
            assert!(p.role(role.as_str()).is_some(), "{}", role.as_str());
        }
        assert!(p.role("orchestrator").is_some() && p.role("adhoc").is_some());
        assert!(p.warnings().is_empty());
    }

    #[test]
    fn the_orchestrator_sees_only_the_workflow_tools() {
        let p = default_policy();
        let allowed: Vec<&str> = crate::tools::TROUPE_TOOLS
            .into_iter()
            .filter(|t| p.check_tool("orchestrator", &format!("troupe__{t}")).is_allowed())
            .collect();
        assert_eq!(allowed, ["list_skills", "get_skill", "run_script"]);
        for tool in ["builtin__read", "builtin__write", "builtin__shell", "builtin__other", "fs__read_file"] {
            assert!(!p.check_tool("orchestrator", tool).is_allowed(), "{tool}");
        }
        assert!(p.check_tool("adhoc", "builtin__shell").is_allowed());
    }

    #[test]
    fn the_coordinator_sees_board_and_messages_but_writes_nothing() {
        let p = default_policy();
        for tool in [
            "troupe__board_list",
            "troupe__board_create",
            "troupe__board_assign",
            "troupe__send_message",
            "troupe__read_messages",
        ] {
            assert!(p.check_tool("coordinator", tool).is_allowed(), "{tool}");
        }
        // It delegates: the work itself is a Builder's.
        // Delegate mode (seed 003 B5 `deny_file_locks`): it takes no file locks either.
        for tool in ["troupe__board_claim", "troupe__board_complete", "troupe__lock_file", "troupe__unlock_file"] {
            assert!(!p.check_tool("coordinator", tool).is_allowed(), "{tool}");
        }
        assert!(p.check_tool("coordinator", "troupe__list_locks").is_allowed());
        assert!(p.check_tool("builder", "troupe__lock_file").is_allowed());
        for tool in ["Write", "Edit", "Bash", "apply_patch", "write_file", "run_shell_command", "Task"] {
            assert!(!check_builtin_tool(&p, "coordinator", tool).is_allowed(), "{tool}");
        }
        assert!(!p.check_tool("coordinator", "filesystem__write_file").is_allowed());
        assert_eq!(p.effective_memory("coordinator").policy, MemoryPolicy::None);
        assert!(check_builtin_tool(&p, "builder", "Write").is_allowed());
        // Every role that writes can run `troupe skill use` (the skill gate) and load skills.
        for role in ["architect", "auditor", "task-generator", "builder", "inspector"] {
            for tool in ["Bash", "Skill", "Write", "run_shell_command", "exec_command"] {
                assert!(check_builtin_tool(&p, role, tool).is_allowed(), "{role} {tool}");
            }
        }
        assert!(p.check_tool("adhoc", "filesystem__write_file").is_allowed());
    }

    #[test]
    fn every_template_parses() {
        for (name, _) in SKILL_TEMPLATES {
            let text = skill_template(name, "my-skill").unwrap();
            let skill = Skill::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(skill.id, "my-skill");
        }
        assert!(skill_template("nope", "x").is_none());
    }
}
