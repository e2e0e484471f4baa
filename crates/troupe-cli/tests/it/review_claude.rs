//! Reviews with the real Claude Code CLI as every Inspector, Auditor and
//! fixing Architect, each driven by a testkit Anthropic stub. A wrapper set as
//! `[engines.commands] claude` routes each teammate by `TROUPE_ROLE` and
//! `TROUPE_GROUP` (an Inspector's group is its perspective); a route may also
//! stand in a process that never answers, for the recovery paths.
//!
//! The recovery tests judge hangs by a short hang timeout ([`HANG_MS`])
//! beside a generous start-up allowance (Claude Code takes seconds to start
//! its session on a loaded machine), and stop a hung teammate 300 ms after
//! asking it to.

use std::path::{Path, PathBuf};
use std::process::Command as Std;
use std::time::Duration;

use serde_json::json;
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::{Conversation, Responder, Script, Turn};

use crate::support::{TestProject, json};

/// These tests start up to 21 Claude Code processes each and judge liveness by a
/// hang timeout: run them one at a time so that they do not starve each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn git(root: &Path, args: &[&str]) -> String {
    let out = Std::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The hang timeout of the tests whose subject is a hang: a teammate whose
/// session started and then printed nothing for this long is hung. Not below
/// a second: on a 2-core machine at load 16, working Claude Code teammates
/// went quiet for up to 2.5 s between two events of their session (measured
/// from their logs), and any teammate taken for hung changes what these tests
/// count. The start-up allowance covers the longer silence before the session
/// (30-45 s at that load).
const HANG_MS: u64 = 5000;
/// [`HANG_MS`] as decisions.md says it.
const HANG_SAID: &str = "5 s";
/// The hang timeout of the tests where nothing hangs: never reached.
const CALM_MS: u64 = 120_000;

const FINDINGS: &str = "VERDICT:CONDITIONAL\nSCOPE:login\nISSUES:\nH|naming|design.md|component names are unclear\n";

fn verdict(v: &str) -> String {
    format!("VERDICT:{v}\nSCOPE:login\nVERIFIED:\ninspector-rules-1|H|naming|design.md|component names are unclear\n")
}

/// What a route runs: Claude Code against a stub, or a process that never answers.
enum Route<'a> {
    Stub(&'a AnthropicStub),
    /// Claude against the first stub on the first run of this route, the second after.
    Rounds(&'a AnthropicStub, &'a AnthropicStub),
    Silent,
}

fn wrapper(dir: &Path, routes: &[(&str, Route)]) -> PathBuf {
    let mut sh = String::from("#!/bin/sh\ncase \"$TROUPE_ROLE:$TROUPE_GROUP\" in\n");
    for (i, (pattern, route)) in routes.iter().enumerate() {
        let body = match route {
            Route::Stub(s) => format!("export ANTHROPIC_BASE_URL={}", s.url()),
            Route::Rounds(a, b) => {
                // In Claude's own folder of its HOME: a sandboxed teammate (and
                // this wrapper, which runs as it) writes nowhere else outside
                // its files, not even HOME itself.
                let count = format!("\"$HOME/.claude/.troupe-test-count-{i}\"");
                format!(
                    "if [ -e {c} ]; then export ANTHROPIC_BASE_URL={}; else touch {c}; export ANTHROPIC_BASE_URL={}; fi",
                    b.url(),
                    a.url(),
                    c = count
                )
            }
            // Its session starts (with no id to resume it by), then it says nothing more.
            Route::Silent => "echo '{\"type\":\"system\",\"subtype\":\"init\"}'; exec sleep 600".to_string(),
        };
        sh.push_str(&format!("  {pattern}) {body} ;;\n"));
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

/// A git project with `login` in `phase` and design files.
fn project(phase: &str) -> TestProject {
    let p = TestProject::new();
    // The Claude skills (the Architect invokes document-quality-rules before writing).
    p.troupe().args(["init", "--claude"]).arg(p.root()).assert().success();
    std::fs::write(
        p.path(".troupe/steering/tech.md"),
        "# Tech\n\n## Common Commands\n\n- Test: `true`\n- Lint: `true`\n",
    )
    .unwrap();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let spec = p.path(".troupe/specs/login/spec.yaml");
    let text = std::fs::read_to_string(&spec).unwrap().replace("phase: initialized", &format!("phase: {phase}"));
    std::fs::write(&spec, text).unwrap();
    std::fs::write(p.path(".troupe/specs/login/design.md"), "# Design\n\nThing A talks to thing B.\n").unwrap();
    std::fs::write(p.path(".troupe/specs/login/research.md"), "# Research\n").unwrap();
    git(p.root(), &["init", "-q"]);
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "start"]);
    p
}

/// Route `claude` through `wrapper`, with the hang timeout `hang_ms` from a
/// teammate's first output on (before it, the start-up allowance of 120 s).
fn configure(p: &TestProject, wrapper: &Path, hang_ms: u64, extra: &str) {
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"claude\"\n{extra}\n[engines.commands]\nclaude = \"{}\"\n\n[team]\nhang_timeout_ms = {hang_ms}\nstartup_timeout_seconds = 120\n",
            wrapper.display()
        ),
    )
    .unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "config"]);
}

/// An Auditor that reads the design twice, then answers `text`.
fn auditor(root: &Path, text: String) -> AnthropicStub {
    let design = root.join(".troupe/specs/login/design.md").display().to_string();
    let read = || Turn::tool("Read", json!({"file_path": design}));
    AnthropicStub::start(Script::new([read(), read(), Turn::text(text)]))
}

/// An Auditor that waits for the Lead's recovery notice the way the role
/// prompt says one waits for its messages (`read_messages`, every 200 ms:
/// well within the hang timeout), then answers `verdict`. It stays busy
/// exactly as long as the Inspectors' recovery takes, on any machine.
struct AwaitsRecoveryNotice {
    verdict: String,
}

impl Responder for AwaitsRecoveryNotice {
    fn respond(&self, c: &Conversation) -> Turn {
        // Bounded: 3000 polls outlast any test timeout.
        if c.results.iter().any(|r| r.contains("recovery_notice")) || c.turns > 3000 {
            return Turn::text(self.verdict.clone());
        }
        Turn::tool("mcp__troupe__troupe__read_messages", json!({})).after(Duration::from_millis(200))
    }
}

fn run_troupe(p: &TestProject, claude: &Claude, args: &[&str]) -> std::process::Output {
    let mut cmd = p.troupe();
    for k in Claude::inherited_to_remove() {
        cmd.env_remove(k);
    }
    cmd.envs(claude.env());
    cmd.args(args).timeout(Duration::from_secs(300)).output().unwrap()
}

/// The run ended well; else what it said, on both streams (`--json` puts its error on stdout).
fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\nstderr:\n{}\nstdout:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

fn inspectors() -> AnthropicStub {
    AnthropicStub::start(Script::new([Turn::text(FINDINGS)]))
}

fn teammates(report: &serde_json::Value, role: &str) -> Vec<serde_json::Value> {
    report["teammates"].as_array().unwrap().iter().filter(|t| t["role"] == role).cloned().collect()
}

#[test]
fn design_review_no_go_then_the_architect_fixes_and_the_second_round_is_go() {
    let _serial = serial();
    let p = project("design-generated");
    let root = p.root().canonicalize().unwrap();
    let insp = inspectors();
    let no_go = auditor(&root, verdict("NO-GO").replace("|H|", "|C|"));
    let go = auditor(&root, verdict("GO").replace("|H|", "|L|"));
    // The fixing Architect is real Claude too: it loads the document skill with
    // the Skill tool (installed by `troupe init --claude`; the role policy counts
    // it as a read), which the skill gate requires before the write, reads the
    // design (Claude Code overwrites only files it has read), then rewrites it.
    let design_md = root.join(".troupe/specs/login/design.md").display().to_string();
    let arch = AnthropicStub::start(Script::new([
        Turn::tool("Skill", json!({"skill": "document-quality-rules"})),
        Turn::tool("Read", json!({"file_path": design_md})),
        Turn::tool(
            "Write",
            json!({"file_path": design_md, "content": "# Design\n\nThe Session store talks to the Login handler.\n"}),
        ),
        Turn::text("ARCHITECT_COMPLETE\nFeature: login\nSummary: clearer component names"),
    ]));
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(
        bin.path(),
        &[
            ("inspector:*", Route::Stub(&insp)),
            ("auditor:*", Route::Rounds(&no_go, &go)),
            ("architect:*", Route::Stub(&arch)),
        ],
    );
    configure(&p, &w, CALM_MS, "");
    let claude = Claude::new(&insp.url());
    let out = run_troupe(&p, &claude, &["--json", "review", "design", "login"]);
    succeeded(&out);
    let report = json(&out);
    assert_eq!(teammates(&report, "Inspector").len(), 12, "two rounds of six: {report}");
    assert_eq!(teammates(&report, "Auditor").len(), 2);
    assert_eq!(teammates(&report, "Architect").len(), 1);
    let architects = teammates(&report, "Architect");
    for t in teammates(&report, "Inspector").iter().chain(&teammates(&report, "Auditor")).chain(&architects) {
        assert_eq!(t["engine"], "claude", "{t}");
    }
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    assert!(
        md.contains("## [B1] design")
            && md.contains("- verdict: NO-GO\n")
            && md.contains("- action: auto-fix round 1/5"),
        "{md}"
    );
    assert!(md.contains("## [B2] design") && md.contains("- verdict: GO\n"), "{md}");
    // The skill loaded offline from .claude/skills/ and the gates let the write through.
    let seen = arch.model_requests().last().map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(seen.contains("Document quality rules") && !seen.contains("\"is_error\":true"), "{seen}");
    let design = std::fs::read_to_string(p.path(".troupe/specs/login/design.md")).unwrap();
    assert!(design.contains("Session store"), "{design}");
    let spec = json(&p.troupe().args(["--json", "spec", "show", "login"]).output().unwrap());
    assert_eq!(spec["orchestration"]["retry_count"], 1, "{spec}");
    let log = git(p.root(), &["log", "--format=%s"]);
    assert!(log.starts_with("login: the run's handover notes\nlogin: design review GO (B2)"), "{log}");
}

#[test]
fn impl_review_with_a_hanging_inspector_proceeds_with_5_of_6() {
    let _serial = serial();
    let p = project("implementation-complete");
    let insp = inspectors();
    // Busy until the testability Inspector and its respawn have both hung.
    let audit = AnthropicStub::with_responder(AwaitsRecoveryNotice { verdict: verdict("CONDITIONAL") });
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(
        bin.path(),
        &[
            ("inspector:testability", Route::Silent),
            ("inspector:*", Route::Stub(&insp)),
            ("auditor:*", Route::Stub(&audit)),
        ],
    );
    // A silent Inspector is replaced once its process is gone: forced after 300 ms.
    configure(&p, &w, HANG_MS, "[shutdown]\ntimeout_ms = 300\n");
    let claude = Claude::new(&insp.url());
    let out = run_troupe(&p, &claude, &["--json", "review", "impl", "login", "--no-commit"]);
    succeeded(&out);
    let report = json(&out);
    let testability: Vec<String> = teammates(&report, "Inspector")
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .filter(|id| id.starts_with("inspector-testability-"))
        .collect();
    let results: Vec<String> = audit
        .model_requests()
        .iter()
        .map(|r| r.to_string())
        .filter_map(|r| r.rfind("tool_result").map(|i| r[i..(i + 400).min(r.len())].to_string()))
        .collect();
    assert_eq!(testability.len(), 2, "retried once under a new name: {report}\n{results:#?}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    // The five others answered at once: the retry went after they had reported.
    assert!(decisions.contains("5/6 Inspectors reported; retrying its perspective once"), "{decisions}");
    assert!(decisions.contains(&format!("Inspector {} unavailable after retry", testability[0])), "{decisions}");
    // The Auditor (real Claude) got the recovery notice through the mailbox,
    // then answered; the Lead acted on its verdict.
    let seen = audit.model_requests().iter().map(|r| r.to_string()).collect::<String>();
    assert!(seen.contains("recovery_notice"), "{results:#?}");
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    assert!(md.contains("- verdict: CONDITIONAL"), "{md}");
}

#[test]
fn an_auditor_that_never_answers_gets_the_lead_derived_verdict() {
    let _serial = serial();
    let insp = inspectors();
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("inspector:*", Route::Stub(&insp)), ("auditor:*", Route::Silent)]);
    let p = project("implementation-complete");
    configure(&p, &w, HANG_MS, "[shutdown]\ntimeout_ms = 300\n");
    let claude = Claude::new(&insp.url());
    let out = run_troupe(&p, &claude, &["--json", "review", "impl", "login", "--no-commit"]);
    succeeded(&out);
    let report = json(&out);
    assert_eq!(teammates(&report, "Auditor").len(), 2, "{report}");
    // A process that never started an engine session cannot be resumed: no nudge.
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(decisions.contains("no session to resume, so it cannot be nudged"), "{decisions}");
    let v = std::fs::read_to_string(p.path(".troupe/specs/login/reviews/B1/verdict.cpf")).unwrap();
    assert!(
        v.starts_with("VERDICT:CONDITIONAL\n") && v.contains("NOTES:\nAUDITOR_UNAVAILABLE|lead-derived verdict"),
        "{v}"
    );
}

#[test]
fn a_hung_auditor_is_shut_down_then_nudged_through_its_claude_session() {
    let _serial = serial();
    let p = project("implementation-complete");
    let root = p.root().canonicalize().unwrap();
    let insp = inspectors();
    let design = root.join(".troupe/specs/login/design.md").display().to_string();
    // First run: one read, then a model answer that takes far past the hang timeout
    // and the shutdown timeout. The resumed run (the nudge) answers the verdict.
    let hung = AnthropicStub::start(Script::new([
        Turn::tool("Read", json!({"file_path": design})),
        Turn::text("too late").after(Duration::from_secs(240)),
    ]));
    let partial = format!("{}NOTES:\nPARTIAL_VERIFICATION\n", verdict("CONDITIONAL"));
    // However many model turns the resumed transcript holds, the answer is the verdict.
    let nudged = AnthropicStub::start(Script::new((0..4).map(|_| Turn::text(partial.clone()))));
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("inspector:*", Route::Stub(&insp)), ("auditor:*", Route::Rounds(&hung, &nudged))]);
    configure(&p, &w, HANG_MS, "[shutdown]\ntimeout_ms = 300\n");
    let claude = Claude::new(&insp.url());
    let out = run_troupe(&p, &claude, &["--json", "review", "impl", "login", "--no-commit"]);
    succeeded(&out);
    let report = json(&out);
    let auditors = teammates(&report, "Auditor");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert_eq!(auditors.len(), 1, "nudged, not replaced: {report}\n{decisions}");
    let id = auditors[0]["id"].as_str().unwrap();
    assert!(
        decisions.contains(&format!(
            "{id} showed no activity for {HANG_SAID}; asking it to stop before anything replaces it"
        )),
        "{decisions}"
    );
    assert!(
        decisions
            .contains(&format!("Auditor {id} showed no activity for the hang timeout and was shut down; nudging it")),
        "{decisions}"
    );
    // The resumed Claude session carried the nudge, verbatim.
    let seen = nudged.model_requests().iter().map(|r| r.to_string()).collect::<String>();
    assert!(
        seen.contains(
            "Output your verdict now with findings verified so far. Use NOTES: PARTIAL_VERIFICATION if incomplete."
        ),
        "{seen}"
    );
    let v = std::fs::read_to_string(p.path(".troupe/specs/login/reviews/B1/verdict.cpf")).unwrap();
    assert!(v.contains("PARTIAL_VERIFICATION") && !v.contains("AUDITOR_UNAVAILABLE"), "{v}");
}

#[test]
fn a_hung_claude_auditor_approves_the_shutdown_request_through_the_gateway_then_is_nudged() {
    let _serial = serial();
    let p = project("implementation-complete");
    let root = p.root().canonicalize().unwrap();
    let insp = inspectors();
    let design = root.join(".troupe/specs/login/design.md").display().to_string();
    // Quiet past the hang timeout (5 s), so the Lead asks it to stop; then it reads
    // its mailbox and approves through the gateway. Its next answer would take longer
    // than the run may (the shutdown timeout is longer still): only the approval
    // ends it in time. The shutdown request is the project's first message: id 1.
    let hung = AnthropicStub::start(Script::new([
        Turn::tool("Read", json!({"file_path": design})),
        Turn::tool("mcp__troupe__troupe__read_messages", json!({})).after(Duration::from_secs(9)),
        Turn::tool("mcp__troupe__troupe__respond_shutdown", json!({"request_id": 1, "approve": true})),
        Turn::text("stopping").after(Duration::from_secs(280)),
    ]));
    let partial = format!("{}NOTES:\nPARTIAL_VERIFICATION\n", verdict("CONDITIONAL"));
    let nudged = AnthropicStub::start(Script::new((0..6).map(|_| Turn::text(partial.clone()))));
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("inspector:*", Route::Stub(&insp)), ("auditor:*", Route::Rounds(&hung, &nudged))]);
    configure(&p, &w, HANG_MS, "[shutdown]\ntimeout_seconds = 600\n");
    let claude = Claude::new(&insp.url());
    let out = run_troupe(&p, &claude, &["--json", "review", "impl", "login", "--no-commit"]);
    succeeded(&out);
    let report = json(&out);
    let auditors = teammates(&report, "Auditor");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    let answers: Vec<String> = hung
        .model_requests()
        .iter()
        .map(|r| r.to_string())
        .filter_map(|r| r.rfind("tool_result").map(|i| r[i..(i + 300).min(r.len())].to_string()))
        .collect();
    assert_eq!(auditors.len(), 1, "nudged, not replaced: {report}\n{decisions}\n{answers:#?}");
    let id = auditors[0]["id"].as_str().unwrap();
    for line in [
        format!("{id} showed no activity for {HANG_SAID}; asking it to stop before anything replaces it"),
        format!("{id} approved the shutdown request; stopping its processes"),
        format!("Auditor {id} showed no activity for the hang timeout and was shut down; nudging it"),
    ] {
        assert!(decisions.contains(&line), "{line}\n{decisions}\n{answers:#?}");
    }
    let v = std::fs::read_to_string(p.path(".troupe/specs/login/reviews/B1/verdict.cpf")).unwrap();
    assert!(v.contains("PARTIAL_VERIFICATION") && !v.contains("AUDITOR_UNAVAILABLE"), "{v}");
}

#[test]
fn consensus_of_three_pipelines_with_real_claude_under_a_cap_of_ten() {
    let _serial = serial();
    let p = project("design-generated");
    let insp = inspectors();
    let audit = AnthropicStub::start(Script::new([Turn::text(verdict("GO"))]));
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("inspector:*", Route::Stub(&insp)), ("auditor:*", Route::Stub(&audit))]);
    configure(&p, &w, CALM_MS, "");
    let config = p.path(".troupe/config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace("[team]\n", "[team]\nmax_concurrent = 10\n");
    std::fs::write(&config, text).unwrap();
    git(p.root(), &["commit", "-q", "-am", "cap"]);
    let claude = Claude::new(&insp.url());
    let out = run_troupe(&p, &claude, &["--json", "review", "design", "login", "--consensus", "3", "--no-commit"]);
    succeeded(&out);
    let report = json(&out);
    assert_eq!(teammates(&report, "Inspector").len(), 18, "{report}");
    assert_eq!(teammates(&report, "Auditor").len(), 3, "{report}");
    let md = std::fs::read_to_string(p.path(".troupe/specs/login/verdicts.md")).unwrap();
    assert!(md.contains(" | runs:3 | threshold:2/3\n- verdict: GO"), "{md}");
    let v = std::fs::read_to_string(p.path(".troupe/specs/login/reviews/B1/verdict.cpf")).unwrap();
    assert!(v.contains("CONSENSUS|runs:3 | threshold:2/3|GO=3"), "{v}");
    assert!(v.contains("AGREEMENT|3/3|design.md|naming"), "a finding all three verified ranks first: {v}");
}
