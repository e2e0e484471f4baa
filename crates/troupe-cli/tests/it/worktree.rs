//! `[team] isolation = "worktree"` end to end with the scripted engine: each
//! Builder group in its own git worktree, merged by the Lead in wave order,
//! the wave's gate on the merged result, conflicts and failing merged gates
//! reset and rebuilt, a killed run resumed. After every run: no troupe
//! worktree in `git worktree list`, no `troupe/*` branch, no merge debris.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::lead::{DESIGN, git, project};
use crate::support::{TestProject, json};

/// Two waves: G1 and G2 side by side, G3 after them.
fn tasks(g1_files: &str, g2_files: &str) -> String {
    format!(
        r##"
  task-generator:
    - - write:
          path: ".troupe/specs/{{feature}}/tasks.yaml"
          content: |
            tasks:
              - {{id: "1", summary: A, status: pending}}
              - {{id: "2", summary: B, status: pending}}
              - {{id: "3", summary: C, depends: ["1", "2"], status: pending}}
            execution:
              - wave: 1
                groups:
                  - {{id: G1, tasks: ["1"], files: [{g1_files}]}}
                  - {{id: G2, tasks: ["2"], files: [{g2_files}]}}
              - wave: 2
                groups:
                  - {{id: G3, tasks: ["3"], files: [c.txt]}}
      - report: "TASKGEN_COMPLETE\nTasks: 3\nWaves: 2"
"##
    )
}

/// A Builder turn: `actions` (YAML list items, already indented), then its report.
fn builder(group: &str, task: &str, files: &str, actions: &[&str]) -> String {
    let mut s = format!("  builder/{group}:\n    - ");
    for (i, a) in actions.iter().enumerate() {
        s.push_str(if i == 0 { "- " } else { "      - " });
        s.push_str(a);
        s.push('\n');
    }
    s.push_str(&format!(
        "      - report: \"BUILDER_COMPLETE\\nFeature: login\\nStatus: done\\nTasks completed: {task}\\nFiles: {files}\\nTests: ok\"\n"
    ));
    s
}

/// A shell loop (bounded at 30 s) that waits until the line holds `group`'s merge.
fn until_merged(group: &str) -> String {
    format!(
        "run: \"for i in $(seq 600); do git -C \\\"$TROUPE_PROJECT\\\" log --format=%B | grep -q 'Troupe-Merge: login/{group}@' && break; sleep 0.05; done\""
    )
}

/// A project in worktree isolation whose gate runs `check` (a shell script).
fn isolated(script: &str, check: &str) -> TestProject {
    let p = project(script);
    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    let config = config.replacen("[team]\n", "[team]\nisolation = \"worktree\"\n", 1);
    std::fs::write(p.path(".troupe/config.toml"), config).unwrap();
    std::fs::write(p.path("check.sh"), check).unwrap();
    git(p.root(), &["commit", "-qam", "worktree isolation"]);
    p
}

fn run(p: &TestProject, verb: &str) -> (serde_json::Value, String) {
    let mut args = vec!["--json", verb, "login"];
    if verb == "run" {
        args.push("users log in");
    }
    args.extend(["--engine", "scripted", "--no-review"]);
    let out = p.troupe().args(&args).output().unwrap();
    (json(&out), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// No troupe worktree, no troupe branch, no merge in progress, and nothing
/// changed outside `.troupe/` (the run's own notes stay uncommitted when it
/// escalates; the Builders' work is either merged or gone).
fn assert_clean(root: &Path) {
    let list = git(root, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "only the main tree:\n{list}");
    assert_eq!(git(root, &["branch", "--list", "troupe/*"]), "", "no troupe branch is left");
    assert!(!root.join(".troupe/state/worktrees/login").exists(), "worktree folders removed");
    let merging = std::process::Command::new("git")
        .args(["rev-parse", "-q", "--verify", "MERGE_HEAD"])
        .current_dir(root)
        .output();
    assert!(!merging.unwrap().status.success(), "no merge in progress");
    let status = git(root, &["status", "--porcelain", "--untracked-files=all"]);
    let outside: Vec<&str> = status.lines().filter(|l| !l[3..].starts_with(".troupe/")).collect();
    assert!(outside.is_empty(), "nothing but troupe's notes is uncommitted: {outside:?}");
}

fn merges(root: &Path) -> Vec<String> {
    git(root, &["log", "--merges", "--format=%(trailers:key=Troupe-Merge,valueonly)"])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn builders(report: &serde_json::Value, group: &str) -> usize {
    let prefix = format!("builder-{}-", group.to_lowercase());
    report["teammates"].as_array().unwrap().iter().filter(|t| t["id"].as_str().unwrap().starts_with(&prefix)).count()
}

/// README's old known limitation, as a regression test: G1 writes its test
/// RED first and keeps it red until G2 is merged; G2's gate (in its own
/// worktree) and the gate on the line after G2's merge never see it, and the
/// merged result passes.
#[test]
fn a_red_test_of_one_builder_never_fails_anothers_gate() {
    let check = "if grep -qs RED t1.txt; then echo 'test t1 is red'; exit 1; fi\necho ok\n";
    let script = format!(
        "agents:{DESIGN}{}{}{}{}",
        tasks("t1.txt, a.txt", "b.txt"),
        builder(
            "G1",
            "1",
            "t1.txt, a.txt",
            &[
                "write: {path: t1.txt, content: \"RED\"}",
                &until_merged("G2"),
                "write: {path: t1.txt, content: \"GREEN\"}",
                "write: {path: a.txt, content: \"A\"}"
            ]
        ),
        builder("G2", "2", "b.txt", &["write: {path: b.txt, content: \"B\"}"]),
        builder("G3", "3", "c.txt", &["run: \"cat a.txt b.txt > c.txt\""]),
    );
    let p = isolated(&script, check);
    let (report, err) = run(&p, "run");
    assert_eq!(report["outcome"], "completed", "{err}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(!decisions.contains("failed the quality gate"), "no gate saw the red test:\n{decisions}");
    assert_eq!(merges(p.root()), ["login/G3@1.0", "login/G1@1.0", "login/G2@1.0"], "wave order, then completion order");
    // G3 started from the merged result of wave 1.
    assert_eq!(std::fs::read_to_string(p.path("c.txt")).unwrap(), "AB");
    assert_eq!(std::fs::read_to_string(p.path("t1.txt")).unwrap(), "GREEN");
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "", "a completed run leaves the tree clean");
    assert_clean(p.root());
}

/// Two groups write the same file despite the plan (a glob hides it from the
/// plan's check): the second merge conflicts and is aborted, the group is
/// reset and rebuilt from the merged line (where the other's version is), and
/// the run completes with both merges kept. (The escalation after two
/// rebuilds is the machine's unit test.)
#[test]
fn a_merge_conflict_is_aborted_and_the_group_rebuilt_from_the_merged_line() {
    let script = format!(
        "agents:{DESIGN}{}{}{}{}",
        tasks("\"s/*.txt\"", "s/a.txt"),
        builder("G1", "1", "s/a.txt", &["write: {path: s/a.txt, content: \"one\"}"]),
        builder("G2", "2", "s/a.txt", &[&until_merged("G1"), "run: \"mkdir -p s && echo two >> s/a.txt\""]),
        builder("G3", "3", "c.txt", &["run: \"cat s/a.txt > c.txt\""]),
    );
    let p = isolated(&script, "echo ok\n");
    let (report, err) = run(&p, "run");
    assert_eq!(report["outcome"], "completed", "{err}");
    assert_eq!(builders(&report, "G2"), 2, "the first Builder and one from the merged line: {report:#}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(decisions.contains("group G2 reset to be built again (1/2): merging its branch conflicted"), "{decisions}");
    assert_eq!(merges(p.root()), ["login/G3@1.0", "login/G2@1.0", "login/G1@1.0"], "G1's merge is kept");
    assert_eq!(std::fs::read_to_string(p.path("s/a.txt")).unwrap(), "onetwo\n");
    assert_eq!(std::fs::read_to_string(p.path("c.txt")).unwrap(), "onetwo\n");
    assert_clean(p.root());
}

/// Each group passes its own gate, but together they fail: the merge is taken
/// back, the group rebuilt from the merged line (where it sees G1's work and
/// adapts), and the run completes.
#[test]
fn a_failing_gate_on_the_merged_result_takes_the_merge_back_and_rebuilds() {
    let check =
        "if [ -f a.txt ] && grep -qs v1 b.txt; then echo 'b.txt v1 does not work with a.txt'; exit 1; fi\necho ok\n";
    let script = format!(
        "agents:{DESIGN}{}{}{}{}",
        tasks("a.txt", "b.txt"),
        builder("G1", "1", "a.txt", &["write: {path: a.txt, content: \"A\"}"]),
        builder(
            "G2",
            "2",
            "b.txt",
            &[&until_merged("G1"), "run: \"if [ -f a.txt ]; then echo v2 > b.txt; else echo v1 > b.txt; fi\""]
        ),
        builder("G3", "3", "c.txt", &["write: {path: c.txt, content: \"C\"}"]),
    );
    let p = isolated(&script, check);
    let (report, err) = run(&p, "run");
    assert_eq!(report["outcome"], "completed", "{err}");
    assert_eq!(builders(&report, "G2"), 2, "{report:#}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(
        decisions.contains("group G2 reset to be built again (1/2): the quality gate failed on the merged result"),
        "{decisions}"
    );
    assert_eq!(merges(p.root()), ["login/G3@1.0", "login/G2@1.0", "login/G1@1.0"], "the taken-back merge is gone");
    // So is it from the report: every commit it lists is on the line.
    let commits = report["commits"].as_array().unwrap();
    for c in commits {
        let sha = c.as_str().unwrap().split(' ').next().unwrap();
        let on_line = std::process::Command::new("git")
            .args(["merge-base", "--is-ancestor", sha, "HEAD"])
            .current_dir(p.root())
            .status()
            .unwrap();
        assert!(on_line.success(), "{c} is not on the line: {report:#}");
    }
    assert_eq!(std::fs::read_to_string(p.path("b.txt")).unwrap(), "v2\n");
    assert_clean(p.root());
}

/// SIGKILL while the gate runs on the line right after G1's merge, then
/// `troupe resume`: G1's merge is kept and never redone, G2 (unfinished) is
/// reset and built again, and nothing stale is left.
#[test]
fn resume_after_a_kill_mid_merge_keeps_merges_and_rebuilds_the_rest() {
    use std::os::unix::process::CommandExt;
    let signals = tempfile::tempdir().unwrap();
    let (gating, killed) = (signals.path().join("gating"), signals.path().join("killed"));
    // On the line (where .git is a folder) with G1 merged, the first gate
    // stops until the test has killed the Lead.
    let check = format!(
        "if [ -d .git ] && [ -f a.txt ] && [ ! -f {k} ]; then touch {g}; sleep 30; fi\necho ok\n",
        k = killed.display(),
        g = gating.display()
    );
    let wait_killed =
        format!("run: \"for i in $(seq 600); do [ -f {} ] && break; sleep 0.05; done\"", killed.display());
    let script = format!(
        "agents:{DESIGN}{}{}{}{}",
        tasks("a.txt", "b.txt"),
        builder("G1", "1", "a.txt", &["write: {path: a.txt, content: \"A\"}"]),
        builder("G2", "2", "b.txt", &[&wait_killed, "write: {path: b.txt, content: \"B\"}"]),
        builder("G3", "3", "c.txt", &["write: {path: c.txt, content: \"C\"}"]),
    );
    let p = isolated(&script, &check);
    let mut lead = std::process::Command::new(assert_cmd::cargo::cargo_bin("troupe"))
        .arg("-C")
        .arg(p.root())
        .args(["run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gating.exists() {
        assert!(Instant::now() < deadline, "the gate after G1's merge never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The Lead and its gate, at once.
    let group = format!("-{}", lead.id());
    assert!(std::process::Command::new("kill").args(["-KILL", "--", &group]).status().unwrap().success());
    lead.wait().unwrap();
    std::fs::write(&killed, "").unwrap();
    assert_eq!(merges(p.root()), ["login/G1@1.0"], "killed after G1's merge");
    // Status shows where each group's branch stands.
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    let groups = &status[0]["groups"];
    assert_eq!(groups[0], serde_json::json!({"group": "G1", "branch": "troupe/login/G1", "state": "merged"}));
    assert_eq!(groups[1], serde_json::json!({"group": "G2", "branch": "troupe/login/G2", "state": "working"}));
    assert_eq!(groups[2]["state"], "pending");

    let (report, err) = run(&p, "resume");
    assert_eq!(report["outcome"], "completed", "{err}");
    assert_eq!(builders(&report, "G1"), 0, "a merged group is never redone: {report:#}");
    assert_eq!(builders(&report, "G2"), 1);
    assert_eq!(merges(p.root()), ["login/G3@1.0", "login/G2@1.0", "login/G1@1.0"], "no lost commit, none twice");
    assert_eq!(std::fs::read_to_string(p.path("b.txt")).unwrap(), "B");
    assert_clean(p.root());
}

/// "At most twice, then escalation", from the binary: G1's work passes its
/// own gate every time but always fails the gate on the merged line, so its
/// merge is taken back three times and the run escalates, naming the group
/// and the cause. G2's merge is kept; G1's tasks wait again (pending on the
/// board and in `troupe status`), G3 never starts, and nothing of G1 is left:
/// no worktree, no branch, no uncommitted file.
#[test]
fn a_group_whose_merge_fails_three_times_escalates_and_leaves_nothing_behind() {
    let check = "if [ -d .git ] && [ -f a.txt ]; then echo 'a.txt breaks the merged build'; exit 1; fi\necho ok\n";
    let script = format!(
        "agents:{DESIGN}{}{}{}{}",
        tasks("a.txt", "b.txt"),
        builder("G1", "1", "a.txt", &[&until_merged("G2"), "write: {path: a.txt, content: \"A\"}"]),
        builder("G2", "2", "b.txt", &["write: {path: b.txt, content: \"B\"}"]),
        builder("G3", "3", "c.txt", &["write: {path: c.txt, content: \"C\"}"]),
    );
    let p = isolated(&script, check);
    let (report, err) = run(&p, "run");
    assert_eq!(report["outcome"], "escalated", "{err}");
    let (why, hint) = (&report["escalations"][0][0], &report["escalations"][0][1]);
    let why = why.as_str().unwrap_or_default();
    assert!(
        why.starts_with(
            "group G1 of login could not be merged after 2 new attempts: the quality gate failed on the merged result"
        ) && why.contains("a.txt breaks the merged build"),
        "names the group and the cause, with the gate's output: {report:#}"
    );
    assert!(hint.as_str().unwrap_or_default().contains("troupe resume login"), "{report:#}");
    assert_eq!((builders(&report, "G1"), builders(&report, "G2"), builders(&report, "G3")), (3, 1, 0), "{report:#}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(decisions.contains("group G1 reset to be built again (2/2)"), "{decisions}");
    assert_eq!(merges(p.root()), ["login/G2@1.0"], "every merge of G1 was taken back, G2's kept");
    assert!(!p.path("a.txt").exists(), "nothing of G1 on the line");
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    let states: Vec<&str> =
        status[0]["groups"].as_array().unwrap().iter().map(|g| g["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["pending", "merged", "pending"], "{status:#}");
    assert_eq!(status[0]["tasks_completed"], 1, "only G2's task is done: {status:#}");
    assert_clean(p.root());
}

/// A custom engine (`[engines.custom.<id>]`, any command; here a shell
/// script with `format = "text"`) as the Builder: it starts in its group's
/// worktree, writes there by relative path, and its files reach the line by
/// the group's merge.
#[test]
fn a_custom_engine_builder_works_in_its_worktree() {
    use crate::obedient_run::{WHERE_CHECK, one_group};
    let p = project(&one_group());
    std::fs::write(p.path("check.sh"), WHERE_CHECK).unwrap();
    let bin = tempfile::tempdir().unwrap();
    let agent = bin.path().join("builder.sh");
    std::fs::write(
        &agent,
        "mkdir -p src && echo 'add() { echo $(($1 + $2)); }' > src/add.sh && sh check.sh >/dev/null || exit 1\nprintf 'BUILDER_COMPLETE\\nFeature: login\\nStatus: done\\nTasks completed: 1\\nFiles: src/add.sh, where.txt\\nTests: sh check.sh passed\\n'\n",
    )
    .unwrap();
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"scripted\"\n\n[engines.phases]\nimpl = \"mine\"\n\n[engines.custom.mine]\ncommand = \"sh\"\nargs = [\"{}\"]\nprompt = \"argument\"\nformat = \"text\"\n\n[team]\nisolation = \"worktree\"\n",
            agent.display()
        ),
    )
    .unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-qm", "a custom Builder"]);
    let out = p.troupe().args(["--json", "run", "login", "add numbers", "--no-review"]).output().unwrap();
    let (report, err) = (json(&out), String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["outcome"], "completed", "{err}");
    let builder: Vec<&serde_json::Value> =
        report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Builder").collect();
    assert_eq!((builder.len(), builder[0]["engine"].as_str()), (1, Some("mine")), "{report:#}");
    let worktree = p.root().canonicalize().unwrap().join(".troupe/state/worktrees/login/G1");
    let worktree = worktree.to_string_lossy();
    assert_eq!(std::fs::read_to_string(p.path("where.txt")).unwrap(), format!("{worktree}\n{worktree}\n"));
    assert_eq!(std::fs::read_to_string(p.path("src/add.sh")).unwrap(), "add() { echo $(($1 + $2)); }\n");
    assert_eq!(merges(p.root()), ["login/G1@1.0"]);
    assert_clean(p.root());
}
