//! The token rule, the body limit, ids that try to climb out of their
//! folder, and errors that say nothing they should not.

use serde_json::{Value, json};
use troupe_server::auth::Auth;

use crate::support::{Server, agent, answer, assert_error};

const TOKEN: &str = "s3cret-token";

fn with_token(
    req: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
    req.header("Authorization", &format!("Bearer {TOKEN}"))
}

#[test]
fn a_token_is_required_on_every_path_and_says_nothing_about_it() {
    let s = Server::start_with(Auth::bearer(TOKEN));
    let http = agent();
    let (status, body) = answer(http.get(&format!("{}/tasks/board", s.url)).call());
    assert_eq!(status, 401);
    assert_error(&body, "unauthorized");
    let res = http.get(&format!("{}/tasks/board", s.url)).header("Authorization", "Bearer wrong").call().unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers().get("www-authenticate").unwrap(), "Bearer");
    // A path that does not exist answers exactly as one that does.
    let (status, unknown) = answer(http.get(&format!("{}/no/such/thing", s.url)).call());
    assert_eq!((status, &unknown), (401, &body));
    let (status, ok) = answer(with_token(http.get(&format!("{}/tasks/board", s.url))).call());
    assert_eq!(status, 200, "{ok}");
}

/// Every endpoint the OpenAPI document lists (and the A2A card, and the
/// document itself) answers 401 without the token, with every method.
#[test]
fn no_endpoint_answers_without_the_token() {
    let s = Server::start_with(Auth::bearer(TOKEN));
    let http = agent();
    let (status, doc) = answer(with_token(http.get(&format!("{}/api/openapi.json", s.url))).call());
    assert_eq!(status, 200);
    let mut checked = 0;
    let mut paths: Vec<(String, String)> = vec![
        ("get".into(), "/api/openapi.json".into()),
        ("get".into(), "/.well-known/agent-card.json".into()),
        ("post".into(), "/".into()),
    ];
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            paths.push((method.clone(), crate::support::fill(path, "t1")));
        }
    }
    for (method, path) in paths {
        let url = format!("{}{path}", s.url);
        let res = match method.as_str() {
            "get" => http.get(&url).call(),
            "post" => http.post(&url).send_json(json!({"subject": "x", "agent": "a"})),
            "put" => http.put(&url).send_json(json!({})),
            "delete" => http.delete(&url).call(),
            "patch" => http.patch(&url).send_json(json!({})),
            other => panic!("method {other} of {path} is not covered by this test"),
        };
        let (status, body) = answer(res);
        assert_eq!(status, 401, "{method} {path} answered without a token: {body}");
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} endpoints");
}

#[test]
fn an_oversized_body_is_refused_with_413() {
    let s = Server::start();
    let big = "x".repeat(troupe_server::BODY_LIMIT + 1);
    let (status, body) = s.post("/tasks/board", json!({"subject": big}));
    assert_eq!(status, 413, "{body}");
    assert_error(&body, "payload_too_large");
    assert!(s.store.list(&Default::default()).unwrap().is_empty());
}

#[test]
fn ids_that_climb_out_of_their_folder_are_refused() {
    let s = Server::start();
    for path in ["/tasks/board/..%2F..%2Fetc%2Fpasswd", "/tasks/board/%2E%2E", "/tasks/board/a%2F..%2Fb"] {
        let (status, body) = s.get(path);
        assert_eq!(status, 400, "{path}: {body}");
        assert_error(&body, "bad_request");
    }
    let (status, body) = s.post("/tasks/board/..%2Fx/claim", json!({"agent": "claude"}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.post("/tasks/board", json!({"subject": "x", "created_by": "../../root"}));
    assert_eq!(status, 400, "{body}");
}

#[test]
fn errors_are_json_and_never_name_the_project() {
    let s = Server::start();
    let root = s.root().display().to_string();
    let cases: Vec<(u16, Value)> = vec![
        s.get("/nowhere"),
        s.post("/tasks/board/t1/claim", json!({"agent": "a"})),
        s.post("/tasks/board/import", json!({"feature": "missing"})),
        answer(agent().delete(&format!("{}/tasks/board", s.url)).call()),
        answer(agent().post(&format!("{}/tasks/board", s.url)).content_type("application/json").send("{not json")),
    ];
    let kinds: Vec<&str> = cases.iter().map(|(_, b)| b["error"]["kind"].as_str().unwrap_or("?")).collect();
    assert_eq!(kinds, ["not_found", "not_found", "not_found", "method_not_allowed", "bad_request"]);
    for (_, body) in &cases {
        assert!(!body.to_string().contains(&root), "{body} names the project's path");
    }
}

/// A teammate's gateway token acts as that agent only: whatever a body names,
/// it cannot claim, complete, release, read the inbox of or write as another
/// agent (403), nor decide what people decide; the server's token still may.
#[test]
fn an_agent_token_acts_only_as_its_own_agent() {
    let s = Server::start_with(Auth::bearer(TOKEN));
    let mine = troupe_store::token::mint().unwrap();
    s.store.set_gateway_token("builder-1", &troupe_store::token::hash(&mine)).unwrap();
    let theirs = troupe_store::token::mint().unwrap();
    s.store.set_gateway_token("builder-2", &troupe_store::token::hash(&theirs)).unwrap();
    let http = agent();
    let as_me = |method: &str, path: &str, body: Value| {
        let url = format!("{}{path}", s.url);
        let auth = format!("Bearer {mine}");
        match method {
            "GET" => answer(http.get(&url).header("Authorization", &auth).call()),
            _ => answer(http.post(&url).header("Authorization", &auth).send_json(body)),
        }
    };
    let (status, t1) = as_me("POST", "/tasks/board", json!({"subject": "one", "created_by": "builder-2"}));
    assert_eq!(status, 403, "{t1}");
    assert_error(&t1, "forbidden");
    let (status, t1) = as_me("POST", "/tasks/board", json!({"subject": "one"}));
    assert_eq!((status, t1["created_by"].as_str()), (201, Some("builder-1")), "recorded as itself: {t1}");
    let id = t1["id"].as_str().unwrap().to_string();

    let (status, body) = as_me("POST", &format!("/tasks/board/{id}/claim"), json!({"agent": "builder-2"}));
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("builder-1"), "{body}");
    assert_eq!(s.store.task(&id).unwrap().assignee, None, "nothing was claimed");
    let (status, body) = as_me("POST", &format!("/tasks/board/{id}/claim"), json!({"agent": "builder-1"}));
    assert_eq!(status, 200, "{body}");
    for (path, body) in [
        (format!("/tasks/board/{id}/complete"), json!({"agent": "builder-2"})),
        (format!("/tasks/board/{id}/release"), json!({"agent": "builder-2"})),
        (format!("/tasks/board/{id}/release"), json!({"by": "builder-2"})),
        ("/messages".to_string(), json!({"from": "builder-2", "to": "builder-1", "body": "forged"})),
        ("/messages".to_string(), json!({"to": "builder-2", "body": "yes", "kind": "plan_decision"})),
        ("/tasks/1/approve".to_string(), json!({})),
    ] {
        let (status, answer) = as_me("POST", &path, body.clone());
        assert_eq!(status, 403, "{path} {body}: {answer}");
    }
    let (status, body) = as_me("GET", "/agents/builder-2/inbox", Value::Null);
    assert_eq!(status, 403, "{body}");
    let (status, _) = as_me("GET", "/agents/builder-1/inbox", Value::Null);
    assert_eq!(status, 200);
    let (status, sent) = as_me("POST", "/messages", json!({"to": "builder-2", "body": "hi"}));
    assert_eq!((status, sent["messages"][0]["from"].as_str()), (201, Some("builder-1")), "{sent}");

    // A replaced token (the agent was launched again) no longer admits anyone.
    s.store.set_gateway_token("builder-1", &troupe_store::token::hash("newer")).unwrap();
    let (status, _) = as_me("GET", "/tasks/board", Value::Null);
    assert_eq!(status, 401);
    // People, with the server's token, still act for any agent.
    let url = format!("{}/tasks/board/{id}/release", s.url);
    let (status, body) = answer(
        http.post(&url).header("Authorization", &format!("Bearer {TOKEN}")).send_json(json!({"agent": "builder-1"})),
    );
    assert_eq!(status, 200, "{body}");
}
