//! troupe's hooks reach teammates on every engine, for their run only: a Builder
//! on the real Codex CLI and one on the real OpenCode CLI (each against its
//! testkit stub, in its own scratch home) try to write outside their group and
//! are denied by the hooks the Lead gave them, then finish their group. The
//! project's own engine settings (`.codex/`, `.opencode/`) are never written.
//! The OpenCode Builder reports through troupe's MCP gateway, also given to its
//! run, and ends with plain text.
//! (Claude Code and Gemini CLI teammates: `lead_claude.rs`, `lead_report.rs`.)

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::json;
use troupe_testkit::chat::ChatStub;
use troupe_testkit::codex::{Codex, add_file_patch};
use troupe_testkit::opencode::OpenCode;
use troupe_testkit::responses::ResponsesStub;
use troupe_testkit::{Script, Turn};

use crate::lead_claude::{git, project, troupe_bin};
use crate::support::{TestProject, json};

const TASKS_YAML: &str = "tasks:\n  - id: \"1\"\n    summary: Adder\n    status: pending\n    subtasks:\n      - id: \"1.1\"\n        summary: add A B\n        status: pending\nexecution:\n  - wave: 1\n    groups:\n      - id: G1\n        tasks: [\"1.1\"]\n        files: [src/add.sh, tests/test_add.sh]\n";

const TEST: &str = ". src/add.sh\n[ \"$(add 2 3)\" = 5 ] || exit 1\n";
const CODE: &str = "add() { echo $(($1 + $2)); }\n";
const REPORT: &str = "BUILDER_COMPLETE\nFeature: f\nStatus: done\nTasks completed: 1.1\nFiles: src/add.sh, tests/test_add.sh\nTests: 1 passed\n[INCIDENT] src/evil.sh is not mine; the hook denied it";

/// Design and tasks on the scripted engine, impl on `engine` run from `bin`.
fn setup(engine: &str, bin: &Path) -> TestProject {
    let script = format!(
        "agents:\n  architect:\n    - - write: {{path: .troupe/specs/login/design.md, content: \"# Design\\n\"}}\n      - write: {{path: .troupe/specs/login/research.md, content: \"# Research\\n\"}}\n      - report: \"ARCHITECT_COMPLETE\\nSummary: add in sh\"\n  task-generator:\n    - - write:\n          path: .troupe/specs/login/tasks.yaml\n          content: {}\n      - report: \"TASKGEN_COMPLETE\"\n",
        serde_json::to_string(TASKS_YAML).unwrap()
    );
    let p = project("", Some(&script));
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"{engine}\"\n\n[engines.phases]\ndesign = \"scripted\"\ntasks = \"scripted\"\n\n[engines.commands]\n{engine} = \"{}\"\n",
            bin.display()
        ),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    p
}

fn run(p: &TestProject, remove: Vec<OsString>, env: Vec<(OsString, OsString)>) -> serde_json::Value {
    let mut cmd = p.troupe();
    for k in remove {
        cmd.env_remove(k);
    }
    cmd.envs(env);
    let out = cmd
        .args(["--json", "run", "login", "add numbers", "--no-review"])
        .timeout(std::time::Duration::from_secs(240))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr:\n{}\nstdout:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    json(&out)
}

fn assert_done(p: &TestProject, report: &serde_json::Value, engine: &str, told: &str) {
    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let builder = report["teammates"].as_array().unwrap().iter().find(|t| t["role"] == "Builder").unwrap();
    assert_eq!(builder["engine"], engine);
    assert!(
        told.contains("troupe ownership: Builder may not write src/evil.sh"),
        "the {engine} Builder's per-run hook denied the write and the model was told why"
    );
    assert!(!p.path("src/evil.sh").exists());
    assert_eq!(std::fs::read_to_string(p.path("src/add.sh")).unwrap(), CODE);
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["tasks_completed"], 1, "{status}");
    // Per run only: the project's engine settings were not touched (none
    // made, and those the project holds unchanged, with nothing added beside).
    for dir in [".codex", ".gemini", ".opencode", ".claude/settings.json"] {
        let tracked = !git(p.root(), &["ls-files", "--", dir]).is_empty();
        assert!(tracked || !p.path(dir).exists(), "{dir} was written");
        assert_eq!(git(p.root(), &["status", "--porcelain", "--ignored", "--", dir]), "", "{dir} was written");
    }
    assert!(!p.path(".troupe/state/hooks").exists(), "the run's own settings are gone with it");
}

/// The Builder's `report` tool call: its completion report, as the Lead reads it.
fn tool_report() -> serde_json::Value {
    json!({
        "status": "complete",
        "summary": "add in POSIX sh",
        "task_id": "1.1",
        "files": ["src/add.sh", "tests/test_add.sh"],
        "tests": ["tests/test_add.sh passed"],
        "knowledge": [{"tag": "INCIDENT", "text": "src/evil.sh is not mine; the hook denied it"}],
    })
}

fn troupe() -> PathBuf {
    troupe_bin()
}

#[test]
fn a_codex_builder_is_held_by_the_hooks_of_its_run() {
    let t = troupe();
    let stub = ResponsesStub::start(Script::new([
        Turn::tool("exec_command", json!({"cmd": format!("{} skill use code-quality-rules", t.display())})),
        Turn::freeform_tool("apply_patch", add_file_patch("src/evil.sh", "rm -rf /\n")),
        Turn::freeform_tool("apply_patch", add_file_patch("tests/test_add.sh", TEST)),
        Turn::freeform_tool("apply_patch", add_file_patch("src/add.sh", CODE)),
        Turn::tool("exec_command", json!({"cmd": "sh check.sh"})),
        // It stops without the verification skill: the Stop hook sends it back once (the stub, which
        // picks turns by tool outputs, then replays this report and the second stop goes through).
        // Codex defers MCP tools behind its tool search, which the stub cannot drive: a text report.
        Turn::text(REPORT),
    ]));
    let codex = Codex::new(&stub.url());
    let p = setup("codex", &Codex::bin());
    let report = run(&p, Codex::inherited_to_remove(), codex.env());
    let told = stub.model_requests().iter().map(|r| r.to_string()).collect::<String>();
    assert_done(&p, &report, "codex", &told);
    assert!(told.contains("troupe stop gate"), "the Stop hook of its run refused the unverified stop");
}

#[test]
fn an_opencode_builder_is_held_by_the_bridge_plugin_of_its_run() {
    let t = troupe();
    let p_root = |p: &TestProject| p.root().canonicalize().unwrap();
    let stub_for = |root: &Path| {
        let write = |rel: &str, content: &str| {
            Turn::tool("write", json!({"filePath": root.join(rel).display().to_string(), "content": content}))
        };
        ChatStub::start(Script::new([
            Turn::tool(
                "bash",
                json!({"command": format!("{} skill use code-quality-rules", t.display()), "description": "load the skill"}),
            ),
            write("src/evil.sh", "rm -rf /\n"),
            write("tests/test_add.sh", TEST),
            write("src/add.sh", CODE),
            Turn::tool("bash", json!({"command": "sh check.sh", "description": "run the tests"})),
            // OpenCode names MCP tools `<server>_<tool>`; the gateway's tools are `troupe__<name>`.
            Turn::tool("troupe_troupe__report", tool_report()),
            Turn::text("Done: adder written and tested."),
        ]))
    };
    let p = setup("opencode", &OpenCode::bin());
    // The project has troupe's bridge for people's own OpenCode sessions
    // (`troupe init --opencode`), naming a troupe binary that has since moved:
    // the bridge of the run, with the running troupe, is the one that holds
    // the Builder (one bridge per OpenCode process, however many copies load).
    let init = p.troupe().args(["init", "--opencode"]).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let bridge = p.path(".opencode/plugin/troupe-gates.js");
    let moved = std::fs::read_to_string(&bridge).unwrap().replace(&t.display().to_string(), "/moved/away/troupe");
    std::fs::write(&bridge, moved).unwrap();
    // No plugin package there: OpenCode would install it into `.opencode` at
    // every start, which the Builder's sandbox refuses; the Lead records it first.
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "opencode bridge"]);
    // The Builder writes in its own worktree.
    let stub = stub_for(&p_root(&p).join(".troupe/state/worktrees/login/G1"));
    let opencode = OpenCode::new(&stub.url());
    let report = run(&p, OpenCode::inherited_to_remove(), opencode.env());
    let told = stub.model_requests().iter().map(|r| r.to_string()).collect::<String>();
    assert_done(&p, &report, "opencode", &told);
    // Its completion report was the gateway's `report` call, not its final text.
    let builder = report["teammates"].as_array().unwrap().iter().find(|t| t["role"] == "Builder").unwrap();
    assert_eq!(builder["tests"], "tests/test_add.sh passed", "{report}");
    assert_eq!(builder["files"], json!(["src/add.sh", "tests/test_add.sh"]));
    let knowledge = std::fs::read_to_string(p.path(".troupe/handover/knowledge.md")).unwrap();
    assert!(knowledge.contains("[INCIDENT] src/evil.sh is not mine; the hook denied it"), "{knowledge}");
    // Its start made no install attempt (a failed one is logged, as one in a
    // folder the sandbox refuses always fails).
    let log = std::fs::read_to_string(opencode.root().join("data/opencode/log/opencode.log")).unwrap();
    assert!(log.contains("creating instance"), "{log}");
    assert!(!log.contains("dependency install"), "{log}");
}

/// The Lead records OpenCode's plugin package in the project's `.opencode`
/// before a sandboxed OpenCode teammate starts (`driver/opencode_deps.rs`),
/// and puts the folder back as it found it when the run ends: here a folder
/// with a `.gitignore` of the user's that does not cover the lock file
/// troupe writes. The teammate is a stand-in for `opencode` (a shell script,
/// sandboxed as OpenCode would be) that writes, into its group's own file,
/// what it found at its start and exits; the run ends without its report.
#[test]
fn a_projects_opencode_folder_is_restored_when_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("opencode");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ -d .opencode/node_modules ] && grep -qs @opencode-ai/plugin .opencode/package-lock.json; then echo recorded > src/add.sh; else echo missing > src/add.sh; fi\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = setup("opencode", &fake);
    let config = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    std::fs::write(p.path(".troupe/config.toml"), format!("{config}\n[team]\nisolation = \"shared\"\n")).unwrap();
    std::fs::create_dir_all(p.path(".opencode")).unwrap();
    std::fs::write(p.path(".opencode/.gitignore"), "node_modules\n").unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "the user's opencode folder"]);
    let out = p
        .troupe()
        .args(["--json", "run", "login", "add numbers", "--no-review"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(p.path("src/add.sh")).unwrap_or_default(),
        "recorded\n",
        "the stand-in started with the package recorded: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<String> = std::fs::read_dir(p.path(".opencode"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [".gitignore"], "the folder as the run found it");
    assert_eq!(std::fs::read_to_string(p.path(".opencode/.gitignore")).unwrap(), "node_modules\n");
    assert_eq!(git(p.root(), &["status", "--porcelain", "--ignored", "--", ".opencode"]), "");
}
