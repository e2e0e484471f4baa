//! The dashboard in real Chromium (Debian's `/usr/bin/chromium`) driven by
//! Playwright (`playwright-core` from `.peers`, `dashboard_browser.js`),
//! against a real `troupe serve` with a token, while a real pipeline runs
//! on the scripted engine in another process. One browser serves every
//! check; the test and the browser script take turns through files in a
//! shared folder (`logged-in`, `kill`, `restarted`, `go`, `done`).
//!
//! `TROUPE_SCREENSHOTS=DIR` keeps the screenshots there (they go to a temp
//! folder otherwise); `TROUPE_DASHBOARD_BENCH=1` also runs the benchmark
//! (`dashboard_bench`), whose numbers are in BENCHMARKS.md.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use troupe_core::layout::Layout;
use troupe_store::{EventLog, Registry, SqliteStore};
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::peers;
use troupe_testkit::{Script, Turn};

use crate::lead::{DESIGN, TASKS, project};
use crate::support::TestProject;

const BROWSER: &str = include_str!("dashboard_browser.js");
const TOKEN: &str = "dashboard-test-token";

/// `troupe serve` with a token, on `bind`.
pub(crate) struct Serving {
    child: Child,
    pub(crate) url: String,
}

impl Serving {
    pub(crate) fn start(p: &TestProject, bind: &str) -> Serving {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("troupe"))
            .arg("-C")
            .arg(p.root())
            .args(["serve", "--bind", bind])
            .env("TROUPE_TOKEN", TOKEN)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("serving on ").unwrap_or_else(|| panic!("no address: {line:?}")).to_string();
        Serving { child, url }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An authenticated request to the server.
pub(crate) fn put(url: &str, path: &str, body: Value) -> Value {
    let http: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut res =
        http.put(&format!("{url}{path}")).header("Authorization", &format!("Bearer {TOKEN}")).send_json(body).unwrap();
    let text = res.body_mut().read_to_string().unwrap();
    assert_eq!(res.status().as_u16(), 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The browser script, started in the background with its settings.
pub(crate) fn browser(dir: &Path, settings: Value) -> Child {
    let script = dir.join("dashboard_browser.js");
    std::fs::write(&script, BROWSER).unwrap();
    Command::new("node")
        .arg(&script)
        .arg(settings.to_string())
        .env("TROUPE_PLAYWRIGHT", peers::dir().join("node_modules/playwright-core"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The browser script's JSON answer, once it ends.
pub(crate) fn finish(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the browser script failed:\n{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Wait for the browser script's signal `name` (it fails the test if the script died).
fn wait_for(dir: &Path, name: &str, browser: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join(name).exists() {
        if let Ok(Some(status)) = browser.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(browser.stderr.as_mut().unwrap(), &mut err);
            panic!("the browser script ended ({status}) before `{name}`:\n{err}");
        }
        assert!(Instant::now() < deadline, "no `{name}` from the browser script");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, dir.join(name)).unwrap();
}

pub(crate) fn screenshots(scratch: &Path) -> PathBuf {
    std::env::var_os("TROUPE_SCREENSHOTS").map(PathBuf::from).unwrap_or_else(|| scratch.join("shots"))
}

/// Builder G1 asks the user to approve its plan and waits for the decision,
/// tries a file of another group (denied by troupe), then waits for `go` in
/// the project (it works in its own worktree).
fn script() -> String {
    let g1 = r#"  builder/G1:
    - - message: {to: user, body: "1. write a.txt\n2. complete 1.1", kind: plan}
      - run: "until troupe --json msg inbox | grep -q plan_decision; do sleep 0.05; done"
      - write: {path: b.txt, content: "not mine"}
      - run: "until [ -e \"$TROUPE_PROJECT/go\" ]; do sleep 0.05; done"
      - write: {path: a.txt, content: "G1\n"}
      - complete: "1.1"
      - report: "BUILDER_COMPLETE\nFeature: login\nStatus: done\nTasks completed: 1.1\nFiles: a.txt\nTests: ok"
"#;
    let other = |group: &str, task: &str, file: &str| {
        format!(
            "  builder/{group}:\n    - - write: {{path: {file}, content: \"{group}\\n\"}}\n      - complete: \"{task}\"\n      - report: \"BUILDER_COMPLETE\\nFeature: login\\nStatus: done\\nTasks completed: {task}\\nFiles: {file}\\nTests: ok\"\n"
        )
    };
    // A review's first Inspector works until the test says `go-inspect`:
    // the engine settings change while it does.
    let inspector = "  inspector:\n    - - run: \"until [ -e go-inspect ]; do sleep 0.05; done\"\n      - report: \"VERDICT:GO\\nSCOPE:login\\nISSUES:\\n\"\n";
    format!("agents:{DESIGN}{TASKS}{g1}{}{}{inspector}", other("G2", "1.2", "b.txt"), other("G3", "2", "c.txt"))
}

/// Two review rounds in verdicts.md, written by the review record's own
/// writer (the runs of this test skip reviews to stay fast).
fn verdicts_md() -> String {
    use troupe_lead::review::ReviewKind;
    use troupe_lead::review::record::{RoundRecord, entry};
    let design: troupe_core::cpf::AuditVerdict =
        "VERDICT:CONDITIONAL\nSCOPE:login\nVERIFIED:\ni1|H|sec|a.txt|x\ni2|H|sec|a.txt|y\ni3|M|t|b.txt|z\n"
            .parse()
            .unwrap();
    let implementation: troupe_core::cpf::AuditVerdict =
        "VERDICT:GO\nSCOPE:login\nVERIFIED:\ni1|L|naming|c.txt|terse\n".parse().unwrap();
    let round = |seq, kind, verdict| RoundRecord {
        seq,
        kind,
        at: "2026-01-01T10:00:00Z".parse().unwrap(),
        version: "1.0",
        runs: 1,
        threshold: 1,
        verdict,
        action: "continue",
    };
    format!(
        "# Verdicts: login\n\n{}{}",
        entry(&round(1, ReviewKind::Design, &design)),
        entry(&round(2, ReviewKind::Impl, &implementation))
    )
}

/// The registry's Inspectors, in spawn order, once there are `n`.
fn inspectors(store: &SqliteStore, n: usize) -> Vec<troupe_store::Agent> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut found: Vec<_> =
            store.agents().unwrap().into_iter().filter(|a| a.role.eq_ignore_ascii_case("inspector")).collect();
        if found.len() >= n {
            found.sort_by_key(|a| a.started_at);
            return found;
        }
        assert!(Instant::now() < deadline, "{} Inspector(s) spawned, waiting for {n}", found.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The board fills and moves live; an agent page streams a live gate denial;
/// a plan approved on the page lets the teammate go on; the server killed and
/// restarted mid-run loses no event and shows none twice; the inspection
/// section set to gemini writes its three phases and the next Inspector is
/// spawned on gemini.
#[test]
fn the_dashboard_watches_and_steers_a_live_run() {
    let p = project(&script());
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    // Gemini is installed (the real CLI, against a stub) so it can be chosen.
    let stub = GeminiStub::start(Script::new(vec![Turn::text("INSPECTOR_COMPLETE")]));
    let gemini = GeminiCli::new(&stub.url());
    let original = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!("{original}\n[engines.commands]\ngemini = \"{}\"\n", GeminiCli::bin().display()),
    )
    .unwrap();
    let server = Serving::start(&p, "127.0.0.1:0");
    let port = server.url.rsplit(':').next().unwrap().to_string();
    put(&server.url, "/engines", json!({"default": "scripted"}));
    p.troupe().args(["spec", "new", "login", "-d", "users log in"]).assert().success();

    let mut browser = browser(
        dir,
        json!({"base": server.url, "token": TOKEN, "dir": dir, "shots": screenshots(dir), "feature": "login"}),
    );
    wait_for(dir, "logged-in", &mut browser);
    let run = troupe(&p)
        .args(["--json", "run", "login", "--no-review"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut run = Stopped(Some(run.unwrap()));

    // Killed mid-run (G1 waits for `go`), with an event written while it is down.
    wait_for(dir, "kill", &mut browser);
    server.kill();
    p.troupe().args(["board", "create", "written while the server was down"]).assert().success();
    let server = Serving::start(&p, &format!("127.0.0.1:{port}"));
    signal(dir, "restarted", "");
    std::fs::write(p.path("go"), "").unwrap();
    let out = run.0.take().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["phase"], "implementation-complete", "{report}");
    let store = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
    std::fs::write(p.path(".troupe/specs/login/verdicts.md"), verdicts_md()).unwrap();
    let all: Vec<i64> = store.events_since(0, 100_000).unwrap().into_iter().map(|e| e.id).collect();
    signal(dir, "done", &all.last().unwrap().to_string());

    // Engine settings take effect at the next spawn, not the next run: a
    // review (one teammate at a time) spawns its first Inspector on the
    // scripted engine; while it works the page sets inspection to gemini;
    // the same Lead spawns the next Inspector on gemini.
    let text = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    assert!(text.contains("# max_concurrent = 24"), "{text}");
    std::fs::write(p.path(".troupe/config.toml"), text.replace("# max_concurrent = 24", "max_concurrent = 1")).unwrap();
    let mut review = troupe(&p);
    review.args(["review", "design", "login"]).stdout(Stdio::null()).stderr(Stdio::null());
    gemini.apply_env(&mut review);
    let review = Stopped(Some(review.spawn().unwrap()));
    let first = inspectors(&store, 1).remove(0);
    signal(dir, "inspecting", "");
    wait_for(dir, "engines-set", &mut browser);
    std::fs::write(p.path("go-inspect"), "").unwrap();
    let next = inspectors(&store, 2).remove(1);
    drop(review);
    assert_eq!(first.engine, "scripted", "{first:?}");
    assert_eq!(next.engine, "gemini", "the next Inspector of the same run: {next:?}");
    let seen = finish(browser);

    assert!(seen["after_login_url"].as_str().unwrap().ends_with('/'), "the token leaves the address bar: {seen}");
    assert_eq!(seen["anonymous_status"], 401, "{seen}");
    // Up to the run's last event (the review's own events may follow it).
    let newest = *all.last().unwrap();
    let after = |first: i64| -> Vec<i64> { all.iter().copied().filter(|id| *id > first).collect() };
    let upto = |v: &Value| -> Vec<i64> {
        serde_json::from_value::<Vec<i64>>(v.clone()).unwrap().into_iter().filter(|id| *id <= newest).collect()
    };
    let expected = after(seen["initial_last"].as_i64().unwrap());
    let applied = upto(&seen["applied"]);
    assert_eq!(applied, expected, "every event after the page was read, once, in order, across the restart");
    let mut activity: Vec<i64> = serde_json::from_value(seen["activity"].clone()).unwrap();
    activity.reverse();
    activity.retain(|id| *id <= newest);
    assert_eq!(activity, expected, "the activity list shows each event once");
    for page in ["agent", "approvals"] {
        let live = &seen["live"][page];
        assert_eq!(
            upto(&live["applied"]),
            after(live["initial"].as_i64().unwrap()),
            "the {page} page across the restart: {live}"
        );
        assert!(live["connects"].as_u64().unwrap() > 1, "the {page} page reconnected: {live}");
    }
    let seqs: Vec<u64> = serde_json::from_value(seen["log_seqs"].clone()).unwrap();
    let unique: std::collections::BTreeSet<_> = seqs.iter().collect();
    assert!(!seqs.is_empty() && unique.len() == seqs.len(), "the log shows each record once: {seqs:?}");
    assert!(seen["denial_text"].as_str().unwrap().contains("denied by troupe"), "{seen}");
    assert_eq!(seen["feature_design"], 1, "{seen}");
    assert!(seen["commits"].as_u64().unwrap() >= 2, "the feature's commits with diffs: {seen}");
    assert_eq!(
        seen["verdict_rounds"],
        json!(["B1 design CONDITIONAL 0 2 1 0", "B2 impl GO 0 0 0 1"]),
        "the verdict history with findings by severity"
    );
    assert_eq!(seen["verdict_tally"], json!(["CONDITIONAL 1 0 2 1 0", "GO 1 0 0 0 1"]), "{seen}");
    let columns = seen["done_columns"].to_string();
    for task in ["login/1.1", "login/1.2", "login/2"] {
        assert!(columns.contains(&format!("{task}=completed")), "moved live to completed: {columns}");
    }
    // Accessible: the keyboard reaches the skip link first and it works; on
    // every page, light and dark, laptop and phone: test ids, labels, contrast, no sideways scroll.
    assert_eq!((&seen["first_tab"], &seen["after_skip"]), (&json!("skip-to-content"), &json!("main")), "{seen}");
    let checks = seen["checks"].as_object().unwrap();
    assert!(checks.len() >= 12, "{checks:?}");
    for (page, c) in checks {
        for list in ["missing", "unlabeled", "low"] {
            assert_eq!(c[list], json!([]), "{page}: {list} (test ids, labels, contrast)");
        }
        assert_eq!(c["overflow"], false, "{page} scrolls sideways: {}", c["overflow"]);
        let dark = page.ends_with("-dark");
        let bg = c["background"].as_f64().unwrap();
        assert!(if dark { bg < 0.05 } else { bg > 0.9 }, "{page}: background luminance {bg}");
    }
    // Without JavaScript, every page is a complete view.
    assert!(seen["nojs_cards"].as_u64().unwrap() >= 3, "the board without JavaScript: {seen}");
    assert!(seen["nojs_agent_rows"].as_u64().unwrap() >= 3, "{seen}");
    for (url, v) in seen["nojs"].as_object().unwrap() {
        assert_eq!((&v[0], &v[1]), (&json!(200), &json!(1)), "{url} without JavaScript: {v}");
    }
    // The plan was decided by the page, through the one writer.
    let decisions: Vec<_> = store
        .events_since(0, 100_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "message_sent" && e.data["kind"] == "plan_decision" && e.actor.as_deref() == Some("user"))
        .collect();
    assert_eq!(decisions.len(), 1, "one plan_decision, by the page");

    // Engine settings: the inspection section wrote its three phases, comments kept.
    let text = std::fs::read_to_string(p.path(".troupe/config.toml")).unwrap();
    let config = troupe_core::config::Config::from_toml(&text).unwrap();
    for phase in ["document-review", "document-review-reply", "inspection"] {
        assert_eq!(config.engines.phases.get(phase).map(String::as_str), Some("gemini"), "{text}");
    }
    for comment in original.lines().filter(|l| l.starts_with('#') && !l.contains("max_concurrent")) {
        assert!(text.contains(comment), "the comment {comment:?} is kept:\n{text}");
    }
    drop(server);
}

/// A Lead process stopped with SIGTERM when dropped (its teammates with it),
/// so a failing test leaves nothing running.
struct Stopped(Option<Child>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }
}

/// `troupe -C <root>` as a process of its own (run in the background).
fn troupe(p: &TestProject) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("troupe"));
    cmd.arg("-C").arg(p.root()).env("NO_COLOR", "1").env_remove("TROUPE_TOKEN");
    for var in ["TROUPE_AGENT_ID", "TROUPE_ROLE", "TROUPE_FEATURE", "TROUPE_TASK_ID", "TROUPE_PROJECT"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Benchmark mode (numbers in BENCHMARKS.md, never asserted): the first
/// paint of a board of 10,000 tasks, and store commit → card visible in the
/// browser while 20 teammates (threads with agents of their own in the
/// registry) claim and complete 10 tasks each.
#[test]
#[ignore = "benchmark: cargo test -p troupe-cli --test it dashboard_bench -- --ignored --nocapture"]
fn dashboard_bench() {
    use troupe_store::{Board, NewAgent, NewTask};
    let p = TestProject::new();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let layout = Layout::new(p.root());
    let store = SqliteStore::open_project(&layout).unwrap();
    let tasks: Vec<NewTask> = (0..10_000)
        .map(|i| {
            let mut t = NewTask::new(format!("task number {i} of the benchmark"), "lead");
            t.id = Some(format!("bench/{i}"));
            t.feature = Some("bench".into());
            t.wave = Some(1 + i / 2500);
            t.group = Some(format!("G{}", i % 20));
            t.files = vec![format!("src/file{}.rs", i % 20)];
            t
        })
        .collect();
    store.create_tasks(tasks).unwrap();
    let server = Serving::start(&p, "127.0.0.1:0");
    let mut browser = browser(
        dir,
        json!({"mode": "bench", "base": server.url, "token": TOKEN, "dir": dir, "shots": screenshots(dir)}),
    );
    wait_for(dir, "bench-ready", &mut browser);
    let threads: Vec<_> = (0..20)
        .map(|n| {
            let layout = layout.clone();
            std::thread::spawn(move || {
                let store = SqliteStore::open_project(&layout).unwrap();
                let id = format!("builder-{n}");
                let mut agent = NewAgent::new(&id, "builder", "scripted");
                agent.pid = Some(std::process::id());
                store.register(agent).unwrap();
                for k in 0..10 {
                    let task = format!("bench/{}", n * 10 + k);
                    store.claim(&task, &id).unwrap();
                    std::thread::sleep(Duration::from_millis(40));
                    store.complete(&task, &id).unwrap();
                    std::thread::sleep(Duration::from_millis(40));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    signal(dir, "bench-done", "400");
    let seen = finish(browser);
    let moves: Vec<&Value> = seen["shown"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "task_claimed" || s["kind"] == "task_completed")
        .collect();
    let spread = |from: &str, to: &str| {
        let mut ms: Vec<i64> = moves.iter().map(|s| s[to].as_i64().unwrap() - s[from].as_i64().unwrap()).collect();
        ms.sort_unstable();
        let pct = |q: f64| ms[((ms.len() as f64 * q) as usize).min(ms.len() - 1)];
        format!("p50 {} ms, p95 {} ms, max {} ms", pct(0.5), pct(0.95), ms.last().unwrap())
    };
    eprintln!("first paint of 10,000 tasks: {}", seen["paints"]);
    eprintln!("store commit -> visible, 20 teammates, {} commits: {}", moves.len(), spread("at", "shown"));
    eprintln!("  of which commit -> event in the page: {}", spread("at", "arrived"));
    eprintln!("  and event in the page -> visible: {}", spread("arrived", "shown"));
}
