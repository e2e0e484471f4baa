//! `[gates]`: quality gate commands (seed 003 B2) and the skill and Stop gates
//! (seed 001), plus the parser of steering's "Common Commands", which gives the
//! quality gates their defaults.
//!
//! ```toml
//! [gates]
//! on_task_completed = "cargo test && cargo clippy -- -D warnings"
//! code_extensions = ["rs", "ts"]
//! marker_max_age_hours = 12
//!
//! [gates.engines.codex]
//! on_idle = "cargo test -q"
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// Extensions (without the dot, lower case) whose files count as code: writing
/// one needs the code skill and makes the session a code session.
pub const DEFAULT_CODE_EXTENSIONS: &[&str] = &[
    "rs", "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "py", "pyi", "go", "java", "kt", "kts", "scala",
    "swift", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "m", "mm", "cs", "fs", "vb", "rb", "php", "pl", "pm",
    "lua", "dart", "ex", "exs", "erl", "hrl", "hs", "ml", "mli", "clj", "cljs", "elm", "vue", "svelte", "astro", "sql",
    "r", "jl", "zig", "nim", "sh", "bash", "zsh", "fish", "ps1", "css", "scss", "sass", "less", "html", "htm", "ipynb",
    "sol", "tf",
];

/// Extensions whose files count as documents: writing one needs the document skill.
pub const DEFAULT_DOCUMENT_EXTENSIONS: &[&str] = &["md", "mdx", "markdown", "rst", "adoc", "asciidoc", "org", "txt"];

/// The engines a `[gates.engines.<engine>]` table may name.
pub const GATE_ENGINES: [&str; 4] = ["claude", "gemini", "codex", "opencode"];

/// `[gates]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatesConfig {
    /// Command run when a teammate goes idle; defaults to the steering test command.
    pub on_idle: Option<String>,
    /// Command run before a task is marked complete; defaults to the steering test and lint commands.
    pub on_task_completed: Option<String>,
    /// How long a quality gate command may run before it counts as an error (allow with a warning).
    pub timeout_seconds: u64,
    /// File extensions that count as code (no dot).
    pub code_extensions: Vec<String>,
    /// File extensions that count as documents (no dot).
    pub document_extensions: Vec<String>,
    /// Which skills the gates require.
    pub skills: RequiredSkills,
    /// Session markers older than this are removed when a session starts or ends.
    pub marker_max_age_hours: u64,
    /// Revert writes found outside a teammate's ownership by the post-run check.
    pub revert_violations: bool,
    /// `[gates.engines.<engine>]`: per-engine overrides of the quality gate commands.
    pub engines: BTreeMap<String, EngineGates>,
}

impl Default for GatesConfig {
    fn default() -> Self {
        GatesConfig {
            on_idle: None,
            on_task_completed: None,
            timeout_seconds: 600,
            code_extensions: DEFAULT_CODE_EXTENSIONS.iter().map(|s| s.to_string()).collect(),
            document_extensions: DEFAULT_DOCUMENT_EXTENSIONS.iter().map(|s| s.to_string()).collect(),
            skills: RequiredSkills::default(),
            marker_max_age_hours: 24,
            revert_violations: false,
            engines: BTreeMap::new(),
        }
    }
}

/// `[gates.skills]`: the skill each gate requires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequiredSkills {
    /// Needed before writing a code file.
    pub code: String,
    /// Needed before writing a document file.
    pub document: String,
    /// Needed before stopping after a code change.
    pub verification: String,
}

impl Default for RequiredSkills {
    fn default() -> Self {
        RequiredSkills {
            code: "code-quality-rules".into(),
            document: "document-quality-rules".into(),
            verification: "verification-before-completion".into(),
        }
    }
}

/// `[gates.engines.<engine>]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineGates {
    /// Replaces `gates.on_idle` for teammates on this engine.
    pub on_idle: Option<String>,
    /// Replaces `gates.on_task_completed` for teammates on this engine.
    pub on_task_completed: Option<String>,
}

/// The two quality gates of seed 003 B2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QualityGate {
    /// A teammate is about to go idle (PROCESSING → READY).
    OnIdle,
    /// A task is about to be marked complete.
    OnTaskCompleted,
}

impl QualityGate {
    /// The config key.
    pub fn key(self) -> &'static str {
        match self {
            QualityGate::OnIdle => "on_idle",
            QualityGate::OnTaskCompleted => "on_task_completed",
        }
    }
}

/// What a file is, for the skill gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// Code: needs the code skill; makes a code session.
    Code,
    /// A document: needs the document skill.
    Document,
    /// Config and data files: pass.
    Other,
}

/// How a quality gate command's exit code is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    /// A command of steering's Common Commands (Test, Lint): a test suite, so
    /// any non-zero exit refuses (pytest's 1, `cargo test`'s 101).
    Tests,
    /// A command the user wrote in `[gates]`: seed 003 B2's table (0 allows,
    /// 2 refuses, anything else allows with a warning).
    Hook,
}

/// One command of a quality gate, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateStep {
    /// What the user knows it as: `Test` or `Lint` (steering), or the config
    /// key that set it (`gates.on_idle`, `gates.engines.codex.on_task_completed`).
    pub label: String,
    /// The shell command.
    pub command: String,
    /// How its exit code is read.
    pub rule: GateRule,
}

impl GatesConfig {
    /// The commands of `gate`, for a teammate on `engine`, in the order they
    /// run: the engine's override, else the `[gates]` value (one
    /// [`GateRule::Hook`] step), else steering's Common Commands (`on_idle`: Test;
    /// `on_task_completed`: Test, then Lint; [`GateRule::Tests`] steps). Empty
    /// when no command is configured or config turns the gate off with `""`.
    pub fn steps(&self, gate: QualityGate, engine: Option<&str>, steering: &CommonCommands) -> Vec<GateStep> {
        let pick = |g: &EngineGates| match gate {
            QualityGate::OnIdle => g.on_idle.clone(),
            QualityGate::OnTaskCompleted => g.on_task_completed.clone(),
        };
        let configured = match engine.and_then(|e| self.engines.get(e).and_then(pick).map(|c| (e, c))) {
            Some((e, c)) => Some((format!("gates.engines.{e}.{}", gate.key()), c)),
            None => match gate {
                QualityGate::OnIdle => self.on_idle.clone(),
                QualityGate::OnTaskCompleted => self.on_task_completed.clone(),
            }
            .map(|c| (format!("gates.{}", gate.key()), c)),
        };
        let steps = match configured {
            Some((label, command)) => vec![GateStep { label, command, rule: GateRule::Hook }],
            None => {
                let test = steering.test.as_ref().map(|c| ("Test", c));
                let lint = steering.lint.as_ref().map(|c| ("Lint", c));
                let wanted = match gate {
                    QualityGate::OnIdle => vec![test],
                    QualityGate::OnTaskCompleted => vec![test, lint],
                };
                wanted
                    .into_iter()
                    .flatten()
                    .map(|(label, command)| GateStep {
                        label: label.into(),
                        command: command.clone(),
                        rule: GateRule::Tests,
                    })
                    .collect()
            }
        };
        steps
            .into_iter()
            .map(|s| GateStep { command: s.command.trim().to_string(), ..s })
            .filter(|s| !s.command.is_empty())
            .collect()
    }

    /// The steps of `gate` as one shell command (`Test && Lint`), for display;
    /// `None` when the gate has no command. See [`GatesConfig::steps`].
    pub fn command(&self, gate: QualityGate, engine: Option<&str>, steering: &CommonCommands) -> Option<String> {
        let steps = self.steps(gate, engine, steering);
        (!steps.is_empty()).then(|| steps.iter().map(|s| s.command.as_str()).collect::<Vec<_>>().join(" && "))
    }

    /// Which kind of file `path` is, by its extension (case-insensitive).
    pub fn file_kind(&self, path: &str) -> FileKind {
        let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
        let Some((stem, ext)) = name.rsplit_once('.') else { return FileKind::Other };
        if stem.is_empty() {
            // A dotfile such as `.bashrc` has no extension.
            return FileKind::Other;
        }
        let ext = ext.to_ascii_lowercase();
        if self.code_extensions.iter().any(|e| e.eq_ignore_ascii_case(&ext)) {
            FileKind::Code
        } else if self.document_extensions.iter().any(|e| e.eq_ignore_ascii_case(&ext)) {
            FileKind::Document
        } else {
            FileKind::Other
        }
    }

    /// The skill writing a file of `kind` requires, if any.
    pub fn skill_for(&self, kind: FileKind) -> Option<&str> {
        match kind {
            FileKind::Code => Some(&self.skills.code),
            FileKind::Document => Some(&self.skills.document),
            FileKind::Other => None,
        }
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for engine in self.engines.keys() {
            if !GATE_ENGINES.contains(&engine.as_str()) {
                return Err(invalid(format!(
                    "gates.engines.{engine}: unknown engine (expected one of: {})",
                    GATE_ENGINES.join(", ")
                )));
            }
        }
        for (key, list) in
            [("code_extensions", &self.code_extensions), ("document_extensions", &self.document_extensions)]
        {
            if let Some(bad) = list.iter().find(|e| e.is_empty() || e.contains(['.', '/', '\\', ' '])) {
                return Err(invalid(format!(
                    "gates.{key}: '{bad}' is not an extension (write it without the dot, e.g. \"rs\")"
                )));
            }
        }
        for (key, skill) in [
            ("code", &self.skills.code),
            ("document", &self.skills.document),
            ("verification", &self.skills.verification),
        ] {
            if skill.trim().is_empty() {
                return Err(invalid(format!("gates.skills.{key} is empty; name the skill the gate requires")));
            }
        }
        if self.timeout_seconds == 0 {
            return Err(invalid("gates.timeout_seconds must be at least 1"));
        }
        if self.marker_max_age_hours == 0 {
            return Err(invalid("gates.marker_max_age_hours must be at least 1"));
        }
        Ok(())
    }
}

/// The commands of `.troupe/steering/tech.md`'s "Common Commands" section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CommonCommands {
    /// The test command.
    pub test: Option<String>,
    /// The lint command (also accepts "check", "typecheck" when no lint is given).
    pub lint: Option<String>,
    /// The build command.
    pub build: Option<String>,
    /// Every labelled command, lower-case label → command, in file order.
    pub all: Vec<(String, String)>,
}

/// Parse the "Common Commands" section of a steering tech.md. The section is the
/// heading whose text contains "Common Commands" (any level) up to the next
/// heading of the same or a higher level. Inside it, a command is a line of the
/// form `Label: command`, in any of the usual dresses: a list item (`- Test:`),
/// bold (`**Test**:`), a comment in a code block (`# Test: cargo test`), or with
/// the command in backticks. Lines without a label are ignored, so prose is safe.
pub fn parse_common_commands(tech_md: &str) -> CommonCommands {
    let mut out = CommonCommands::default();
    let mut level: Option<usize> = None;
    let mut in_fence = false;
    for raw in tech_md.lines() {
        let line = raw.trim();
        if line.starts_with("```") || line.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence && line.starts_with('#') {
            let hashes = line.chars().take_while(|c| *c == '#').count();
            if line[hashes..].starts_with(' ') {
                match level {
                    Some(l) if hashes <= l => break,
                    Some(_) => continue,
                    None if line.to_ascii_lowercase().contains("common commands") => {
                        level = Some(hashes);
                        continue;
                    }
                    None => continue,
                }
            }
        }
        if level.is_none() {
            continue;
        }
        if let Some((label, command)) = labelled_command(line) {
            out.all.push((label, command));
        }
    }
    let find = |names: &[&str]| names.iter().find_map(|n| out.all.iter().find(|(l, _)| l == n).map(|(_, c)| c.clone()));
    out.test = find(&["test", "tests", "testing", "unit test", "unit tests"]);
    out.lint = find(&["lint", "linting", "lint and format", "check", "typecheck", "type check"]);
    out.build = find(&["build"]);
    out
}

/// `- **Test**: `cargo test`` → ("test", "cargo test").
fn labelled_command(line: &str) -> Option<(String, String)> {
    let line = line.trim_start_matches(['-', '*', '+', '#', '>', ' ']);
    let (label, rest) = line.split_once(':')?;
    let label = label.trim().trim_matches(['*', '_', '`']).trim().to_ascii_lowercase();
    if label.is_empty() || label.len() > 24 || !label.chars().all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '-') {
        return None;
    }
    let command = rest.trim().trim_matches('`').trim();
    // A trailing "# comment" or " — explanation" after a backticked command is prose.
    let command = match rest.trim().strip_prefix('`') {
        Some(inner) => inner.split('`').next().unwrap_or(command).trim(),
        None => command,
    };
    if command.is_empty() || command.starts_with("//") {
        return None;
    }
    Some((label.replace('-', " "), command.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn defaults_need_no_config() {
        let g = GatesConfig::default();
        assert_eq!(g.file_kind("src/App.tsx"), FileKind::Code);
        assert_eq!(g.file_kind("/p/README.md"), FileKind::Document);
        assert_eq!(g.file_kind("Cargo.toml"), FileKind::Other);
        assert_eq!(g.file_kind(".bashrc"), FileKind::Other);
        assert_eq!(g.file_kind("Makefile"), FileKind::Other);
        assert_eq!(g.file_kind("a/B.RS"), FileKind::Code);
        assert_eq!(g.skill_for(FileKind::Code), Some("code-quality-rules"));
        assert_eq!(g.skill_for(FileKind::Other), None);
    }

    #[test]
    fn config_overrides_and_validation() {
        let c = Config::from_toml(
            "[gates]\non_idle = \"make test\"\ncode_extensions = [\"foo\"]\n[gates.skills]\ncode = \"my-rules\"\n[gates.engines.codex]\non_idle = \"\"\n",
        )
        .unwrap();
        assert_eq!(c.gates.file_kind("x.foo"), FileKind::Code);
        assert_eq!(c.gates.file_kind("x.rs"), FileKind::Other);
        assert_eq!(c.gates.skills.code, "my-rules");
        assert_eq!(c.gates.skills.verification, "verification-before-completion");
        let none = CommonCommands::default();
        assert_eq!(c.gates.command(QualityGate::OnIdle, Some("claude"), &none).as_deref(), Some("make test"));
        assert_eq!(c.gates.command(QualityGate::OnIdle, Some("codex"), &none), None, "empty override turns it off");

        for (text, key) in [
            ("[gates.engines.vim]\n", "gates.engines.vim"),
            ("[gates]\ncode_extensions = [\".rs\"]\n", "gates.code_extensions"),
            ("[gates.skills]\ncode = \" \"\n", "gates.skills.code"),
            ("[gates]\nmarker_max_age_hours = 0\n", "gates.marker_max_age_hours"),
            ("[gates]\non_idel = \"x\"\n", "on_idel"),
        ] {
            let err = Config::from_toml(text).unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn commands_default_to_steering() {
        let steering =
            CommonCommands { test: Some("cargo test".into()), lint: Some("cargo clippy".into()), ..Default::default() };
        let g = GatesConfig::default();
        assert_eq!(g.command(QualityGate::OnIdle, None, &steering).as_deref(), Some("cargo test"));
        assert_eq!(
            g.command(QualityGate::OnTaskCompleted, Some("claude"), &steering).as_deref(),
            Some("cargo test && cargo clippy")
        );
        assert_eq!(g.command(QualityGate::OnIdle, None, &CommonCommands::default()), None);
    }

    #[test]
    fn steps_say_where_each_command_came_from() {
        let steering =
            CommonCommands { test: Some("pytest -q".into()), lint: Some("ruff check .".into()), ..Default::default() };
        let step = |label: &str, command: &str, rule| GateStep { label: label.into(), command: command.into(), rule };
        let g = GatesConfig::default();
        assert_eq!(
            g.steps(QualityGate::OnTaskCompleted, Some("claude"), &steering),
            [step("Test", "pytest -q", GateRule::Tests), step("Lint", "ruff check .", GateRule::Tests)]
        );
        assert_eq!(g.steps(QualityGate::OnIdle, None, &steering), [step("Test", "pytest -q", GateRule::Tests)]);
        assert_eq!(g.steps(QualityGate::OnIdle, None, &CommonCommands::default()), []);
        let c = Config::from_toml(
            "[gates]\non_task_completed = \" make check \"\n[gates.engines.codex]\non_task_completed = \"\"\n[gates.engines.gemini]\non_idle = \"make t\"\n",
        )
        .unwrap()
        .gates;
        assert_eq!(
            c.steps(QualityGate::OnTaskCompleted, Some("claude"), &steering),
            [step("gates.on_task_completed", "make check", GateRule::Hook)]
        );
        assert_eq!(c.steps(QualityGate::OnTaskCompleted, Some("codex"), &steering), [], "empty override turns it off");
        assert_eq!(
            c.steps(QualityGate::OnIdle, Some("gemini"), &steering),
            [step("gates.engines.gemini.on_idle", "make t", GateRule::Hook)]
        );
        assert_eq!(
            c.steps(QualityGate::OnIdle, Some("claude"), &steering),
            [step("Test", "pytest -q", GateRule::Tests)]
        );
    }

    #[test]
    fn common_commands_in_their_usual_dresses() {
        let check = |text: &str, test: Option<&str>, lint: Option<&str>| {
            let c = parse_common_commands(text);
            assert_eq!(c.test.as_deref(), test, "{text}");
            assert_eq!(c.lint.as_deref(), lint, "{text}");
        };
        check(
            "# Tech\n\n## Common Commands\n```bash\n# Dev: npm run dev\n# Test: npm test\n# Lint: npm run lint\n```\n",
            Some("npm test"),
            Some("npm run lint"),
        );
        check(
            "## Common Commands\n\n- **Build**: `cargo build`\n- **Test**: `cargo test --all` (fast)\n- **Lint**: `cargo clippy -- -D warnings`\n",
            Some("cargo test --all"),
            Some("cargo clippy -- -D warnings"),
        );
        check("## Common commands\n\nTest: pytest -q\nTypecheck: mypy .\n", Some("pytest -q"), Some("mypy ."));
        // Only the section counts; a later section's labels are not commands.
        check("## Common Commands\n- Test: make test\n## Other\n- Lint: nope\n", Some("make test"), None);
        // Subsections belong to the section.
        check("## Common Commands\n### Testing\n- Test: go test ./...\n", Some("go test ./..."), None);
        // Prose and URLs are not commands.
        check("## Common Commands\nRun the tests before pushing.\nSee: https://x\n", None, None);
        check("# Tech\nTest: not in the section\n", None, None);
    }
}
