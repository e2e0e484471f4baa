//! `troupe serve` and `--serve` as real processes: the token rules at start,
//! a generated token shown once, SIGTERM, an event stream that resumes across
//! SIGKILL and a restart, and the server a run hosts.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

use troupe_core::layout::Layout;
use troupe_store::{EventLog, SqliteStore};
use troupe_testkit::sse::Stream;

use crate::support::TestProject;

/// A `troupe serve` process and where it listens.
struct Serving {
    child: Child,
    url: String,
    announced: serde_json::Value,
}

impl Serving {
    fn start(p: &TestProject, args: &[&str]) -> Serving {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("troupe"))
            .arg("-C")
            .arg(p.root())
            .args(["--json", "serve"])
            .args(args)
            .env_remove("TROUPE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // `--json` prints one document when listening; read it whole.
        let mut text = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        while serde_json::from_str::<serde_json::Value>(&text).is_err() {
            assert!(out.read_line(&mut text).unwrap() > 0, "troupe serve ended before listening");
        }
        let announced: serde_json::Value = serde_json::from_str(&text).unwrap();
        // A wildcard bind is reached on loopback.
        let url = announced["url"].as_str().unwrap().replace("0.0.0.0", "127.0.0.1");
        Serving { child, url, announced }
    }

    fn signal(&self, sig: &str) {
        assert!(Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success());
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status(url: &str, token: Option<&str>) -> u16 {
    let http: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut req = http.get(&format!("{url}/tasks/board"));
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    req.call().unwrap().status().as_u16()
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let p = TestProject::new();
    let out = p.troupe().args(["serve", "--bind", "0.0.0.0:0"]).env_remove("TROUPE_TOKEN").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to serve on 0.0.0.0:0 without a token"), "{stderr}");
    assert!(stderr.contains("TROUPE_TOKEN") && stderr.contains("--generate-token"), "{stderr}");
    assert!(!p.path(".troupe/state/server.token").exists());
}

#[test]
fn a_generated_token_is_shown_once_and_required_everywhere() {
    let p = TestProject::new();
    let first = Serving::start(&p, &["--bind", "0.0.0.0:0", "--generate-token"]);
    let token = first.announced["token"].as_str().unwrap().to_string();
    let file = p.path(".troupe/state/server.token");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(status(&first.url, None), 401);
    assert_eq!(status(&first.url, Some("wrong")), 401);
    assert_eq!(status(&first.url, Some(&token)), 200);
    // SIGTERM with a stream open: the stream ends and the server exits 0.
    let mut stream = Stream::connect(&first.url, "", None, Some(&token));
    first.signal("-TERM");
    assert!(stream.try_event().is_none_or(|_| stream.try_event().is_none()));
    let mut first = first;
    assert!(first.child.wait().unwrap().success());
    // Started again off loopback: the same token, not shown again.
    let second = Serving::start(&p, &["--bind", "0.0.0.0:0"]);
    assert_eq!(second.announced["token"], serde_json::Value::Null);
    assert_eq!(second.announced["token_required"], true);
    assert_eq!(status(&second.url, Some(&token)), 200);
    // TROUPE_TOKEN applies on loopback too.
    let out = p.troupe().args(["serve", "--bind", "127.0.0.1:0"]).env("TROUPE_TOKEN", "").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "an empty token is refused");
}

/// Events written by other processes reach the stream; a client that
/// resumes with `Last-Event-ID` after the server was SIGKILLed and started
/// again receives every event exactly once.
#[test]
fn the_event_stream_resumes_across_sigkill_and_restart() {
    let p = TestProject::new();
    let create = |subject: &str| p.troupe().args(["board", "create", subject]).assert().success();
    create("one");
    create("two");
    let server = Serving::start(&p, &["--bind", "127.0.0.1:0"]);
    let mut stream = Stream::connect(&server.url, "", None, None);
    let mut seen = stream.events(2);
    create("three"); // another process, while the client listens
    seen.extend(stream.events(1));
    assert_eq!(seen[2].1["data"]["subject"], "three");
    server.signal("-KILL");
    drop(server);
    drop(stream);
    create("four");
    p.troupe().args(["board", "claim", "t1", "--agent", "builder-1"]).assert().success();
    let server = Serving::start(&p, &["--bind", "127.0.0.1:0"]);
    let mut stream = Stream::connect(&server.url, "", Some(seen.last().unwrap().0), None);
    let store = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
    let all: Vec<i64> = store.events_since(0, 10_000).unwrap().into_iter().map(|e| e.id).collect();
    seen.extend(stream.events(all.len() - seen.len()));
    let ids: Vec<i64> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, all, "every event exactly once, in order");
}

/// `--serve` hosts the API in the Lead's process: a client sees the run's
/// events live, and the stream ends when the run does.
#[test]
fn a_run_hosts_the_api_while_it_runs() {
    let script = r##"agents:
  architect:
    - - run: "until [ -e go ]; do sleep 0.05; done"
      - write: {path: ".troupe/specs/{feature}/design.md", content: "# Design\n"}
      - write: {path: ".troupe/specs/{feature}/research.md", content: "# Research\n"}
      - report: "ARCHITECT_COMPLETE\nSummary: a design"
"##;
    let p = crate::lead::project(script);
    p.troupe().args(["spec", "new", "calc", "-d", "a calculator"]).assert().success();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("troupe"))
        .arg("-C")
        .arg(p.root())
        .args(["design", "calc", "--engine", "scripted", "--no-commit", "--serve", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let url = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "the run ended without serving");
        if let Some(rest) = line.trim().strip_prefix("serving the run's API on ") {
            break rest.to_string();
        }
    };
    // Keep reading stderr so the run never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut stream = Stream::connect(&url, "?kind=agent_registered", None, None);
    let (_, registered) = stream.event();
    assert_eq!(
        registered["data"]["role"].as_str().map(str::to_lowercase).as_deref(),
        Some("architect"),
        "{registered}"
    );
    std::fs::write(p.path("go"), "").unwrap();
    while stream.try_event().is_some() {}
    assert!(child.wait().unwrap().success(), "the run completes and its server stops with it");
}
