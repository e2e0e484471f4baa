//! `troupe msg …` and `troupe agents …` through the real binary.

use troupe_core::layout::Layout;
use troupe_store::{AgentStatus, NewAgent, Registry, SqliteStore};

use crate::support::{TestProject, json};

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn send_and_read_an_inbox_in_priority_order() {
    let p = TestProject::new();
    let send = |to: &str, text: &str, prio: &str| {
        let o = p.troupe().args(["msg", "send", to, text, "--priority", prio, "--from", "lead"]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out(&o)
    };
    send("bob", "later", "1");
    let urgent = send("bob", "now", "5");
    send("bob", "soon", "3");
    // Unregistered recipients are allowed, with a note.
    let o = p.troupe().args(["msg", "send", "nobody", "hello"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("no agent `nobody` is registered"));

    let o = p.troupe().args(["--json", "msg", "inbox", "--agent", "bob"]).output().unwrap();
    let bodies: Vec<String> =
        json(&o).as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap().to_string()).collect();
    assert_eq!(bodies, ["now", "soon", "later"]);

    // A reply threads onto the original.
    let o = p
        .troupe()
        .args(["--json", "msg", "send", "lead", "on it", "--reply-to", &urgent])
        .env("TROUPE_AGENT_ID", "bob")
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(v[0]["from"], "bob");
    assert_eq!(v[0]["thread"].to_string(), urgent);
    assert_eq!(v[0]["in_reply_to"].to_string(), urgent);

    // Text inbox: unread marker, then --mark-read empties --unread.
    let text = out(&p.troupe().args(["msg", "inbox", "--agent", "bob", "--mark-read"]).output().unwrap());
    assert!(text.lines().next().unwrap().contains("ID  PRI  KIND"), "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with('*'), "{text}");
    assert!(text.contains("  p5   text  lead  "), "{text}");
    assert!(text.contains("s ago  ") || text.contains("just now  "), "when it was sent, human: {text}");
    p.troupe()
        .args(["msg", "inbox", "--agent", "bob", "--unread"])
        .assert()
        .success()
        .stdout("")
        .stderr(predicates::str::contains("no unread messages for bob"));
}

#[test]
fn bad_messages_are_refused_clearly() {
    let p = TestProject::new();
    p.troupe().args(["msg", "send", "bob", "x", "--priority", "9"]).assert().code(2);
    p.troupe()
        .args(["msg", "send", "bob", "x", "--kind", "shout"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown message kind `shout`"));
    p.troupe()
        .args(["msg", "send", "bob", "x", "--reply-to", "42"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("no message 42"));
    p.troupe()
        .args(["msg", "inbox"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("hint: pass `--agent <id>`, or set TROUPE_AGENT_ID"));
}

#[test]
fn broadcast_and_agents_list_with_stale_detection() {
    let p = TestProject::new();
    p.troupe().args(["agent", "list"]).assert().success().stderr(predicates::str::contains("no agents"));
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    {
        let store = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
        let mut a = NewAgent::new("builder-1", "builder", "claude");
        a.pid = Some(std::process::id());
        store.register(a).unwrap();
        let mut b = NewAgent::new("builder-2", "builder", "gemini");
        b.pid = Some(dead_pid);
        store.register(b).unwrap();
        store.set_status("builder-2", AgentStatus::Processing).unwrap();
    }
    let o = p.troupe().args(["--json", "agent", "list"]).output().unwrap();
    let v = json(&o);
    assert_eq!(v[0]["id"], "builder-1");
    assert_eq!(v[0]["stale"], false);
    assert_eq!(v[1]["status"], "PROCESSING");
    assert_eq!(v[1]["stale"], true);
    let text = out(&p.troupe().args(["agent", "list"]).output().unwrap());
    assert!(text.contains("s ago"), "a human time in the table: {text}");
    let started = v[0]["started_at"].as_str().unwrap();
    assert!(started.parse::<jiff::Timestamp>().is_ok(), "RFC 3339 in --json: {started}");
    assert!(text.contains("builder-2") && text.contains("PROCESSING (stale)"), "{text}");
    let o = p.troupe().args(["--json", "agent", "list", "--stale"]).output().unwrap();
    assert_eq!(json(&o).as_array().unwrap().len(), 1);

    let o = p.troupe().args(["--json", "msg", "send", "*", "stop", "--kind", "shutdown_request"]).output().unwrap();
    let to: Vec<String> = json(&o).as_array().unwrap().iter().map(|m| m["to"].as_str().unwrap().to_string()).collect();
    assert_eq!(to, ["builder-1", "builder-2"]);
    let o = p.troupe().args(["--json", "msg", "inbox", "--agent", "builder-2"]).output().unwrap();
    assert_eq!(json(&o)[0]["kind"], "shutdown_request");
}

#[test]
fn agents_list_is_merged_into_agent_list() {
    let p = TestProject::new();
    p.troupe().args(["agents", "list"]).assert().code(2);
    p.troupe()
        .args(["agent", "list", "--stale"])
        .assert()
        .success()
        .stderr(predicates::str::contains("no stale agents"));
}
