//! `troupe status`: where each feature stands and the command to type next.

use troupe_core::layout::Layout;
use troupe_store::{AgentStatus, NewAgent, NewUsage, Registry, SqliteStore, UsageContext, UsageLedger};

use crate::support::{TestProject, json};

fn set_phase(p: &TestProject, feature: &str, phase: &str) {
    let path = p.path(&format!(".troupe/specs/{feature}/spec.yaml"));
    let text = std::fs::read_to_string(&path).unwrap().replace("phase: initialized", &format!("phase: {phase}"));
    std::fs::write(&path, text).unwrap();
}

#[test]
fn status_names_the_next_command_by_phase_and_flags_a_broken_spec_without_hiding_the_others() {
    let p = TestProject::new();
    for f in ["checkout", "hello", "done", "broken"] {
        p.troupe().args(["spec", "new", f]).assert().success();
    }
    set_phase(&p, "hello", "design-generated");
    set_phase(&p, "done", "implementation-complete");
    std::fs::write(p.path(".troupe/specs/broken/spec.yaml"), "feature_name: [unclosed\n").unwrap();

    let out = p.troupe().args(["--json", "status"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    let by = |f: &str| doc.as_array().unwrap().iter().find(|s| s["feature"] == f).unwrap().clone();
    assert_eq!(by("checkout")["next_command"], "troupe design checkout");
    assert_eq!(by("hello")["next_command"], "troupe impl hello");
    assert!(by("done")["next_command"].as_str().unwrap().starts_with("troupe revise done \"<change>\""));
    assert_eq!(by("broken")["phase"], "unreadable");
    assert!(by("broken")["error"].as_str().is_some_and(|e| !e.is_empty()));

    let text = p.troupe().arg("status").output().unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("hello: design-generated\n  next:    troupe impl hello"), "{stdout}");
    assert!(stdout.contains("broken: unreadable\n  error:   "), "{stdout}");

    // Asked for by name, a broken spec is an error.
    p.troupe().args(["status", "broken"]).assert().code(3);
}

#[test]
fn a_teammate_whose_process_is_gone_is_not_running() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    {
        let store = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
        for (id, pid) in [("builder-live", std::process::id()), ("builder-dead", dead_pid)] {
            let mut a = NewAgent::new(id, "builder", "claude");
            a.pid = Some(pid);
            a.feature = Some("login".into());
            store.register(a).unwrap();
            store.set_status(id, AgentStatus::Processing).unwrap();
        }
    }
    let doc = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    let running: Vec<&str> = doc[0]["running"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(running, ["builder-live"]);
    assert_eq!(doc[0]["next_command"], "troupe agent logs builder-live --follow   # a run is in progress");
}

#[test]
fn no_features_is_a_hint_on_stderr_and_nothing_on_stdout() {
    let p = TestProject::new();
    let out = p.troupe().arg("status").output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no features yet"));
}

#[test]
fn status_shows_the_last_verdict_the_cost_and_what_the_roadmap_runs_next() {
    let p = TestProject::new();
    p.troupe().args(["roadmap", "create", "cart", "pay", "--depends", "pay:cart"]).assert().success();
    std::fs::write(
        p.path(".troupe/specs/cart/verdicts.md"),
        "# Verdicts: cart\n\n## [B1] design | 2026-01-01T00:00:00Z | v1.0 | runs:1 | threshold:1/1\n- verdict: NO-GO\n\
         - verified: C:1 H:0 M:0 L:0 (removed: 0)\n\n## [B2] design | 2026-01-01T01:00:00Z | v1.0 | runs:1 | threshold:1/1\n\
         - verdict: CONDITIONAL\n- verified: C:0 H:1 M:2 L:0 (removed: 1)\n- action: continue\n",
    )
    .unwrap();
    // Two model turns of one teammate, as the usage ledger books them: the costs add up.
    {
        let store = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
        let mut a = NewAgent::new("architect-1", "architect", "claude");
        a.feature = Some("cart".into());
        store.register(a).unwrap();
        store.set_status("architect-1", AgentStatus::Done).unwrap();
        for (message, cost) in [("msg_1", 0.25), ("msg_2", 0.5)] {
            let context = UsageContext {
                run: "cart@1".into(),
                feature: Some("cart".into()),
                agent: "architect-1".into(),
                role: "architect".into(),
                engine: "claude".into(),
                ..UsageContext::default()
            };
            let turn = NewUsage {
                context,
                message_id: message.into(),
                model: None,
                input_tokens: 1,
                output_tokens: 1,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
                cost_usd: cost,
                cost_source: "reported".into(),
            };
            assert!(store.record_usage(turn).unwrap());
        }
    }

    let doc = json(&p.troupe().args(["--json", "status"]).output().unwrap());
    let by = |f: &str| doc.as_array().unwrap().iter().find(|s| s["feature"] == f).unwrap().clone();
    let cart = by("cart");
    assert_eq!(cart["last_verdict"]["seq"], 2, "the last round counts: {cart}");
    assert_eq!(cart["last_verdict"]["verdict"], "CONDITIONAL");
    assert_eq!(cart["last_verdict"]["findings"], serde_json::json!({"critical": 0, "high": 1, "medium": 2, "low": 0}));
    assert_eq!(cart["findings_in"], ".troupe/handover/buffer.md");
    assert_eq!(cart["cost_usd"], 0.75);
    assert_eq!(cart["roadmap"], serde_json::json!({"wave": 1, "status": "pending", "runs_next": true}));
    let pay = by("pay");
    assert_eq!(pay["roadmap"], serde_json::json!({"wave": 2, "status": "pending", "runs_next": false}));
    assert!(pay["last_verdict"].is_null() && pay["cost_usd"].is_null(), "{pay}");

    let out = p.troupe().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cart: initialized\n  roadmap: wave 1, pending, runs next\n"), "{text}");
    assert!(
        text.contains(
            "  review:  B2 design CONDITIONAL, open findings: 1 high, 2 medium (in .troupe/handover/buffer.md)\n"
        ),
        "{text}"
    );
    assert!(text.contains("  cost:    $0.75 so far\n"), "{text}");
    assert!(text.contains("pay: initialized\n  roadmap: wave 2, pending\n"), "{text}");

    // A broken spec.yaml hides neither the other features nor their place in the roadmap.
    std::fs::write(p.path(".troupe/specs/pay/spec.yaml"), "feature_name: [unclosed\n").unwrap();
    let doc = json(&p.troupe().args(["--json", "status"]).output().unwrap());
    let by = |f: &str| doc.as_array().unwrap().iter().find(|s| s["feature"] == f).unwrap().clone();
    assert_eq!(by("pay")["phase"], "unreadable");
    assert_eq!(by("cart")["roadmap"]["runs_next"], true, "{doc}");
}
