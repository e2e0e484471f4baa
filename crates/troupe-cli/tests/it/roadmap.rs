//! `troupe roadmap` and `troupe revise` end to end, with the built-in scripted
//! engine as every teammate: waves, a failing feature blocking everything
//! downstream, skip and fix restoring phases, `Wave {N}` commits.

use std::fs;
use std::path::Path;
use std::process::Command as Std;

use predicates::prelude::*;

use crate::support::{TestProject, json};

fn git(root: &Path, args: &[&str]) -> String {
    let out = Std::new("git").args(args).current_dir(root).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every role's script. The Architect removes its design again for a feature
/// that has a `fail-<feature>` file, so that feature's design fails.
const SCRIPT: &str = r##"agents:
  architect:
    - - write: {path: ".troupe/specs/{feature}/design.md", content: "# Design\n"}
      - write: {path: ".troupe/specs/{feature}/research.md", content: "# Research\n"}
      - run: "if [ -e fail-{feature} ]; then rm .troupe/specs/{feature}/design.md; fi; true"
      - report: "ARCHITECT_COMPLETE\nSummary: a design"
  task-generator:
    - - write:
          path: ".troupe/specs/{feature}/tasks.yaml"
          content: |
            tasks:
              - id: "1"
                summary: the feature
                status: pending
            execution:
              - wave: 1
                groups:
                  - {id: G1, tasks: ["1"], files: ["{feature}.txt"]}
      - report: "TASKGEN_COMPLETE\nTasks: 1\nWaves: 1"
  builder/G1:
    - - write: {path: "{feature}.txt", content: "done\n"}
      - complete: "1"
      - report: "BUILDER_COMPLETE\nTasks completed: 1\nFiles: {feature}.txt\nTests: ok"
"##;

fn project() -> TestProject {
    let p = TestProject::new();
    fs::write(p.path(".troupe/scripted.yaml"), SCRIPT).unwrap();
    fs::write(p.path(".troupe/steering/tech.md"), "# Tech\n\n## Common Commands\n\n- Test: `true`\n- Lint: `true`\n")
        .unwrap();
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["config", "user.email", "t@localhost"]);
    git(p.root(), &["config", "user.name", "t"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "start"]);
    p
}

fn status(p: &TestProject) -> serde_json::Value {
    json(&p.troupe().args(["--json", "roadmap", "status"]).output().unwrap())
}

fn row<'a>(s: &'a serde_json::Value, feature: &str) -> &'a serde_json::Value {
    s.as_array().unwrap().iter().find(|f| f["feature"] == feature).unwrap()
}

#[test]
fn create_shows_waves_and_bad_input_changes_nothing() {
    let p = project();
    let out = p
        .troupe()
        .args(["--json", "roadmap", "create", "pay", "cart", "search", "checkout"])
        .args(["--depends", "cart:pay", "--depends", "checkout:cart", "--depends", "checkout:search"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    assert_eq!(v["waves"], serde_json::json!([["pay", "search"], ["cart"], ["checkout"]]));
    let spec = fs::read_to_string(p.path(".troupe/specs/checkout/spec.yaml")).unwrap();
    assert!(spec.contains("roadmap:\n  wave: 3\n  dependencies:\n  - cart\n  - search"), "{spec}");
    p.troupe().args(["roadmap", "status"]).assert().success().stdout(predicate::str::contains("3     checkout"));
    p.troupe().args(["roadmap", "create", "x"]).assert().code(1).stderr(predicate::str::contains("is not complete"));

    let q = project();
    let before = q.snapshot();
    q.troupe()
        .args(["roadmap", "create", "a", "b", "--depends", "a:b", "--depends", "b:a"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("dependency cycle: a -> b -> a"));
    q.troupe().args(["roadmap", "create", "a", "--depends", "a"]).assert().code(2);
    q.troupe()
        .args(["roadmap", "create", "a", "--depends", "a:zz"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("names 'zz'"));
    assert_eq!(q.snapshot(), before, "nothing written on bad input");
    q.troupe().args(["roadmap", "status"]).assert().code(1).stderr(predicate::str::contains("there is no roadmap"));
}

#[test]
fn a_failure_blocks_downstream_then_skip_unblocks_and_the_rest_runs_in_waves() {
    let p = project();
    p.troupe().args(["roadmap", "create", "pay", "cart", "search", "--depends", "cart:pay"]).assert().success();
    fs::write(p.path("fail-pay"), "").unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    let run = p.troupe().args(["--json", "roadmap", "run", "--no-review", "--engine", "scripted"]).output().unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", String::from_utf8_lossy(&run.stderr));
    let s = status(&p);
    assert_eq!(row(&s, "pay")["status"], "failed");
    assert_eq!(row(&s, "cart")["phase"], "blocked");
    assert_eq!(row(&s, "cart")["blocked_by"], "pay");
    assert_eq!(row(&s, "cart")["blocked_at_phase"], "initialized");
    assert_eq!(row(&s, "search")["status"], "done", "independent features go on");
    let spec = fs::read_to_string(p.path(".troupe/specs/cart/spec.yaml")).unwrap();
    assert!(spec.contains("reason: upstream_failure"), "{spec}");
    p.troupe()
        .args(["spec", "gate", "cart", "design"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cart is blocked by pay"));

    let out = p.troupe().args(["--json", "roadmap", "skip", "pay"]).output().unwrap();
    assert_eq!(json(&out), serde_json::json!([{"feature": "cart", "changed": true, "phase": "initialized"}]));
    let run = p.troupe().args(["--json", "roadmap", "run", "--no-review", "--engine", "scripted"]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let s = status(&p);
    assert_eq!(row(&s, "pay")["status"], "skipped");
    assert_eq!(row(&s, "cart")["status"], "done");
    assert_eq!(row(&s, "cart")["phase"], "implementation-complete");
    let log = git(p.root(), &["log", "--format=%s"]);
    assert!(log.lines().any(|l| l.starts_with("Wave 2: ")), "cart is in wave 2: {log}");
    assert!(log.lines().any(|l| l.starts_with("Wave 1: ")), "search is in wave 1: {log}");
}

#[test]
fn fix_restores_the_blocked_phase_and_runs_the_failed_feature_again() {
    let p = project();
    p.troupe().args(["roadmap", "create", "pay", "cart", "--depends", "cart:pay"]).assert().success();
    fs::write(p.path("fail-pay"), "").unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    p.troupe().args(["roadmap", "run", "--no-review", "--engine", "scripted"]).assert().code(1);
    fs::remove_file(p.path("fail-pay")).unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "fixed"]);
    p.troupe()
        .args(["roadmap", "fix", "pay"])
        .assert()
        .success()
        .stdout(predicate::str::contains("cart: now initialized"));
    assert_eq!(row(&status(&p), "pay")["status"], "pending");
    p.troupe().args(["roadmap", "run", "--no-review", "--engine", "scripted"]).assert().success();
    let s = status(&p);
    assert_eq!(row(&s, "pay")["phase"], "implementation-complete");
    assert_eq!(row(&s, "cart")["phase"], "implementation-complete");
}

#[test]
fn revise_goes_through_the_roadmap_or_runs_the_pipeline() {
    let p = project();
    p.troupe().args(["roadmap", "create", "pay", "cart", "--depends", "cart:pay"]).assert().success();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    p.troupe().args(["roadmap", "run", "--no-review", "--engine", "scripted"]).assert().success();
    p.troupe()
        .args(["revise", "pay", "", "--no-run"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the change is empty"));
    let out = p.troupe().args(["--json", "revise", "pay", "pay by card too"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    assert_eq!(v["phase"], "design-generated");
    assert_eq!(v["version"], "1.1");
    assert_eq!(v["roadmap_queued"], serde_json::json!(["pay", "cart"]));
    let spec = fs::read_to_string(p.path(".troupe/specs/pay/spec.yaml")).unwrap();
    assert!(spec.contains("Revision 1.1: pay by card too"), "the Architect reads the change: {spec}");
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "revise"]);
    p.troupe().args(["roadmap", "run", "--no-review", "--engine", "scripted"]).assert().success();
    assert_eq!(row(&status(&p), "pay")["phase"], "implementation-complete");

    // Outside a roadmap, revise runs the pipeline itself.
    p.troupe().args(["spec", "new", "solo"]).assert().success();
    p.troupe().args(["run", "solo", "a solo feature", "--engine", "scripted"]).assert().success();
    p.troupe().args(["revise", "solo", "more", "--no-review", "--engine", "scripted"]).assert().success();
    let spec = json(&p.troupe().args(["--json", "spec", "show", "solo"]).output().unwrap());
    assert_eq!(
        (spec["phase"].as_str(), spec["version"].as_str()),
        (Some("implementation-complete"), Some("1.1")),
        "{spec}"
    );
}
