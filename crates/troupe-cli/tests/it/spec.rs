use predicates::prelude::*;

use crate::support::{TestProject, json};

fn set_phase(p: &TestProject, feature: &str, phase: &str) {
    let path = p.path(&format!(".troupe/specs/{feature}/spec.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("phase: initialized", &format!("phase: {phase}"));
    std::fs::write(&path, text).unwrap();
}

#[test]
fn new_list_show() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login", "--description", "users log in"]).assert().success();
    let out = p.troupe().args(["--json", "spec", "list"]).output().unwrap();
    let list = json(&out);
    assert_eq!(list[0]["feature"], "login");
    assert_eq!(list[0]["phase"], "initialized");
    let out = p.troupe().args(["--json", "spec", "show", "login"]).output().unwrap();
    let spec = json(&out);
    assert_eq!(spec["description"], "users log in");
    assert_eq!(spec["changelog"][0]["action"], "created");
    p.troupe().args(["spec", "new", "login"]).assert().code(1).stderr(predicate::str::contains("already exists"));
}

#[test]
fn gate_reports_the_seed_messages() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "checkout"]).assert().success();
    p.troupe().args(["spec", "new", "payments"]).assert().success();
    p.troupe().args(["spec", "gate", "checkout", "design"]).assert().success();
    p.troupe()
        .args(["spec", "gate", "checkout", "impl"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("needs phase 'design-generated'"))
        .stderr(predicate::str::contains("troupe design checkout"));

    p.troupe().args(["spec", "block", "checkout", "--by", "payments"]).assert().success();
    p.troupe()
        .args(["spec", "gate", "checkout", "design"])
        .assert()
        .code(1)
        .stderr(predicate::str::diff("error: checkout is blocked by payments\n"));
    let out = p.troupe().args(["--json", "spec", "gate", "checkout", "design"]).output().unwrap();
    assert_eq!(json(&out)["message"], "checkout is blocked by payments");

    p.troupe().args(["spec", "unblock", "checkout"]).assert().success();
    p.troupe().args(["spec", "gate", "checkout", "design"]).assert().success();

    set_phase(&p, "payments", "designing");
    p.troupe()
        .args(["spec", "gate", "payments", "design"])
        .assert()
        .code(1)
        .stderr(predicate::str::diff("error: Unknown phase 'designing'\n"));
}

#[test]
fn block_restores_phase_and_revise_moves_back() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "a"]).assert().success();
    p.troupe().args(["spec", "new", "b"]).assert().success();
    set_phase(&p, "b", "design-generated");
    p.troupe().args(["spec", "block", "b", "--by", "a", "--reason", "upstream_failure"]).assert().success();
    let out = p.troupe().args(["--json", "spec", "show", "b"]).output().unwrap();
    let spec = json(&out);
    assert_eq!(spec["phase"], "blocked");
    assert_eq!(spec["blocked_info"]["blocked_at_phase"], "design-generated");
    assert_eq!(spec["blocked_info"]["reason"], "upstream_failure");
    p.troupe().args(["spec", "unblock", "b"]).assert().success();
    let out = p.troupe().args(["--json", "spec", "show", "b"]).output().unwrap();
    assert_eq!(json(&out)["phase"], "design-generated");

    p.troupe()
        .args(["spec", "revise", "b"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("needs phase 'implementation-complete'"));
    set_phase(&p, "a", "implementation-complete");
    p.troupe().args(["spec", "revise", "a"]).assert().success();
    let out = p.troupe().args(["--json", "spec", "show", "a"]).output().unwrap();
    let spec = json(&out);
    assert_eq!(spec["phase"], "design-generated");
    assert_eq!(spec["version"], "1.1");
}

#[test]
fn bad_input_changes_nothing() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "a"]).assert().success();
    let before = p.snapshot();

    p.troupe()
        .args(["spec", "new", "../escape"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not a valid feature name"));
    p.troupe()
        .args(["spec", "show", "missing"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no spec named 'missing'"));
    p.troupe().args(["spec", "block", "a", "--by", "missing"]).assert().code(1);
    p.troupe().args(["spec", "block", "a", "--by", "a"]).assert().code(1);
    p.troupe().args(["spec", "unblock", "a"]).assert().code(1).stderr(predicate::str::contains("is not blocked"));
    p.troupe()
        .args(["spec", "gate", "a", "deploy"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown operation 'deploy'"));
    assert_eq!(p.snapshot(), before);

    let path = p.path(".troupe/specs/a/spec.yaml");
    std::fs::write(&path, "feature_name: a\nphase: [oops\n").unwrap();
    let before = p.snapshot();
    p.troupe()
        .args(["spec", "block", "a", "--by", "a"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("spec.yaml:2:8"))
        .stderr(predicate::str::contains("never rewrites"));
    p.troupe().args(["spec", "gate", "a", "design"]).assert().code(3);
    assert_eq!(p.snapshot(), before);
    let out = p.troupe().args(["--json", "spec", "list"]).output().unwrap();
    assert!(json(&out)[0]["error"].as_str().unwrap().contains("spec.yaml"));
}

#[test]
fn json_errors_are_objects_on_stdout() {
    let p = TestProject::new();
    let out = p.troupe().args(["--json", "spec", "show", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["error"]["kind"], "user");
    assert!(v["error"]["hint"].as_str().unwrap().contains("troupe spec list"));
}

#[test]
fn ownership_matrix_is_printed() {
    let p = TestProject::new();
    let out = p.troupe().args(["--json", "policy", "ownership"]).output().unwrap();
    let rows = json(&out);
    let tasks = rows.as_array().unwrap().iter().find(|r| r["artifact"] == "tasks.yaml").unwrap();
    assert_eq!(tasks["rights"]["lead"], "status-only");
    assert_eq!(tasks["rights"]["task-generator"], "create+modify");
    p.troupe().args(["policy", "ownership"]).assert().success().stdout(predicate::str::contains("spec.yaml"));
}
