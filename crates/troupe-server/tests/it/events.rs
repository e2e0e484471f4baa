//! `GET /events`: the event log as SSE, resumed with `Last-Event-ID`, fed
//! by writes of this server and of other store handles (other processes).

use serde_json::json;
use troupe_core::layout::Layout;
use troupe_store::{Board, EventLog, NewTask, SqliteStore};

use troupe_testkit::sse::Stream;

use crate::support::Server;

/// A stream of the server's events, without a token.
fn connect(url: &str, query: &str, last: Option<i64>) -> Stream {
    Stream::connect(url, query, last, None)
}

fn all_ids(store: &dyn EventLog) -> Vec<i64> {
    store.events_since(0, 100_000).unwrap().into_iter().map(|e| e.id).collect()
}

#[test]
fn a_dropped_client_resumes_with_last_event_id_and_misses_nothing() {
    let s = Server::start();
    for i in 0..10 {
        s.post("/tasks/board", json!({"subject": format!("task {i}")}));
    }
    let mut seen = Vec::new();
    let mut first = connect(&s.url, "", None);
    // The history first, then what happens while connected.
    seen.extend(first.events(10));
    s.post("/tasks/board/t1/claim", json!({"agent": "claude"}));
    s.post("/tasks/board/t2/claim", json!({"agent": "claude"}));
    seen.extend(first.events(2));
    assert_eq!(seen[10].1["kind"], "task_claimed");
    // Disconnected mid-run: more happens while nobody listens.
    drop(first);
    for i in 3..=8 {
        s.post(&format!("/tasks/board/t{i}/claim"), json!({"agent": "gemini"}));
    }
    let last = seen.last().unwrap().0;
    let mut second = connect(&s.url, "", Some(last));
    s.post("/tasks/board/t9/claim", json!({"agent": "gemini"}));
    let expected = all_ids(s.store.as_ref());
    seen.extend(second.events(expected.len() - seen.len()));
    let ids: Vec<i64> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, expected, "every event exactly once, in order");
    for (id, data) in &seen {
        assert_eq!(data["id"], *id, "the SSE id is the store id");
    }
}

#[test]
fn commits_of_another_process_reach_the_stream() {
    let s = Server::start();
    let mut stream = connect(&s.url, "?kind=task_created", None);
    // A second handle on the same database file, as another process has.
    let other = SqliteStore::open_project(&Layout::new(s.root())).unwrap();
    other.create_task(NewTask::new("from elsewhere", "lead")).unwrap();
    let (_, event) = stream.event();
    assert_eq!(event["kind"], "task_created");
    assert_eq!(event["data"]["subject"], "from elsewhere");
}

#[test]
fn filters_by_kind_agent_and_feature() {
    let s = Server::start();
    let tasks = vec![
        NewTask { feature: Some("login".into()), ..NewTask::new("l", "lead").with_id("login/1") },
        NewTask { feature: Some("cart".into()), ..NewTask::new("c", "lead").with_id("cart/1") },
    ];
    s.store.create_tasks(tasks).unwrap();
    s.post("/tasks/board/cart%2F1/claim", json!({"agent": "gemini"}));
    s.post("/tasks/board/login%2F1/claim", json!({"agent": "claude"}));
    let mut claimed = connect(&s.url, "?kind=task_claimed", None);
    let (_, e) = claimed.event();
    assert_eq!((e["kind"].as_str(), e["subject"].as_str()), (Some("task_claimed"), Some("cart/1")));
    let mut claude = connect(&s.url, "?agent=claude", None);
    assert_eq!(claude.event().1["subject"], "login/1");
    let mut login = connect(&s.url, "?feature=login&kind=task_claimed", None);
    assert_eq!(login.event().1["actor"], "claude");
    let http = crate::support::agent();
    let (status, body) =
        crate::support::answer(http.get(&format!("{}/events", s.url)).header("Last-Event-ID", "yesterday").call());
    assert_eq!(status, 400, "{body}");
}
