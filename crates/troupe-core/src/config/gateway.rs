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

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn the_readme_example_parses() {
        let c = Config::from_toml(
            "[mcp.servers.filesystem]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]\n\n\
             [gateway]\ncall_timeout_seconds = 120\nconnect_timeout_seconds = 30\naudit_argument_values = false\n\n\
             [gateway.roles.senior]\ninherits = \"builder\"\n\n\
             [gateway.rate_limits.builder]\nper_minute = 60\nper_hour = 1000\nconcurrent = 4\n\
             per_tool_per_minute = { \"filesystem__write_file\" = 10 }\n",
        )
        .unwrap();
        assert_eq!(c.gateway.roles["senior"].inherits.as_deref(), Some("builder"));
        assert_eq!(c.gateway.rate_limits["builder"].per_tool_per_minute["filesystem__write_file"], 10);
        assert_eq!(c.mcp.servers["filesystem"].args.len(), 3);
    }

    #[test]
    fn unknown_gateway_keys_are_errors() {
        let err = Config::from_toml("[gateway.roles.x]\ninherit = \"y\"\n").unwrap_err();
        assert!(err.message.contains("inherit"), "{err}");
    }
}
