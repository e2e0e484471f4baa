//! Risk of a tool call in adhoc mode (seed 004's `DANGEROUS_TOOL_CATEGORIES`
//! and risk levels), pure: the engines' built-in tools through their
//! capability, backend tools (`server__tool`) through patterns per category,
//! and a shell command through the destructive commands it contains.

use serde::{Deserialize, Serialize};

use super::builtin::{Capability, builtin_capability};
use super::pattern::ToolPattern;

/// How dangerous a call is, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reading, listing, asking.
    Low,
    /// Changing files, reaching the network.
    Medium,
    /// Running commands, changing databases.
    High,
    /// A command that destroys (`rm -rf`, a forced push, `DROP TABLE`, ...).
    Critical,
}

impl Risk {
    /// Its name in config and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

impl std::str::FromStr for Risk {
    type Err = String;
    fn from_str(s: &str) -> Result<Risk, String> {
        [Risk::Low, Risk::Medium, Risk::High, Risk::Critical]
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown risk level '{s}' (low, medium, high or critical)"))
    }
}

/// The seed's dangerous categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Category {
    /// Writing or deleting files.
    #[serde(rename = "FILE_WRITE")]
    FileWrite,
    /// Running commands.
    #[serde(rename = "SHELL_EXEC")]
    ShellExec,
    /// Reaching the network.
    #[serde(rename = "NETWORK")]
    Network,
    /// Changing a database.
    #[serde(rename = "DATABASE")]
    Database,
}

impl Category {
    /// The seed's name (`FILE_WRITE`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::FileWrite => "FILE_WRITE",
            Category::ShellExec => "SHELL_EXEC",
            Category::Network => "NETWORK",
            Category::Database => "DATABASE",
        }
    }

    /// The risk of a call in this category that is not critical.
    pub fn risk(self) -> Risk {
        match self {
            Category::FileWrite | Category::Network => Risk::Medium,
            Category::ShellExec | Category::Database => Risk::High,
        }
    }
}

/// Which backend tools fall in each category, and which commands are critical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RiskRules {
    /// Backend tool patterns (`server__tool`, `server__*`) per category.
    pub categories: Vec<(Category, Vec<ToolPattern>)>,
    /// Text that makes a shell command critical.
    pub critical_commands: Vec<String>,
}

/// The seed's `DANGEROUS_TOOL_CATEGORIES`.
pub const DEFAULT_CATEGORIES: [(Category, &[&str]); 4] = [
    (
        Category::FileWrite,
        &["filesystem__write_file", "filesystem__delete_file", "filesystem__edit_file", "filesystem__move_file"],
    ),
    (Category::ShellExec, &["shell__exec", "bash__run", "sandbox__exec"]),
    (Category::Network, &["http__request", "fetch__url"]),
    (Category::Database, &["postgres__execute", "database__write"]),
];

/// Commands that destroy what cannot be rebuilt: critical in any shell call.
pub const DEFAULT_CRITICAL: &[&str] = &[
    "rm -rf",
    "rm -fr",
    "rm -r ",
    "git push --force",
    "git push -f",
    "git reset --hard",
    "mkfs",
    "dd if=",
    "drop table",
    "drop database",
    "truncate table",
    "chmod -r 777",
];

impl Default for RiskRules {
    fn default() -> Self {
        RiskRules {
            categories: DEFAULT_CATEGORIES
                .iter()
                .map(|(c, pats)| (*c, pats.iter().filter_map(|p| ToolPattern::parse(p).ok()).collect()))
                .collect(),
            critical_commands: DEFAULT_CRITICAL.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// What a call was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Assessment {
    /// How dangerous.
    pub risk: Risk,
    /// Its dangerous category, if any.
    pub category: Option<Category>,
}

impl RiskRules {
    /// The risk of calling `tool` (an engine's built-in tool name, or
    /// `mcp__<server>__<tool>` / `server__tool` for a backend tool) with shell
    /// command `command` when it runs one.
    pub fn classify(&self, tool: &str, command: Option<&str>) -> Assessment {
        let backend = tool.strip_prefix("mcp__").unwrap_or(tool);
        let category = if backend.contains("__") {
            self.categories.iter().find(|(_, pats)| pats.iter().any(|p| p.matches(backend))).map(|(c, _)| *c)
        } else {
            match builtin_capability(tool) {
                Capability::Write => Some(Category::FileWrite),
                Capability::Shell => Some(Category::ShellExec),
                Capability::Web => Some(Category::Network),
                _ => None,
            }
        };
        let critical = command.is_some_and(|c| {
            let c = c.to_ascii_lowercase();
            self.critical_commands.iter().any(|k| c.contains(&k.to_ascii_lowercase()))
        });
        let risk = if critical { Risk::Critical } else { category.map_or(Risk::Low, Category::risk) };
        Assessment { risk, category: category.or(critical.then_some(Category::ShellExec)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_and_backend_tools_and_commands() {
        let r = RiskRules::default();
        let check = |tool: &str, cmd: Option<&str>| {
            let a = r.classify(tool, cmd);
            (a.risk, a.category)
        };
        assert_eq!(check("Read", None), (Risk::Low, None));
        assert_eq!(check("Write", None), (Risk::Medium, Some(Category::FileWrite)));
        assert_eq!(check("run_shell_command", Some("ls")), (Risk::High, Some(Category::ShellExec)));
        assert_eq!(check("Bash", Some("rm -rf build")), (Risk::Critical, Some(Category::ShellExec)));
        assert_eq!(check("exec_command", Some("git push --force origin")), (Risk::Critical, Some(Category::ShellExec)));
        assert_eq!(check("WebFetch", None), (Risk::Medium, Some(Category::Network)));
        assert_eq!(check("mcp__postgres__execute", None), (Risk::High, Some(Category::Database)));
        assert_eq!(check("filesystem__write_file", None), (Risk::Medium, Some(Category::FileWrite)));
        assert_eq!(check("mcp__fs__read_file", None), (Risk::Low, None));
        assert!(Risk::High < Risk::Critical && "high".parse::<Risk>() == Ok(Risk::High));
        assert!("severe".parse::<Risk>().is_err());
    }
}
