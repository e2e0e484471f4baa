//! Budgets end to end with the scripted engine, which reports usage like a
//! real engine: a run pauses when the feature's budget is reached, `troupe
//! status` says so with what was spent, and `troupe resume --budget +5`
//! finishes it without redoing a completed task.

use crate::lead::{DESIGN, TASKS, project};
use crate::support::json;

/// A Builder that spends `usd` in one model turn, writes its file, completes its task and reports.
fn spending_builder(group: &str, task: &str, file: &str, usd: f64) -> String {
    format!(
        "  builder/{group}:\n    - - usage: {{input_tokens: 100, output_tokens: 10, cost_usd: {usd}}}\n      - write: {{path: {file}, content: \"{group}\\n\"}}\n      - complete: \"{task}\"\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: {task}\\nFiles: {file}\\nTests: ok\"\n"
    )
}

/// The design, the plan and three Builders that spend `usd` each.
pub(crate) fn spending_script(usd: f64) -> String {
    format!(
        "agents:{DESIGN}{TASKS}{}{}{}",
        spending_builder("G1", "1.1", "a.txt", usd),
        spending_builder("G2", "1.2", "b.txt", usd),
        spending_builder("G3", "2", "c.txt", usd)
    )
}

/// A project of `script` with a shutdown timeout of `shutdown_ms` and `budgets`
/// appended to its config, and its `troupe run` on the scripted engine.
fn budgeted_run(script: &str, shutdown_ms: u32, budgets: &str) -> (crate::support::TestProject, std::process::Output) {
    let p = project(script);
    let config = p.path(".troupe/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let mut text = text.replace("[shutdown]\n", &format!("[shutdown]\ntimeout_ms = {shutdown_ms}\n"));
    text.push_str(budgets);
    std::fs::write(&config, text).unwrap();
    let out = p
        .troupe()
        .args(["--json", "run", "login", "users log in", "--engine", "scripted", "--no-review"])
        .output()
        .unwrap();
    (p, out)
}

#[test]
fn a_feature_budget_pauses_the_run_and_resume_with_more_budget_finishes_it() {
    let (p, out) = budgeted_run(&spending_script(0.3), 2000, "\n[budgets.feature]\nmax_cost_usd = 0.5\n");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["outcome"], "paused", "{report:#}");
    let reason = report["budget"].as_str().unwrap();
    assert!(reason.starts_with("feature spent $0.6000 of its max_cost_usd $0.5000"), "{reason}");
    let ids: Vec<&str> = report["teammates"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert!(!ids.iter().any(|id| id.starts_with("builder-g3-")), "nothing spawns after the budget: {ids:?}");
    let decisions = std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap();
    assert!(decisions.contains(": BUDGET | login: feature spent $0.6000"), "{decisions}");

    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    let paused = status[0]["paused"].as_str().unwrap();
    assert!(paused.starts_with("paused: budget (feature spent $0.6000"), "{status:#}");
    assert!((status[0]["cost_usd"].as_f64().unwrap() - 0.6).abs() < 1e-9, "{status:#}");
    assert_eq!(status[0]["next_command"], "troupe resume login --budget +5   # or raise the limit in [budgets]");
    let text = p.troupe().args(["status", "login"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("\n  state:   paused: budget (feature spent"));

    // Without more budget, a resume pauses again before spawning anything.
    let again = p.troupe().args(["--json", "resume", "login", "--engine", "scripted", "--no-review"]).output().unwrap();
    let again = json(&again);
    assert_eq!((again["outcome"].as_str(), again["teammates"].as_array().map(Vec::len)), (Some("paused"), Some(0)));

    // Five dollars more: G3 alone runs; G1 and G2 completed their tasks before the pause.
    let out = p
        .troupe()
        .args(["--json", "resume", "login", "--engine", "scripted", "--no-review", "--budget", "+5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["outcome"], "completed");
    let ids: Vec<&str> = report["teammates"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0].starts_with("builder-g3-"), "{ids:?}");
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert_eq!(status[0]["paused"], serde_json::Value::Null);
    assert_eq!(status[0]["tasks_completed"], 3);

    // A bad --budget names the input and the fix.
    p.troupe()
        .args(["resume", "login", "--budget", "lots"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("`lots` is not a budget in dollars"));
}

/// The real Claude Code CLI against its stub, which reports usage on every
/// message: the run's token budget pauses the design after the first booked
/// turn (the Architect is asked to stop and finishes its turn), and once the
/// limit is raised `troupe resume` designs and implements the feature.
#[test]
fn a_real_claude_architect_pauses_on_the_run_budget_and_a_raised_limit_resumes() {
    use troupe_testkit::anthropic::AnthropicStub;
    use troupe_testkit::claude::Claude;

    use crate::lead_claude::{architect_script, git, run_troupe, wrapper};

    let p = crate::lead_claude::project("", Some(&spending_script(0.0)));
    let root = p.root().canonicalize().unwrap();
    let arch = AnthropicStub::start(architect_script(&root));
    let bin = tempfile::tempdir().unwrap();
    let w = wrapper(bin.path(), &[("architect:*", &arch)]);
    // Claude designs; the scripted engine plans and builds.
    let base = format!(
        "[engines]\ndefault = \"scripted\"\n\n[engines.phases]\ndesign = \"claude\"\n\n[engines.commands]\nclaude = \"{}\"\n",
        w.display()
    );
    std::fs::write(p.path(".troupe/config.toml"), format!("{base}\n[budgets.run]\nmax_tokens = 1\n")).unwrap();
    git(p.root(), &["add", "-A"]);
    git(p.root(), &["commit", "-q", "-m", "config"]);
    p.troupe().args(["spec", "new", "login", "-d", "add and double"]).assert().success();
    let claude = Claude::new(&arch.url());

    let out = run_troupe(&p, &claude, &["--json", "design", "login"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["outcome"], "paused", "{report:#}");
    assert!(report["budget"].as_str().unwrap().starts_with("run spent "), "{report:#}");
    assert_eq!(report["teammates"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!(report["phase"], "initialized");
    let status = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    assert!(status[0]["paused"].as_str().unwrap().contains("of its max_tokens 1 tokens"), "{status:#}");
    assert!(status[0]["cost_usd"].as_f64().is_some(), "Claude's turns are in the ledger: {status:#}");

    // The limit raised (removed): resume designs with Claude and builds with the scripted engine.
    std::fs::write(p.path(".troupe/config.toml"), base).unwrap();
    let out = run_troupe(&p, &claude, &["--json", "resume", "login", "--no-review"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    assert_eq!(report["phase"], "implementation-complete", "{report:#}");
    let engines: Vec<&str> =
        report["teammates"].as_array().unwrap().iter().map(|t| t["engine"].as_str().unwrap()).collect();
    assert_eq!(engines, ["claude", "scripted", "scripted", "scripted", "scripted"]);
}

#[test]
fn a_spent_budget_of_gateway_calls_refuses_the_call_and_pauses_the_run() {
    // G1 calls the gateway three times on a budget of two: the third call is refused, naming the budget.
    let g1 = "  builder/G1:\n    - - tool: {name: troupe__board_list}\n      - tool: {name: troupe__board_list}\n      - tool: {name: troupe__board_list}\n      - sleep: 1500\n      - report: \"BUILDER_COMPLETE\\nFeature: f\\nStatus: done\\nTasks completed: 1.1\\nFiles: a.txt\\nTests: ok\"\n";
    let script = format!(
        "agents:{DESIGN}{TASKS}{g1}{}{}",
        spending_builder("G2", "1.2", "b.txt", 0.0),
        spending_builder("G3", "2", "c.txt", 0.0)
    );
    let (p, out) = budgeted_run(&script, 500, "\n[budgets.role.builder]\nmax_gateway_calls = 2\n");
    let report = json(&out);
    assert_eq!(report["outcome"], "paused", "{report:#}");
    let reason = report["budget"].as_str().unwrap();
    assert!(
        reason.contains("spent 2 calls of its max_gateway_calls 2 ([budgets.role.builder] max_gateway_calls)"),
        "{reason}"
    );
    let g1 = report["teammates"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|t| t["id"].as_str().filter(|id| id.starts_with("builder-g1-")));
    let log = std::fs::read_to_string(p.path(&format!(".troupe/state/logs/{}.jsonl", g1.unwrap()))).unwrap();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("\"ok\":false")).collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains("budget of gateway calls reached")
            && refused[0].contains("raise it in .troupe/config.toml"),
        "{}",
        refused[0]
    );
}
