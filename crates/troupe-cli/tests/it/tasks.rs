//! `troupe tasks validate` and `troupe tasks waves`.

use predicates::prelude::*;

use crate::support::{TestProject, json};

/// A project with spec `login` whose tasks.yaml is `yaml`.
fn with_plan(yaml: &str) -> TestProject {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    std::fs::write(p.path(".troupe/specs/login/tasks.yaml"), yaml).unwrap();
    p
}

const VALID: &str = "\
tasks:
  - id: \"1\"
    summary: Sessions
    status: pending
    subtasks:
      - id: \"1.1\"
        p: true
        summary: Session store
        depends: []
        status: done
      - id: \"1.2\"
        summary: Login handler
        depends: [\"1.1\"]
        status: pending
  - id: \"2\"
    summary: Logout
    status: pending
    subtasks:
      - id: \"2.1\"
        summary: Logout handler
        depends: []
        status: pending
execution:
  - wave: 1
    groups:
      - id: G1
        tasks: [\"1.1\"]
        files: [src/session.rs]
      - id: G2
        tasks: [\"2\"]
        files: [src/logout.rs]
  - wave: 2
    groups:
      - id: G3
        tasks: [\"1.2\"]
        files: [src/login.rs, src/session.rs]
";

#[test]
fn valid_plan() {
    let p = with_plan(VALID);
    p.troupe().args(["tasks", "validate", "login"]).assert().success().stdout(predicate::str::diff(
        ".troupe/specs/login/tasks.yaml: valid (2 tasks, 3 subtasks, 2 waves, 3 groups, declared)\n",
    ));
    let out = p.troupe().args(["--json", "tasks", "validate", "login"]).output().unwrap();
    assert!(out.status.success());
    let v = json(&out);
    assert_eq!(v["valid"], true);
    assert_eq!(v["source"], "declared");
    assert_eq!(v["subtasks"], 3);
}

#[test]
fn waves_text_and_json() {
    let p = with_plan(VALID);
    p.troupe().args(["tasks", "waves", "login"]).assert().success().stdout(predicate::str::diff(
        "\
login: 2 waves, 3 groups (as declared in tasks.yaml)
wave 1
  G1: 1.1 (done)
    files: src/session.rs
  G2: 2.1
    files: src/logout.rs
wave 2
  G3: 1.2
    files: src/login.rs, src/session.rs
ready to start: G2, G3
",
    ));
    let out = p.troupe().args(["--json", "tasks", "waves", "login"]).output().unwrap();
    let v = json(&out);
    assert_eq!(v["waves"][0]["groups"][1]["tasks"], serde_json::json!(["2.1"]));
    assert_eq!(v["waves"][0]["groups"][0]["done"], serde_json::json!(["1.1"]));
    assert_eq!(v["waves"][1]["groups"][0]["files"], serde_json::json!(["src/login.rs", "src/session.rs"]));
    assert_eq!(v["ready"], serde_json::json!(["G2", "G3"]));
}

#[test]
fn computed_waves() {
    let p = with_plan(&VALID[..VALID.find("execution:").unwrap()]);
    p.troupe().args(["tasks", "waves", "login"]).assert().success().stdout(predicate::str::diff(
        "\
login: 2 waves, 3 groups (computed from depends)
wave 1
  W1-1.1: 1.1 (done)
  W1-2: 2.1
wave 2
  W2-1: 1.2
ready to start: W1-2, W2-1
",
    ));
}

/// Run `tasks validate` on a bad plan: exit 1, the errors on stderr, the JSON
/// list on stdout, and the file untouched.
#[track_caller]
fn check_invalid(yaml: &str, errors: &[&str], kinds: &[&str]) {
    let p = with_plan(yaml);
    let before = p.snapshot();
    let mut expected = format!(
        "error: .troupe/specs/login/tasks.yaml has {} problem{}\n",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    );
    for e in errors {
        expected += &format!("  - {e}\n");
    }
    expected +=
        "\nhint: tasks.yaml belongs to the TaskGenerator; fix it there and run `troupe tasks validate login` again\n";
    p.troupe().args(["tasks", "validate", "login"]).assert().code(1).stdout("").stderr(predicate::str::diff(expected));
    p.troupe().args(["tasks", "waves", "login"]).assert().code(1).stdout("");
    let out = p.troupe().args(["--json", "tasks", "validate", "login"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["valid"], false);
    let got: Vec<&str> = v["errors"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(got, kinds);
    let messages: Vec<&str> = v["errors"].as_array().unwrap().iter().map(|e| e["message"].as_str().unwrap()).collect();
    assert_eq!(messages, errors);
    assert_eq!(p.snapshot(), before, "nothing on disk may change");
}

#[test]
fn cycle() {
    let yaml = VALID.replace("depends: []\n        status: done", "depends: [\"1.2\"]\n        status: done");
    check_invalid(
        &yaml,
        &[
            "dependency cycle: 1.1 -> 1.2 -> 1.1 (each depends on the next)",
            "1.1 (wave 1) depends on 1.2 (wave 2); 1.2 must run in an earlier wave",
        ],
        &["cycle", "wave_order"],
    );
}

#[test]
fn unknown_dependency() {
    let yaml = VALID.replace("depends: [\"1.1\"]", "depends: [\"1.1\", \"9.9\"]");
    check_invalid(&yaml, &["1.2 depends on 9.9, which is no task or subtask id"], &["unknown_dependency"]);
}

#[test]
fn file_collision() {
    let yaml = VALID.replace("files: [src/logout.rs]", "files: [src/logout.rs, ./src/session.rs]");
    check_invalid(&yaml, &["wave 1: groups G1 (1.1) and G2 (2.1) both own src/session.rs"], &["file_collision"]);
}

#[test]
fn bad_wave_order() {
    let yaml = VALID
        .replace("tasks: [\"1.1\"]", "tasks: [\"1.2\"]")
        .replace("tasks: [\"1.2\"]\n        files: [src/login.rs", "tasks: [\"1.1\"]\n        files: [src/login.rs");
    check_invalid(&yaml, &["1.2 (wave 1) depends on 1.1 (wave 2); 1.1 must run in an earlier wave"], &["wave_order"]);
}

#[test]
fn task_in_two_groups() {
    let yaml = VALID.replace("tasks: [\"1.2\"]", "tasks: [\"1.2\", \"2.1\"]");
    check_invalid(&yaml, &["2.1 is in two groups: G2 (wave 1) and G3 (wave 2)"], &["task_in_two_groups"]);
}

#[test]
fn malformed_yaml_names_the_line() {
    let p = with_plan("tasks:\n  - id: \"1\"\n    subtasks: [\n");
    let before = p.snapshot();
    p.troupe().args(["tasks", "validate", "login"]).assert().code(3).stderr(predicate::str::diff(
        "error: .troupe/specs/login/tasks.yaml is not a valid task plan: did not find expected node content at line 4, column 1\n\nhint: fix the YAML at that line; troupe changes nothing in a file it cannot read\n",
    ));
    let out = p.troupe().args(["--json", "tasks", "waves", "login"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["error"]["kind"], "config");
    assert_eq!(p.snapshot(), before);
}

#[test]
fn missing_feature_and_missing_plan() {
    let p = TestProject::new();
    p.troupe().args(["tasks", "validate", "nope"]).assert().code(1).stderr(predicate::str::starts_with(
        "error: no spec named 'nope'\n\nhint: `troupe spec list` shows the existing specs",
    ));
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let before = p.snapshot();
    p.troupe().args(["tasks", "waves", "login"]).assert().code(1).stderr(predicate::str::diff(
        "error: login has no task plan yet (.troupe/specs/login/tasks.yaml does not exist)\n\nhint: the TaskGenerator writes tasks.yaml once the design is done\n",
    ));
    p.troupe()
        .args(["tasks", "validate", "../etc"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a feature name"));
    assert_eq!(p.snapshot(), before);
}
