//! One test per MUST of the A2A 1.0 specification's operations section (§3),
//! written from the specification: raw JSON-RPC and HTTP+JSON requests (the
//! `rpc` scenario of `a2a_client.py`) against `troupe serve`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use troupe_store::{Board, Mailbox, MessageKind, NewMessage};

use crate::a2a::{Server, client, client_in_background, finish, register, store, wait_for_file};
use crate::support::TestProject;

const TASK_NOT_FOUND: i64 = -32001;
const TASK_NOT_CANCELABLE: i64 = -32002;
const UNSUPPORTED_OPERATION: i64 = -32004;
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
const VERSION_NOT_SUPPORTED: i64 = -32009;
const INVALID_PARAMS: i64 = -32602;

fn rpc(p: &TestProject, server: &Server, calls: Value) -> Vec<Value> {
    client(p.root(), "rpc", json!({"base": server.base, "calls": calls}))["results"].as_array().unwrap().clone()
}

fn message(text: &str, metadata: Value) -> Value {
    json!({"messageId": format!("m-{}", rand_id()), "role": "ROLE_USER", "parts": [{"text": text}], "metadata": metadata})
}

fn rand_id() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn send(text: &str, metadata: Value, immediately: bool) -> Value {
    json!({"method": "SendMessage", "params": {"message": message(text, metadata), "configuration": {"returnImmediately": immediately}}})
}

fn post_task() -> Value {
    json!({"x-troupe-skill": "post-task"})
}

fn code(result: &Value) -> i64 {
    result["body"]["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {result:#}"))
}

fn task(result: &Value) -> &Value {
    let r = &result["body"]["result"];
    if r.get("task").is_some() { &r["task"] } else { r }
}

/// Every error names its reason in an ErrorInfo detail with an `@type` (§3.3.2).
fn reason(result: &Value) -> String {
    let data = result["body"]["error"]["data"].as_array().unwrap_or_else(|| panic!("no details: {result:#}"));
    let info = data.iter().find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo").unwrap();
    info["reason"].as_str().unwrap().to_string()
}

/// §3.4.2: unique server-generated task ids; §3.4.1: a generated contextId is
/// in the response, a client's contextId is kept.
#[test]
fn task_ids_are_unique_and_context_ids_are_returned_or_kept() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let mut with_context = message("B", post_task());
    with_context["contextId"] = json!("client-ctx-1");
    let r = rpc(
        &p,
        &server,
        json!([send("A", post_task(), true), {"method": "SendMessage", "params": {"message": with_context, "configuration": {"returnImmediately": true}}}]),
    );
    let (a, b) = (task(&r[0]), task(&r[1]));
    assert_ne!(a["id"], b["id"]);
    assert!(a["contextId"].as_str().is_some_and(|c| !c.is_empty()), "{a:#}");
    assert_eq!(b["contextId"], "client-ctx-1");
}

/// §3.4.2: a taskId that is not a task is TaskNotFoundError; §3.4.3: a
/// contextId other than the task's is rejected; §3.1.1: a task in a terminal
/// state takes no more messages (UnsupportedOperationError).
#[test]
fn follow_ups_need_an_existing_unfinished_task_of_the_same_context() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let metadata = json!({"x-troupe-skill": "post-task", "x-troupe-blocked-by": ["nothing-here"]});
    let first = rpc(&p, &server, json!([send("refused", metadata, false)]));
    let rejected = task(&first[0]).clone();
    assert_eq!(rejected["status"]["state"], "TASK_STATE_REJECTED");
    let mut unknown = message("more", json!({}));
    unknown["taskId"] = json!("no-such-task");
    let mut finished = message("more", json!({}));
    finished["taskId"] = rejected["id"].clone();
    let mut other_context = finished.clone();
    other_context["contextId"] = json!("another");
    let r = rpc(
        &p,
        &server,
        json!([
            {"method": "SendMessage", "params": {"message": unknown}},
            {"method": "SendMessage", "params": {"message": finished}},
            {"method": "SendMessage", "params": {"message": other_context}},
        ]),
    );
    assert_eq!(code(&r[0]), TASK_NOT_FOUND);
    assert_eq!(reason(&r[0]), "TASK_NOT_FOUND");
    assert_eq!(code(&r[1]), UNSUPPORTED_OPERATION);
    assert_eq!(code(&r[2]), INVALID_PARAMS, "{:#}", r[2]);
}

/// §3.1.4: artifacts omitted unless asked for; nextPageToken always present,
/// empty on the last page; newest change first; cursor pagination.
#[test]
fn list_tasks_pages_newest_first_with_a_token_that_is_always_there() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let sends: Vec<Value> = (0..5).map(|i| send(&format!("task {i}"), post_task(), true)).collect();
    let created = rpc(&p, &server, json!(sends));
    let ids: Vec<Value> = created.iter().rev().map(|r| task(r)["id"].clone()).collect();
    let r = rpc(
        &p,
        &server,
        json!([
            {"method": "ListTasks", "params": {"pageSize": 3}},
            {"method": "ListTasks", "params": {"pageSize": 3, "includeArtifacts": true}},
            {"method": "ListTasks", "params": {"pageSize": 101}},
            {"method": "ListTasks", "params": {"pageSize": 3, "pageToken": "garbage"}},
        ]),
    );
    let first = &r[0]["body"]["result"];
    let token = first["nextPageToken"].as_str().unwrap().to_string();
    assert!(!token.is_empty());
    let page1: Vec<Value> = first["tasks"].as_array().unwrap().iter().map(|t| t["id"].clone()).collect();
    assert_eq!(page1, ids[..3], "newest first");
    assert!(first["tasks"].as_array().unwrap().iter().all(|t| t.get("artifacts").is_none()));
    assert_eq!(first["totalSize"], 5);
    assert!(r[1]["body"]["result"]["tasks"][0]["artifacts"].is_array(), "{:#}", r[1]);
    assert_eq!(code(&r[2]), INVALID_PARAMS);
    assert_eq!(code(&r[3]), INVALID_PARAMS);
    let rest = rpc(&p, &server, json!([{"method": "ListTasks", "params": {"pageSize": 3, "pageToken": token}}]));
    let last = &rest[0]["body"]["result"];
    assert_eq!(last["nextPageToken"], "", "present and empty on the last page: {last:#}");
    let page2: Vec<Value> = last["tasks"].as_array().unwrap().iter().map(|t| t["id"].clone()).collect();
    assert_eq!(page2, ids[3..]);
}

/// §3.2.4: historyLength 0 omits the history; >0 keeps the most recent.
#[test]
fn history_length_limits_the_history() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let r = rpc(&p, &server, json!([send("a task", post_task(), true)]));
    let id = task(&r[0])["id"].clone();
    let r = rpc(
        &p,
        &server,
        json!([
            {"method": "GetTask", "params": {"id": id, "historyLength": 0}},
            {"method": "GetTask", "params": {"id": id, "historyLength": 1}},
            {"method": "GetTask", "params": {"id": id, "historyLength": -1}},
        ]),
    );
    assert!(task(&r[0]).get("history").is_none(), "{:#}", r[0]);
    assert_eq!(task(&r[1])["history"].as_array().unwrap().len(), 1);
    assert_eq!(code(&r[2]), INVALID_PARAMS);
}

/// §3.1.5: a task in a terminal state is TaskNotCancelableError; an unknown
/// one TaskNotFoundError.
#[test]
fn cancel_refuses_finished_and_unknown_tasks() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let metadata = json!({"x-troupe-skill": "post-task", "x-troupe-blocked-by": ["nothing-here"]});
    let r = rpc(&p, &server, json!([send("refused", metadata, false)]));
    let id = task(&r[0])["id"].clone();
    let r = rpc(
        &p,
        &server,
        json!([{"method": "CancelTask", "params": {"id": id}}, {"method": "CancelTask", "params": {"id": "nope"}}]),
    );
    assert_eq!(code(&r[0]), TASK_NOT_CANCELABLE);
    assert_eq!(code(&r[1]), TASK_NOT_FOUND);
}

/// §3.1.6: the stream starts with the Task and closes at a terminal state;
/// a terminal task cannot be subscribed to. §3.5.2: every stream of a task
/// gets the same events in the same order.
#[test]
fn subscribers_get_the_task_first_then_the_same_events_until_the_end() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let r = rpc(&p, &server, json!([send("watch me", post_task(), true)]));
    let t = task(&r[0]).clone();
    let board = t["metadata"]["x-troupe-board-task"].as_str().unwrap().to_string();
    let subscribers: Vec<_> = (0..2)
        .map(|i| {
            let started = p.path(&format!("sub-{i}"));
            let call = json!([{"method": "SubscribeToTask", "params": {"id": t["id"]}, "started": started}]);
            (client_in_background(p.root(), "rpc", json!({"base": server.base, "calls": call})), started)
        })
        .collect();
    for (_, started) in &subscribers {
        wait_for_file(started);
    }
    let s = store(&p);
    s.claim(&board, "builder-3").unwrap();
    s.complete(&board, "builder-3").unwrap();
    let streams: Vec<Vec<Value>> = subscribers
        .into_iter()
        .map(|(child, _)| finish(child)["results"][0]["events"].as_array().unwrap().clone())
        .collect();
    let first = &streams[0];
    assert!(first[0]["result"].get("task").is_some(), "the Task first: {first:#?}");
    assert_eq!(first.last().unwrap()["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(streams[0], streams[1], "the same events in the same order");
    let again = rpc(&p, &server, json!([{"method": "SubscribeToTask", "params": {"id": t["id"]}}]));
    assert_eq!(again[0]["body"]["error"]["code"], UNSUPPORTED_OPERATION, "{:#}", again[0]);
}

/// §3.2.2: a blocking SendMessage waits until the task is terminal or
/// interrupted (here INPUT_REQUIRED: the teammate submitted its plan).
#[test]
fn a_blocking_send_waits_for_an_interrupted_state() {
    let p = TestProject::new();
    register(&p, "builder-4", "builder");
    let server = Server::start(&p, None);
    let metadata =
        json!({"x-troupe-skill": "message-teammate", "x-troupe-agent": "builder-4", "x-troupe-plan-mode": true});
    let blocked = client_in_background(
        p.root(),
        "rpc",
        json!({"base": server.base, "calls": [send("plan it", metadata, false)]}),
    );
    // The teammate: reads its mailbox and submits a plan to the approver it names.
    let s = store(&p);
    let asked = loop {
        if let Some(m) = s.inbox("builder-4", true).unwrap().into_iter().next() {
            break m;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    s.send(NewMessage {
        from: "builder-4".into(),
        to: asked.from.clone(),
        priority: 4,
        kind: MessageKind::Plan,
        body: "1. read\n2. write".into(),
        in_reply_to: None,
    })
    .unwrap();
    let r = finish(blocked)["results"][0].clone();
    assert_eq!(task(&r)["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r:#}");
}

/// §3.3.2/§3.3.4: parts troupe cannot read are ContentTypeNotSupportedError;
/// a message without parts is invalid.
#[test]
fn unreadable_parts_and_empty_messages_are_refused() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let mut file = message("x", post_task());
    file["parts"] = json!([{"url": "file:///etc/passwd", "mediaType": "application/octet-stream"}]);
    let mut empty = message("x", post_task());
    empty["parts"] = json!([]);
    let r = rpc(
        &p,
        &server,
        json!([{"method": "SendMessage", "params": {"message": file}}, {"method": "SendMessage", "params": {"message": empty}}]),
    );
    assert_eq!(code(&r[0]), CONTENT_TYPE_NOT_SUPPORTED);
    assert_eq!(code(&r[1]), INVALID_PARAMS);
    assert!(store(&p).list(&Default::default()).unwrap().is_empty(), "nothing was created");
}

/// §3.6.2: a missing version is 0.3, unsupported, and so is any other than
/// 1.0: VersionNotSupportedError on both bindings; the version may also be a
/// query parameter.
#[test]
fn versions_other_than_1_0_are_refused_on_both_bindings() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let body = json!({"message": message("x", post_task()), "configuration": {"returnImmediately": true}});
    let mut none = send("x", post_task(), true);
    none["version"] = Value::Null;
    let r = rpc(
        &p,
        &server,
        json!([
            none,
            {"method": "GetTask", "params": {"id": "x"}, "version": "0.3"},
            {"http": "POST", "path": "/message:send", "body": body, "version": null},
            {"http": "GET", "path": "/tasks?A2A-Version=1.0", "version": null},
        ]),
    );
    assert_eq!(code(&r[0]), VERSION_NOT_SUPPORTED);
    assert_eq!(reason(&r[0]), "VERSION_NOT_SUPPORTED");
    assert_eq!(code(&r[1]), VERSION_NOT_SUPPORTED);
    assert_eq!(r[2]["status"], 400, "{:#}", r[2]);
    assert!(r[2]["body"].to_string().contains("VERSION_NOT_SUPPORTED"), "{:#}", r[2]);
    assert_eq!(r[3]["status"], 200, "the version as a query parameter: {:#}", r[3]);
    assert!(store(&p).list(&Default::default()).unwrap().is_empty());
}

/// §3.3.4: without `capabilities.extendedAgentCard` GetExtendedAgentCard is
/// UnsupportedOperationError; with a token it is served, authenticated.
#[test]
fn the_extended_card_needs_authentication() {
    let p = TestProject::new();
    let open = Server::start(&p, None);
    let r = rpc(&p, &open, json!([{"method": "GetExtendedAgentCard", "params": {}}]));
    assert_eq!(code(&r[0]), UNSUPPORTED_OPERATION);
    drop(open);
    register(&p, "builder-5", "builder");
    let secured = Server::start(&p, Some("s3cret-token"));
    let call = json!([{"method": "GetExtendedAgentCard", "params": {}}]);
    let denied = client(p.root(), "rpc", json!({"base": secured.base, "calls": call}));
    assert_eq!(denied["results"][0]["status"], 401);
    let r = client(p.root(), "rpc", json!({"base": secured.base, "calls": call, "token": "s3cret-token"}));
    let card = &r["results"][0]["body"]["result"];
    assert_eq!(card["capabilities"]["extendedAgentCard"], true, "{r:#}");
    let agents = card["capabilities"]["extensions"][0]["params"]["agents"].as_array().unwrap();
    assert!(agents.iter().any(|a| a["id"] == "builder-5"), "{agents:?}");
    assert!(card["securitySchemes"]["bearer"].is_object(), "{card:#}");
}

/// A loopback webhook that records what it is sent.
fn webhook() -> (String, mpsc::Receiver<(String, Value)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head, body) = loop {
                let n = conn.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break (String::new(), Vec::new());
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    while buf.len() < end + 4 + len {
                        let n = conn.read(&mut chunk).unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    break (head, buf[end + 4..].to_vec());
                }
            };
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if tx.send((head, body)).is_err() {
                return;
            }
        }
    });
    (url, rx)
}

/// §3.1.7–3.1.10: a created config gets an id and persists; Get returns it
/// and fails for one that does not exist; List returns all; Delete is
/// idempotent; updates are POSTed to the webhook with the token. troupe's
/// own rule: only loopback targets or targets with a token.
#[test]
fn push_configs_are_kept_listed_deleted_idempotently_and_delivered() {
    let p = TestProject::new();
    let server = Server::start(&p, None);
    let (url, received) = webhook();
    let r = rpc(&p, &server, json!([send("pushed", post_task(), true)]));
    let t = task(&r[0]).clone();
    let id = t["id"].as_str().unwrap().to_string();
    let r = rpc(
        &p,
        &server,
        json!([
            {"method": "CreateTaskPushNotificationConfig", "params": {"taskId": id, "url": url, "token": "hook-token"}},
            {"method": "CreateTaskPushNotificationConfig", "params": {"taskId": id, "url": "http://10.1.2.3/hook"}},
            {"method": "CreateTaskPushNotificationConfig", "params": {"taskId": "nope", "url": url}},
        ]),
    );
    let created = r[0]["body"]["result"].clone();
    let config_id = created["id"].as_str().unwrap_or_else(|| panic!("{:#}", r[0])).to_string();
    assert_eq!(code(&r[1]), INVALID_PARAMS, "neither loopback nor a token: {:#}", r[1]);
    assert_eq!(code(&r[2]), TASK_NOT_FOUND);
    let board = t["metadata"]["x-troupe-board-task"].as_str().unwrap().to_string();
    store(&p).claim(&board, "builder-6").unwrap();
    let (head, body) = received.recv_timeout(Duration::from_secs(30)).expect("the webhook was called");
    assert!(head.to_ascii_lowercase().contains("a2a-notification-token: hook-token"), "{head}");
    assert_eq!(body["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING", "{body:#}");
    let r = rpc(
        &p,
        &server,
        json!([
            {"method": "GetTaskPushNotificationConfig", "params": {"taskId": id, "id": config_id}},
            {"method": "GetTaskPushNotificationConfig", "params": {"taskId": id, "id": "other"}},
            {"method": "ListTaskPushNotificationConfigs", "params": {"taskId": id}},
            {"method": "DeleteTaskPushNotificationConfig", "params": {"taskId": id, "id": config_id}},
            {"method": "DeleteTaskPushNotificationConfig", "params": {"taskId": id, "id": config_id}},
            {"method": "ListTaskPushNotificationConfigs", "params": {"taskId": id}},
        ]),
    );
    assert_eq!(r[0]["body"]["result"]["url"], url);
    assert_eq!(code(&r[1]), TASK_NOT_FOUND);
    assert_eq!(r[2]["body"]["result"]["configs"].as_array().unwrap().len(), 1);
    assert!(r[3]["body"].get("error").is_none(), "{:#}", r[3]);
    assert!(r[4]["body"].get("error").is_none(), "deleting twice is not an error: {:#}", r[4]);
    assert_eq!(r[5]["body"]["result"]["configs"].as_array().map_or(0, Vec::len), 0, "{:#}", r[5]);
}
