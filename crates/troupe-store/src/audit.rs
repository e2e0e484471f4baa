//! The gateway's audit log: one record per tool call it decided on. Append-only:
//! the database refuses to change or delete a record.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What the gateway decided about a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call was forwarded.
    Allowed,
    /// The role may not call the tool.
    Denied,
    /// The caller exceeded its rate limit.
    RateLimited,
}

impl Decision {
    /// The name used in the database and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::RateLimited => "rate_limited",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision name that is not `allowed`, `denied` or `rate_limited`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit decision `{0}` (expected allowed, denied or rate_limited)")]
pub struct UnknownDecision(pub String);

impl FromStr for Decision {
    type Err = UnknownDecision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allowed" => Ok(Decision::Allowed),
            "denied" => Ok(Decision::Denied),
            "rate_limited" => Ok(Decision::RateLimited),
            other => Err(UnknownDecision(other.to_string())),
        }
    }
}

/// One audited tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Increasing id.
    pub id: i64,
    /// When the call was decided.
    pub at: Timestamp,
    /// The calling agent.
    pub agent: String,
    /// The role it had at the time.
    pub role: String,
    /// The tool it called.
    pub tool: String,
    /// What the gateway decided.
    pub decision: Decision,
    /// Why (the policy rule, the limit), when there is more to say.
    pub reason: Option<String>,
    /// How long the call took, when it was forwarded.
    pub duration_ms: Option<u64>,
    /// The shape of the arguments (keys and types, never values), as JSON.
    pub argument_shape: serde_json::Value,
    /// The thinking signature of the model turn that made the call, as JSON.
    pub thinking_signature: Option<serde_json::Value>,
}

/// What is needed to append an audit record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditRecord {
    /// The calling agent.
    pub agent: String,
    /// The role it had.
    pub role: String,
    /// The tool it called.
    pub tool: String,
    /// What the gateway decided.
    pub decision: Decision,
    /// Why.
    pub reason: Option<String>,
    /// How long the call took.
    pub duration_ms: Option<u64>,
    /// The shape of the arguments.
    pub argument_shape: serde_json::Value,
    /// The thinking signature.
    pub thinking_signature: Option<serde_json::Value>,
}

/// Which audit records a query returns, newest first. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only calls by this agent.
    pub agent: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only this decision.
    pub decision: Option<Decision>,
    /// Only records at or after this time.
    pub since: Option<Timestamp>,
    /// At most this many records (all when `None`).
    pub limit: Option<u32>,
}
