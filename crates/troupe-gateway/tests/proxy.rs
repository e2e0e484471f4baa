//! The gateway against real backends (`mcp-server-everything`,
//! `mcp-server-filesystem`) through a real rmcp client.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use troupe_core::config::McpServer;

const SKILLS: &[&str] = &[
    "id: dev\nallowedRoles: [developer]\nallowedTools: [everything__*, filesystem__read_text_file, filesystem__list_directory, troupe__send_message, troupe__read_messages]\ngrants: {memory: isolated}",
    "id: guest\nallowedRoles: [guest]\nallowedTools: [everything__echo]",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_forwards_real_backend_tools_by_role() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("hello.txt"), "hello from disk").unwrap();
    let h =
        harness(policy(SKILLS, &[]), &[("everything", everything()), ("filesystem", filesystem(files.path()))], &[]);
    let dev = connect(&h.gateway, "dev-1", "developer").await;
    let names = dev.names().await;
    assert!(names.contains(&"everything__echo".to_string()), "{names:?}");
    assert!(names.contains(&"everything__get-sum".to_string()), "{names:?}");
    assert!(names.contains(&"filesystem__read_text_file".to_string()), "{names:?}");
    assert!(!names.contains(&"filesystem__write_file".to_string()), "{names:?}");
    assert!(names.contains(&"set_role".to_string()));
    assert!(names.contains(&"troupe__save_memory".to_string()), "memory grant makes memory tools visible");

    let echoed = dev.call("everything__echo", json!({"message": "hi there"})).await;
    assert!(!is_error(&echoed), "{echoed:?}");
    assert!(text(&echoed).contains("hi there"), "{echoed:?}");
    assert_eq!(echoed.result_type.as_ref().map(|r| r.as_str()), None, "stripped for a legacy (initialize) client");

    let path = files.path().join("hello.txt").canonicalize().unwrap();
    let read = dev.call("filesystem__read_text_file", json!({"path": path})).await;
    assert!(text(&read).contains("hello from disk"), "{read:?}");

    let write = dev.call("filesystem__write_file", json!({"path": files.path().join("x.txt"), "content": "no"})).await;
    assert!(is_error(&write));
    assert_eq!(text(&write), "tool \"filesystem__write_file\" is not available to role \"developer\"");
    assert!(!files.path().join("x.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_does_not_reveal_whether_the_tool_exists() {
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[]);
    let guest = connect(&h.gateway, "g", "guest").await;
    let hidden = guest.call("everything__get-sum", json!({"a": 1, "b": 2})).await;
    let missing = guest.call("everything__no-such-tool", json!({})).await;
    let no_server = guest.call("nowhere__get-sum", json!({})).await;
    for r in [&hidden, &missing, &no_server] {
        assert!(is_error(r));
    }
    assert_eq!(text(&hidden).replace("get-sum", "X"), text(&missing).replace("no-such-tool", "X"));
    assert_eq!(text(&hidden).replace("everything__get-sum", "X"), text(&no_server).replace("nowhere__get-sum", "X"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_role_switches_within_the_ceiling_and_notifies_on_change_only() {
    let h = harness(policy(SKILLS, &[]), &[("everything", everything())], &[]);
    let c = connect(&h.gateway, "dev-1", "developer").await;
    let before = c.names().await;
    let up = c.call("set_role", json!({"role_id": "guest"})).await;
    assert!(!is_error(&up), "{up:?}");
    assert_eq!(c.wait_for_changes(1).await, 1);
    let after = c.names().await;
    assert!(after.len() < before.len());
    assert_eq!(after, ["everything__echo", "set_role"]);
    // Same role again: nothing changes, no notification.
    c.call("set_role", json!({"role_id": "guest"})).await;
    assert_eq!(c.changes_after(Duration::from_millis(300)).await, 1);
    // Back up to the ceiling is allowed; above it is not.
    assert!(!is_error(&c.call("set_role", json!({"role_id": "developer"})).await));
    let g = connect(&h.gateway, "guest-1", "guest").await;
    let refused = g.call("set_role", json!({"role_id": "developer"})).await;
    assert!(is_error(&refused));
    assert!(text(&refused).contains("above this connection's role"), "{}", text(&refused));
    assert_eq!(g.names().await, ["everything__echo", "set_role"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_and_hung_backends_are_reported_not_waited_on() {
    let dead = McpServer {
        command: "sh".into(),
        args: vec!["-c".into(), "echo boom >&2; exit 3".into()],
        env: Default::default(),
    };
    let hung = McpServer { command: "sleep".into(), args: vec!["600".into()], env: Default::default() };
    let missing = McpServer { command: "/no/such/binary".into(), args: vec![], env: Default::default() };
    let p = policy(&["id: all\nallowedRoles: [admin]\nallowedTools: ['*']"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let gateway = std::sync::Arc::new(troupe_gateway::Gateway::new(troupe_gateway::GatewayParts {
        policy: p,
        servers: [
            ("dead".to_string(), dead),
            ("hung".to_string(), hung),
            ("missing".to_string(), missing),
            ("everything".to_string(), everything()),
        ]
        .into(),
        limits: Default::default(),
        store: None,
        memory: Some(troupe_gateway::memory::MemoryDir::new(dir.path())),
        root: None,
        audit_values: false,
        connect_timeout: Duration::from_secs(8),
        call_timeout: Duration::from_secs(8),
    }));
    let started = std::time::Instant::now();
    let c = connect(&gateway, "a", "admin").await;
    let names = c.names().await;
    assert!(names.contains(&"everything__echo".to_string()), "a healthy backend still serves: {names:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    let status = gateway.status(false).await;
    let by_name = |n: &str| status.iter().find(|s| s.name == n).unwrap().clone();
    assert_eq!(by_name("dead").state, "failed");
    assert!(by_name("dead").stderr_tail.iter().any(|l| l.contains("boom")), "{:?}", by_name("dead"));
    assert!(by_name("hung").error.unwrap().contains("did not answer the MCP handshake within 8 s"));
    assert_eq!(by_name("missing").state, "failed");
    assert!(by_name("missing").error.unwrap().contains("could not be started (/no/such/binary)"));
    let call = c.call("dead__anything", json!({})).await;
    assert!(is_error(&call));
    assert!(text(&call).contains("dead"), "{}", text(&call));
}
