//! The Lead with the real Claude Code CLI as every teammate, each role driven
//! by its own testkit Anthropic stub (a wrapper set as `[engines.commands]
//! claude` points each teammate at its role's stub by `TROUPE_ROLE` and
//! `TROUPE_GROUP`). The hooks troupe wires in (`--settings`) are real: a
//! Builder writing outside its group is denied. A second run mixes engines by
//! phase: the real Gemini CLI designs (held by the hooks and connected to the
//! gateway the Lead gave its run: a write outside its files is denied, and it
//! reports through the gateway's `report` tool), the scripted engine plans,
//! Claude builds.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::{Script, Turn};

use crate::support::{TestProject, json};

pub(crate) fn git(root: &Path, args: &[&str]) -> String {
    let out = Std::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn troupe_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("troupe")
}

pub(crate) fn bash(cmd: &str) -> Turn {
    Turn::tool("Bash", json!({"command": cmd, "description": "run"}))
}

pub(crate) fn write(path: &Path, content: &str) -> Turn {
    Turn::tool("Write", json!({"file_path": path.display().to_string(), "content": content}))
}

pub(crate) const TASKS_YAML: &str = "tasks:\n  - id: \"1\"\n    summary: Adder\n    status: pending\n    subtasks:\n      - id: \"1.1\"\n        summary: add A B\n        status: pending\n  - id: \"2\"\n    summary: Doubler\n    status: pending\n    subtasks:\n      - id: \"2.1\"\n        summary: double A, using add\n        depends: [\"1.1\"]\n        status: pending\nexecution:\n  - wave: 1\n    groups:\n      - id: G1\n        tasks: [\"1.1\"]\n        files: [src/add.sh, tests/test_add.sh]\n  - wave: 2\n    groups:\n      - id: G2\n        tasks: [\"2.1\"]\n        files: [src/double.sh, tests/test_double.sh]\n";

pub(crate) fn architect_script(root: &Path) -> Script {
    let t = troupe_bin();
    Script::new([
        bash(&format!("{} skill use document-quality-rules", t.display())),
        write(&root.join(".troupe/specs/login/design.md"), "# Design\n\nadd.sh and double.sh in POSIX sh.\n"),
        write(&root.join(".troupe/specs/login/research.md"), "# Research\n\nShell arithmetic.\n"),
        Turn::text(
            "ARCHITECT_COMPLETE\nFeature: login\nArtifacts: design.md, research.md\nSummary: add and double in sh\n[PATTERN] one function per file",
        ),
    ])
}

fn taskgen_script(root: &Path) -> Script {
    Script::new([
        write(&root.join(".troupe/specs/login/tasks.yaml"), TASKS_YAML),
        Turn::text("TASKGEN_COMPLETE\nFeature: login\nTasks: 2\nWaves: 2"),
    ])
}

/// Where a Builder of `group` works: its own worktree (`[team] isolation =
/// "worktree"`, the default), so its turns write there.
pub(crate) fn worktree(root: &Path, group: &str) -> PathBuf {
    root.join(".troupe/state/worktrees/login").join(group)
}

fn g1_script(root: &Path) -> Script {
    Script::new(g1_turns(root))
}

/// The G1 Builder's turns: the skill, its test and code, the checks, the
/// board, the report.
pub(crate) fn g1_turns(root: &Path) -> Vec<Turn> {
    let t = troupe_bin();
    vec![
        bash(&format!("{} skill use code-quality-rules", t.display())),
        write(&root.join("tests/test_add.sh"), ". src/add.sh\n[ \"$(add 2 3)\" = 5 ] || exit 1\n"),
        write(&root.join("src/add.sh"), "add() { echo $(($1 + $2)); }\n"),
        bash("sh check.sh"),
        // The Stop gate holds a Builder that changed code until it has verified it.
        bash(&format!("{} skill use verification-before-completion", t.display())),
        bash(&format!("{t} board claim login/1.1 && {t} board complete login/1.1", t = t.display())),
        Turn::text(
            "BUILDER_COMPLETE\nFeature: login\nTasks completed: 1.1\nFiles: src/add.sh, tests/test_add.sh\nTests: 1 passed\nStatus: done\n[REFERENCE] POSIX $(( ))",
        ),
    ]
}

fn g2_script(root: &Path) -> Script {
    Script::new(g2_turns(root))
}

/// The G2 Builder's turns: like G1's, with a write outside its group that
/// the hook denies.
pub(crate) fn g2_turns(root: &Path) -> Vec<Turn> {
    let t = troupe_bin();
    vec![
        bash(&format!("{} skill use code-quality-rules", t.display())),
        // Outside its group: the PreToolUse hook denies it, and the model sees why.
        write(&root.join("src/util.sh"), "util() { :; }\n"),
        write(&root.join("tests/test_double.sh"), ". src/double.sh\n[ \"$(double 4)\" = 8 ] || exit 1\n"),
        write(&root.join("src/double.sh"), ". src/add.sh\ndouble() { add \"$1\" \"$1\"; }\n"),
        bash("sh check.sh"),
        bash(&format!("{} skill use verification-before-completion", t.display())),
        Turn::text(
            "BUILDER_COMPLETE\nFeature: login\nTasks completed: 2.1\nFiles: src/double.sh, tests/test_double.sh\nTests: 2 passed\nStatus: done\n[INCIDENT] src/util.sh is in no group of mine; the write was denied",
        ),
    ]
}

/// A wrapper for `claude` that picks the stub of the teammate's role and group.
pub(crate) fn wrapper(dir: &Path, routes: &[(&str, &AnthropicStub)]) -> PathBuf {
    let mut sh = String::from("#!/bin/sh\ncase \"$TROUPE_ROLE:$TROUPE_GROUP\" in\n");
    for (pattern, stub) in routes {
        sh.push_str(&format!("  {pattern}) export ANTHROPIC_BASE_URL={} ;;\n", stub.url()));
    }
    sh.push_str(&format!(
        "  *) echo \"no stub for $TROUPE_ROLE:$TROUPE_GROUP\" >&2; exit 3 ;;\nesac\nexec {} \"$@\"\n",
        Claude::bin().display()
    ));
    let path = dir.join("claude-wrapper.sh");
    std::fs::write(&path, sh).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub(crate) fn project(config: &str, script: Option<&str>) -> TestProject {
    let p = TestProject::new();
    std::fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n\n## Common Commands\n\n- Test: `sh check.sh`\n- Lint: `true`\n",
    )
    .unwrap();
    std::fs::write(
        p.path("check.sh"),
        "for t in tests/test_*.sh; do [ -e \"$t\" ] || continue; sh \"$t\" || exit 1; done\necho all tests pass\n",
    )
    .unwrap();
    std::fs::write(p.path(".troupe/config.toml"), config).unwrap();
    if let Some(s) = script {
        std::fs::write(p.path(".troupe/scripted.yaml"), s).unwrap();
    }
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "start"]);
    p
}

pub(crate) fn run_troupe(p: &TestProject, claude: &Claude, args: &[&str]) -> std::process::Output {
    let mut cmd = p.troupe();
    for k in Claude::inherited_to_remove() {
        cmd.env_remove(k);
    }
    cmd.envs(claude.env());
    cmd.args(args).timeout(std::time::Duration::from_secs(240)).output().unwrap()
}

fn denied_in(stub: &AnthropicStub) -> bool {
    let requests = stub.model_requests();
    let found = requests.iter().any(|r| r.to_string().contains("troupe ownership: Builder may not write src/util.sh"));
    if !found {
        // Show what the model was told after its write, to see why.
        let last = requests.last().map(|r| r["messages"].to_string()).unwrap_or_default();
        eprintln!(
            "G2's conversation:\n{}",
            last.chars().rev().take(3000).collect::<String>().chars().rev().collect::<String>()
        );
    }
    found
}

fn assert_board_complete(p: &TestProject) {
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["tasks_total"], 2, "{status}");
    assert_eq!(status[0]["tasks_completed"], 2, "{status}");
}

#[test]
fn run_with_real_claude_code_as_every_teammate() {
    let p = project("", None);
    let root = p.root().canonicalize().unwrap();
    let (arch, tg, g1, g2) = (
        AnthropicStub::start(architect_script(&root)),
        AnthropicStub::start(taskgen_script(&root)),
        AnthropicStub::start(g1_script(&worktree(&root, "G1"))),
        AnthropicStub::start(g2_script(&worktree(&root, "G2"))),
    );
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(
        bin.path(),
        &[("architect:*", &arch), ("task-generator:*", &tg), ("builder:G1", &g1), ("builder:G2", &g2)],
    );
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("[engines]\ndefault = \"claude\"\n\n[engines.commands]\nclaude = \"{}\"\n", w.display()),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    let claude = Claude::new(&arch.url());
    let mut claude_env = claude.env();
    claude_env.push(("TROUPE_LOG".into(), "hook_answerer=debug".into()));
    let mut cmd = p.troupe();
    for k in Claude::inherited_to_remove() {
        cmd.env_remove(k);
    }
    let out = cmd
        .envs(claude_env)
        .args(["--json", "run", "login", "add and double numbers", "--no-review"])
        .timeout(std::time::Duration::from_secs(240))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr:\n{err}\nstdout:\n{}", String::from_utf8_lossy(&out.stdout));
    // The teammates' hook calls went to the answerer `troupe run` hosts, not each to a cold process.
    let answered: u64 = err
        .split("answered=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no answerer count in:\n{err}"));
    eprintln!("hook calls answered by troupe run's answerer: {answered}");
    assert!(answered >= 4, "{err}");
    let report = json(&out);
    assert_eq!(report["phase"], "implementation-complete");
    let teammates = report["teammates"].as_array().unwrap();
    assert_eq!(teammates.len(), 4, "{report}");
    for t in teammates {
        assert_eq!(t["engine"], "claude");
        assert!(t["turns"].as_u64().unwrap() >= 2, "turns come from Claude's result stats: {t}");
    }
    assert_eq!(teammates[0]["model"], "opus", "T2 runs on the T2 model");
    assert_eq!(teammates[2]["model"], "sonnet", "T3 runs on the T3 model");

    assert!(denied_in(&g2), "the G2 Builder's write of src/util.sh was denied by the hook");
    assert!(!p.path("src/util.sh").exists());
    assert_eq!(std::fs::read_to_string(p.path("src/add.sh")).unwrap(), "add() { echo $(($1 + $2)); }\n");
    assert!(p.path("src/double.sh").exists());

    let log = git(p.root(), &["log", "--format=%s"]);
    assert!(log.starts_with("login: the run's handover notes\nlogin: implement 2 tasks in 2 groups"), "{log}");
    assert!(log.contains("login: design (add and double in sh)"), "{log}");
    assert_board_complete(&p);
    let spec = std::fs::read_to_string(p.path(".troupe/specs/login/spec.yaml")).unwrap();
    assert!(spec.contains("src/double.sh"), "files_created: {spec}");
    // Each teammate was connected to troupe's MCP gateway for its role: the model was offered its tools.
    let offered = g1.model_requests()[0]["tools"].to_string();
    assert!(offered.contains("\"mcp__troupe__troupe__report\""), "the gateway's tools reach the Builder");
    // Each teammate's prompt carried its role template and its assignment.
    let first = arch.model_requests()[0].to_string();
    assert!(first.contains("Role: Architect") && first.contains("Your id: architect-1"), "{first}");

    // The recorded run replays from the teammates' logs with no model: same events, same board,
    // and not one more request reaches any stub.
    let stubs = [&arch, &tg, &g1, &g2];
    let asked: Vec<usize> = stubs.iter().map(|s| s.server().requests().len()).collect();
    crate::replay::assert_replays(&root, &[]);
    let after: Vec<usize> = stubs.iter().map(|s| s.server().requests().len()).collect();
    assert_eq!(asked, after, "the replay made no model calls");
}

#[test]
fn engines_mix_by_phase_through_the_resolution() {
    // design: [engines.phases] → the real Gemini CLI; tasks: spec.yaml engine_override →
    // scripted; impl: [engines] default → the real Claude Code CLI.
    let script = format!(
        "agents:\n  task-generator:\n    - - write:\n          path: .troupe/specs/login/tasks.yaml\n          content: {}\n      - report: \"TASKGEN_COMPLETE\"\n",
        serde_json::to_string(TASKS_YAML).unwrap()
    );
    let p = project("", Some(&script));
    let root = p.root().canonicalize().unwrap();
    let gemini = GeminiStub::start(Script::new([
        Turn::tool(
            "run_shell_command",
            json!({"command": format!("{} skill use document-quality-rules", troupe_bin().display())}),
        ),
        // Not an Architect's file: troupe's hooks, given to this run, deny it.
        Turn::tool(
            "write_file",
            json!({"file_path": root.join("src/evil.sh").display().to_string(), "content": "rm -rf /\n"}),
        ),
        Turn::tool(
            "write_file",
            json!({"file_path": root.join(".troupe/specs/login/design.md").display().to_string(), "content": "# Design\n"}),
        ),
        Turn::tool(
            "write_file",
            json!({"file_path": root.join(".troupe/specs/login/research.md").display().to_string(), "content": "# Research\n"}),
        ),
        // Through troupe's MCP gateway, given to the run (Gemini names MCP tools `mcp_<server>_<tool>`).
        Turn::tool("mcp_troupe_troupe__report", json!({"status": "complete", "summary": "designed on gemini"})),
        Turn::text("The design is written."),
    ]));
    let (g1, g2) = (
        AnthropicStub::start(g1_script(&worktree(&root, "G1"))),
        AnthropicStub::start(g2_script(&worktree(&root, "G2"))),
    );
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("builder:G1", &g1), ("builder:G2", &g2)]);
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"claude\"\n\n[engines.phases]\ndesign = \"gemini\"\n\n[engines.models.gemini]\nt2 = \"{}\"\n\n[engines.commands]\nclaude = \"{}\"\ngemini = \"{}\"\n",
            troupe_testkit::gemini_cli::MODEL,
            w.display(),
            GeminiCli::bin().display()
        ),
    )
    .unwrap();
    p.troupe().args(["spec", "new", "login", "-d", "add and double"]).assert().success();
    let spec_path = p.path(".troupe/specs/login/spec.yaml");
    let spec = std::fs::read_to_string(&spec_path).unwrap();
    std::fs::write(&spec_path, format!("{spec}engine_override:\n  tasks: scripted\n")).unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "spec"]);
    // One HOME for both CLIs: Claude's scratch home, with Gemini's settings in it.
    let claude = Claude::new(&g1.url());
    let gemini_cli = GeminiCli::new(&gemini.url());
    std::fs::create_dir_all(claude.home().join(".gemini")).unwrap();
    std::fs::copy(gemini_cli.home().join(".gemini/settings.json"), claude.home().join(".gemini/settings.json"))
        .unwrap();
    let mut cmd = p.troupe();
    for k in Claude::inherited_to_remove().into_iter().chain(GeminiCli::inherited_to_remove()) {
        cmd.env_remove(k);
    }
    cmd.envs(gemini_cli.env()).envs(claude.env());
    let out = cmd
        .args(["--json", "run", "login", "add and double", "--no-review"])
        .timeout(std::time::Duration::from_secs(240))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    let report = json(&out);
    let engines: Vec<&str> =
        report["teammates"].as_array().unwrap().iter().map(|t| t["engine"].as_str().unwrap()).collect();
    assert_eq!(engines, ["gemini", "scripted", "claude", "claude"]);
    assert_eq!(report["phase"], "implementation-complete");
    assert!(!gemini.model_requests().is_empty(), "the design ran on the Gemini stub");
    let told = gemini.model_requests().iter().map(|r| r.to_string()).collect::<String>();
    assert!(
        told.contains("troupe ownership: Architect may not write src/evil.sh"),
        "Gemini's per-run hooks denied the write"
    );
    assert!(!p.path("src/evil.sh").exists());
    assert!(git(p.root(), &["log", "--format=%s"]).contains("login: design (designed on gemini)"));
    assert!(denied_in(&g2));
    assert_board_complete(&p);
}

#[test]
fn after_a_plain_init_a_claude_teammate_loads_a_gate_skill_with_the_skill_tool() {
    let p = project("", None);
    assert!(!p.path(".claude").exists(), "plain `troupe init` installs nothing for Claude");
    let root = p.root().canonicalize().unwrap();
    // The Lead hands the gate skills to this run as a plugin (`troupe:<name>`).
    let arch = AnthropicStub::start(Script::new([
        Turn::tool("Skill", json!({"skill": "troupe:document-quality-rules"})),
        write(&root.join(".troupe/specs/login/design.md"), "# Design\n\nOne shell function.\n"),
        write(&root.join(".troupe/specs/login/research.md"), "# Research\n\nNone needed.\n"),
        Turn::text("ARCHITECT_COMPLETE\nFeature: login\nArtifacts: design.md, research.md\nSummary: one function"),
    ]));
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("architect:*", &arch)]);
    std::fs::write(p.path(".troupe/config.toml"), format!("[engines.commands]\nclaude = \"{}\"\n", w.display()))
        .unwrap();
    let claude = Claude::new(&arch.url());
    let out = run_troupe(&p, &claude, &["--json", "design", "login", "-d", "one function", "--no-commit"]);
    assert!(out.status.success(), "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let seen = arch.model_requests().last().map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(seen.contains("Document quality rules"), "the skill loaded: {seen}");
    assert!(!seen.contains("Unknown skill") && !seen.contains("\"is_error\":true"), "{seen}");
    assert!(p.path(".troupe/specs/login/design.md").is_file(), "the skill gate let the write through");
    assert!(!p.path(".claude").exists(), "the project's Claude settings were not touched");
}
