use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::output::{note, print_json, print_line};

/// Show what a role may use: its servers, allowed and denied tool patterns,
/// memory policy, inheritance chain and skills (all merged along the chain).
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The role to check.
    #[arg(long)]
    pub role: String,
    /// Also decide one tool (`server__tool`, `builtin__write`, or an engine tool name like `Write`).
    #[arg(long)]
    pub tool: Option<String>,
}

pub fn run(g: &GlobalArgs, args: CheckArgs) -> CliResult<ExitCode> {
    let project = crate::project::find(g)?;
    let setup = crate::commands::mcp::load_setup(&project)?;
    let policy = &setup.policy;
    let Some(role) = policy.role(&args.role) else {
        let known: Vec<&str> = policy.roles().keys().map(String::as_str).collect();
        return Err(CliError::user(format!("unknown role {:?}", args.role))
            .with_hint(format!("known roles: {}", known.join(", "))));
    };
    let chain = policy.inheritance_chain(&role.id).unwrap_or_default();
    let (allow, deny) = policy.effective_tool_permissions(&role.id);
    let memory = policy.effective_memory(&role.id);
    let skills: Vec<&str> = policy.skills_for_role(&role.id).iter().map(|s| s.id.as_str()).collect();
    let servers: Vec<String> = policy.effective_servers(&role.id).into_iter().collect();
    let decision = args.tool.as_deref().map(|tool| {
        let d = if tool.contains("__") {
            policy.check_tool(&role.id, tool)
        } else {
            troupe_core::rbac::check_builtin_tool(policy, &role.id, tool)
        };
        match d {
            troupe_core::rbac::Decision::Allow => ("allow".to_string(), None),
            troupe_core::rbac::Decision::Deny(r) => ("deny".to_string(), Some(r.to_string())),
        }
    });
    let warnings: Vec<&String> = setup
        .warnings
        .iter()
        .filter(|w| w.contains(&format!("role: {}", role.id)) || w.contains(&format!("{:?}", role.id)))
        .collect();
    if g.json {
        print_json(&json!({
            "role": role.id,
            "description": role.description,
            "inheritanceChain": chain,
            "servers": servers,
            "allow": allow,
            "deny": deny,
            "memory": memory,
            "skills": skills,
            "warnings": warnings,
            "decision": decision.as_ref().map(|(d, r)| json!({"tool": args.tool, "decision": d, "reason": r})),
        }));
    } else {
        print_line(&format!("role: {}  ({})", role.id, role.description));
        print_line(&format!(
            "inheritance: {}",
            if chain.is_empty() { "broken (no permissions)".to_string() } else { chain.join(" -> ") }
        ));
        print_line(&format!("servers: {}", if servers.is_empty() { "none".into() } else { servers.join(", ") }));
        print_line(&format!("allow: {}", allow.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")));
        print_line(&format!("deny: {}", deny.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")));
        let team = if memory.team_roles.is_empty() {
            String::new()
        } else {
            format!(" (team: {})", memory.team_roles.iter().cloned().collect::<Vec<_>>().join(", "))
        };
        print_line(&format!("memory: {}{team}", memory.policy.as_str()));
        print_line(&format!("skills: {}", skills.join(", ")));
        for w in warnings {
            note(&format!("warning: {w}"));
        }
        if let (Some(tool), Some((d, r))) = (&args.tool, &decision) {
            print_line(&format!("{tool}: {d}{}", r.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()));
        }
    }
    Ok(match decision {
        Some((d, _)) if d == "deny" => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}
