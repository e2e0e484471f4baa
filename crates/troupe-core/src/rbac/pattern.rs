//! Tool patterns as skills write them: `server__tool`, `server__*`, `*`.
//!
//! Nothing else is a pattern. A general glob (`file*`, `*delete*`) would let a
//! backend widen a role's reach just by naming a new tool cleverly, so only a
//! whole server or one exact tool can be named.

use std::fmt;

use super::names::{self, NameError, NameKind, RESERVED_SERVERS, SEPARATOR};

/// One compiled tool pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolPattern {
    /// `*`: every tool of every server.
    All,
    /// `server__*`: every tool of one server.
    Server(String),
    /// `server__tool`: one tool.
    Exact(String),
}

/// A pattern that could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern has no `__` separator.
    #[error("invalid tool pattern {0:?}: write `server__tool`, `server__*` or `*`")]
    NoSeparator(String),
    /// A `*` somewhere other than the whole pattern or the whole tool part.
    #[error(
        "invalid tool pattern {0:?}: `*` may only stand for a whole server's tools (`server__*`) or everything (`*`)"
    )]
    Wildcard(String),
    /// A part of the pattern is not a valid name.
    #[error("invalid tool pattern {pattern:?}: {source}")]
    Name {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with the name in it.
        source: NameError,
    },
}

impl ToolPattern {
    /// Compiles one pattern.
    pub fn parse(text: &str) -> Result<ToolPattern, PatternError> {
        if text == "*" {
            return Ok(ToolPattern::All);
        }
        let Some((server, tool)) = names::split_tool_name(text) else {
            return Err(PatternError::NoSeparator(text.to_string()));
        };
        let named = |source| PatternError::Name { pattern: text.to_string(), source };
        if !RESERVED_SERVERS.contains(&server) {
            names::validate_server_name(server).map_err(named)?;
        } else {
            // Reserved names are valid prefixes; still refuse anything odd in them.
            names::validate_tool_name(server).map_err(|e| named(NameError { kind: NameKind::Server, ..e }))?;
        }
        if tool == "*" {
            return Ok(ToolPattern::Server(server.to_string()));
        }
        if tool.contains('*') {
            return Err(PatternError::Wildcard(text.to_string()));
        }
        names::validate_tool_name(tool).map_err(named)?;
        Ok(ToolPattern::Exact(text.to_string()))
    }

    /// True when this pattern covers the full tool name `full` (`server__tool`).
    pub fn matches(&self, full: &str) -> bool {
        match self {
            ToolPattern::All => true,
            ToolPattern::Exact(name) => name == full,
            ToolPattern::Server(server) => {
                full.len() > server.len() + SEPARATOR.len()
                    && full.starts_with(server.as_str())
                    && full[server.len()..].starts_with(SEPARATOR)
            }
        }
    }

    /// The server this pattern names, `None` for `*`.
    pub fn server(&self) -> Option<&str> {
        match self {
            ToolPattern::All => None,
            ToolPattern::Server(server) => Some(server),
            ToolPattern::Exact(name) => names::split_tool_name(name).map(|(s, _)| s),
        }
    }
}

impl serde::Serialize for ToolPattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for ToolPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolPattern::All => f.write_str("*"),
            ToolPattern::Server(server) => write!(f, "{server}{SEPARATOR}*"),
            ToolPattern::Exact(name) => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> ToolPattern {
        ToolPattern::parse(text).unwrap()
    }

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(p("*"), ToolPattern::All);
        assert_eq!(p("filesystem__*"), ToolPattern::Server("filesystem".into()));
        assert_eq!(p("filesystem__read_file"), ToolPattern::Exact("filesystem__read_file".into()));
        assert_eq!(p("builtin__write"), ToolPattern::Exact("builtin__write".into()));
        assert_eq!(p("troupe__*").to_string(), "troupe__*");
    }

    #[test]
    fn refuses_other_globs_and_bad_names() {
        for bad in ["file*", "fs__read*", "fs__*_delete", "read_file", "f__s__*x", "ｆｓ__*", "fs__a\u{0}b", "_fs__x"]
        {
            assert!(ToolPattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn matching_is_exact() {
        let read = p("filesystem__read_file");
        assert!(read.matches("filesystem__read_file"));
        for other in [
            "filesystem__read_file_and_delete",
            "filesystem__READ_FILE",
            "filesystem__read_fil",
            "xfilesystem__read_file",
        ] {
            assert!(!read.matches(other), "{other}");
        }
        let server = p("filesystem__*");
        assert!(server.matches("filesystem__write_file"));
        for other in ["filesystem2__x", "filesystem__", "filesystem_x", "database__query", "filesystem"] {
            assert!(!server.matches(other), "{other}");
        }
    }
}
