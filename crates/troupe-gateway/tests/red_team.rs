//! The red-team suite (seed 004 "Red Team Verification Loop"): every attack
//! goes through the real gateway to real backends, and every case asserts
//! the denial — and, where it matters, that nothing happened behind it.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use troupe_core::config::RateLimit;
use troupe_store::{AuditFilter, Decision};

const SKILLS: &[&str] = &[
    "id: admin\nallowedRoles: [admin]\nallowedTools: ['*']\ngrants: {memory: all}",
    "id: guest\nallowedRoles: [guest]\nallowedTools: [everything__echo]",
    "id: fs\nallowedRoles: [filesystem_user]\nallowedTools: [filesystem__*]",
    "id: mem\nallowedRoles: [writer]\nallowedTools: [everything__echo]\ngrants: {memory: isolated}",
    "id: dyn\nallowedRoles: [reader]\nallowedTools: [dyn__safe_read]",
    "id: dynall\nallowedRoles: [dynamic]\nallowedTools: [dyn__*]",
];

fn denied_text(tool: &str, role: &str) -> String {
    format!("tool {tool:?} is not available to role {role:?}")
}

async fn assert_denied(c: &Client, tool: &str, role: &str) {
    let r = c.call(tool, json!({"message": "x"})).await;
    assert!(is_error(&r), "{tool:?} was not denied: {r:?}");
    assert_eq!(text(&r), denied_text(tool, role), "{tool:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_role_access_is_denied_and_invisible() {
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[]);
    let guest = connect(&h.gateway, "guest-1", "guest").await;
    let names = guest.names().await;
    for tool in ["everything__get-sum", "everything__get-env", "everything__trigger-long-running-operation"] {
        assert!(!names.contains(&tool.to_string()), "{tool} visible to guest");
        assert_denied(&guest, tool, "guest").await;
    }
    let audit = h.store.audit(&AuditFilter { decision: Some(Decision::Denied), ..AuditFilter::default() }).unwrap();
    assert_eq!(audit.len(), 3, "every denial is audited");
    assert!(audit.iter().all(|r| r.agent == "guest-1" && r.role == "guest"));
    assert_eq!(audit[0].argument_shape, json!({"message": "string"}), "shape, not values");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_access_bypass_is_denied() {
    let h = harness(policy(SKILLS, &[]), &[], &[]);
    let guest = connect(&h.gateway, "guest-1", "guest").await;
    for tool in ["troupe__save_memory", "troupe__recall_memory", "troupe__list_memories"] {
        assert_denied(&guest, tool, "guest").await;
    }
    assert!(!h.dir.path().join("memory/guest.memory.md").exists());
    // An isolated role saves its own memory but cannot read another role's.
    let admin = connect(&h.gateway, "admin-1", "admin").await;
    assert!(!is_error(
        &admin.call("troupe__save_memory", json!({"content": "the admin secret", "type": "fact"})).await
    ));
    let writer = connect(&h.gateway, "w-1", "writer").await;
    assert!(!is_error(&writer.call("troupe__save_memory", json!({"content": "mine"})).await));
    let peek = writer.call("troupe__recall_memory", json!({"role": "admin"})).await;
    assert!(is_error(&peek) && text(&peek).contains("may not read the memory of role \"admin\""), "{peek:?}");
    let all = writer.call("troupe__recall_memory", json!({"all_roles": true})).await;
    assert!(!text(&all).contains("admin secret"), "{all:?}");
    let traversal = writer.call("troupe__recall_memory", json!({"role": "../admin"})).await;
    assert!(is_error(&traversal));
    // The admin (memory: all) reads everyone.
    let everything = admin.call("troupe__recall_memory", json!({"all_roles": true})).await;
    assert!(text(&everything).contains("mine") && text(&everything).contains("admin secret"), "{everything:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_matching_exploits_are_denied() {
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[]);
    let guest = connect(&h.gateway, "guest-1", "guest").await;
    let attacks = [
        "everything__echo_and_delete",
        "everything__echo\u{0}drop",
        "everything__query\u{0}drop",
        "\u{435}verything__echo",         // Cyrillic 'е'
        "everything__\u{435}cho",         // homoglyph in the tool part
        "\u{ff45}verything__echo",        // fullwidth 'ｅ'
        "everything__\u{ff45}\u{ff43}ho", // fullwidth in the tool part
        "Everything__echo",
        "EVERYTHING__ECHO",
        "everything__Echo",
        "everything___echo",
        "everything_echo",
        "everything__echo__",
        "everything____echo",
        "everything:echo",
        "everything/echo",
        "everything.echo",
        " everything__echo",
        "everything__echo ",
        "everything__echo\n",
        "everything__ech\u{200b}o",
        "everything__echo\u{202e}",
        "*",
        "everything__*",
        "",
    ];
    for attack in attacks {
        let r = guest.call(attack, json!({"message": "pwned"})).await;
        assert!(is_error(&r), "{attack:?} got through: {r:?}");
        assert!(!text(&r).contains("Echo: pwned"), "{attack:?} reached the backend");
    }
    // The real tool still works, so the denials above are not a broken gateway.
    let ok = guest.call("everything__echo", json!({"message": "fine"})).await;
    assert!(text(&ok).contains("fine"), "{ok:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privilege_escalation_through_set_role_is_refused() {
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[]);
    let guest = connect(&h.gateway, "guest-1", "guest").await;
    for target in [
        "admin; DROP TABLE users",
        "admin",
        "../admin",
        "ADMIN",
        "admin\u{0}",
        "\u{430}dmin",
        "*",
        "",
        "filesystem_user",
    ] {
        let r = guest.call("set_role", json!({"role_id": target})).await;
        assert!(is_error(&r), "{target:?}: {r:?}");
        assert_eq!(guest.session.role(), "guest", "{target:?} changed the role");
    }
    assert_eq!(guest.names().await, ["everything__echo", "set_role"]);
    assert_denied(&guest, "everything__get-sum", "guest").await;
    let audit = h.store.audit(&AuditFilter { tool: Some("set_role".into()), ..AuditFilter::default() }).unwrap();
    assert!(audit.iter().all(|r| r.decision == Decision::Denied) && audit.len() == 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_access_control_keeps_roles_on_their_servers() {
    let files = tempfile::tempdir().unwrap();
    let h =
        harness(policy(SKILLS, &[]), &[("everything", everything()), ("filesystem", filesystem(files.path()))], &[]);
    let fs_user = connect(&h.gateway, "fs-1", "filesystem_user").await;
    let names = fs_user.names().await;
    assert!(names.iter().any(|n| n.starts_with("filesystem__")));
    assert!(!names.iter().any(|n| n.starts_with("everything__")), "{names:?}");
    assert_denied(&fs_user, "everything__echo", "filesystem_user").await;
    assert_denied(&fs_user, "database__query", "filesystem_user").await;
    assert_denied(&fs_user, "troupe__send_message", "filesystem_user").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_visibility_is_consistent_on_downgrade() {
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[]);
    let admin = connect(&h.gateway, "admin-1", "admin").await;
    let before = admin.names().await;
    assert!(before.contains(&"everything__get-sum".to_string()));
    // A backend may announce its own tool list once it is up (late on a loaded
    // machine): counted before the downgrade, so the downgrade's is exactly one.
    let settled = admin.changes_after(std::time::Duration::from_millis(300)).await;
    assert!(!is_error(&admin.call("set_role", json!({"role_id": "guest"})).await));
    assert_eq!(admin.wait_for_changes(settled + 1).await, settled + 1, "downgrade notifies once");
    assert_eq!(admin.names().await, ["everything__echo", "set_role"]);
    for tool in before.iter().filter(|t| !["everything__echo", "set_role"].contains(&t.as_str())) {
        assert_denied(&admin, tool, "guest").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_survive_role_switching() {
    let limit = RateLimit { per_minute: Some(3), ..RateLimit::default() };
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[("admin", limit)]);
    let c = connect(&h.gateway, "agent-7", "admin").await;
    for _ in 0..2 {
        assert!(!is_error(&c.call("everything__echo", json!({"message": "a"})).await));
    }
    // The switch is the third call of the minute: it counts like any other.
    assert!(!is_error(&c.call("set_role", json!({"role_id": "guest"})).await));
    let still = c.call("everything__echo", json!({"message": "a"})).await;
    assert!(
        text(&still).contains("rate limit of role \"admin\" reached: 3 calls per minute"),
        "switching roles reset the counter: {still:?}"
    );
    let back = c.call("set_role", json!({"role_id": "admin"})).await;
    assert!(is_error(&back) && text(&back).contains("rate limit"), "set_role is not rate-limited: {back:?}");
    // A second connection of the same identity shares the counter.
    let again = connect(&h.gateway, "agent-7", "admin").await;
    assert!(text(&again.call("everything__echo", json!({"message": "a"})).await).contains("rate limit"));
    let audit =
        h.store.audit(&AuditFilter { decision: Some(Decision::RateLimited), ..AuditFilter::default() }).unwrap();
    assert_eq!(audit.len(), 3);
    assert_eq!(audit[1].tool, "set_role");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_role_flooding_is_cut_off_without_any_configured_limit() {
    let h = harness(policy(SKILLS, &[]), &[], &[]);
    let c = connect(&h.gateway, "flood-1", "admin").await;
    let mut refused = 0;
    for i in 0..(troupe_gateway::ratelimit::SET_ROLE_PER_MINUTE + 20) {
        let role = if i % 2 == 0 { "guest" } else { "admin" };
        let r = c.call("set_role", json!({"role_id": role})).await;
        if is_error(&r) {
            assert!(text(&r).contains("30 calls per minute of set_role"), "{r:?}");
            refused += 1;
        }
    }
    assert_eq!(refused, 20, "every switch within the ceiling passes until the built-in limit");
    let limited =
        h.store.audit(&AuditFilter { decision: Some(Decision::RateLimited), ..AuditFilter::default() }).unwrap();
    assert_eq!(limited.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_whose_tool_list_changes_after_approval_gains_nothing() {
    let h = harness(policy(SKILLS, &[]), &[("dyn", changing_backend())], &[]);
    let reader = connect(&h.gateway, "r-1", "reader").await;
    let dynamic = connect(&h.gateway, "d-1", "dynamic").await;
    assert_eq!(reader.names().await, ["dyn__safe_read", "set_role"]);
    assert_eq!(dynamic.names().await, ["dyn__safe_read", "set_role"]);
    // The first call makes the backend add `delete_all` and announce it.
    assert_eq!(text(&reader.call("dyn__safe_read", json!({})).await), "read ok");
    // A role granted the whole server sees the new tool, and was told the list changed.
    assert_eq!(dynamic.wait_for_changes(1).await, 1);
    assert_eq!(reader.names().await, ["dyn__safe_read", "set_role"], "the new tool stays hidden from an exact grant");
    assert_denied(&reader, "dyn__delete_all", "reader").await;
    assert_eq!(reader.changes_after(Duration::ZERO).await, 0, "nothing changed for the reader, so no notification");
    assert_eq!(dynamic.names().await, ["dyn__delete_all", "dyn__safe_read", "set_role"]);
    let stderr = h.gateway.status(false).await.into_iter().find(|s| s.name == "dyn").unwrap().stderr_tail;
    assert_eq!(stderr, ["dyn backend started"], "backend stderr is captured, not leaked");
}

/// Writes `line` to a gateway served by `serve_io` and reads its next answer.
async fn exchange(
    to: &mut tokio::io::DuplexStream,
    from: &mut tokio::io::BufReader<tokio::io::DuplexStream>,
    line: &[u8],
) -> serde_json::Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    to.write_all(line).await.unwrap();
    to.write_all(b"\n").await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), from.read_line(&mut answer))
        .await
        .expect("the gateway did not answer")
        .unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_is_always_answered_and_the_session_survives() {
    let h = harness(policy(SKILLS, &[]), &[], &[]);
    let (mut to, input) = tokio::io::duplex(1 << 16);
    let (output, from) = tokio::io::duplex(1 << 16);
    let mut from = tokio::io::BufReader::new(from);
    let session = std::sync::Arc::new(troupe_gateway::Session::new("fuzz-1", "admin"));
    let served = tokio::spawn(troupe_gateway::serve::serve_io(h.gateway.clone(), session, input, output));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    assert!(exchange(&mut to, &mut from, init.to_string().as_bytes()).await["result"].is_object());
    let deep = format!("{}{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    let huge = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","x":"{}"}}"#, "a".repeat(17_000_000));
    let cases: [(&[u8], i64, serde_json::Value); 6] = [
        (b"\x00\xff not json", -32700, json!(null)),
        (deep.as_bytes(), -32700, json!(null)),
        (huge.as_bytes(), -32700, json!(null)),
        (br#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#, -32600, json!(null)),
        (br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":3}}"#, -32602, json!(3)),
        (
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"set_role","arguments":"x"}}"#,
            -32602,
            json!(4),
        ),
    ];
    for (line, code, id) in cases {
        let answer = exchange(&mut to, &mut from, line).await;
        assert_eq!((answer["error"]["code"].as_i64(), &answer["id"]), (Some(code), &id), "{answer}");
    }
    let ping = exchange(&mut to, &mut from, br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#).await;
    assert_eq!(ping["id"], 5, "{ping}");
    drop(to);
    served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_requests_without_the_agents_token() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = harness(policy(SKILLS, &[]), &[], &[]);
    let token = troupe_store::token::mint().unwrap();
    let auth = troupe_gateway::serve::Auth::new(troupe_store::token::hash(&token));
    let session = std::sync::Arc::new(troupe_gateway::Session::new("builder-1", "admin"));
    let cancel = tokio_util::sync::CancellationToken::new();
    let (addr, serve) = troupe_gateway::serve::bind_http(
        h.gateway.clone(),
        session,
        "127.0.0.1:0".parse().unwrap(),
        auth,
        cancel.clone(),
    )
    .await
    .unwrap();
    tokio::spawn(serve);
    let post = |bearer: Option<String>| async move {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        .to_string();
        let auth = bearer.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).await.unwrap();
        response
    };
    for bearer in [None, Some(String::new()), Some("x".repeat(64)), Some(troupe_store::token::hash(&token))] {
        let response = post(bearer.clone()).await;
        assert!(response.starts_with("HTTP/1.1 401"), "{bearer:?}: {response}");
        assert!(response.contains("www-authenticate: Bearer") && response.contains("\"code\":-32600"), "{response}");
    }
    let response = post(Some(token)).await;
    assert!(response.starts_with("HTTP/1.1 200") && response.contains("serverInfo"), "{response}");
    cancel.cancel();
}
