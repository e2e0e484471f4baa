//! Ecosystems and their version files, as text in and text out (no IO).
//!
//! Edits are surgical: only the version string changes, so comments,
//! formatting and key order of the user's manifest survive a release.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// Which part of the version goes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// `1.2.3` → `1.2.4`
    Patch,
    /// `1.2.3` → `1.3.0`
    Minor,
    /// `1.2.3` → `2.0.0`
    Major,
}

impl FromStr for Level {
    type Err = ReleaseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "patch" => Ok(Level::Patch),
            "minor" => Ok(Level::Minor),
            "major" => Ok(Level::Major),
            other => Err(ReleaseError::BadLevel(other.to_string())),
        }
    }
}

/// The project kinds of seed 000 Spec 14.10, detected in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Ecosystem {
    /// `pyproject.toml`: `[project] version` (or `[tool.poetry] version`).
    Python,
    /// `package.json`: `"version"` (TypeScript when `tsconfig.json` exists).
    TypeScript,
    /// `package.json` without `tsconfig.json`.
    JavaScript,
    /// `Cargo.toml`: `[package] version` or `[workspace.package] version`.
    Rust,
    /// A `VERSION` file holding just the version (the SDD framework's own layout).
    #[serde(rename = "SDD Framework")]
    SddFramework,
    /// None of the above: the version lives only in git tags.
    Other,
}

impl Ecosystem {
    /// Detect from which files exist at the project root.
    pub fn detect(exists: impl Fn(&str) -> bool) -> Ecosystem {
        if exists("pyproject.toml") {
            Ecosystem::Python
        } else if exists("package.json") {
            if exists("tsconfig.json") { Ecosystem::TypeScript } else { Ecosystem::JavaScript }
        } else if exists("Cargo.toml") {
            Ecosystem::Rust
        } else if exists("VERSION") {
            Ecosystem::SddFramework
        } else {
            Ecosystem::Other
        }
    }

    /// The file holding the version, if the ecosystem has one.
    pub fn version_file(self) -> Option<&'static str> {
        match self {
            Ecosystem::Python => Some("pyproject.toml"),
            Ecosystem::TypeScript | Ecosystem::JavaScript => Some("package.json"),
            Ecosystem::Rust => Some("Cargo.toml"),
            Ecosystem::SddFramework => Some("VERSION"),
            Ecosystem::Other => None,
        }
    }

    /// A lock file that records the project's own version too.
    pub fn lock_file(self) -> Option<&'static str> {
        match self {
            Ecosystem::TypeScript | Ecosystem::JavaScript => Some("package-lock.json"),
            Ecosystem::Rust => Some("Cargo.lock"),
            _ => None,
        }
    }

    /// The name shown to the user.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Python => "Python",
            Ecosystem::TypeScript => "TypeScript",
            Ecosystem::JavaScript => "JavaScript",
            Ecosystem::Rust => "Rust",
            Ecosystem::SddFramework => "SDD Framework",
            Ecosystem::Other => "Other",
        }
    }
}

impl fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a release cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// Not patch, minor or major.
    #[error("'{0}' is not a release level (expected patch, minor or major)")]
    BadLevel(String),
    /// The version is not `MAJOR.MINOR.PATCH`.
    #[error("version '{0}' is not MAJOR.MINOR.PATCH")]
    BadVersion(String),
    /// The version file has no version troupe can change.
    #[error("{file}: {problem}")]
    NoVersion {
        /// The file.
        file: String,
        /// What is missing.
        problem: String,
    },
}

/// Parse `MAJOR.MINOR.PATCH` (a leading `v` and a pre-release or build suffix are allowed).
fn parse(version: &str) -> Result<(u64, u64, u64), ReleaseError> {
    let bad = || ReleaseError::BadVersion(version.to_string());
    let core = version.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next().ok_or_else(bad)?;
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3 {
        return Err(bad());
    }
    let n = |s: &str| s.parse::<u64>().map_err(|_| bad());
    Ok((n(parts[0])?, n(parts[1])?, n(parts[2])?))
}

/// The next version at `level`. A pre-release suffix is dropped.
pub fn bump(version: &str, level: Level) -> Result<String, ReleaseError> {
    let (ma, mi, pa) = parse(version)?;
    Ok(match level {
        Level::Patch => format!("{ma}.{mi}.{}", pa + 1),
        Level::Minor => format!("{ma}.{}.0", mi + 1),
        Level::Major => format!("{}.0.0", ma + 1),
    })
}

/// A `key = "value"` line's value, if the line assigns `key`.
fn toml_string_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = &rest[1..];
    inner.find(quote).map(|end| &inner[..end])
}

/// The line index and value of `version = "..."` inside one of `tables`, the first table found winning.
fn toml_version(text: &str, tables: &[&str]) -> Option<(usize, String, String)> {
    let mut current = String::new();
    let mut found: Vec<(usize, String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            current = t.trim_start_matches('[').trim_end_matches(']').trim().to_string();
            continue;
        }
        if tables.contains(&current.as_str())
            && let Some(v) = toml_string_value(t, "version")
        {
            found.push((i, current.clone(), v.to_string()));
        }
    }
    tables.iter().find_map(|tbl| found.iter().find(|(_, t, _)| t == tbl).cloned())
}

fn replace_line(text: &str, index: usize, old: &str, new: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i == index {
            out.push_str(&line.replacen(old, new, 1));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Read the current version from the ecosystem's version file.
pub fn read_version(eco: Ecosystem, text: &str) -> Result<String, ReleaseError> {
    let file = eco.version_file().unwrap_or("(tags)").to_string();
    let missing = |problem: &str| ReleaseError::NoVersion { file: file.clone(), problem: problem.to_string() };
    let v = match eco {
        Ecosystem::Python => {
            if text.lines().any(|l| l.trim().starts_with("dynamic") && l.contains("\"version\"")) {
                return Err(missing("the version is dynamic; set it where your build backend reads it"));
            }
            toml_version(text, &["project", "tool.poetry"])
                .map(|x| x.2)
                .ok_or_else(|| missing("no version = \"...\" under [project] or [tool.poetry]"))?
        }
        Ecosystem::Rust => toml_version(text, &["package", "workspace.package"])
            .map(|x| x.2)
            .ok_or_else(|| missing("no version = \"...\" under [package] or [workspace.package]"))?,
        Ecosystem::TypeScript | Ecosystem::JavaScript => {
            let json: serde_json::Value =
                serde_json::from_str(text).map_err(|e| missing(&format!("not valid JSON ({e})")))?;
            json.get("version")
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .ok_or_else(|| missing("no top-level \"version\""))?
        }
        Ecosystem::SddFramework => text.trim().to_string(),
        Ecosystem::Other => return Err(missing("the version of an Other project comes from its tags")),
    };
    parse(&v)?;
    Ok(v)
}

/// The version file's text with the version replaced by `new`, everything else untouched.
pub fn write_version(eco: Ecosystem, text: &str, new: &str) -> Result<String, ReleaseError> {
    let old = read_version(eco, text)?;
    match eco {
        Ecosystem::Python | Ecosystem::Rust => {
            let tables: &[&str] =
                if eco == Ecosystem::Python { &["project", "tool.poetry"] } else { &["package", "workspace.package"] };
            let (i, _, _) = toml_version(text, tables).expect("read above");
            let line = text.lines().nth(i).unwrap_or_default();
            let q = if line.contains(&format!("\"{old}\"")) { '"' } else { '\'' };
            Ok(replace_line(text, i, &format!("{q}{old}{q}"), &format!("{q}{new}{q}")))
        }
        Ecosystem::TypeScript | Ecosystem::JavaScript => {
            // The first `"version"` key before any nested object opens is the top-level one.
            let key = text.find("\"version\"").expect("read above");
            let after = &text[key..];
            let value = after.find(&format!("\"{old}\"")).expect("read above");
            let at = key + value;
            let out = format!("{}\"{new}\"{}", &text[..at], &text[at + old.len() + 2..]);
            let check: serde_json::Value = serde_json::from_str(&out).map_err(|e| ReleaseError::NoVersion {
                file: "package.json".into(),
                problem: format!("the edit did not give valid JSON ({e})"),
            })?;
            if check.get("version").and_then(|v| v.as_str()) != Some(new) {
                return Err(ReleaseError::NoVersion {
                    file: "package.json".into(),
                    problem: "the first \"version\" key is not the top-level one; bump it by hand".into(),
                });
            }
            Ok(out)
        }
        Ecosystem::SddFramework => Ok(format!("{new}\n")),
        Ecosystem::Other => unreachable!("read_version refused Other"),
    }
}

/// `Cargo.lock`: the entries of local packages (no `source`) at `old` move to `new`.
pub fn bump_cargo_lock(text: &str, old: &str, new: &str) -> String {
    let blocks: Vec<&str> = text.split("\n[[package]]\n").collect();
    let mut out = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        let local = i > 0 && !block.lines().any(|l| l.starts_with("source = "));
        let old_line = format!("version = \"{old}\"");
        if local && block.lines().any(|l| l == old_line) {
            out.push(block.replacen(&old_line, &format!("version = \"{new}\""), 1));
        } else {
            out.push(block.to_string());
        }
    }
    out.join("\n[[package]]\n")
}

/// `package-lock.json`: the top-level version and the root package's (`packages[""]`).
pub fn bump_package_lock(text: &str, new: &str) -> Result<String, ReleaseError> {
    let mut json: serde_json::Value = serde_json::from_str(text).map_err(|e| ReleaseError::NoVersion {
        file: "package-lock.json".into(),
        problem: format!("not valid JSON ({e})"),
    })?;
    if let Some(v) = json.get_mut("version") {
        *v = serde_json::Value::String(new.to_string());
    }
    if let Some(v) = json.get_mut("packages").and_then(|p| p.get_mut("")).and_then(|r| r.get_mut("version")) {
        *v = serde_json::Value::String(new.to_string());
    }
    // npm writes JSON.stringify(lock, null, 2) plus a newline; serde_json's pretty form is the same.
    Ok(serde_json::to_string_pretty(&json).expect("a Value serializes") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bumps() {
        let cases = [
            ("1.2.3", Level::Patch, "1.2.4"),
            ("1.2.3", Level::Minor, "1.3.0"),
            ("1.2.3", Level::Major, "2.0.0"),
            ("v0.9.9", Level::Patch, "0.9.10"),
            ("1.0.0-rc.1", Level::Patch, "1.0.1"),
        ];
        for (v, l, want) in cases {
            assert_eq!(bump(v, l).unwrap(), want, "{v} {l:?}");
        }
        for bad in ["1.2", "x.y.z", "", "1.2.3.4"] {
            assert!(bump(bad, Level::Patch).is_err(), "{bad}");
        }
        assert!("huge".parse::<Level>().is_err());
    }

    #[test]
    fn detection_order() {
        let with = |files: &'static [&'static str]| move |f: &str| files.contains(&f);
        assert_eq!(Ecosystem::detect(with(&["pyproject.toml", "package.json"])), Ecosystem::Python);
        assert_eq!(Ecosystem::detect(with(&["package.json", "tsconfig.json"])), Ecosystem::TypeScript);
        assert_eq!(Ecosystem::detect(with(&["package.json"])), Ecosystem::JavaScript);
        assert_eq!(Ecosystem::detect(with(&["Cargo.toml", "VERSION"])), Ecosystem::Rust);
        assert_eq!(Ecosystem::detect(with(&["VERSION"])), Ecosystem::SddFramework);
        assert_eq!(Ecosystem::detect(with(&[])), Ecosystem::Other);
    }

    #[test]
    fn pyproject_edit_keeps_everything_else() {
        let text = "[build-system]\nrequires = [\"hatchling\"]\n\n[project]\nname = \"x\"  # the name\nversion = \"0.1.0\"  # bumped by release\n\n[tool.other]\nversion = \"9.9.9\"\n";
        assert_eq!(read_version(Ecosystem::Python, text).unwrap(), "0.1.0");
        let out = write_version(Ecosystem::Python, text, "0.2.0").unwrap();
        assert_eq!(out, text.replace("version = \"0.1.0\"", "version = \"0.2.0\""));
        let poetry = "[tool.poetry]\nversion = '1.0.0'\n";
        assert_eq!(write_version(Ecosystem::Python, poetry, "1.0.1").unwrap(), "[tool.poetry]\nversion = '1.0.1'\n");
        let dynamic = "[project]\nname = \"x\"\ndynamic = [\"version\"]\n";
        assert!(read_version(Ecosystem::Python, dynamic).unwrap_err().to_string().contains("dynamic"));
    }

    #[test]
    fn cargo_edit_handles_packages_and_workspaces() {
        let text = "[package]\nname = \"x\"\nversion = \"0.3.1\"\n\n[dependencies]\nserde = { version = \"1\" }\n";
        assert_eq!(write_version(Ecosystem::Rust, text, "0.4.0").unwrap(), text.replace("0.3.1", "0.4.0"));
        let ws = "[workspace]\nmembers = [\"a\"]\n\n[workspace.package]\nversion = \"2.0.0\"\n";
        assert_eq!(read_version(Ecosystem::Rust, ws).unwrap(), "2.0.0");
        let none = "[package]\nname = \"x\"\nversion.workspace = true\n";
        assert!(read_version(Ecosystem::Rust, none).is_err());
    }

    #[test]
    fn package_json_edit_is_surgical_and_checked() {
        let text = "{\n  \"name\": \"x\",\n  \"version\": \"1.4.2\",\n  \"scripts\": {\"test\": \"node t.js\"}\n}\n";
        let out = write_version(Ecosystem::JavaScript, text, "1.5.0").unwrap();
        assert_eq!(out, text.replace("1.4.2", "1.5.0"));
        let nested_first = "{\n  \"engines\": {\"version\": \"1.4.2\"},\n  \"version\": \"1.4.2\"\n}\n";
        assert!(write_version(Ecosystem::JavaScript, nested_first, "1.5.0").is_err());
        assert!(read_version(Ecosystem::JavaScript, "{\"name\":\"x\"}").is_err());
        assert!(read_version(Ecosystem::JavaScript, "{oops").is_err());
    }

    #[test]
    fn version_file_and_locks() {
        assert_eq!(read_version(Ecosystem::SddFramework, "1.9.0\n").unwrap(), "1.9.0");
        assert_eq!(write_version(Ecosystem::SddFramework, "1.9.0\n", "1.10.0").unwrap(), "1.10.0\n");
        let lock = "version = 4\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"x\"\nversion = \"1.0.0\"\n";
        let out = bump_cargo_lock(lock, "1.0.0", "1.1.0");
        assert!(out.contains("name = \"serde\"\nversion = \"1.0.0\""), "{out}");
        assert!(out.contains("name = \"x\"\nversion = \"1.1.0\""), "{out}");
        let plock = "{\n  \"name\": \"x\",\n  \"version\": \"1.0.0\",\n  \"lockfileVersion\": 3,\n  \"packages\": {\n    \"\": {\n      \"name\": \"x\",\n      \"version\": \"1.0.0\"\n    }\n  }\n}\n";
        assert_eq!(bump_package_lock(plock, "1.0.1").unwrap(), plock.replace("1.0.0", "1.0.1"));
    }
}
