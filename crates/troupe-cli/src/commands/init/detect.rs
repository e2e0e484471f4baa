//! What `troupe init` learns from the project before it guesses: its own
//! commands (Makefile targets, justfile recipes, package.json scripts, tox.ini
//! environments, `[tool.*]` in pyproject.toml, uv.lock), its manifest (name,
//! description, Cargo workspace, go.mod) and its top-level folders. Then each
//! Common Command's program is looked up, so a command that cannot run is
//! written commented out instead of being used by a gate.

use std::path::Path;

/// The Common Commands init writes, in order.
pub const PURPOSES: [&str; 4] = ["Test", "Lint", "Build", "Format"];

/// One Common Command and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guess {
    pub purpose: &'static str,
    pub command: String,
    /// The file it was read from (`Makefile`, `tox.ini`, ...), or `guess` for an ecosystem default.
    pub source: &'static str,
}

/// What init knows about the project.
#[derive(Debug, Default)]
pub struct Detected {
    /// `Python (uv)`, `Rust (cargo workspace)`, ... ; empty when nothing was recognised.
    pub runtime: String,
    pub commands: Vec<Guess>,
    pub name: Option<String>,
    pub description: Option<String>,
    /// The manifest `name` and `description` came from.
    pub manifest: Option<&'static str>,
}

impl Detected {
    pub fn command(&self, purpose: &str) -> Option<&Guess> {
        self.commands.iter().find(|g| g.purpose == purpose)
    }
}

fn read(root: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(root.join(name)).ok()
}

fn first_of(root: &Path, names: &[&'static str]) -> Option<(&'static str, String)> {
    names.iter().find_map(|n| read(root, n).map(|t| (*n, t)))
}

/// Targets of a Makefile: `name:` at the start of a line (not `name :=`, not patterns or special targets).
pub fn make_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with(['\t', ' ', '#', '.']) {
            continue;
        }
        let Some((head, rest)) = line.split_once(':') else { continue };
        if rest.starts_with('=') || head.contains(['=', '%', '$', '?', '+']) {
            continue;
        }
        out.extend(head.split_whitespace().map(str::to_string));
    }
    out
}

/// Recipes of a justfile: `name args...:` at the start of a line (not `name :=` nor settings).
pub fn just_recipes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with([' ', '\t', '#', '[']) || line.trim().is_empty() {
            continue;
        }
        let Some((head, rest)) = line.split_once(':') else { continue };
        if rest.starts_with('=') || head.contains(":=") {
            continue;
        }
        let mut words = head.split_whitespace();
        let Some(name) = words.next() else { continue };
        if matches!(name, "set" | "alias" | "export" | "import" | "mod") {
            continue;
        }
        let name = name.trim_start_matches('@');
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') && !name.is_empty() {
            out.push(name.to_string());
        }
    }
    out
}

/// `commands` of each tox.ini section, as `(section, first command)`; `{posargs}` dropped,
/// lines with other substitutions (`{envpython}`, `{toxinidir}`) skipped.
pub fn tox_commands(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut in_commands = false;
    let mut found = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('[') && line.ends_with(']') {
            section = line[1..line.len() - 1].trim().to_string();
            in_commands = false;
            found = false;
            continue;
        }
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let continuation = raw.starts_with([' ', '\t']);
        let value = if !continuation {
            in_commands = false;
            match line.split_once('=') {
                Some((key, value)) if key.trim() == "commands" => {
                    in_commands = true;
                    value.trim()
                }
                _ => continue,
            }
        } else if in_commands {
            line
        } else {
            continue;
        };
        if found || value.is_empty() {
            continue;
        }
        let command = value.replace("{posargs}", "");
        let command = command.trim().trim_start_matches('-').trim();
        if command.is_empty() || command.contains('{') {
            continue;
        }
        out.push((section.clone(), command.to_string()));
        found = true;
    }
    out
}

/// `scripts` of a package.json.
fn npm_scripts(json: &serde_json::Value) -> Vec<(String, String)> {
    json.get("scripts")
        .and_then(|s| s.as_object())
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

fn str_at<'a>(v: &'a toml::Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

fn set(out: &mut Detected, purpose: &'static str, command: impl Into<String>, source: &'static str) {
    if out.command(purpose).is_none() {
        out.commands.push(Guess { purpose, command: command.into(), source });
    }
}

/// Read the project's own commands first, then fill the gaps with its ecosystem's defaults.
pub fn detect(root: &Path) -> Detected {
    let mut d = Detected::default();
    // 1. The project's own task runners: what its developers type.
    if let Some((file, text)) = first_of(root, &["GNUmakefile", "makefile", "Makefile"]) {
        let targets = make_targets(&text);
        let file: &'static str = file;
        for (purpose, names) in [
            ("Test", &["test", "tests", "check"][..]),
            ("Lint", &["lint", "flake8", "ruff", "typecheck"]),
            ("Build", &["build"]),
            ("Format", &["format", "fmt"]),
        ] {
            if let Some(t) = names.iter().find(|n| targets.iter().any(|t| t == *n)) {
                set(&mut d, purpose, format!("make {t}"), file);
            }
        }
    }
    if let Some((file, text)) = first_of(root, &["justfile", "Justfile", ".justfile"]) {
        let recipes = just_recipes(&text);
        for (purpose, names) in [
            ("Test", &["test", "check"][..]),
            ("Lint", &["lint"]),
            ("Build", &["build"]),
            ("Format", &["format", "fmt"]),
        ] {
            if let Some(r) = names.iter().find(|n| recipes.iter().any(|r| r == *n)) {
                set(&mut d, purpose, format!("just {r}"), file);
            }
        }
    }
    // 2. Manifests.
    if let Some(json) = read(root, "package.json").and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()) {
        let runner = if root.join("pnpm-lock.yaml").exists() {
            "pnpm"
        } else if root.join("yarn.lock").exists() {
            "yarn"
        } else if root.join("bun.lockb").exists() || root.join("bun.lock").exists() {
            "bun"
        } else {
            "npm"
        };
        d.runtime = format!("Node.js ({runner})");
        d.name = json.get("name").and_then(|v| v.as_str()).map(str::to_string);
        d.description = json.get("description").and_then(|v| v.as_str()).map(str::to_string);
        d.manifest = Some("package.json");
        let scripts = npm_scripts(&json);
        for (purpose, names) in [
            ("Test", &["test"][..]),
            ("Lint", &["lint"]),
            ("Build", &["build"]),
            ("Format", &["format", "fmt", "prettier"]),
        ] {
            let Some((name, body)) = names.iter().find_map(|n| scripts.iter().find(|(k, _)| k == n)) else {
                continue;
            };
            // `npm init`'s placeholder test script only fails.
            if body.contains("no test specified") {
                continue;
            }
            let command = match (runner, name.as_str()) {
                ("bun", n) => format!("bun run {n}"),
                (r, "test") => format!("{r} test"),
                (r, n) => format!("{r} run {n}"),
            };
            set(&mut d, purpose, command, "package.json");
        }
    }
    if let Some(cargo) = read(root, "Cargo.toml").and_then(|t| t.parse::<toml::Table>().ok()) {
        let cargo = toml::Value::Table(cargo);
        let workspace = cargo.get("workspace").is_some();
        d.runtime = if workspace { "Rust (cargo workspace)".into() } else { "Rust (cargo)".into() };
        if d.manifest.is_none() {
            d.name = str_at(&cargo, &["package", "name"]).map(str::to_string);
            d.description = str_at(&cargo, &["package", "description"])
                .or_else(|| str_at(&cargo, &["workspace", "package", "description"]))
                .map(str::to_string);
            d.manifest = Some("Cargo.toml");
        }
        let all = if workspace { " --workspace" } else { "" };
        set(&mut d, "Test", format!("cargo test{all}"), "Cargo.toml");
        set(&mut d, "Lint", format!("cargo clippy{all} --all-targets -- -D warnings"), "Cargo.toml");
        set(&mut d, "Build", format!("cargo build{all}"), "Cargo.toml");
        set(&mut d, "Format", if workspace { "cargo fmt --all" } else { "cargo fmt" }, "Cargo.toml");
    }
    if let Some(text) = read(root, "go.mod") {
        d.runtime = "Go".into();
        if d.manifest.is_none() {
            d.name = text.lines().find_map(|l| l.strip_prefix("module ")).map(|m| m.trim().to_string());
            d.manifest = Some("go.mod");
        }
        set(&mut d, "Test", "go test ./...", "go.mod");
        set(&mut d, "Lint", "go vet ./...", "go.mod");
        set(&mut d, "Build", "go build ./...", "go.mod");
        set(&mut d, "Format", "gofmt -w .", "go.mod");
    }
    let pyproject = read(root, "pyproject.toml");
    let tox = read(root, "tox.ini").map(|t| tox_commands(&t)).unwrap_or_default();
    if pyproject.is_some() || !tox.is_empty() || root.join("setup.py").exists() {
        python(root, &mut d, pyproject.as_deref(), &tox);
    }
    d
}

fn python(root: &Path, d: &mut Detected, pyproject: Option<&str>, tox: &[(String, String)]) {
    let uv = root.join("uv.lock").exists();
    if d.runtime.is_empty() {
        d.runtime = if uv { "Python (uv)".into() } else { "Python".into() };
    }
    let table = pyproject.and_then(|t| t.parse::<toml::Table>().ok()).map(toml::Value::Table);
    let tool = |name: &str| table.as_ref().and_then(|t| t.get("tool")).and_then(|t| t.get(name)).is_some();
    if let Some(t) = &table
        && d.manifest.is_none()
    {
        d.name = str_at(t, &["project", "name"]).map(str::to_string);
        d.description = str_at(t, &["project", "description"]).map(str::to_string);
        d.manifest = Some("pyproject.toml");
    }
    // Through uv when the project is a uv project (seed 000 Spec 13.2: never the bare form).
    let run = |cmd: &str| if uv { format!("uv run {cmd}") } else { cmd.to_string() };
    // tox.ini: [testenv] runs the tests; a lint-like environment the linter.
    if let Some((_, c)) = tox.iter().find(|(s, _)| s == "testenv") {
        set(d, "Test", run(c), "tox.ini");
    }
    if let Some((_, c)) = tox.iter().find(|(s, _)| {
        ["lint", "flake8", "ruff", "style", "pep8", "mypy", "typecheck"]
            .iter()
            .any(|n| s.strip_prefix("testenv:").is_some_and(|e| e == *n))
    }) {
        set(d, "Lint", run(c), "tox.ini");
    }
    let text = pyproject.unwrap_or_default();
    let pytest = tool("pytest") || root.join("pytest.ini").exists() || root.join("conftest.py").exists() || {
        // pytest named as a dependency (dev group, extras) counts too.
        text.contains("\"pytest") || text.contains("'pytest")
    };
    if pytest {
        set(d, "Test", if uv { "uv run pytest".into() } else { "python3 -m pytest".to_string() }, "pyproject.toml");
    } else {
        set(d, "Test", run("python3 -m unittest"), "guess");
    }
    let ruff = tool("ruff") || root.join("ruff.toml").exists() || root.join(".ruff.toml").exists();
    if ruff {
        set(d, "Lint", run("ruff check ."), "pyproject.toml");
        set(d, "Format", run("ruff format ."), "pyproject.toml");
    }
    if tool("black") {
        set(d, "Format", run("black ."), "pyproject.toml");
    }
    if tool("mypy") {
        set(d, "Lint", run("mypy ."), "pyproject.toml");
    }
    if table.as_ref().is_some_and(|t| t.get("build-system").is_some()) {
        set(d, "Build", if uv { "uv build".into() } else { "python3 -m build".to_string() }, "pyproject.toml");
    }
}

/// Why `command` cannot run here, or `None` when its program is found:
/// `ruff not found`, `python3 has no module pytest`.
pub fn check(command: &str, path: Option<&std::ffi::OsStr>) -> Option<String> {
    let mut words = command.split_whitespace().skip_while(|w| w.contains('=') && !w.starts_with('-'));
    let program = words.next()?;
    let Some(found) = troupe_engine::registry::locate(program, path) else {
        return Some(format!("{program} not found"));
    };
    // `python3 -m pytest`: the module must be importable too.
    if program.starts_with("python") && words.next() == Some("-m") {
        let module = words.next()?;
        let probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)";
        let ok = std::process::Command::new(found)
            .args(["-c", probe, module])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Some(format!("{program} has no module {module}"));
        }
    }
    None
}

/// Top-level folders worth naming in structure.md, with what they usually hold.
pub fn top_folders(root: &Path) -> Vec<(String, Option<&'static str>)> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut out: Vec<(String, Option<&'static str>)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| {
            !n.starts_with('.')
                && !matches!(
                    n.as_str(),
                    "target" | "node_modules" | "dist" | "build" | "venv" | "__pycache__" | "vendor" | "coverage"
                )
                && !n.ends_with(".egg-info")
        })
        .map(|n| {
            let what = match n.as_str() {
                "src" | "lib" => Some("the source code"),
                "tests" | "test" | "spec" => Some("the tests"),
                "docs" | "doc" => Some("the documentation"),
                "crates" => Some("the workspace's crates"),
                "packages" => Some("the workspace's packages"),
                "examples" => Some("examples"),
                "benches" | "benchmarks" => Some("benchmarks"),
                "scripts" | "tools" => Some("scripts for developers"),
                "cmd" => Some("the executables (Go)"),
                "internal" => Some("internal packages (Go)"),
                _ => None,
            };
            (n, what)
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makefile_targets_skip_variables_and_patterns() {
        let mk = "PY := python\n.PHONY: test lint\ntest:\n\tpython -m unittest\nlint docs: deps\n%.o: %.c\nX = a:b\n";
        assert_eq!(make_targets(mk), ["test", "lint", "docs"]);
    }

    #[test]
    fn justfile_recipes_skip_settings() {
        let j = "set shell := [\"bash\"]\nversion := \"1\"\n@test *ARGS:\n  cargo test\nlint: fmt\n  x\n";
        assert_eq!(just_recipes(j), ["test", "lint"]);
    }

    #[test]
    fn tox_commands_take_the_first_runnable_line() {
        let t = "[tox]\nenvlist = py3\n\n[testenv]\ndeps = x\ncommands =\n    python -m unittest {posargs}\n    other\n\n[testenv:lint]\ncommands = {envpython} -m flake8\n    flake8 src\n";
        assert_eq!(
            tox_commands(t),
            [
                ("testenv".to_string(), "python -m unittest".to_string()),
                ("testenv:lint".to_string(), "flake8 src".to_string())
            ]
        );
    }

    #[test]
    fn check_names_the_missing_program() {
        let empty = tempfile::tempdir().unwrap();
        let path = Some(empty.path().as_os_str());
        assert_eq!(check("ruff check .", path).as_deref(), Some("ruff not found"));
        assert_eq!(check("RUST_LOG=x cargo test", path).as_deref(), Some("cargo not found"));
        assert_eq!(check("sh -c true", Some(std::ffi::OsStr::new("/bin:/usr/bin"))), None);
    }
}
