//! `[mcp]` backends and `[gateway]` policy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::rbac::policy::RoleSettings;

/// `[mcp]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// `[mcp.servers.<name>]`: backend MCP servers, by name.
    pub servers: BTreeMap<String, McpServer>,
}

/// One backend MCP server, started over stdio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The executable.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// `[gateway]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// `[gateway.rate_limits.<role>]`: limits per role, counted per identity.
    pub rate_limits: BTreeMap<String, RateLimit>,
    /// Record argument values in the audit log, not only their shape.
    pub audit_argument_values: bool,
    /// `[gateway.roles.<role>]`: inheritance and descriptions of roles.
    pub roles: BTreeMap<String, RoleSettings>,
    /// Seconds a backend may take to start and answer its handshake.
    pub connect_timeout_seconds: u64,
    /// Seconds a backend may take to answer one call before it counts as hung.
    pub call_timeout_seconds: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            rate_limits: BTreeMap::new(),
            audit_argument_values: false,
            roles: BTreeMap::new(),
            connect_timeout_seconds: 30,
            call_timeout_seconds: 120,
        }
    }
}

/// Call limits for one role.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimit {
    /// Calls per minute.
    pub per_minute: Option<u32>,
    /// Calls per hour.
    pub per_hour: Option<u32>,
    /// Calls in flight at once.
    pub concurrent: Option<u32>,
    /// Calls per minute for single tools, by tool name.
    pub per_tool_per_minute: BTreeMap<String, u32>,
}
