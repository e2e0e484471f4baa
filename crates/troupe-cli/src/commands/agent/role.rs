//! The one place a command turns `--role NAME` into the role an agent runs
//! under (`agent run`, `ask`, `chat`, `workflow`, `adhoc`): a built-in role, or
//! any role the project's skills define, and the prompt that introduces it.

use troupe_core::rbac::policy::Policy;
use troupe_core::role::{Role, TeamRole};

use crate::error::{CliError, CliResult};
use troupe_project::Project;

/// The project's role policy (skills and `[gateway.roles]`), as the gateway loads it.
pub(crate) fn policy(project: &Project) -> CliResult<Policy> {
    troupe_gateway::Setup::load(project.layout()).map(|s| s.policy).map_err(|e| {
        CliError::config(format!("cannot load the project's skills: {e}"))
            .with_hint("fix the file named above (`troupe policy roles` shows what loads)")
    })
}

/// `name` as a role: built-in, or defined by a skill's `allowedRoles`. The Lead is troupe itself.
pub(crate) fn resolve(project: &Project, name: &str) -> CliResult<TeamRole> {
    let builtin = "architect, auditor, task-generator, builder, inspector, coordinator";
    if let Ok(Role::Lead) = name.parse::<Role>() {
        return Err(CliError::usage("the Lead is troupe itself and is not run as an agent")
            .with_hint(format!("pick a teammate role: {builtin}, or a role of the skills")));
    }
    if name.parse::<Role>().is_ok() {
        return Ok(TeamRole::resolve(name, |_| false).expect("a built-in role"));
    }
    let policy = policy(project)?;
    TeamRole::resolve(name, |n| policy.role(n).is_some()).ok_or_else(|| {
        // The roles the skills add; the built-in ones are named already.
        let skills: Vec<&str> =
            policy.roles().keys().map(String::as_str).filter(|r| r.parse::<Role>().is_err()).collect();
        let builtins = builtin.split(", ").filter(|r| *r != "lead");
        let meant = match troupe_core::names::closest(name, builtins.chain(skills.iter().copied())) {
            Some(m) => format!(" (did you mean '{m}'?)"),
            None => String::new(),
        };
        CliError::usage(format!("unknown role '{name}'{meant}")).with_hint(if skills.is_empty() {
            format!("roles: {builtin}; a skill's `allowedRoles` in .troupe/skills/<id>/SKILL.md defines more")
        } else {
            format!("roles: {builtin}; of the skills: {}", skills.join(", "))
        })
    })
}

/// The instructions of a skill role, in place of a built-in role's template:
/// who it is, that troupe enforces its tools, and its skills' instructions.
pub(crate) fn skill_role_prompt(policy: &Policy, role: &str) -> String {
    let mut out = format!(
        "# Role: {role}\n\nYou work in this project as `{role}`, a role its skills define. troupe checks every \
         tool call you make: its hooks check the engine's own tools, and its MCP gateway (the server named \
         `troupe`) offers the tools your role may use. A refused call tells you why; do not try to get around it.\n"
    );
    for skill in policy.skills_for_role(role) {
        out.push_str(&format!("\n## Skill {}: {}\n", skill.id, skill.description.trim()));
        if !skill.body.trim().is_empty() {
            out.push_str(&format!("\n{}\n", skill.body.trim()));
        }
    }
    out
}
