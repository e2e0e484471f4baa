//! A full `troupe run` with a real agent CLI (Claude Code, Gemini CLI, Codex,
//! OpenCode) as every teammate, each driven by the testkit's obedient stub
//! model: its turns are derived from the
//! role prompt and assignment troupe rendered (the tools, ids, paths, skills,
//! test command and report it names), so a drift between what troupe tells a
//! teammate and what it accepts fails here. The test knows only the content:
//! what the demo feature's files hold and what one Inspector finds.
//!
//! The run designs, passes the design review, builds two waves (the second
//! Builder starts on the first's board completion, before its report), gets a
//! NO-GO from the implementation review, fixes it, passes the second round and
//! ends `implementation-complete` with the suite green at HEAD.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command as Std;
use std::sync::Arc;

use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::chat::ChatStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::codex::Codex;
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::obedient::{Assignment, Knowledge, Obedient};
use troupe_testkit::opencode::OpenCode;
use troupe_testkit::responses::ResponsesStub;

use crate::lead_claude::{git, project};
use crate::support::{TestProject, json};

const TASKS_YAML: &str = "tasks:\n  - id: \"1\"\n    summary: Adder\n    status: pending\n    subtasks:\n      - id: \"1.1\"\n        summary: add A B\n        status: pending\n  - id: \"2\"\n    summary: Doubler\n    status: pending\n    subtasks:\n      - id: \"2.1\"\n        summary: double A, using add\n        depends: [\"1.1\"]\n        status: pending\nexecution:\n  - wave: 1\n    groups:\n      - id: G1\n        tasks: [\"1.1\"]\n        files: [src/add.sh, tests/test_add.sh]\n  - wave: 2\n    groups:\n      - id: G2\n        tasks: [\"2.1\"]\n        files: [src/double.sh, tests/test_double.sh]\n";

/// What `add` looks like before the review: a missing operand is a shell error.
const ADD: &str = "add() { echo $(($1 + $2)); }\n";
/// After the fix round: a missing operand is refused with a message.
const ADD_FIXED: &str =
    "add() {\n  [ $# -eq 2 ] || { echo \"add: two numbers\" >&2; return 2; }\n  echo $(($1 + $2))\n}\n";

/// The demo feature "add and double numbers" in POSIX sh, as a model would
/// write it in the project at `root`.
pub(crate) struct Demo {
    pub root: std::path::PathBuf,
}

impl Knowledge for Demo {
    fn file(&self, a: &Assignment, path: &str) -> Option<String> {
        let fixing = a.scope.starts_with("Fix the verified findings");
        let text = match path.rsplit('/').next()? {
            "design.md" => "# Design\n\nadd.sh and double.sh in POSIX sh, one function per file.\n",
            "research.md" => "# Research\n\nShell arithmetic with $(( )).\n",
            "tasks.yaml" => TASKS_YAML,
            "add.sh" if fixing => ADD_FIXED,
            "add.sh" => ADD,
            "test_add.sh" if fixing => {
                ". src/add.sh\n[ \"$(add 2 3)\" = 5 ] || exit 1\nadd 2 2>/dev/null && exit 1\nexit 0\n"
            }
            "test_add.sh" => ". src/add.sh\n[ \"$(add 2 3)\" = 5 ] || exit 1\n",
            "double.sh" => ". src/add.sh\ndouble() { add \"$1\" \"$1\"; }\n",
            "test_double.sh" => ". src/double.sh\n[ \"$(double 4)\" = 8 ] || exit 1\n",
            _ => return None,
        };
        Some(text.to_string())
    }

    fn findings(&self, a: &Assignment) -> Vec<String> {
        // The best-practices Inspector of the implementation review reads add.sh.
        let add = std::fs::read_to_string(self.root.join("src/add.sh")).unwrap_or_default();
        if a.group.as_deref() == Some("best-practices") && a.scope.contains(" impl review ") && !add.contains("$#") {
            vec!["C|error-handling|src/add.sh:1|add with a missing operand fails with a shell syntax error".into()]
        } else {
            Vec::new()
        }
    }

    fn field(&self, a: &Assignment, key: &str) -> Option<String> {
        match (a.role.as_str(), key) {
            ("TaskGenerator", "Tasks") => Some("2".into()),
            ("TaskGenerator", "Waves") => Some("2".into()),
            ("Architect", "Summary") => Some("add and double in sh".into()),
            _ => None,
        }
    }

    fn report_after(&self, a: &Assignment) -> Option<(String, String)> {
        (a.role == "Builder" && a.group.as_deref() == Some("G1") && !a.tasks.is_empty())
            .then(|| ("Builder".to_string(), "G2".to_string()))
    }
}

/// `[team] startup_timeout_seconds`: several real CLIs starting together on a
/// busy 2-core machine print nothing for over a minute (Gemini CLI and
/// OpenCode); until its first output a teammate is not taken for hung.
const STARTUP: u64 = 300;

/// Runs of real CLIs are heavy (up to 26 processes each): one at a time.
pub(crate) static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One engine's setup: its stub, its scratch home, its config.
struct Engine {
    name: &'static str,
    /// `[team] hang_timeout_seconds`, from a teammate's first output on: the
    /// longest silence of a working CLI between two events on a busy 2-core
    /// machine. Nothing in the run waits on it.
    hang: u64,
    /// Keeps the stub server and the scratch home alive.
    _keep: Box<dyn std::any::Any>,
    env: Vec<(OsString, OsString)>,
    remove: Vec<OsString>,
    config: String,
}

fn claude(model: Arc<Obedient>) -> Engine {
    let stub = AnthropicStub::with_responder(model);
    let cli = Claude::new(&stub.url());
    Engine {
        name: "claude",
        hang: 60,
        env: cli.env(),
        remove: Claude::inherited_to_remove(),
        config: format!("[engines.commands]\nclaude = \"{}\"\n", Claude::bin().display()),
        _keep: Box::new((stub, cli)),
    }
}

fn gemini(model: Arc<Obedient>) -> Engine {
    let stub = GeminiStub::with_responder(model);
    let cli = GeminiCli::new(&stub.url());
    let m = troupe_testkit::gemini_cli::MODEL;
    Engine {
        name: "gemini",
        hang: 60,
        env: cli.env(),
        remove: GeminiCli::inherited_to_remove(),
        config: format!(
            "[engines.models.gemini]\nt2 = \"{m}\"\nt3 = \"{m}\"\n\n[engines.commands]\ngemini = \"{}\"\n",
            GeminiCli::bin().display()
        ),
        _keep: Box::new((stub, cli)),
    }
}

fn codex(model: Arc<Obedient>) -> Engine {
    let stub = ResponsesStub::with_responder(model);
    let cli = Codex::new(&stub.url());
    let m = troupe_testkit::codex::MODEL;
    Engine {
        name: "codex",
        hang: 60,
        env: cli.env(),
        remove: Codex::inherited_to_remove(),
        config: format!(
            "[engines.models.codex]\nt2 = \"{m}\"\nt3 = \"{m}\"\n\n[engines.commands]\ncodex = \"{}\"\n",
            Codex::bin().display()
        ),
        _keep: Box::new((stub, cli)),
    }
}

fn opencode(model: Arc<Obedient>) -> Engine {
    let stub = ChatStub::with_responder(model);
    let cli = OpenCode::new(&stub.url());
    Engine {
        name: "opencode",
        hang: 60,
        env: cli.env(),
        remove: OpenCode::inherited_to_remove(),
        config: format!(
            "[engines.models.opencode]\nt2 = \"fake/fake-model\"\nt3 = \"fake/fake-model\"\n\n[engines.commands]\nopencode = \"{}\"\n",
            OpenCode::bin().display()
        ),
        _keep: Box::new((stub, cli)),
    }
}

/// `troupe --json run login "add and double numbers"` with every teammate on
/// `engine`, and everything the run must leave behind. In the shared work
/// tree (`isolation = "shared"`): the second wave starts on the first
/// Builder's board completion, which worktree isolation defers to the merge
/// (`a_run_with_obedient_claude_code_builders_in_worktrees`). With `replay`,
/// the recorded run then replays from the teammates' logs with no model
/// (`troupe replay`): the same events, board and committed code.
fn full_run(engine: fn(Arc<Obedient>) -> Engine, replay: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = project("", None);
    let root: PathBuf = p.root().canonicalize().unwrap();
    let model = Obedient::new(&root, Demo { root: root.clone() });
    let e = engine(model.clone());
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"{}\"\n\n{}\n[team]\nhang_timeout_seconds = {}\nstartup_timeout_seconds = {STARTUP}\nisolation = \"shared\"\n",
            e.name, e.config, e.hang
        ),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    let report = obeyed(&p, &e, &model, &["--json", "run", "login", "add and double numbers"]);
    assert_eq!(report["phase"], "implementation-complete", "{report}");
    for t in report["teammates"].as_array().unwrap() {
        assert_eq!(t["engine"], e.name, "{t}");
    }
    let roles: Vec<&str> =
        report["teammates"].as_array().unwrap().iter().map(|t| t["role"].as_str().unwrap()).collect();
    let count = |r: &str| roles.iter().filter(|x| **x == r).count();
    assert_eq!(count("Architect"), 1, "{roles:?}");
    assert_eq!(count("Builder"), 3, "G1, G2 and the fix round: {roles:?}");
    assert_eq!(count("Auditor"), 3, "the design review and two implementation rounds: {roles:?}");
    assert_eq!(count("Inspector"), 18, "six per round, none retried: {roles:?}");

    let verdicts = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    let order: Vec<&str> = verdicts.lines().filter_map(|l| l.strip_prefix("- verdict: ")).collect();
    assert_eq!(order, ["GO", "NO-GO", "GO"], "{verdicts}");
    assert_eq!(std::fs::read_to_string(p.path("src/add.sh")).unwrap(), ADD_FIXED);

    // The second wave started on the first Builder's board completion, before its report.
    let log = model.log();
    let g1 = model.teammates().into_iter().find(|a| a.group.as_deref() == Some("G1")).unwrap().id;
    let g2 = model.teammates().into_iter().find(|a| a.group.as_deref() == Some("G2")).unwrap().id;
    let at = |id: &str, e: &str| log.iter().position(|(i, x)| i == id && *x == e).unwrap();
    assert!(at(&g2, "started") < at(&g1, "reported"), "{log:?}");

    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["tasks_total"], 2, "{status}");
    assert_eq!(status[0]["tasks_completed"], 2, "{status}");
    // The suite is green at HEAD, and HEAD holds everything.
    assert_eq!(git(p.root(), &["status", "--porcelain", "--", "src", "tests"]), "");
    let suite = Std::new("sh").arg("check.sh").current_dir(p.root()).output().unwrap();
    assert!(suite.status.success(), "{}", String::from_utf8_lossy(&suite.stdout));
    if replay {
        crate::replay::assert_replays(&root, &[]);
    }
}

/// `troupe <args>` with every teammate on `e`: the model was obeyed, the
/// command succeeded; its JSON report.
fn obeyed(p: &TestProject, e: &Engine, model: &Obedient, args: &[&str]) -> serde_json::Value {
    let out = run(p, e, args);
    model.assert_obeyed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr:\n{stderr}\nstdout:\n{}", String::from_utf8_lossy(&out.stdout));
    json(&out)
}

fn run(p: &TestProject, e: &Engine, args: &[&str]) -> std::process::Output {
    let mut cmd = p.troupe();
    for k in &e.remove {
        cmd.env_remove(k);
    }
    cmd.envs(e.env.iter().cloned());
    cmd.args(args).timeout(std::time::Duration::from_secs(900)).output().unwrap()
}

#[test]
fn a_full_run_with_obedient_claude_code_teammates() {
    full_run(claude, false);
}

/// Gemini CLI's loop detector is off for troupe's teammates (an Auditor's
/// repeated `read_messages` wait would trip it), and troupe's session-start
/// reminder stays out of the first prompt (Gemini drops it, with the role
/// prompt, from a resumed session).
#[test]
fn a_full_run_with_obedient_gemini_cli_teammates() {
    full_run(gemini, false);
}

/// Codex offers the gateway's tools only through its `tool_search`: the
/// obedient model searches for each tool the prompt names, then calls it.
/// Its file edits are `apply_patch` calls whose stream names only the paths:
/// the replay writes what the supervisor logged they left.
#[test]
fn a_full_run_with_obedient_codex_teammates() {
    full_run(codex, true);
}

/// The costliest test of the suite per process: 26 OpenCode starts of 7-10 s
/// of CPU each (a 185 MB bun binary loading its bundle; BENCHMARKS.md,
/// "OpenCode start-up in tests", lists every switch tried). It runs in CI
/// since the suite shed more than it costs (2026-11-26: the whole suite with
/// it 672 s of nextest wall against 645 s for the last suite CI passed
/// with; this test 210 s of it). Costs of troupe's OpenCode wiring that are
/// gone: OpenCode's npm install of `@opencode-ai/plugin`, which it waited for
/// before every session (here the testkit's `satisfy_plugin_dependency`; in a
/// project's `.opencode` the Lead's `driver/opencode_deps.rs`), the shared
/// `opencode.db` that failed one of seven Inspectors started together with
/// "database is locked" (each teammate has its own `OPENCODE_DB`), the
/// session title OpenCode asked its small model for at every start (the
/// `title` agent disabled) and its snapshots (a git copy of the work tree at
/// every step). Gate skills reach OpenCode teammates through `skills.paths`
/// (its `skill` tool, which needs `rg` on PATH), which
/// `contract::every_skill_a_role_prompt_names_is_reachable_on_its_engine`
/// checks.
#[test]
fn a_full_run_with_obedient_opencode_teammates() {
    full_run(opencode, false);
}

/// The demo's files without G1's early report: under worktree isolation G2
/// starts only once G1's branch is merged.
struct Isolated(Demo);

impl Knowledge for Isolated {
    fn file(&self, a: &Assignment, path: &str) -> Option<String> {
        self.0.file(a, path)
    }

    fn field(&self, a: &Assignment, key: &str) -> Option<String> {
        self.0.field(a, key)
    }
}

/// `[team] isolation = "worktree"` with real Claude Code teammates (issue 18):
/// each Builder starts in its own git worktree, writes, tests and is gated
/// there (hooks and sandbox resolve its files there), and its work reaches
/// the line only through the Lead's merge; the second wave starts from the
/// merged result. No review (the worktree path is what is under test).
#[test]
fn a_run_with_obedient_claude_code_builders_in_worktrees() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = project("", None);
    let root: PathBuf = p.root().canonicalize().unwrap();
    let model = Obedient::new(&root, Isolated(Demo { root: root.clone() }));
    let e = claude(model.clone());
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"claude\"\n\n{}\n[team]\nhang_timeout_seconds = {}\nisolation = \"worktree\"\n",
            e.config, e.hang
        ),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    let report = obeyed(&p, &e, &model, &["--json", "run", "login", "add and double numbers", "--no-review"]);
    assert_eq!(report["phase"], "implementation-complete");
    let merges = git(p.root(), &["log", "--merges", "--format=%(trailers:key=Troupe-Merge,valueonly)"]);
    let merges: Vec<&str> = merges.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(merges, ["login/G2@1.0", "login/G1@1.0"], "each group reached the line by its merge");
    let log = model.log();
    let g1 = model.teammates().into_iter().find(|a| a.group.as_deref() == Some("G1")).unwrap().id;
    let g2 = model.teammates().into_iter().find(|a| a.group.as_deref() == Some("G2")).unwrap().id;
    let at = |id: &str, e: &str| log.iter().position(|(i, x)| i == id && *x == e).unwrap();
    assert!(at(&g1, "reported") < at(&g2, "started"), "G2 starts from G1's merged work: {log:?}");
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "");
    assert_eq!(git(p.root(), &["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    assert_eq!(git(p.root(), &["branch", "--list", "troupe/*"]), "");
    let suite = Std::new("sh").arg("check.sh").current_dir(p.root()).output().unwrap();
    assert!(suite.status.success(), "{}", String::from_utf8_lossy(&suite.stdout));
}

/// One Builder group whose test command (`sh check.sh`, run by the teammate
/// as its prompt says) also records where the teammate's shell runs: its
/// working directory and `git rev-parse --show-toplevel`, into `where.txt`,
/// one of the group's files. Only a teammate has `TROUPE_AGENT_ID`, so the
/// Lead's gates leave `where.txt` alone.
pub(crate) const WHERE_CHECK: &str = "if [ -n \"$TROUPE_AGENT_ID\" ]; then printf '%s\\n%s\\n' \"$(pwd -P)\" \"$(git rev-parse --show-toplevel)\" > where.txt; fi\nfor t in tests/test_*.sh; do [ -e \"$t\" ] || continue; sh \"$t\" || exit 1; done\necho all tests pass\n";

/// The scripted Architect and TaskGenerator of a one-group plan: G1 writes
/// `src/add.sh` and `where.txt`.
pub(crate) fn one_group() -> String {
    let taskgen = r##"
  task-generator:
    - - write:
          path: ".troupe/specs/{feature}/tasks.yaml"
          content: |
            tasks:
              - {id: "1", summary: add A B, status: pending}
            execution:
              - wave: 1
                groups:
                  - {id: G1, tasks: ["1"], files: [src/add.sh, where.txt]}
      - report: "TASKGEN_COMPLETE\nTasks: 1\nWaves: 1"
"##;
    format!("agents:{}{taskgen}", crate::lead::DESIGN)
}

/// What the one group's Builder writes: add.sh (where.txt is its test's).
struct OneGroup;

impl Knowledge for OneGroup {
    fn file(&self, _: &Assignment, path: &str) -> Option<String> {
        path.ends_with("add.sh").then(|| ADD.to_string())
    }
}

/// `troupe run` with the Builder on `engine` (the Architect and the
/// TaskGenerator scripted) in worktree isolation: the real CLI starts in the
/// group's worktree (its shell's working directory and `git rev-parse
/// --show-toplevel` are the worktree), its writes land there (they reach the
/// line only through the group's merge) and nothing is left behind.
fn builder_in_worktree(engine: fn(Arc<Obedient>) -> Engine) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = project("", Some(&one_group()));
    std::fs::write(p.path("check.sh"), WHERE_CHECK).unwrap();
    let root: PathBuf = p.root().canonicalize().unwrap();
    let model = Obedient::new(&root, OneGroup);
    let e = engine(model.clone());
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"scripted\"\n\n[engines.phases]\nimpl = \"{}\"\n\n{}\n[team]\nhang_timeout_seconds = {}\nstartup_timeout_seconds = {STARTUP}\nisolation = \"worktree\"\n",
            e.name, e.config, e.hang
        ),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    let report = obeyed(&p, &e, &model, &["--json", "run", "login", "add numbers", "--no-review"]);
    let builders: Vec<&serde_json::Value> =
        report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == "Builder").collect();
    assert_eq!(builders.len(), 1, "{report:#}");
    assert_eq!(builders[0]["engine"], e.name, "{report:#}");
    let worktree = root.join(".troupe/state/worktrees/login/G1").to_string_lossy().into_owned();
    assert_eq!(
        std::fs::read_to_string(p.path("where.txt")).unwrap(),
        format!("{worktree}\n{worktree}\n"),
        "the teammate's shell ran in its worktree"
    );
    // Its files reached the line by the group's merge, from its branch.
    let merge = git(p.root(), &["log", "--merges", "--format=%H %(trailers:key=Troupe-Merge,valueonly)"]);
    let merge = merge.lines().find(|l| l.ends_with("login/G1@1.0")).unwrap_or_else(|| panic!("{merge}"));
    let merged = git(p.root(), &["diff", "--name-only", &format!("{0}^1", &merge[..40]), &merge[..40]]);
    assert_eq!(merged.lines().collect::<Vec<_>>(), ["src/add.sh", "where.txt"]);
    assert_eq!(std::fs::read_to_string(p.path("src/add.sh")).unwrap(), ADD);
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "");
    assert_eq!(git(p.root(), &["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    assert_eq!(git(p.root(), &["branch", "--list", "troupe/*"]), "");
}

#[test]
fn a_gemini_cli_builder_works_in_its_worktree() {
    builder_in_worktree(gemini);
}

#[test]
fn a_codex_builder_works_in_its_worktree() {
    builder_in_worktree(codex);
}

/// One OpenCode start (≈ 7 s of its CPU): 9.6-12.3 s of CPU and 11-21 s
/// of wall for the whole test at load 7-9 (BENCHMARKS.md, "Does it fit CI
/// now?"), paid for by the Gemini CLI and Codex starts without their
/// launchers (the testkit).
#[test]
fn an_opencode_builder_works_in_its_worktree() {
    builder_in_worktree(opencode);
}
