//! The rest of the REST API: agents and their logs, messages, specs, runs,
//! audit and engines.

use serde_json::json;
use troupe_store::{Decision, NewAgent, NewAuditRecord};

use crate::support::{Server, answer, assert_error};

pub(crate) fn register(s: &Server, id: &str, feature: &str) {
    s.store
        .register(NewAgent {
            id: id.into(),
            name: id.into(),
            role: "builder".into(),
            engine: "claude".into(),
            model: None,
            feature: Some(feature.into()),
            task: None,
            pid: None,
            session_id: None,
            lease: None,
        })
        .unwrap();
}

/// Books one model turn of `agent` on feature calc in the usage ledger:
/// 10 input and 5 output tokens, `cost` dollars as the engine reported.
pub(crate) fn book(s: &Server, agent: &str, role: &str, message_id: &str, cost: f64) {
    let usage = troupe_store::NewUsage {
        context: troupe_store::UsageContext {
            run: "calc@1".into(),
            feature: Some("calc".into()),
            agent: agent.into(),
            role: role.into(),
            engine: "claude".into(),
            ..Default::default()
        },
        message_id: message_id.into(),
        model: Some("claude-opus-4-8".into()),
        input_tokens: 10,
        output_tokens: 5,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cost_usd: cost,
        cost_source: "reported".into(),
    };
    s.store.record_usage(usage).unwrap();
}

#[test]
fn agents_logs_and_runs() {
    let s = Server::start();
    register(&s, "builder-1", "calc");
    let (status, list) = s.get("/agents");
    assert_eq!(status, 200);
    assert_eq!(list["agents"][0]["id"], "builder-1");
    assert_eq!(s.get("/agents/builder-1").1["role"], "builder");
    assert_eq!(s.get("/agents/nobody").0, 404);
    assert_eq!(s.get("/agents/stale").0, 200);
    // The log, paged; a result event gives the run its turns and cost.
    std::fs::create_dir_all(s.path(".troupe/state/logs")).unwrap();
    let mut log = String::new();
    for seq in 0..5 {
        log.push_str(&format!("{{\"seq\":{seq},\"agent\":\"builder-1\",\"kind\":\"event\",\"event\":{{\"type\":\"text\",\"text\":\"hi\"}}}}\n"));
    }
    log.push_str("{\"seq\":5,\"agent\":\"builder-1\",\"kind\":\"event\",\"event\":{\"type\":\"result\",\"output\":{\"type\":\"success\",\"stats\":{\"num_turns\":3,\"duration_ms\":10,\"total_cost_usd\":0.25}}}}\n");
    std::fs::write(s.path(".troupe/state/logs/builder-1.jsonl"), log).unwrap();
    let (status, page) = s.get("/agents/builder-1/log?offset=1&limit=2");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["records"].as_array().unwrap().len(), 2);
    assert_eq!(page["records"][0]["seq"], 1);
    assert_eq!(page["next"], 3);
    assert_eq!(s.get("/agents/builder-1/log?offset=4").1["next"], json!(null));
    assert_eq!(s.get("/agents/..%2F..%2Fetc/log").0, 400);
    // Cost comes from the usage ledger (one source with `troupe cost`), never the log's total.
    book(&s, "builder-1", "builder", "m1", 0.4);
    let (status, run) = s.get("/runs/calc");
    assert_eq!(status, 200, "{run}");
    assert_eq!((run["turns"].as_u64(), run["cost_usd"].as_f64()), (Some(3), Some(0.4)), "{run}");
    assert_eq!(run["teammates"][0]["outcome"], "success");
}

#[test]
fn messages_send_inbox_and_threads() {
    let s = Server::start();
    let (status, sent) =
        s.post("/messages", json!({"from": "lead", "to": "builder-1", "body": "start", "priority": 5}));
    assert_eq!(status, 201, "{sent}");
    let first = sent["messages"][0]["id"].as_i64().unwrap();
    let (_, reply) =
        s.post("/messages", json!({"from": "builder-1", "to": "lead", "body": "ok", "in_reply_to": first}));
    assert_eq!(reply["messages"][0]["thread"], first);
    let (status, inbox) = s.get("/agents/builder-1/inbox?unread=true");
    assert_eq!(status, 200);
    assert_eq!(inbox["messages"][0]["body"], "start");
    let (_, thread) = s.get(&format!("/messages/{first}/thread"));
    assert_eq!(thread["messages"].as_array().unwrap().len(), 2);
    let (status, body) = s.post("/messages", json!({"to": "lead", "body": "x", "kind": "gossip"}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(s.get("/messages/999/thread").0, 404);
}

#[test]
fn specs_and_their_documents() {
    let s = Server::start();
    let project = troupe_project::Project::at(s.root());
    troupe_project::specs::Specs::new(&project).create("calc", "a calculator", jiff::Timestamp::now()).unwrap();
    std::fs::write(s.path(".troupe/specs/calc/design.md"), "# Design\n").unwrap();
    let (status, list) = s.get("/specs");
    assert_eq!(status, 200);
    assert_eq!(list[0]["feature"], "calc");
    let (status, spec) = s.get("/specs/calc");
    assert_eq!(status, 200, "{spec}");
    assert!(spec["phase"].is_string() && spec.get("changelog").is_some(), "{spec}");
    let (status, file) = s.get("/specs/calc/files/design.md");
    assert_eq!((status, file["content"].as_str()), (200, Some("# Design\n")));
    assert_eq!(s.get("/specs/calc/files/research.md").0, 404);
    let (status, body) = s.get("/specs/calc/files/spec.yaml");
    assert_eq!(status, 400, "only the listed documents: {body}");
    assert_eq!(s.get("/specs/calc/files/..%2Fcalc%2Fspec.yaml").0, 400);
    assert_eq!(s.get("/specs/nope").0, 404);
}

#[test]
fn audit_stats_denials_and_export() {
    let s = Server::start();
    for (tool, decision) in [("board_list", Decision::Allowed), ("shell__run", Decision::Denied)] {
        s.store
            .append_audit(NewAuditRecord {
                agent: "builder-1".into(),
                role: "builder".into(),
                tool: tool.into(),
                decision,
                reason: None,
                duration_ms: None,
                argument_shape: json!({}),
                thinking_signature: None,
            })
            .unwrap();
    }
    let (_, stats) = s.get("/audit/stats");
    assert_eq!((stats["total"].as_u64(), stats["denied"].as_u64()), (Some(2), Some(1)), "{stats}");
    let (_, denials) = s.get("/audit/denials");
    assert_eq!(denials[0]["tool"], "shell__run");
    let mut res = crate::support::agent().get(&format!("{}/audit/export?format=csv", s.url)).call().unwrap();
    assert!(res.headers().get("content-type").unwrap().to_str().unwrap().starts_with("text/csv"));
    let csv = res.body_mut().read_to_string().unwrap();
    assert!(csv.starts_with("id,at,agent") && csv.lines().count() == 3, "{csv}");
    assert_eq!(s.get("/audit/export?format=xml").0, 400);
}

#[test]
fn engines_are_written_keeping_the_users_file() {
    let s = Server::start();
    let config =
        "# team settings\n[engines]\ndefault = \"claude\" # the usual\n\n[server]\nbind = \"127.0.0.1:7878\"\n";
    std::fs::write(s.path(".troupe/config.toml"), config).unwrap();
    let (status, engines) = s.get("/engines");
    assert_eq!(status, 200);
    assert_eq!(engines["default"], "claude");
    assert!(engines["engines"].as_array().unwrap().contains(&json!("gemini")));
    let put = |body| answer(crate::support::agent().put(&format!("{}/engines", s.url)).send_json(body));
    let (status, after) = put(json!({"phases": {"design": "gemini"}}));
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["phases"]["design"], "gemini");
    let text = std::fs::read_to_string(s.path(".troupe/config.toml")).unwrap();
    assert_eq!(
        text,
        "# team settings\n[engines]\ndefault = \"claude\" # the usual\n\n[engines.phases]\ndesign = \"gemini\"\n\n[server]\nbind = \"127.0.0.1:7878\"\n"
    );
    let (status, body) = put(json!({"default": "gpt-9"}));
    assert_eq!(status, 400);
    assert_error(&body, "bad_request");
    let (status, _) = put(json!({"phases": {"lunch": "claude"}}));
    assert_eq!(status, 400);
    assert_eq!(
        std::fs::read_to_string(s.path(".troupe/config.toml")).unwrap(),
        text,
        "a refused change writes nothing"
    );
}

#[test]
fn cost_groups_the_usage_ledger() {
    let s = Server::start();
    for (agent, role, id, cost) in
        [("b1", "builder", "m1", 0.5), ("b1", "builder", "m2", 0.25), ("a1", "architect", "m1", 1.0)]
    {
        book(&s, agent, role, id, cost);
    }
    let (status, cost) = s.get("/cost?by=role");
    assert_eq!(status, 200, "{cost}");
    assert_eq!(cost["groups"][0]["key"], "builder");
    assert_eq!((cost["groups"][0]["turns"].as_u64(), cost["groups"][0]["cost_usd"].as_f64()), (Some(2), Some(0.75)));
    assert_eq!((cost["total"]["turns"].as_u64(), cost["total"]["total_tokens"].as_u64()), (Some(3), Some(45)));
    assert_eq!(s.get("/cost?feature=other").1["total"]["turns"], 0);
    assert_eq!(s.get("/cost?since=2999-01-01T00:00:00Z").1["total"]["turns"], 0);
    assert_eq!(s.get("/cost?by=week").0, 400);
    assert_eq!(s.get("/cost?since=yesterday").0, 400);
}
