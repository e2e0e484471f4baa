//! The agent card: who troupe is, where its two bindings answer, what it can
//! do (one skill per thing a client can ask of the team), and the metadata
//! keys of its `x-troupe-` extension.

use std::collections::HashMap;

use a2a::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill, HttpAuthSecurityScheme, SecurityScheme,
    TRANSPORT_PROTOCOL_HTTP_JSON, TRANSPORT_PROTOCOL_JSONRPC,
};
use serde_json::json;

use super::skills::keys;
use troupe_store::Agent;

use super::{JSONRPC_PATH, REST_PATH};

/// The URI of troupe's extension: the `x-troupe-*` metadata keys a message
/// uses to choose a skill and give its arguments (seed 003 §6.3's `x-` prefix).
pub const EXTENSION_URI: &str = "urn:x-troupe:a2a:v1";

/// The skills, by id: what a message's `x-troupe-skill` names.
pub const SKILLS: [&str; 3] = [RUN_FEATURE, POST_TASK, MESSAGE_TEAMMATE];
/// Run a feature: `troupe run` with the real Lead.
pub const RUN_FEATURE: &str = "run-feature";
/// Put a task on the board.
pub const POST_TASK: &str = "post-task";
/// Write to a teammate's mailbox.
pub const MESSAGE_TEAMMATE: &str = "message-teammate";

const MODES: [&str; 2] = ["text/plain", "application/json"];
const BEARER: &str = "bearer";

/// The card, with interface URLs on `host`. The extended card (GetExtendedAgentCard,
/// authenticated) adds the team as it is now: its registered `agents`.
pub fn card(authenticated: bool, host: &str, agents: Option<Vec<Agent>>) -> AgentCard {
    let modes = || MODES.iter().map(|m| m.to_string()).collect::<Vec<_>>();
    let mut params = HashMap::from([(
        "metadata".to_string(),
        json!({
            keys::SKILL: format!("the skill: {}", SKILLS.join(", ")),
            keys::FEATURE: "run-feature: the feature (its spec folder's name); post-task: the feature the task belongs to",
            keys::ENGINE: "run-feature: run every teammate on this engine",
            keys::AGENT: "message-teammate: the teammate's agent id",
            keys::PLAN_MODE: "message-teammate: true asks for a plan first; the task is INPUT_REQUIRED until a follow-up message approves or rejects it",
            keys::DECISION: "a follow-up to a plan: approve or reject (the text is the reason)",
            keys::BLOCKED_BY: "post-task: ids of board tasks that must be completed first",
        }),
    )]);
    if let Some(agents) = agents {
        let agents: Vec<_> = agents
            .into_iter()
            .map(|a| json!({"id": a.id, "role": a.role, "feature": a.feature, "status": a.status.to_string()}))
            .collect();
        params.insert("agents".to_string(), json!(agents));
    }
    let (security_schemes, security_requirements) = if authenticated {
        let scheme = SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
            scheme: "Bearer".into(),
            description: Some(
                "TROUPE_TOKEN, or the token `troupe serve` generated into .troupe/state/server.token".into(),
            ),
            bearer_format: None,
        });
        (Some(HashMap::from([(BEARER.to_string(), scheme)])), Some(vec![HashMap::from([(BEARER.to_string(), vec![])])]))
    } else {
        (None, None)
    };
    AgentCard {
        name: "troupe".into(),
        description: "A team of AI coding agents run by troupe's Lead: spec-driven development with phase gates, \
                      ownership and quality gates enforced by program."
            .into(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![
            AgentInterface::new(format!("http://{host}{JSONRPC_PATH}"), TRANSPORT_PROTOCOL_JSONRPC),
            AgentInterface::new(format!("http://{host}{REST_PATH}"), TRANSPORT_PROTOCOL_HTTP_JSON),
        ],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: Some(vec![AgentExtension {
                uri: EXTENSION_URI.into(),
                description: Some("troupe's message metadata: which skill, and its arguments".into()),
                required: Some(false),
                params: Some(params),
            }]),
            extended_agent_card: Some(authenticated),
        },
        default_input_modes: modes(),
        default_output_modes: modes(),
        skills: skills(),
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes,
        security_requirements,
        signatures: None,
    }
}

fn skills() -> Vec<AgentSkill> {
    let skill = |id: &str, name: &str, description: &str, tags: &[&str], example: String| AgentSkill {
        id: id.into(),
        name: name.into(),
        description: description.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        examples: Some(vec![example]),
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    };
    vec![
        skill(
            RUN_FEATURE,
            "Run a feature",
            "Runs `troupe run <feature>`: design, plan, build and review by the team under the Lead. The task is \
             WORKING with a status update per stage, has artifacts for design.md, the plan and the commits, and ends \
             COMPLETED, or FAILED with the escalation. CancelTask stops the run gracefully.",
            &["run", "feature", "lead"],
            format!(
                "text: what the feature is for; metadata {{\"{}\": \"{RUN_FEATURE}\", \"{}\": \"login\"}}",
                keys::SKILL,
                keys::FEATURE
            ),
        ),
        skill(
            POST_TASK,
            "Post a task to the board",
            "Creates a task on the shared board (first line: subject, the rest: description). The A2A task follows \
             it: pending SUBMITTED, in progress WORKING, completed COMPLETED; a task the board refuses is REJECTED.",
            &["board", "task"],
            format!("text: \"Write the migration guide\"; metadata {{\"{}\": \"{POST_TASK}\"}}", keys::SKILL),
        ),
        skill(
            MESSAGE_TEAMMATE,
            "Message a teammate",
            "Writes to a teammate's mailbox and completes with its reply. With plan mode the teammate submits a plan \
             first: the task is INPUT_REQUIRED with the plan as an artifact until a follow-up message approves or \
             rejects it.",
            &["message", "teammate", "plan"],
            format!(
                "text: \"Add tests for the parser\"; metadata {{\"{}\": \"{MESSAGE_TEAMMATE}\", \"{}\": \"builder-2\", \"{}\": true}}",
                keys::SKILL,
                keys::AGENT,
                keys::PLAN_MODE
            ),
        ),
    ]
}
