//! The board over HTTP: seed 003 B1's table, the CLI's rules, filters,
//! assign, release, plan import, the gate, and 24 racing claimers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use troupe_store::{NewTask, TaskStatus};

use crate::support::{Server, assert_error};

/// Seed 003, B1, "API エンドポイント", verbatim.
const B1_TABLE: &str = "\
| メソッド | パス | 説明 |
|----------|------|------|
| `GET` | `/tasks/board` | タスクボード全体を取得 |
| `POST` | `/tasks/board` | 新規タスク作成 |
| `POST` | `/tasks/board/{id}/claim` | タスクをクレーム |
| `POST` | `/tasks/board/{id}/complete` | タスクを完了 |";

fn b1_rows() -> Vec<(String, String)> {
    B1_TABLE
        .lines()
        .skip(2)
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(|c| c.trim().trim_matches('`')).collect();
            (cells[1].to_string(), cells[2].to_string())
        })
        .collect()
}

#[test]
fn every_row_of_the_b1_table_is_served_and_documented() {
    let s = Server::start();
    let doc = s.get("/api/openapi.json").1;
    let rows = b1_rows();
    assert_eq!(rows.len(), 4);
    for (method, path) in &rows {
        let op = &doc["paths"][path][method.to_lowercase()];
        assert!(op.is_object(), "{method} {path} is not in the OpenAPI document");
    }
    // Walk the table in order: get the (empty) board, create, claim, complete.
    let (status, board) = s.get("/tasks/board");
    assert_eq!(status, 200);
    assert_eq!(board["tasks"], json!([]));
    let (status, design) = s.post("/tasks/board", json!({"subject": "design", "created_by": "lead"}));
    assert_eq!(status, 201, "{design}");
    assert_eq!(design["status"], "pending");
    let (_, build) = s.post("/tasks/board", json!({"subject": "build", "blocked_by": ["t1"]}));
    assert_eq!(build["blocked"], true);
    assert_eq!(build["created_by"], "api");
    let (status, claimed) = s.post("/tasks/board/t1/claim", json!({"agent": "claude"}));
    assert_eq!(status, 200, "{claimed}");
    assert_eq!(claimed["task"]["assignee"], "claude");
    assert_eq!(claimed["already_held"], false);
    let (status, done) = s.post("/tasks/board/t1/complete", json!({"agent": "claude"}));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["task"]["status"], "completed");
    assert_eq!(done["unblocked"], json!(["t2"]), "the answer names what the completion unblocked");
    let (_, board) = s.get("/tasks/board");
    let states: Vec<_> = board["tasks"].as_array().unwrap().iter().map(|t| t["status"].clone()).collect();
    assert_eq!(states, vec![json!("completed"), json!("pending")]);
}

#[test]
fn the_same_rules_as_the_cli() {
    let s = Server::start();
    s.post("/tasks/board", json!({"subject": "a"}));
    s.post("/tasks/board", json!({"subject": "b", "blocked_by": ["t1"]}));
    // A blocked task cannot be claimed.
    let (status, body) = s.post("/tasks/board/t2/claim", json!({"agent": "gemini"}));
    assert_eq!(status, 409);
    assert_error(&body, "conflict");
    assert!(body["error"]["message"].as_str().unwrap().contains("blocked by t1"), "{body}");
    // Claimed by one agent: refused to another, idempotent for the holder.
    s.post("/tasks/board/t1/claim", json!({"agent": "claude"}));
    let (status, body) = s.post("/tasks/board/t1/claim", json!({"agent": "gemini"}));
    assert_eq!((status, body["error"]["kind"].as_str()), (409, Some("conflict")));
    let (status, again) = s.post("/tasks/board/t1/claim", json!({"agent": "claude"}));
    assert_eq!((status, &again["already_held"]), (200, &json!(true)));
    // Only the holder completes.
    let (status, body) = s.post("/tasks/board/t1/complete", json!({"agent": "gemini"}));
    assert_eq!(status, 403, "{body}");
    assert_error(&body, "forbidden");
    // Unknown tasks, missing fields, unknown fields.
    let (status, body) = s.post("/tasks/board/t99/claim", json!({"agent": "claude"}));
    assert_eq!(status, 404);
    assert_error(&body, "not_found");
    let (status, body) = s.post("/tasks/board/t1/claim", json!({}));
    assert_eq!(status, 400, "{body}");
    assert_error(&body, "bad_request");
    let (status, _) = s.post("/tasks/board", json!({"subject": "x", "colour": "red"}));
    assert_eq!(status, 400);
    let (status, body) = s.post("/tasks/board", json!({"subject": ""}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.post("/tasks/board", json!({"subject": "c", "blocked_by": ["t7"]}));
    assert_eq!(status, 400, "{body}");
    // Show.
    let (status, t1) = s.get("/tasks/board/t1");
    assert_eq!((status, t1["status"].as_str()), (200, Some("in_progress")));
}

#[test]
fn filters_assign_and_release() {
    let s = Server::start();
    let tasks = vec![
        NewTask { feature: Some("login".into()), wave: Some(1), ..NewTask::new("l1", "lead").with_id("login/1") },
        NewTask { feature: Some("login".into()), wave: Some(2), ..NewTask::new("l2", "lead").with_id("login/2") },
        NewTask { feature: Some("cart".into()), wave: Some(1), ..NewTask::new("c1", "lead").with_id("cart/1") },
    ];
    s.store.create_tasks(tasks).unwrap();
    let ids = |q: &str| -> Vec<String> {
        let (status, body) = s.get(&format!("/tasks/board{q}"));
        assert_eq!(status, 200, "{q}: {body}");
        body["tasks"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids("?feature=login"), ["login/1", "login/2"]);
    assert_eq!(ids("?wave=1"), ["login/1", "cart/1"]);
    assert_eq!(ids("?feature=login&wave=2"), ["login/2"]);
    // Assign reserves: the task is then available to its agent only.
    let (status, t) = s.post("/tasks/board/login%2F1/assign", json!({"agent": "claude", "by": "lead"}));
    assert_eq!((status, t["assignee"].as_str()), (200, Some("claude")), "{t}");
    assert_eq!(ids("?available=true&agent=gemini"), ["login/2", "cart/1"]);
    assert_eq!(ids("?available=true&agent=claude"), ["login/1", "login/2", "cart/1"]);
    assert_eq!(ids("?agent=claude"), ["login/1"]);
    s.post("/tasks/board/cart%2F1/claim", json!({"agent": "gemini"}));
    assert_eq!(ids("?status=in_progress"), ["cart/1"]);
    assert_eq!(ids("?status=pending"), ["login/1", "login/2"]);
    let (status, body) = s.get("/tasks/board?status=done");
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.get("/tasks/board?status=pending&available=true");
    assert_eq!(status, 400, "{body}");
    // Release: only the holder when an agent is named; anyone without.
    let (status, body) = s.post("/tasks/board/cart%2F1/release", json!({"agent": "claude"}));
    assert_eq!(status, 403, "{body}");
    let (status, t) = s.post("/tasks/board/cart%2F1/release", json!({"agent": "gemini"}));
    assert_eq!((status, t["status"].as_str(), &t["assignee"]), (200, Some("pending"), &json!(null)));
    let (status, _) = s.post("/tasks/board/login%2F1/release", json!({}));
    assert_eq!(status, 200);
    assert_eq!(s.store.task("login/1").unwrap().assignee, None);
    // A listing is answered again from what was kept until the event log
    // grows: a write by another process (a store handle of its own, which
    // wakes nothing in the server) shows at the next request.
    assert_eq!(ids("?status=pending"), ["login/1", "login/2", "cart/1"]);
    assert_eq!(ids("?status=pending"), ["login/1", "login/2", "cart/1"]);
    s.store.claim("login/2", "gemini").unwrap();
    assert_eq!(ids("?status=pending"), ["login/1", "cart/1"]);
    assert_eq!(ids("?available=true&agent=claude"), ["login/1", "cart/1"]);
}

#[test]
fn plan_import_reads_the_features_tasks_yaml() {
    let s = Server::start();
    std::fs::create_dir_all(s.path(".troupe/specs/calc")).unwrap();
    let plan = "tasks:
  - id: '1'
    summary: Model
    status: pending
    subtasks:
      - id: '1.1'
        summary: Session struct
        status: done
      - id: '1.2'
        summary: Login handler
        depends: ['1.1']
        status: pending
  - id: '2'
    summary: Docs
    depends: ['1']
    status: pending
";
    std::fs::write(s.path(".troupe/specs/calc/tasks.yaml"), plan).unwrap();
    let (status, body) = s.post("/tasks/board/import", json!({"feature": "calc"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["unchanged"], false);
    assert!(body["created"].as_u64().unwrap() >= 2, "{body}");
    let (_, again) = s.post("/tasks/board/import", json!({"feature": "calc"}));
    assert_eq!(again["unchanged"], true, "the same plan again changes nothing");
    let (status, body) = s.post("/tasks/board/import", json!({"feature": "nope"}));
    assert_eq!(status, 404, "{body}");
    let (status, body) = s.post("/tasks/board/import", json!({"feature": "../calc"}));
    assert_eq!(status, 400, "{body}");
}

#[test]
fn the_on_task_completed_gate_refuses_before_the_state_changes() {
    let s = Server::start();
    std::fs::create_dir_all(s.path(".troupe/steering")).unwrap();
    std::fs::write(s.path(".troupe/steering/tech.md"), "## Common Commands\n- Test: `echo 3 tests failed; exit 2`\n")
        .unwrap();
    s.post("/tasks/board", json!({"subject": "a"}));
    s.post("/tasks/board/t1/claim", json!({"agent": "claude"}));
    let (status, body) = s.post("/tasks/board/t1/complete", json!({"agent": "claude"}));
    assert_eq!(status, 422, "{body}");
    assert_error(&body, "gate_refused");
    assert!(body["error"]["message"].as_str().unwrap().contains("3 tests failed"), "{body}");
    assert_eq!(s.store.task("t1").unwrap().status, TaskStatus::InProgress, "the task stays in progress");
    std::fs::write(s.path(".troupe/steering/tech.md"), "## Common Commands\n- Test: `true`\n").unwrap();
    let (status, body) = s.post("/tasks/board/t1/complete", json!({"agent": "claude"}));
    assert_eq!(status, 200, "{body}");
}

/// 24 HTTP clients race over 2,000 tasks in the same order, so most claims
/// collide; every task is won by exactly one of them, and the board agrees.
#[test]
fn twenty_four_concurrent_claimers_never_double_claim() {
    const TASKS: usize = 2000;
    const CLAIMERS: usize = 24;
    let s = Server::start();
    let batch: Vec<NewTask> = (0..TASKS).map(|i| NewTask::new(format!("task {i}"), "lead")).collect();
    let ids: Vec<String> = s.store.create_tasks(batch).unwrap().into_iter().map(|t| t.id).collect();
    let ids = Arc::new(ids);
    let taken: Arc<Vec<AtomicBool>> = Arc::new((0..TASKS).map(|_| AtomicBool::new(false)).collect());
    let wins: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
    let url = s.url.clone();
    let threads: Vec<_> = (0..CLAIMERS)
        .map(|n| {
            let (ids, taken, wins, url) = (ids.clone(), taken.clone(), wins.clone(), url.clone());
            std::thread::spawn(move || {
                let agent = format!("claimer-{n}");
                let http = crate::support::agent();
                for (i, id) in ids.iter().enumerate() {
                    // Skipping what is known taken only saves requests; the
                    // race for each task is still real.
                    if taken[i].load(Ordering::SeqCst) {
                        continue;
                    }
                    let res = http.post(&format!("{url}/tasks/board/{id}/claim")).send_json(json!({"agent": agent}));
                    let (status, body) = crate::support::answer(res);
                    match status {
                        200 => {
                            assert_eq!(body["already_held"], false);
                            wins.lock().unwrap().entry(id.clone()).or_default().push(agent.clone());
                        }
                        409 => assert!(body["error"]["message"].as_str().unwrap().contains("in progress by")),
                        other => panic!("claim of {id}: {other} {body}"),
                    }
                    taken[i].store(true, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let wins = wins.lock().unwrap();
    assert_eq!(wins.len(), TASKS, "every task was claimed");
    for (id, winners) in wins.iter() {
        assert_eq!(winners.len(), 1, "{id} was claimed by {winners:?}");
        let task = s.store.task(id).unwrap();
        assert_eq!(task.status, TaskStatus::InProgress);
        assert_eq!(task.assignee.as_deref(), Some(winners[0].as_str()), "the board agrees with the answer");
    }
}
