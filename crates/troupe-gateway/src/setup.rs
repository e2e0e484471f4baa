//! Loading what the gateway serves from a project: skills from
//! `.troupe/skills/*/SKILL.md`, role settings and rate limits from
//! `.troupe/config.toml`, backends from `[mcp.servers]` and `.mcp.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use troupe_core::config::{GatewayConfig, McpServer};
use troupe_core::layout::Layout;
use troupe_core::rbac::names;
use troupe_core::rbac::policy::{Policy, PolicyError};
use troupe_core::rbac::skill::{Skill, SkillError};

/// Why a project's gateway setup could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `.troupe/config.toml` is invalid.
    #[error("{}: {message}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A SKILL.md is invalid.
    #[error("{}: {source}", path.display())]
    Skill {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: SkillError,
    },
    /// The skills do not form a policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A backend server has an invalid name.
    #[error("{}: {source}", path.display())]
    ServerName {
        /// The file naming it.
        path: PathBuf,
        /// What is wrong.
        source: names::NameError,
    },
}

/// Everything the gateway needs from a project.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The project layout.
    pub layout: Layout,
    /// The role policy.
    pub policy: Policy,
    /// Where each skill came from, by id.
    pub skill_files: BTreeMap<String, PathBuf>,
    /// Backend servers by name, validated.
    pub servers: BTreeMap<String, McpServer>,
    /// Where each backend was configured.
    pub server_sources: BTreeMap<String, PathBuf>,
    /// `[gateway]` settings.
    pub gateway: GatewayConfig,
    /// `[store] lease_seconds`: how long each call's heartbeat keeps its
    /// agent's lease (see troupe-store's `lease`).
    pub lease: std::time::Duration,
    /// The budgets of gateway calls (`max_gateway_calls` of `[budgets]`).
    pub call_budgets: crate::ratelimit::CallBudgets,
    /// Things worth telling the operator (shadowed servers, policy warnings).
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct McpJson {
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpJsonServer>,
}

#[derive(Deserialize)]
struct McpJsonServer {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

fn read(path: &Path) -> Result<Option<String>, SetupError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SetupError::Io { path: path.to_path_buf(), source }),
    }
}

/// Reads every `skills/<dir>/SKILL.md` under `skills_dir`, sorted by folder.
pub fn load_skills(skills_dir: &Path) -> Result<Vec<(PathBuf, Skill)>, SetupError> {
    let entries = match std::fs::read_dir(skills_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SetupError::Io { path: skills_dir.to_path_buf(), source }),
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let mut skills = Vec::new();
    for dir in dirs {
        let path = dir.join("SKILL.md");
        let Some(text) = read(&path)? else { continue };
        let skill = Skill::parse(&text).map_err(|source| SetupError::Skill { path: path.clone(), source })?;
        skills.push((path, skill));
    }
    Ok(skills)
}

impl Setup {
    /// Loads the gateway setup of the project at `layout`.
    pub fn load(layout: &Layout) -> Result<Setup, SetupError> {
        let config_path = layout.config_file();
        let config = troupe_project::config::load(layout)
            .map_err(|e| SetupError::Config { path: config_path.clone(), message: e.detail() })?;
        let skills = load_skills(&layout.skills_dir())?;
        let skill_files = skills.iter().map(|(p, s)| (s.id.clone(), p.clone())).collect();
        let policy = Policy::build(skills.into_iter().map(|(_, s)| s).collect(), &config.gateway.roles)?;
        let mut warnings: Vec<String> = policy.warnings().to_vec();

        let mut servers = BTreeMap::new();
        let mut server_sources = BTreeMap::new();
        for (name, server) in &config.mcp.servers {
            names::validate_server_name(name)
                .map_err(|source| SetupError::ServerName { path: config_path.clone(), source })?;
            servers.insert(name.clone(), server.clone());
            server_sources.insert(name.clone(), config_path.clone());
        }
        let mcp_json = layout.root().join(".mcp.json");
        if let Some(text) = read(&mcp_json)? {
            let parsed: McpJson = serde_json::from_str(&text)
                .map_err(|e| SetupError::Config { path: mcp_json.clone(), message: e.to_string() })?;
            for (name, s) in parsed.mcp_servers {
                names::validate_server_name(&name)
                    .map_err(|source| SetupError::ServerName { path: mcp_json.clone(), source })?;
                if servers.contains_key(&name) {
                    warnings.push(format!(
                        "server {name:?} of .mcp.json is shadowed by [mcp.servers.{name}] in config.toml"
                    ));
                    continue;
                }
                servers.insert(name.clone(), McpServer { command: s.command, args: s.args, env: s.env });
                server_sources.insert(name, mcp_json.clone());
            }
        }
        Ok(Setup {
            layout: layout.clone(),
            policy,
            skill_files,
            servers,
            server_sources,
            gateway: config.gateway,
            lease: config.store.lease(),
            call_budgets: crate::ratelimit::CallBudgets::from_config(&config.budgets),
            warnings,
        })
    }
}
