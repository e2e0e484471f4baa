use predicates::prelude::*;

use crate::support::{TestProject, json, troupe};

#[test]
fn init_creates_the_layout_and_is_idempotent() {
    let p = TestProject::new();
    for f in [
        ".troupe/config.toml",
        ".troupe/steering/product.md",
        ".troupe/steering/tech.md",
        ".troupe/steering/structure.md",
        ".troupe/specs",
        ".troupe/state",
    ] {
        assert!(p.path(f).exists(), "{f} missing");
    }
    let tech = std::fs::read_to_string(p.path(".troupe/steering/tech.md")).unwrap();
    assert!(tech.contains("## Common Commands"));
    assert!(std::fs::read_to_string(p.path(".gitignore")).unwrap().contains(".troupe/state/"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(p.path(".troupe/state")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    let before = p.snapshot();
    let gitignore = std::fs::read(p.path(".gitignore")).unwrap();
    let out = p.troupe().args(["--json", "init"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(json(&out)["changed"], false);
    p.troupe().arg("init").assert().success().stdout(predicate::str::contains("nothing changed"));
    assert_eq!(p.snapshot(), before);
    assert_eq!(std::fs::read(p.path(".gitignore")).unwrap(), gitignore);
}

#[test]
fn init_minimal_writes_what_troupe_needs_and_no_templates() {
    let dir = tempfile::tempdir().unwrap();
    let out = troupe().args(["--json", "init", "--minimal"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let created: Vec<String> =
        json(&out)["created"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    assert!(
        created.iter().any(|c| c == ".troupe/config.toml") && created.iter().any(|c| c == ".troupe/steering/tech.md")
    );
    // The built-in roles' policy is there, so their tools work; no editable role or Inspector templates.
    assert!(dir.path().join(".troupe/skills/builder/SKILL.md").exists());
    assert!(!created.iter().any(|c| c.starts_with(".troupe/roles/") && c.ends_with(".md")), "{created:?}");
    // A later full init adds the templates and changes nothing else.
    let full = troupe().args(["--json", "init"]).arg(dir.path()).output().unwrap();
    let added: Vec<String> =
        json(&full)["created"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    assert!(!added.is_empty() && added.iter().all(|c| c.starts_with(".troupe/roles/")), "{added:?}");
}

#[test]
fn init_never_overwrites_user_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".troupe/steering")).unwrap();
    std::fs::write(dir.path().join(".troupe/steering/tech.md"), "mine\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), "target/\n.troupe/state/\n").unwrap();
    troupe().arg("init").arg(dir.path()).assert().success();
    assert_eq!(std::fs::read_to_string(dir.path().join(".troupe/steering/tech.md")).unwrap(), "mine\n");
    assert_eq!(std::fs::read_to_string(dir.path().join(".gitignore")).unwrap(), "target/\n.troupe/state/\n");
}

#[test]
fn init_guesses_commands_from_the_ecosystem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    troupe().arg("init").arg(dir.path()).assert().success();
    let tech = std::fs::read_to_string(dir.path().join(".troupe/steering/tech.md")).unwrap();
    assert!(tech.contains("- Test: `cargo test`"), "{tech}");
}

#[test]
fn commands_outside_a_project_say_how_to_start() {
    let dir = tempfile::tempdir().unwrap();
    troupe()
        .current_dir(dir.path())
        .args(["spec", "list"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no troupe project in"))
        .stderr(predicate::str::contains("hint: run `troupe init`"));
}

/// A copy of `tests/fixtures/init/<name>` (a real project layout) in a new temporary folder.
fn fixture(name: &str) -> tempfile::TempDir {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), &target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/init").join(name), dir.path());
    dir
}

/// A PATH holding only these programs (each exits 0), so "is it installed" is the test's choice.
fn path_with(programs: &[&str]) -> tempfile::TempDir {
    let bin = tempfile::tempdir().unwrap();
    for p in programs {
        let file = bin.path().join(p);
        std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    bin
}

fn init_with_path(
    dir: &std::path::Path,
    bin: &std::path::Path,
) -> (String, String, troupe_core::config::CommonCommands) {
    let out = troupe().env("PATH", bin).arg("init").arg(dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let tech = std::fs::read_to_string(dir.join(".troupe/steering/tech.md")).unwrap();
    (stdout, tech.clone(), troupe_core::config::parse_common_commands(&tech))
}

#[test]
fn init_reads_a_python_librarys_makefile_and_tox_ini_and_comments_out_what_cannot_run() {
    let dir = fixture("python-make-tox");
    let bin = path_with(&["make"]);
    let (stdout, tech, commands) = init_with_path(dir.path(), bin.path());
    // The Makefile's own target, not a guessed pytest.
    assert_eq!(commands.test.as_deref(), Some("make test"), "{tech}");
    assert!(stdout.contains("Test: make test\n"), "{stdout}");
    // tox.ini's lint environment runs flake8, which is not installed: written, commented out, never used by a gate.
    assert_eq!(commands.lint, None, "{tech}");
    assert!(tech.contains("<!-- - Lint: `flake8 src tests`"), "{tech}");
    assert!(
        stdout.contains("Lint: flake8 not found; written commented out, edit .troupe/steering/tech.md"),
        "{stdout}"
    );
    assert!(tech.contains("<!-- - Format: `black .`"), "{tech}");
    assert!(stdout.contains("Build: python3 not found"), "{stdout}");
    assert!(!tech.contains("pytest"), "{tech}");
    let product = std::fs::read_to_string(dir.path().join(".troupe/steering/product.md")).unwrap();
    assert!(product.starts_with("# Product: pkgx\n"), "{product}");
    assert!(product.contains("Parse and format package version strings. (from pyproject.toml"), "{product}");
    let structure = std::fs::read_to_string(dir.path().join(".troupe/steering/structure.md")).unwrap();
    assert!(structure.contains("- `src/`: the source code\n- `tests/`: the tests\n"), "{structure}");
    assert!(stdout.starts_with("created .troupe/ (config, 3 steering files, "), "{stdout}");
    assert!(stdout.contains("created .gitignore\n"), "{stdout}");
    assert!(stdout.contains("engine: claude (not found on PATH — troupe doctor)"), "{stdout}");
    assert!(!stdout.contains(".troupe/roles/"), "the file list is for -v only:\n{stdout}");
}

#[test]
fn init_runs_a_uv_projects_tools_through_uv() {
    let dir = fixture("uv");
    let bin = path_with(&["uv"]);
    let (stdout, tech, commands) = init_with_path(dir.path(), bin.path());
    assert_eq!(commands.test.as_deref(), Some("uv run pytest"), "{tech}");
    assert_eq!(commands.lint.as_deref(), Some("uv run ruff check ."), "{tech}");
    assert_eq!(commands.build.as_deref(), Some("uv build"), "{tech}");
    assert!(tech.contains("Runtime: Python (uv)"), "{tech}");
    assert!(!tech.contains("- Test: `pytest`") && !tech.contains("python3 -m pytest"), "never the bare form: {tech}");
    assert!(!tech.contains("<!--"), "uv is on PATH, so every command can run: {tech}");
    assert!(stdout.contains("Format: uv run ruff format .\n"), "{stdout}");
}

#[test]
fn init_uses_an_npm_projects_scripts_and_updates_its_gitignore() {
    let dir = fixture("npm");
    let bin = path_with(&["npm"]);
    let (stdout, tech, commands) = init_with_path(dir.path(), bin.path());
    assert_eq!(commands.test.as_deref(), Some("npm test"), "{tech}");
    assert_eq!(commands.lint.as_deref(), Some("npm run lint"), "{tech}");
    assert_eq!(commands.build.as_deref(), Some("npm run build"), "{tech}");
    assert!(!tech.contains("Format"), "no format script, so no guessed Format command: {tech}");
    assert!(stdout.contains("updated .gitignore\n") && !stdout.contains("created .gitignore"), "{stdout}");
    let gitignore = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
    assert!(gitignore.starts_with("node_modules/\n") && gitignore.contains(".troupe/state/"), "{gitignore}");
    let product = std::fs::read_to_string(dir.path().join(".troupe/steering/product.md")).unwrap();
    assert!(product.contains("Trim whitespace on the left of a string."), "{product}");
}

#[test]
fn init_covers_a_whole_cargo_workspace() {
    let dir = fixture("cargo-workspace");
    let bin = path_with(&[]);
    let (stdout, tech, commands) = init_with_path(dir.path(), bin.path());
    // cargo is missing from this PATH: every command is written commented out.
    assert_eq!((commands.test, commands.lint), (None, None), "{tech}");
    assert!(tech.contains("<!-- - Test: `cargo test --workspace`"), "{tech}");
    assert!(tech.contains("Runtime: Rust (cargo workspace)"), "{tech}");
    assert!(stdout.contains("Test: cargo not found"), "{stdout}");

    let again = fixture("cargo-workspace");
    let bin = path_with(&["cargo"]);
    let (_, tech, commands) = init_with_path(again.path(), bin.path());
    assert_eq!(commands.test.as_deref(), Some("cargo test --workspace"), "{tech}");
    assert_eq!(commands.lint.as_deref(), Some("cargo clippy --workspace --all-targets -- -D warnings"), "{tech}");
    assert!(tech.contains("- Format: `cargo fmt --all`"), "{tech}");
    let structure = std::fs::read_to_string(again.path().join(".troupe/steering/structure.md")).unwrap();
    assert!(structure.contains("- `crates/`: the workspace's crates"), "{structure}");
    let product = std::fs::read_to_string(again.path().join(".troupe/steering/product.md")).unwrap();
    assert!(product.contains("Render small diagrams from text."), "{product}");
}

#[test]
fn init_marks_what_it_cannot_know_as_edit_me() {
    let dir = tempfile::tempdir().unwrap();
    troupe().arg("init").arg(dir.path()).assert().success();
    for f in ["product.md", "structure.md", "tech.md"] {
        let text = std::fs::read_to_string(dir.path().join(".troupe/steering").join(f)).unwrap();
        assert!(text.contains("edit me"), "{f}: {text}");
    }
}

#[test]
fn init_refuses_to_nest_inside_a_troupe_project() {
    let p = TestProject::new();
    std::fs::create_dir_all(p.path("src/inner")).unwrap();
    troupe()
        .current_dir(p.path("src/inner"))
        .arg("init")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is inside the troupe project at"))
        .stderr(predicate::str::contains(format!(
            "hint: troupe commands already work here; to refresh that project run `troupe -C {} init`",
            p.root().canonicalize().unwrap().display()
        )));
    assert!(!p.path("src/inner/.troupe").exists());
}

#[test]
fn init_warns_outside_git_and_not_inside() {
    let dir = tempfile::tempdir().unwrap();
    troupe()
        .arg("init")
        .arg(dir.path())
        .assert()
        .success()
        .stderr(predicate::str::contains("is not in a git repository").and(predicate::str::contains("--no-commit")));
    let repo = tempfile::tempdir().unwrap();
    assert!(
        std::process::Command::new("git").args(["init", "-q"]).current_dir(repo.path()).status().unwrap().success()
    );
    troupe().arg("init").arg(repo.path()).assert().success().stderr(predicate::str::contains("warning").not());
    let out = troupe().args(["--json", "init"]).arg(repo.path()).output().unwrap();
    assert_eq!(json(&out)["git"], true);
}

#[test]
fn help_groups_commands_by_the_users_path_and_hides_plumbing() {
    let out = troupe().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    let start = help.find("Start here:\n  init").expect(&help);
    let features = help.find("Features:\n").expect(&help);
    let team = help.find("Team:\n").expect(&help);
    let policy = help.find("Policy:\n").expect(&help);
    assert!(start < features && features < team && team < policy, "{help}");
    assert!(help.contains("Global options:\n"), "{help}");
    assert!(help.contains("Examples:\n  troupe demo"), "{help}");
    assert!(help.contains("tag v<version>"), "no template variable leaks into the listing: {help}");
    assert!(!help.contains("  hook ") && !help.contains("scripted-agent") && !help.contains("  agents "), "{help}");
    let sub = troupe().args(["board", "claim", "--help"]).output().unwrap();
    let sub = String::from_utf8_lossy(&sub.stdout);
    assert!(sub.contains("Global options:\n") && sub.contains("Examples:\n  troupe board claim t1"), "{sub}");
}

#[test]
fn completions_and_man_page_come_from_the_command_tree() {
    for (shell, needle) in [
        ("bash", "complete -F _troupe"),
        ("zsh", "#compdef troupe"),
        ("fish", "complete -c troupe"),
        ("elvish", "edit:completion:arg-completer[troupe]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = troupe().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(needle), "{shell}: {}", &text[..text.len().min(300)]);
        assert!(text.contains("doctor"), "{shell} completes troupe's commands");
    }
    troupe().args(["completions", "tcsh"]).assert().code(2).stderr(predicate::str::contains("possible values"));
    let man = troupe().arg("man").output().unwrap();
    assert!(man.status.success());
    let man = String::from_utf8_lossy(&man.stdout);
    assert!(man.contains(".TH troupe 1") && man.contains("doctor"), "{}", &man[..man.len().min(300)]);
}
