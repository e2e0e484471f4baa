//! Name validation for everything that becomes part of a tool name or a file
//! name: backend server names, tool names, role names, skill ids.
//!
//! Names are ASCII on purpose. A name that only looks like another one (a
//! fullwidth `ｆｉｌｅｓｙｓｔｅｍ`, a Cyrillic `а`, a NUL byte that a C string would
//! cut at) is an attack on pattern matching, so it is refused with an error
//! that says what is wrong instead of being matched or normalised.

use unicode_normalization::UnicodeNormalization;

/// The longest name accepted, in bytes (all names are ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// The separator between a server name and a tool name: `server__tool`.
pub const SEPARATOR: &str = "__";

/// Server names the gateway keeps for itself: its own tools (`troupe__…`) and
/// the engines' built-in tools (`builtin__…`).
pub const RESERVED_SERVERS: [&str; 2] = ["troupe", "builtin"];

/// Tools the gateway serves without a server prefix.
pub const GATEWAY_TOOLS: [&str; 1] = ["set_role"];

/// What kind of name is checked, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A backend MCP server name (the part before `__`).
    Server,
    /// A tool name as a backend lists it (the part after `__`).
    Tool,
    /// A role id.
    Role,
    /// A skill id.
    Skill,
}

impl NameKind {
    fn as_str(self) -> &'static str {
        match self {
            NameKind::Server => "server name",
            NameKind::Tool => "tool name",
            NameKind::Role => "role name",
            NameKind::Skill => "skill id",
        }
    }
}

/// A name that was refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {} {:?}: {problem}", kind.as_str(), name)]
pub struct NameError {
    /// What kind of name it was.
    pub kind: NameKind,
    /// The name as given (shown with escapes, so control characters are visible).
    pub name: String,
    /// What is wrong with it.
    pub problem: String,
}

fn refuse(kind: NameKind, name: &str, problem: impl Into<String>) -> NameError {
    NameError { kind, name: name.to_string(), problem: problem.into() }
}

/// Checks that hold for every kind of name.
fn check_common(kind: NameKind, name: &str) -> Result<(), NameError> {
    check_chars(kind, name)?;
    if name.len() > MAX_NAME_LEN {
        return Err(refuse(kind, name, format!("it is {} characters long; the limit is {MAX_NAME_LEN}", name.len())));
    }
    Ok(())
}

/// Everything but the length: a full `server__tool` name may be up to two limits long.
fn check_chars(kind: NameKind, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(refuse(kind, name, "it is empty"));
    }
    if name.chars().any(|c| c.is_control()) {
        return Err(refuse(kind, name, "it contains a control or NUL character"));
    }
    // ASCII is its own NFKC form: skip the normalisation on the hot path.
    if name.is_ascii() {
        return Ok(());
    }
    let normalised: String = name.nfkc().collect();
    if normalised != name {
        return Err(refuse(
            kind,
            name,
            format!("it changes under NFKC normalisation (to {normalised:?}), so it could pass for another name"),
        ));
    }
    if !name.is_ascii() {
        return Err(refuse(kind, name, "it contains non-ASCII characters; names are ASCII"));
    }
    Ok(())
}

fn check_charset(kind: NameKind, name: &str, extra: &[char]) -> Result<(), NameError> {
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || extra.contains(c))) {
        let allowed: String = extra.iter().map(|c| format!(" '{c}'")).collect();
        return Err(refuse(kind, name, format!("{bad:?} is not allowed; use letters, digits and{allowed}")));
    }
    Ok(())
}

/// A backend server name: ASCII letters, digits, `-` and `_`, no `__`, no
/// leading or trailing `_`, at most 64 characters, not a reserved name.
pub fn validate_server_name(name: &str) -> Result<(), NameError> {
    let kind = NameKind::Server;
    check_common(kind, name)?;
    check_charset(kind, name, &['-', '_'])?;
    if name.contains(SEPARATOR) {
        return Err(refuse(kind, name, "it contains \"__\", the separator between server and tool names"));
    }
    if name.starts_with('_') || name.ends_with('_') {
        return Err(refuse(kind, name, "it starts or ends with '_', which would blur the \"__\" separator"));
    }
    if RESERVED_SERVERS.contains(&name) || GATEWAY_TOOLS.contains(&name) {
        return Err(refuse(kind, name, "it collides with the gateway's own tools; rename the server"));
    }
    Ok(())
}

/// A tool name as a backend lists it: ASCII letters, digits, `_`, `-`, `.`,
/// at most 64 characters.
pub fn validate_tool_name(name: &str) -> Result<(), NameError> {
    check_common(NameKind::Tool, name)?;
    check_charset(NameKind::Tool, name, &['_', '-', '.'])
}

/// A role id: ASCII letters, digits, `-`, `_`, `.`, at most 64 characters.
/// Role ids become file names (`memory/<role>.memory.md`), so `.` alone or a
/// leading `.` is refused too.
pub fn validate_role_name(name: &str) -> Result<(), NameError> {
    check_common(NameKind::Role, name)?;
    check_charset(NameKind::Role, name, &['-', '_', '.'])?;
    if name.starts_with('.') {
        return Err(refuse(NameKind::Role, name, "it starts with '.'"));
    }
    Ok(())
}

/// A skill id: the same rules as a role id (it is a folder name).
pub fn validate_skill_id(name: &str) -> Result<(), NameError> {
    check_common(NameKind::Skill, name)?;
    check_charset(NameKind::Skill, name, &['-', '_', '.'])?;
    if name.starts_with('.') {
        return Err(refuse(NameKind::Skill, name, "it starts with '.'"));
    }
    Ok(())
}

/// Splits a full tool name `server__tool` at the first `__`. Server names never
/// contain `__`, so the split is unambiguous. `None` for names without a
/// separator (gateway tools such as `set_role`, or garbage).
pub fn split_tool_name(full: &str) -> Option<(&str, &str)> {
    full.split_once(SEPARATOR)
}

/// The full name the gateway exposes for `tool` of `server`.
pub fn full_tool_name(server: &str, tool: &str) -> String {
    format!("{server}{SEPARATOR}{tool}")
}

/// Validates a full name as a client sent it: a gateway tool, or a valid
/// server name, `__`, and a valid tool name.
pub fn validate_full_tool_name(full: &str) -> Result<(), NameError> {
    if GATEWAY_TOOLS.contains(&full) {
        return Ok(());
    }
    check_chars(NameKind::Tool, full)?;
    let Some((server, tool)) = split_tool_name(full) else {
        return Err(refuse(NameKind::Tool, full, "it has no \"__\" between a server name and a tool name"));
    };
    if !RESERVED_SERVERS.contains(&server) {
        validate_server_name(server)?;
    }
    validate_tool_name(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_server_names() {
        for name in ["filesystem", "everything", "git-2", "my_server", "a"] {
            validate_server_name(name).unwrap();
        }
    }

    #[test]
    fn bad_server_names_say_why() {
        let cases = [
            ("file__system", "\"__\""),
            ("_fs", "starts or ends"),
            ("fs_", "starts or ends"),
            ("ｆｓ", "NFKC"),
            ("fsé", "non-ASCII"),
            ("fs\0x", "control or NUL"),
            ("fs\u{7}", "control"),
            (&"x".repeat(65), "limit is 64"),
            ("troupe", "collides"),
            ("builtin", "collides"),
            ("set_role", "collides"),
            ("fs.x", "not allowed"),
            ("", "empty"),
        ];
        for (name, needle) in cases {
            let err = validate_server_name(name).unwrap_err();
            assert!(err.to_string().contains(needle), "{name:?}: {err}");
        }
    }

    #[test]
    fn homoglyphs_are_refused() {
        // Cyrillic 'а' (U+0430) survives NFKC but is not ASCII.
        let err = validate_tool_name("re\u{430}d_file").unwrap_err();
        assert!(err.to_string().contains("non-ASCII"), "{err}");
        // The fi ligature changes under NFKC.
        let err = validate_tool_name("\u{fb01}le").unwrap_err();
        assert!(err.to_string().contains("NFKC"), "{err}");
    }

    #[test]
    fn role_names() {
        validate_role_name("task-generator").unwrap();
        validate_role_name("admin").unwrap();
        for bad in ["admin; DROP TABLE users", "../etc", ".hidden", "a b", "r\0le"] {
            assert!(validate_role_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn full_names() {
        validate_full_tool_name("filesystem__read_file").unwrap();
        validate_full_tool_name("troupe__board_list").unwrap();
        validate_full_tool_name("set_role").unwrap();
        for bad in
            ["read_file", "query\u{0}drop", "filesystem__read\u{0}file", "ｆｓ__read", "__read", "fs_____x\u{202e}"]
        {
            assert!(validate_full_tool_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(split_tool_name("fs__a__b"), Some(("fs", "a__b")));
    }
}
