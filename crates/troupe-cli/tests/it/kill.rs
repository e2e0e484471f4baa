//! `troupe kill` (seed 003 B4) through the binary: the agent is asked, and its
//! answer (given the way the gateway's `respond_shutdown` gives it) decides.

use std::os::unix::process::CommandExt;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_core::layout::Layout;
use troupe_store::{Mailbox, MessageKind, NewAgent, NewMessage, Registry, SqliteStore};

use crate::support::{TestProject, json};

/// A process registered as agent `id`, leading its own process group, reaped
/// by a thread of its own (as its real parent, `agent run` or tmux, would:
/// an unreaped zombie would look alive to the stop path).
fn agent(p: &TestProject, id: &str) -> std::thread::JoinHandle<()> {
    let mut child =
        std::process::Command::new("sleep").arg("60").env("TROUPE_AGENT_ID", id).process_group(0).spawn().unwrap();
    store(p).register(NewAgent { pid: Some(child.id()), ..NewAgent::new(id, "builder", "claude") }).unwrap();
    std::thread::spawn(move || {
        child.wait().unwrap();
    })
}

fn store(p: &TestProject) -> SqliteStore {
    SqliteStore::open(&Layout::new(p.root()).database_file()).unwrap()
}

/// `troupe --json kill <args>` while `answer` (if any) answers the request.
fn kill(p: &TestProject, args: &[&str], answer: Option<serde_json::Value>) -> Output {
    let id = args[0].to_string();
    let answering = answer.map(|body| {
        let s = store(p);
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(request) =
                    s.inbox(&id, true).unwrap().into_iter().find(|m| m.kind == MessageKind::ShutdownRequest)
                {
                    s.mark_read(&id, &[request.id]).unwrap();
                    assert_eq!(s.agent(&id).unwrap().status.as_str(), "SHUTTING_DOWN");
                    s.send(NewMessage {
                        kind: MessageKind::ShutdownResponse,
                        in_reply_to: Some(request.id),
                        ..NewMessage::text(id.clone(), request.from, body.to_string())
                    })
                    .unwrap();
                    return;
                }
                assert!(Instant::now() < until, "no shutdown request came");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    });
    // The command runs on this thread; the answer comes from the other.
    let out = p.troupe().arg("--json").arg("kill").args(args).timeout(Duration::from_secs(60)).output().unwrap();
    if let Some(h) = answering {
        h.join().unwrap();
    }
    out
}

fn gone(reaper: &std::thread::JoinHandle<()>) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if reaper.is_finished() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn kill_asks_first_and_a_refusal_an_approval_a_timeout_or_force_decide() {
    let p = TestProject::new();
    let k1 = agent(&p, "k1");
    let config = |text: &str| std::fs::write(p.path(".troupe/config.toml"), text).unwrap();
    config("[shutdown]\ntimeout_seconds = 30\n");

    // Refused: nothing is signalled, the reason is the error.
    let out = kill(&p, &["k1"], Some(json!({"approve": false, "reason": "busy with login/2"})));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: k1 refused: busy with login/2\n"), "{err}");
    assert!(err.contains("\nhint: troupe kill k1 -f"), "{err}");
    assert!(!k1.is_finished(), "still running");
    assert_eq!(store(&p).agent("k1").unwrap().status.as_str(), "READY", "no longer shutting down");

    // Approved: SIGTERM (after the SIGINT an engine saves its session on), never SIGKILL for one that obeys.
    let out = kill(&p, &["k1"], Some(json!({"approve": true, "reason": ""})));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json(&out)["answer"], "approved");
    assert_ne!(json(&out)["signal"], "SIGKILL");
    assert!(gone(&k1));

    // No answer within the timeout: stopped anyway.
    config("[shutdown]\ntimeout_ms = 300\n");
    let k2 = agent(&p, "k2");
    let out = kill(&p, &["k2"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json(&out)["answer"], "no answer");
    assert!(gone(&k2));

    // Graceful stops off: at once, nothing asked.
    config("[shutdown]\ngraceful_enabled = false\n");
    let k3 = agent(&p, "k3");
    let out = kill(&p, &["k3"], None);
    assert_eq!(json(&out)["answer"], "graceful shutdown disabled", "{out:?}");
    assert!(gone(&k3));
    assert!(store(&p).inbox("k3", false).unwrap().is_empty(), "nothing was asked");

    // -f: SIGKILL at once.
    config("");
    let k4 = agent(&p, "k4");
    let out = kill(&p, &["k4", "-f"], None);
    assert_eq!((json(&out)["answer"].as_str(), json(&out)["signal"].as_str()), (Some("forced"), Some("SIGKILL")));
    assert!(gone(&k4));
    // A stopped agent is not running any more.
    assert_eq!(p.troupe().args(["kill", "k4"]).output().unwrap().status.code(), Some(1));
}
