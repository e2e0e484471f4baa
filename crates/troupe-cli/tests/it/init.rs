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
