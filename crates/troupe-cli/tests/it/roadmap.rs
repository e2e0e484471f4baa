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
      - report: "BUILDER_COMPLETE\nFeature: f\nStatus: done\nTasks completed: 1\nFiles: {feature}.txt\nTests: ok"
"##;

/// [`SCRIPT`] whose Builders prove they run at the same time: each leaves
/// `<feature>.start` in `marks`, waits (up to `wait` × 50 ms) for the Builder of
/// the other wave-1 feature to start too, notes what it saw in `<feature>.saw`,
/// and leaves `<feature>.end`. Run one after the other, the first would see only itself.
/// Where the overlapping Builders leave their marks (relative to the root).
const MARKS: &str = "target/marks";

fn overlapping_builders(marks: &str, wait: u32) -> String {
    let m = marks;
    let wait = format!(
        "touch {m}/{{feature}}.start; case {{feature}} in pay|search) i=0; \
         while [ $i -lt {wait} ] && [ $(ls {m} | grep -c start) -lt 2 ]; do sleep 0.05; i=$((i+1)); done;; esac; \
         ls {m} > {m}/{{feature}}.saw; touch {m}/{{feature}}.end"
    );
    let builder = "    - - write: {path: \"{feature}.txt\"";
    assert!(SCRIPT.contains(builder));
    SCRIPT
        .replace("  builder/G1:\n", &format!("  builder/G1:\n    - - run: \"{wait}\"\n"))
        .replace(builder, "      - write: {path: \"{feature}.txt\"")
}

fn project() -> TestProject {
    project_with(SCRIPT)
}

fn project_with(script: &str) -> TestProject {
    let p = TestProject::new();
    fs::write(p.path(".troupe/scripted.yaml"), script).unwrap();
    fs::write(p.path(".troupe/steering/tech.md"), "# Tech\n\n## Common Commands\n\n- Test: `true`\n- Lint: `true`\n")
        .unwrap();
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["config", "user.email", "t@localhost"]);
    git(p.root(), &["config", "user.name", "t"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "start"]);
    p
}

/// `[team] isolation = "shared"`: the features' Builders leave their marks in
/// one build output folder of the shared work tree (in worktrees each would
/// have its own), and every commit of a feature, its files included, is on
/// the line itself (scoped to its feature: the shared tree's concern; with
/// worktrees the files come in by merges, see
/// `sibling_features_of_a_wave_never_see_each_others_partial_files`).
fn shared(p: TestProject) -> TestProject {
    let config = fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    fs::write(p.path(".troupe/config.toml"), config.replacen("[team]\n", "[team]\nisolation = \"shared\"\n", 1))
        .unwrap();
    git(p.root(), &["commit", "-q", "-am", "shared tree"]);
    p
}

/// `troupe roadmap create <create>`, committed, then `troupe --json roadmap
/// run --no-review` with the scripted engine, which must succeed.
fn create_and_run(p: &TestProject, create: &[&str]) -> std::process::Output {
    p.troupe().args(["roadmap", "create"]).args(create).assert().success();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    let run = p.troupe().args(["--json", "roadmap", "run", "--no-review", "--engine", "scripted"]).output().unwrap();
    assert!(run.status.success(), "{}\n{}", String::from_utf8_lossy(&run.stderr), String::from_utf8_lossy(&run.stdout));
    run
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
    p.troupe().args(["roadmap", "status"]).assert().success().stdout(predicate::str::contains("\n   3  checkout  "));
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
    // No roadmap, no run: nothing is recorded for `troupe replay` either.
    q.troupe()
        .args(["roadmap", "run", "--engine", "scripted"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("there is no roadmap"));
    let runs = q.path(".troupe/state/runs");
    assert!(fs::read_dir(&runs).map_or(true, |mut d| d.next().is_none()), "a run folder in {}", runs.display());
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
    // pay and search ran side by side in wave 1; pay's failure blocked cart, search finished.
    let ran = json(&run)["ran"].clone();
    let outcome = |f: &str| ran.as_array().unwrap().iter().find(|r| r["feature"] == f).map(|r| r["outcome"].clone());
    assert_eq!(outcome("pay"), Some("escalated".into()), "{ran}");
    assert_eq!(outcome("search"), Some("completed".into()), "{ran}");
    assert_eq!(outcome("cart"), None, "a blocked feature does not run: {ran}");
    let pay = ran.as_array().unwrap().iter().find(|r| r["feature"] == "pay").unwrap();
    assert_eq!(pay["wave"], 1);
    assert_eq!(pay["blocked"], serde_json::json!([{"feature": "cart", "changed": true, "phase": "blocked"}]));
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
    assert!(run.status.success(), "{}\n{}", String::from_utf8_lossy(&run.stderr), String::from_utf8_lossy(&run.stdout));
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
    p.troupe().args(["run", "solo", "a solo feature", "--no-review", "--engine", "scripted"]).assert().success();
    p.troupe().args(["revise", "solo", "more", "--no-review", "--engine", "scripted"]).assert().success();
    let spec = json(&p.troupe().args(["--json", "spec", "show", "solo"]).output().unwrap());
    assert_eq!(
        (spec["phase"].as_str(), spec["version"].as_str()),
        (Some("implementation-complete"), Some("1.1")),
        "{spec}"
    );
}

/// The feature a changed path belongs to: its spec folder or its `<feature>.txt`
/// (the handover files and roadmap.yaml are shared bookkeeping).
fn owner(path: &str) -> Option<&str> {
    if let Some(rest) = path.strip_prefix(".troupe/specs/") {
        return rest.split('/').next();
    }
    path.strip_suffix(".txt")
}

#[test]
fn a_wave_runs_its_features_at_the_same_time_and_each_commit_holds_only_its_own_files() {
    // In a build output folder, the only place beside their own files the
    // sandboxed Builders may write.
    let p = shared(project_with(&overlapping_builders(MARKS, 400)));
    fs::create_dir_all(p.path(MARKS)).unwrap();
    let run =
        create_and_run(&p, &["pay", "search", "checkout", "--depends", "checkout:pay", "--depends", "checkout:search"]);
    let v = json(&run);
    assert_eq!(v["complete"], true);
    let ran: Vec<(String, u64, String)> = v["ran"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (r["feature"].as_str().unwrap().into(), r["wave"].as_u64().unwrap(), r["outcome"].as_str().unwrap().into())
        })
        .collect();
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert_eq!(ran[2], ("checkout".into(), 2, "completed".into()), "wave 2 after wave 1: {ran:?}");
    for f in ["pay", "search"] {
        assert!(ran[..2].contains(&(f.into(), 1, "completed".into())), "{ran:?}");
    }

    // Both Builders of wave 1 were running at the same time: each saw the other's start before it ended.
    let saw = |f: &str| fs::read_to_string(p.path(MARKS).join(format!("{f}.saw"))).unwrap();
    assert!(saw("pay").contains("search.start"), "pay's Builder ran alone: {}", saw("pay"));
    assert!(saw("search").contains("pay.start"), "search's Builder ran alone: {}", saw("search"));
    // The progress lines name their feature.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("roadmap: wave 1: pay, search"), "{stderr}");

    // Every commit of the run holds one feature's files, and says which.
    let log = git(p.root(), &["log", "--format=%H %s", "HEAD^{/^specs}..HEAD"]);
    let commits: Vec<(&str, &str)> = log.lines().map(|l| l.split_once(' ').unwrap()).collect();
    let mut by_feature: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (sha, subject) in &commits {
        let (wave, feature) = match subject.split_once(": ").and_then(|(w, rest)| Some((w, rest.split_once(' ')?.0))) {
            Some(x) => x,
            None => panic!("not a roadmap commit: {subject}"),
        };
        assert_eq!(wave, if feature == "checkout" { "Wave 2" } else { "Wave 1" }, "{subject}");
        let files = git(p.root(), &["show", "--name-only", "--format=", sha]);
        for file in files.lines() {
            assert!(!file.starts_with(".troupe/state/"), "{subject}: {file}");
            if let Some(o) = owner(file) {
                assert_eq!(o, feature, "{subject} holds {file} of another feature");
            }
            by_feature.entry(feature.to_string()).or_default().push(file.to_string());
        }
    }
    for f in ["pay", "search", "checkout"] {
        let files = &by_feature[f];
        for own in [format!(".troupe/specs/{f}/design.md"), format!(".troupe/specs/{f}/tasks.yaml"), format!("{f}.txt")]
        {
            assert!(files.contains(&own), "{f}'s commits miss {own}: {files:?}");
        }
    }
}

#[test]
fn the_concurrency_cap_holds_across_the_features_of_a_wave() {
    let p = shared(project_with(&overlapping_builders(MARKS, 40)));
    fs::create_dir_all(p.path(MARKS)).unwrap();
    let config = fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    let config = config.replace("[team]\n", "[team]\nmax_concurrent = 1\n");
    assert!(config.contains("max_concurrent = 1\n"), "{config}");
    fs::write(p.path(".troupe/config.toml"), config).unwrap();
    p.troupe().args(["roadmap", "create", "pay", "search"]).assert().success();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    p.troupe().args(["roadmap", "run", "--no-review", "--engine", "scripted"]).assert().success();
    // One teammate at a time in the whole wave: the Builders never met.
    let saw = |f: &str| fs::read_to_string(p.path(MARKS).join(format!("{f}.saw"))).unwrap();
    let (pay, search) = (saw("pay"), saw("search"));
    assert!(!(pay.contains("search.start") && search.contains("pay.start")), "pay saw {pay}; search saw {search}");
    let log = git(p.root(), &["log", "--format=%s"]);
    for f in ["pay", "search"] {
        assert!(log.contains(&format!("Wave 1: {f} implement")), "{log}");
    }
}

/// Inspectors and an Auditor that find nothing.
const REVIEWERS: &str = r##"  inspector:
    - - write: {path: ".troupe/specs/{feature}/reviews/active/{agent}.cpf", content: "VERDICT:GO\nSCOPE:{feature}\nISSUES:\n"}
      - report: "VERDICT:GO\nSCOPE:{feature}\nISSUES:\n"
  auditor:
    - - sleep: 300
      - write: {path: ".troupe/specs/{feature}/reviews/active/verdict.cpf", content: "VERDICT:GO\nSCOPE:{feature}\nVERIFIED:\nREMOVED:\nNOTES:\nnothing found\n"}
      - report: "VERDICT:GO\nSCOPE:{feature}\nVERIFIED:\nREMOVED:\nNOTES:\nnothing found\n"
"##;

#[test]
fn features_of_a_wave_are_reviewed_side_by_side() {
    let p = project_with(&format!("{SCRIPT}{REVIEWERS}"));
    p.troupe().args(["roadmap", "create", "pay", "search"]).assert().success();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    let run = p.troupe().args(["--json", "roadmap", "run", "--review", "--engine", "scripted"]).output().unwrap();
    assert!(run.status.success(), "{}\n{}", String::from_utf8_lossy(&run.stderr), String::from_utf8_lossy(&run.stdout));
    for f in ["pay", "search"] {
        let verdicts = fs::read_to_string(p.path(&format!(".troupe/specs/{f}/verdicts.md"))).unwrap();
        assert!(verdicts.contains("] design |") && verdicts.contains("] impl |"), "{f}: {verdicts}");
        // Each feature's reviewers have their own ids, so their findings never mix.
        let archive: Vec<String> = fs::read_dir(p.path(&format!(".troupe/specs/{f}/reviews/B1")))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(archive.iter().filter(|n| n.starts_with(&format!("inspector-{f}-"))).count(), 6, "{archive:?}");
        let log = git(p.root(), &["log", "--format=%s"]);
        assert!(log.contains(&format!("Wave 1: {f} design review GO (B1)")), "{log}");
        assert!(log.contains(&format!("Wave 1: {f} impl review GO (B2)")), "{log}");
    }
    // Every review commit holds one feature's files.
    let log = git(p.root(), &["log", "--format=%H %s", "HEAD^{/^specs}..HEAD"]);
    for (sha, subject) in log.lines().map(|l| l.split_once(' ').unwrap()) {
        let feature = subject.split(' ').nth(2).unwrap();
        for file in git(p.root(), &["show", "--name-only", "--format=", sha]).lines() {
            if let Some(o) = owner(file) {
                assert_eq!(o, feature, "{subject} holds {file}");
            }
        }
    }
}

/// Two groups per feature, G2 after G1; each feature's G2 Builder waits until
/// the sibling feature's G1 is merged on the sibling's own line, so both lines
/// hold a merged group while neither feature is complete.
const SIBLINGS: &str = r##"  task-generator:
    - - write:
          path: ".troupe/specs/{feature}/tasks.yaml"
          content: |
            tasks:
              - {id: "1", summary: first half, status: pending}
              - {id: "2", summary: second half, depends: ["1"], status: pending}
            execution:
              - wave: 1
                groups:
                  - {id: G1, tasks: ["1"], files: ["{feature}-1.txt"]}
              - wave: 2
                groups:
                  - {id: G2, tasks: ["2"], files: ["{feature}-2.txt"]}
      - report: "TASKGEN_COMPLETE\nTasks: 2\nWaves: 2"
  builder/G1:
    - - write: {path: "{feature}-1.txt", content: "one\n"}
      - report: "BUILDER_COMPLETE\nFeature: {feature}\nStatus: done\nTasks completed: 1\nFiles: {feature}-1.txt\nTests: ok"
  builder/G2:
    - - run: |
          case {feature} in pay) o=search;; *) o=pay;; esac
          for i in $(seq 600); do
            git -C "$TROUPE_PROJECT" log --format=%B "troupe-line/$o" 2>/dev/null | grep -q "Troupe-Merge: $o/G1@" && break
            sleep 0.05
          done
      - write: {path: "{feature}-2.txt", content: "two\n"}
      - report: "BUILDER_COMPLETE\nFeature: {feature}\nStatus: done\nTasks completed: 2\nFiles: {feature}-2.txt\nTests: ok"
"##;

/// Issue 18, roadmap waves: the features of one wave each merge their groups
/// into their own integration branch (`troupe-line/<feature>`), so no gate of
/// one ever sees the other's unfinished files (half a feature: `x-1.txt`
/// without `x-2.txt`), its merged and final gates run on its own line, and
/// each lands on the current branch as one `Wave {N}:` merge. Nothing is left:
/// no worktree, no troupe branch.
#[test]
fn sibling_features_of_a_wave_never_see_each_others_partial_files() {
    let architect = &SCRIPT[..SCRIPT.find("  task-generator:").unwrap()];
    let p = project_with(&format!("{architect}{SIBLINGS}"));
    let log = tempfile::tempdir().unwrap();
    let gates = log.path().join("gates");
    // The gate knows its feature from where it runs (a line's or a group's worktree).
    let check = format!(
        r#"case "$PWD" in
  */.troupe/state/lines/*) me=$(basename "$PWD"); at=line ;;
  */.troupe/state/worktrees/*) me=$(basename "$(dirname "$PWD")"); at=group ;;
  *) me=; at=main ;;
esac
echo "${{me:-main}} $at" >> {}
for f in pay search; do
  if [ "$f" != "$me" ] && [ -f "$f-1.txt" ] && [ ! -f "$f-2.txt" ]; then echo "the $at gate of $me sees $f's partial files"; exit 1; fi
done
"#,
        gates.display()
    );
    fs::write(p.path("check.sh"), check).unwrap();
    fs::write(p.path(".troupe/steering/tech.md"), "# Tech\n\n## Common Commands\n\n- Test: `sh check.sh`\n").unwrap();
    p.troupe().args(["roadmap", "create", "pay", "search"]).assert().success();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "specs"]);
    let run = p.troupe().args(["--json", "roadmap", "run", "--no-review", "--engine", "scripted"]).output().unwrap();
    assert!(run.status.success(), "{}\n{}", String::from_utf8_lossy(&run.stderr), String::from_utf8_lossy(&run.stdout));
    let decisions = fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(!decisions.contains("failed"), "no gate saw a sibling's partial files:\n{decisions}");
    let gates = fs::read_to_string(&gates).unwrap();
    for f in ["pay", "search"] {
        // Two merged gates and the final gate on its own line.
        assert_eq!(gates.lines().filter(|l| *l == format!("{f} line")).count(), 3, "{gates}");
        for n in [1, 2] {
            assert!(p.path(&format!("{f}-{n}.txt")).is_file(), "{f}-{n}.txt landed");
        }
    }
    let subjects = git(p.root(), &["log", "--format=%s"]);
    for f in ["pay", "search"] {
        assert!(subjects.contains(&format!("Wave 1: {f} merge the implementation (2 groups)")), "{subjects}");
    }
    let worktrees = git(p.root(), &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 1, "only the main tree:\n{worktrees}");
    assert_eq!(git(p.root(), &["branch", "--list", "troupe*"]), "", "no troupe branch is left");
    assert!(
        !p.path(".troupe/state/lines").exists() || fs::read_dir(p.path(".troupe/state/lines")).unwrap().count() == 0
    );
    let status = git(p.root(), &["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.lines().all(|l| l[3..].starts_with(".troupe/")), "{status}");
}

/// `troupe roadmap run` is recorded as a whole (its start before any
/// feature's run), and `troupe replay` runs all of it again with no model:
/// both waves, every feature, with the same events, each feature's board and
/// the same committed code. The features of wave 1 reserve their agent
/// numbers in any order; the replay gives each its recorded block.
#[test]
fn a_roadmap_run_replays_every_wave_with_the_same_events_boards_and_commits() {
    let p = project();
    create_and_run(&p, &["pay", "search", "checkout", "--depends", "checkout:pay"]);
    let runs = p.path(".troupe/state/runs");
    let roadmap = fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("roadmap@"))
        .expect("the roadmap run is recorded");
    let record: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(roadmap.path().join("run.json")).unwrap()).unwrap();
    let features: Vec<&str> =
        record["roadmap"]["runs"].as_array().unwrap().iter().filter_map(|r| r["feature"].as_str()).collect();
    assert_eq!(features.len(), 3, "{record}");
    assert_eq!(features[2], "checkout", "wave 2 last: {record}");
    assert_eq!(record["roadmap"]["review_args"], serde_json::json!(["--no-review"]));
    assert_eq!(record["outcome"], "completed");

    let root = p.root().canonicalize().unwrap();
    let report = crate::replay::assert_replays(&root, &[]);
    assert_eq!(report["run"], record["run"], "`last` is the roadmap run, not its last feature's");
    let events = report["events"].to_string();
    for f in ["pay", "search", "checkout"] {
        assert!(events.contains(&format!("\"{f}/1\"")), "{f}'s task is among the replayed events");
    }
    // A feature of the wave names its roadmap run too.
    let at = tempfile::tempdir().unwrap();
    let by_feature = p
        .troupe()
        .args(["--json", "replay", "pay", "--until", "1", "--dir"])
        .arg(at.path().join("at1"))
        .output()
        .unwrap();
    assert_eq!(json(&by_feature)["run"], record["run"], "{}", String::from_utf8_lossy(&by_feature.stderr));
}
