//! The gateway off loopback and under abuse, through the real `troupe` binary:
//! bearer tokens on `--http` (on and off loopback), rate limits shared by two
//! gateway processes of one agent, a JSON-RPC answer to every malformed
//! message over stdio and HTTP, and agent-chosen text escaped in what the
//! operator reads (`troupe audit`, `board`, `msg`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::support::TestProject;

/// A project whose only role, `developer`, may call troupe's context tool
/// (and nothing of `everything__*`, which no backend serves), at most
/// `per_minute` calls a minute.
fn project(per_minute: u32) -> TestProject {
    let p = TestProject::new();
    std::fs::remove_dir_all(p.path(".troupe/skills")).unwrap();
    let dir = p.path(".troupe/skills/dev");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nid: dev\nallowedRoles: [developer]\nallowedTools: [troupe__get_context]\n---\nTest skill.\n",
    )
    .unwrap();
    let config = p.path(".troupe/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    text.push_str(&format!("\n[gateway.rate_limits.developer]\nper_minute = {per_minute}\n"));
    std::fs::write(&config, text).unwrap();
    p
}

fn troupe_bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("troupe")
}

/// A gateway process over stdio, spoken to in raw JSON-RPC lines.
struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    /// The gateway's output lines, read on a thread so a missing answer fails after a deadline instead of hanging.
    answers: std::sync::mpsc::Receiver<String>,
}

impl Stdio_ {
    fn start(p: &TestProject, agent: &str) -> Stdio_ {
        let mut child = Command::new(troupe_bin())
            .arg("-C")
            .arg(p.root())
            .args(["mcp", "serve", "--role", "developer", "--agent", agent])
            .env_remove("TROUPE_GATEWAY_TOKEN_FILE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout: BufReader<ChildStdout> = BufReader::new(child.stdout.take().unwrap());
        let (send, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Stdio_ { child, stdin, answers };
        let init = s.request(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        s.send_line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string().as_bytes());
        s
    }

    fn send_line(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message from the gateway; silence for 30 s (a loaded machine) fails the test.
    fn answer(&mut self) -> Value {
        let line = self
            .answers
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the gateway did not answer (or closed its output)");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn request(&mut self, message: &Value) -> Value {
        self.send_line(message.to_string().as_bytes());
        self.answer()
    }

    fn call(&mut self, id: u64, tool: &str) -> Value {
        self.request(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}))
    }
}

impl Drop for Stdio_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn result_text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// `troupe mcp serve --http ADDR` for `agent`: the process, its URL's address and the token it printed.
fn http_gateway(p: &TestProject, agent: &str, addr: &str) -> (Child, SocketAddr, Option<String>) {
    let mut child = Command::new(troupe_bin())
        .arg("-C")
        .arg(p.root())
        .args(["--json", "mcp", "serve", "--role", "developer", "--agent", agent, "--http", addr])
        .env_remove("TROUPE_GATEWAY_TOKEN_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    // `--json` prints one pretty document: read up to its closing brace.
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "no address printed: {text}");
        text.push_str(&line);
        if line.starts_with('}') {
            break;
        }
    }
    let doc: Value = serde_json::from_str(&text).unwrap();
    let url = doc["url"].as_str().unwrap();
    let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap();
    (child, addr, doc["token"].as_str().map(str::to_string))
}

/// One HTTP/1.1 POST to `/mcp`: (status, body).
fn post(addr: SocketAddr, token: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before reading a huge body: a reset write is fine.
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn initialize() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
    .into_bytes()
}

/// This machine's address on its default route, for a client that does not
/// come over loopback; loopback when there is no such interface.
fn outside_address() -> std::net::IpAddr {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // Connecting a UDP socket sends nothing: it only picks the route.
    match probe.connect("192.0.2.1:9").and_then(|()| probe.local_addr()) {
        Ok(a) if !a.ip().is_unspecified() => a.ip(),
        _ => "127.0.0.1".parse().unwrap(),
    }
}

#[test]
fn http_requires_the_agents_own_token_on_and_off_loopback() {
    let p = project(1000);
    let (mut a, a_addr, a_token) = http_gateway(&p, "builder-a", "127.0.0.1:0");
    let a_token = a_token.expect("a token minted for an agent that had none");
    let (status, body) = post(a_addr, None, &initialize());
    assert_eq!(status, 401, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], -32600, "{body}");
    assert_eq!(post(a_addr, Some("not-the-token"), &initialize()).0, 401);
    let (status, body) = post(a_addr, Some(&a_token), &initialize());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("serverInfo"), "{body}");

    // Off loopback: bound on every interface, reached at this machine's own address.
    let (mut b, b_addr, b_token) = http_gateway(&p, "builder-b", "0.0.0.0:0");
    let b_token = b_token.unwrap();
    let outside = SocketAddr::new(outside_address(), b_addr.port());
    assert_eq!(post(outside, None, &initialize()).0, 401);
    // Agent A's token cannot act as B.
    assert_eq!(post(outside, Some(&a_token), &initialize()).0, 401);
    let (status, body) = post(outside, Some(&b_token), &initialize());
    assert_eq!(status, 200, "{body}");

    // A second gateway for A does not mint again: A's token is required to serve it.
    let out = p
        .troupe()
        .args(["mcp", "serve", "--role", "developer", "--agent", "builder-a", "--http", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("agent \"builder-a\" has a gateway token, and none was given"), "{stderr}");
    // Nor over stdio: a token of A's (in a private file) is needed to speak as A.
    let file = p.path("a.token");
    std::fs::write(&file, &b_token).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = p
        .troupe()
        .args(["mcp", "serve", "--role", "developer", "--agent", "builder-a", "--token-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not agent \"builder-a\"'s"));
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = p
        .troupe()
        .args(["mcp", "serve", "--role", "developer", "--agent", "builder-b", "--token-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("can be read by other users"));
    for child in [&mut a, &mut b] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn two_gateway_processes_of_one_agent_share_one_budget() {
    let p = project(3);
    let mut first = Stdio_::start(&p, "builder-7");
    for id in 1..=2 {
        let answer = first.call(id, "troupe__get_context");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    // The second process starts with the calls the first one made.
    let mut second = Stdio_::start(&p, "builder-7");
    let answer = second.call(1, "set_role");
    assert!(!result_text(&answer).contains("rate limit"), "{answer}");
    let answer = second.call(2, "troupe__get_context");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(result_text(&answer).contains("rate limit of role \"developer\" reached: 3 calls per minute"), "{answer}");
    let answer = first.call(3, "troupe__get_context");
    assert!(result_text(&answer).contains("rate limit"), "{answer}");
    // Another agent has its own budget.
    let mut other = Stdio_::start(&p, "builder-8");
    assert_eq!(other.call(1, "troupe__get_context")["result"]["isError"], false);
}

#[test]
fn every_malformed_message_over_stdio_gets_an_answer() {
    let p = project(1000);
    let mut g = Stdio_::start(&p, "fuzz-1");
    let expect = |g: &mut Stdio_, line: &[u8], code: i64, id: Value| {
        g.send_line(line);
        let answer = g.answer();
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert_eq!(answer["id"], id, "{answer}");
    };
    expect(&mut g, b"this is not json", -32700, Value::Null);
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    expect(&mut g, deep.as_bytes(), -32700, Value::Null);
    let huge = format!(r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"x":"{}"}}}}"#, "a".repeat(17_000_000));
    expect(&mut g, huge.as_bytes(), -32700, Value::Null);
    expect(&mut g, br#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#, -32600, Value::Null);
    expect(&mut g, br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":42}}"#, -32602, json!(7));
    // The session is still up and serving.
    let answer = g.call(8, "troupe__get_context");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

#[test]
fn every_malformed_message_over_http_gets_an_answer() {
    let p = project(1000);
    let (mut child, addr, token) = http_gateway(&p, "fuzz-2", "127.0.0.1:0");
    let token = token.unwrap();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let huge = vec![b'['; 17_000_000];
    for (body, status, code) in [
        (&b"not json"[..], 400, -32700),
        (deep.as_bytes(), 400, -32700),
        (&huge[..], 413, -32700),
        (br#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#, 400, -32600),
        (br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":42}}"#, 200, -32602),
    ] {
        let (got, text) = post(addr, Some(&token), body);
        assert_eq!(got, status, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(answer["error"]["code"], code, "{answer}");
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn agent_chosen_text_reaches_the_operator_escaped() {
    let p = project(1000);
    let evil = "evil\x1b[2J\nforged line";
    {
        // A denied call (a tool of no role) puts the agent's name in the audit log.
        let mut g = Stdio_::start(&p, evil);
        assert_eq!(g.call(1, "everything__echo")["result"]["isError"], true);
        let mut g = Stdio_::start(&p, "=HYPERLINK(\"http://x\")");
        assert_eq!(g.call(1, "everything__echo")["result"]["isError"], true);
    }
    for args in [&["audit", "denials"][..], &["audit", "stats"]] {
        let out = p.troupe().args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{text}");
        assert!(!text.contains('\x1b'), "{args:?}: {text:?}");
        assert!(text.contains("evil\\u{1b}[2J\\nforged line"), "{args:?}: {text}");
        assert!(!text.lines().any(|l| l.starts_with("forged line")), "{args:?}: {text}");
    }
    let csv = p.troupe().args(["audit", "export", "--format", "csv"]).output().unwrap();
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.contains(r#","'=HYPERLINK(""http://x"")","#), "{csv}");
    assert!(!csv.contains(",=HYPERLINK"), "{csv}");

    // The board and the mailbox print agents' words the same way.
    p.troupe().args(["board", "create", "fix it\x1b]0;owned\x07\nforged task"]).assert().success();
    let list = p.troupe().args(["board", "list"]).output().unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(!list.contains('\x1b') && !list.contains('\x07') && list.lines().count() == 2, "{list:?}"); // header and one row
    p.troupe()
        .args(["msg", "send", "lead", "done\r\n*999    p5 text  lead  forged", "--from", "x\x1b[31m"])
        .assert()
        .success();
    let inbox = p.troupe().args(["msg", "inbox", "--agent", "lead"]).output().unwrap();
    let inbox = String::from_utf8(inbox.stdout).unwrap();
    assert!(!inbox.contains('\x1b') && inbox.lines().count() == 2, "{inbox:?}"); // header and one row
    // The table folds the body's white space (a forged line break included) into one line.
    assert!(inbox.contains("x\\u{1b}[31m") && inbox.contains("done *999"), "{inbox}");
}

/// A teammate's token, read out of its environment by another process of the
/// same user, serves no gateway but one its own engine started: the registry
/// knows the pid troupe started for the agent, and the gateway must descend
/// from it.
#[test]
fn a_teammates_token_serves_only_a_gateway_beneath_that_teammate() {
    use troupe_store::{GatewayAccess, NewAgent, Registry};
    let p = project(600);
    let store = crate::a2a::store(&p);
    let token = troupe_store::token::mint().unwrap();
    let serve = |agent: &str| {
        Command::new(troupe_bin())
            .arg("-C")
            .arg(p.root())
            .args(["mcp", "serve", "--role", "developer", "--agent", agent])
            .env_remove("TROUPE_GATEWAY_TOKEN_FILE")
            .env("TROUPE_GATEWAY_TOKEN", &token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The victim: a teammate process this test did not start the gateway under.
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let mut agent = NewAgent::new("builder-v", "developer", "claude");
    agent.pid = Some(victim.id());
    store.register(agent).unwrap();
    store.set_gateway_token("builder-v", &troupe_store::token::hash(&token)).unwrap();
    let thief = serve("builder-v").wait_with_output().unwrap();
    let _ = victim.kill();
    let _ = victim.wait();
    let err = String::from_utf8_lossy(&thief.stderr);
    assert!(!thief.status.success(), "{err}");
    assert!(err.contains("was not started by agent \"builder-v\""), "{err}");

    // The same token beneath the agent's own process (this test, the gateway's parent) is served.
    let mut agent = NewAgent::new("builder-o", "developer", "claude");
    agent.pid = Some(std::process::id());
    store.register(agent).unwrap();
    store.set_gateway_token("builder-o", &troupe_store::token::hash(&token)).unwrap();
    let mut own = serve("builder-o");
    let mut stdin = own.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let mut line = String::new();
    BufReader::new(own.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _ = own.kill();
    let _ = own.wait();
    assert!(line.contains("serverInfo"), "{line}");
}
