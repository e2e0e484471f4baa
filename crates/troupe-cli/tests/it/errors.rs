//! Errors in one style (`error:` / `Caused by:` / blank line / `hint:`), with
//! their exit codes, snapshot-tested so that they cannot drift.

use std::path::Path;

use crate::support::{TestProject, troupe};

/// `exit <code>` and stderr, with the temporary folder written as `[ROOT]`.
fn shown(root: &Path, out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let real = root.canonicalize().unwrap();
    let text = stderr.replace(&real.display().to_string(), "[ROOT]").replace(&root.display().to_string(), "[ROOT]");
    format!("exit {}\n{text}", out.status.code().unwrap_or(-1))
}

#[test]
fn outside_a_project() {
    let dir = tempfile::tempdir().unwrap();
    let out = troupe().current_dir(dir.path()).args(["board", "list"]).output().unwrap();
    insta::assert_snapshot!(shown(dir.path(), &out));
}

#[test]
fn a_broken_config_is_reported_the_same_way_by_every_command() {
    let p = TestProject::new();
    std::fs::write(p.path(".troupe/config.toml"), "[engines]\ndefualt = \"codex\"\n").unwrap();
    let first = shown(p.root(), &p.troupe().args(["board", "list"]).output().unwrap());
    for args in [
        &["msg", "inbox", "--agent", "a"][..],
        &["run", "login", "users log in", "--no-commit"],
        &["mcp", "status"],
        &["skill", "use", "verification-before-completion"],
        &["agent", "list"],
        // These parsed the file themselves: `agent run` and `engines list`
        // warned and went on with the defaults, `init` reported it its own way.
        &["agent", "run", "--role", "builder", "--engine", "scripted", "build it"],
        &["agent", "stop", "builder-1"],
        &["engines", "list", "--no-version"],
        &["init"],
    ] {
        let other = shown(p.root(), &p.troupe().args(args).output().unwrap());
        assert_eq!(other, first, "`troupe {}` reports the broken config differently", args.join(" "));
    }
    insta::assert_snapshot!(first);
    // `doctor` lists it among its checks, with the same cause.
    let doctor = p.troupe().args(["--json", "doctor", "--no-run"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = doc["checks"].as_array().unwrap().iter().find(|c| c["name"] == "config").unwrap().clone();
    let cause = first.lines().find_map(|l| l.strip_prefix("Caused by: ")).unwrap().trim().to_string();
    assert_eq!(check["detail"], format!(".troupe/config.toml: {cause}"), "{check}");
}

/// One byte that is not UTF-8: `troupe run` ignored the whole config (caps,
/// gates, revert settings back to defaults) while other commands exited 70.
/// Now every command refuses it alike, with its line, and writes nothing
/// (issue 12, defect 12).
#[test]
fn a_config_that_is_not_utf8_is_refused_the_same_way_by_every_command() {
    let p = TestProject::new();
    std::fs::write(
        p.path(".troupe/config.toml"),
        b"[team]
max_concurrent = 2
# caf\xe9\n",
    )
    .unwrap();
    let before = p.snapshot();
    let first = shown(p.root(), &p.troupe().args(["board", "list"]).output().unwrap());
    for args in [
        &["msg", "inbox", "--agent", "a"][..],
        &["run", "login", "users log in", "--no-commit"],
        &["resume", "login", "--no-commit"],
        &["skill", "use", "verification-before-completion"],
        &["agent", "list"],
        &["agent", "run", "--role", "builder", "--engine", "scripted", "build it"],
        &["engines", "list", "--no-version"],
        &["init"],
    ] {
        let other = shown(p.root(), &p.troupe().args(args).output().unwrap());
        assert_eq!(other, first, "`troupe {}` reports the config differently", args.join(" "));
    }
    assert_eq!(p.snapshot(), before, "nothing was written");
    insta::assert_snapshot!(first);
}

/// A database emptied to 0 bytes was silently recreated empty.
#[test]
fn an_emptied_database_is_refused() {
    let p = TestProject::new();
    p.troupe().args(["board", "create", "a task"]).assert().success();
    std::fs::write(p.path(".troupe/state/troupe.db"), b"").unwrap();
    let before = p.snapshot();
    let out = p.troupe().args(["board", "list"]).output().unwrap();
    assert_eq!(p.snapshot(), before, "nothing was written");
    insta::assert_snapshot!(shown(p.root(), &out));
}

#[test]
fn an_unknown_feature() {
    let p = TestProject::new();
    let out = p.troupe().args(["spec", "show", "nope"]).output().unwrap();
    insta::assert_snapshot!(shown(p.root(), &out));
}

#[test]
fn an_implemented_feature_points_to_revise() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let spec = p.path(".troupe/specs/login/spec.yaml");
    let text = std::fs::read_to_string(&spec).unwrap().replace("phase: initialized", "phase: implementation-complete");
    std::fs::write(&spec, text).unwrap();
    let out = p.troupe().args(["spec", "gate", "login", "impl"]).output().unwrap();
    insta::assert_snapshot!(shown(p.root(), &out));
}

#[test]
fn init_inside_a_project() {
    let p = TestProject::new();
    std::fs::create_dir(p.path("sub")).unwrap();
    let out = troupe().current_dir(p.path("sub")).arg("init").output().unwrap();
    insta::assert_snapshot!(shown(p.root(), &out));
}

#[test]
fn a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = troupe().current_dir(dir.path()).args(["completions", "tcsh"]).output().unwrap();
    insta::assert_snapshot!(shown(dir.path(), &out));
}

/// A database with zeroed pages accepted writes; a run now refuses it before
/// it writes anything (issue 12, defect 12), and `board` and `msg` refuse it
/// with the very same error (they checked only the header and read or wrote
/// past the damage).
#[test]
fn a_database_with_zeroed_pages_is_refused_before_anything_writes() {
    use troupe_store::Board;
    let p = TestProject::new();
    {
        let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root())).unwrap();
        for i in 0..300 {
            store
                .create_task(troupe_store::NewTask::new(format!("task {i}, long enough to fill pages"), "lead"))
                .unwrap();
        }
        store.checkpoint().unwrap();
    }
    let db = p.path(".troupe/state/troupe.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 6 * 4096, "{} bytes", bytes.len());
    bytes[3 * 4096..5 * 4096].fill(0);
    std::fs::write(&db, &bytes).unwrap();
    let before = p.snapshot();
    let out =
        p.troupe().args(["run", "login", "users log in", "--engine", "scripted", "--no-commit"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("troupe.db is not a usable troupe database") && err.contains("damaged pages"), "{err}");
    assert!(err.contains("hint: "), "{err}");
    assert_eq!(p.snapshot(), before, "nothing was written");
    let refusal = shown(p.root(), &out);
    for args in [
        &["board", "list"][..],
        &["board", "create", "one more"],
        &["board", "claim", "t1", "--agent", "a"],
        &["msg", "send", "b", "hello", "--from", "a"],
        &["msg", "inbox", "--agent", "a"],
    ] {
        let out = p.troupe().args(args).output().unwrap();
        assert_eq!(shown(p.root(), &out), refusal, "troupe {}", args.join(" "));
        assert_eq!(p.snapshot(), before, "troupe {} wrote nothing", args.join(" "));
    }
    // SQLite's report names the damaged tree and page, which any change to
    // the schema moves: the snapshot keeps the rest.
    let refusal: Vec<&str> =
        refusal.lines().map(|l| if l.starts_with("Tree ") { "[which tree and page]" } else { l }).collect();
    insta::assert_snapshot!(refusal.join("\n"));
}
