//! `troupe team` (seed 003 B6) and messages that reach live agents, with the
//! real `tmux` binary and the real interactive Claude Code, Gemini CLI and
//! Codex against the testkit's stub model APIs.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use troupe_core::layout::Layout;
use troupe_core::tools::{LOCK_FILE, McpNaming, RESPOND_SHUTDOWN, UNLOCK_FILE, engine_tool_name};
use troupe_store::sqlite::locks::kind as lock_kind;
use troupe_store::{EventLog, FileLocks, GatewayAccess, Mailbox, Registry, SqliteStore};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::codex::Codex;
use troupe_testkit::gemini::GeminiStub;
use troupe_testkit::gemini_cli::GeminiCli;
use troupe_testkit::responses::ResponsesStub;
use troupe_testkit::{Conversation, Responder, Turn, peers};

use crate::support::{TestProject, json, offered};

/// A `troupe` command for team tests: never inside the tmux of whoever runs the tests.
fn troupe(p: &TestProject) -> assert_cmd::Command {
    let mut cmd = p.troupe();
    cmd.env_remove("TMUX").env_remove("TMUX_PANE").timeout(Duration::from_secs(180));
    cmd
}

/// `text` added to config.toml, and the `[shutdown]` timeout set to `shutdown_ms`.
fn configure(p: &TestProject, text: &str, shutdown_ms: u64) {
    let path = p.path(".troupe/config.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let config = config.replacen("[shutdown]\n", &format!("[shutdown]\ntimeout_ms = {shutdown_ms}\n"), 1);
    std::fs::write(path, format!("{config}{text}")).unwrap();
}

fn tmux(socket: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("tmux").args(["-L", socket]).args(args).env_remove("TMUX").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// (pane id, left, top, width, height) of every pane on `socket`.
fn panes(socket: &str) -> Vec<(String, u32, u32, u32, u32)> {
    let out =
        tmux(socket, &["list-panes", "-a", "-F", "#{pane_id} #{pane_left} #{pane_top} #{pane_width} #{pane_height}"])
            .unwrap_or_default();
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let n = |i: usize| f[i].parse::<u32>().unwrap();
            (f[0].to_string(), n(1), n(2), n(3), n(4))
        })
        .collect()
}

/// The processes in the session of each team pane, by pane process (a
/// pane's process leads its session).
fn team_sessions(p: &TestProject) -> std::collections::BTreeMap<u32, BTreeSet<u32>> {
    let team = json(&troupe(p).args(["--json", "team", "list"]).output().unwrap());
    let mut sessions: std::collections::BTreeMap<u32, BTreeSet<u32>> = team
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["member"]["pid"].as_u64().unwrap() as u32, BTreeSet::new()))
        .collect();
    for pid in std::fs::read_dir("/proc").unwrap().flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        if let Some(session) = fields.get(3).and_then(|s| s.parse::<u32>().ok()).and_then(|sid| sessions.get_mut(&sid))
        {
            session.insert(pid);
        }
    }
    sessions
}

/// Every process in the session of each team pane.
fn team_processes(p: &TestProject) -> BTreeSet<u32> {
    team_sessions(p).into_values().flatten().collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
}

/// troupe's tmux server of a test: on a failure, every pane's screen is
/// printed and the server killed, so a failed test leaves no agent running.
struct Server(String);

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (pane, ..) in panes(&self.0) {
                let screen = tmux(&self.0, &["capture-pane", "-p", "-t", &pane]).unwrap_or_default();
                eprintln!("--- pane {pane} ---\n{}", screen.trim_end());
            }
        }
        let _ = tmux(&self.0, &["kill-server"]);
    }
}

/// `team stop` leaves no pane on troupe's socket and no process of the team, within 10 s.
fn stop_leaves_nothing(p: &TestProject, socket: &str, args: &[&str]) {
    let processes = team_processes(p);
    assert!(!processes.is_empty());
    let started = Instant::now();
    let out = troupe(p).args(["team", "stop"]).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(panes(socket).is_empty(), "no pane is left");
    let left: Vec<u32> = processes.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "processes left: {left:?}");
    // Nor the sandbox's temporary folders of the panes' agents (`troupe-<agent>-<pane's pid>`).
    let folders: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("troupe-") && processes.iter().any(|pid| n.ends_with(&format!("-{pid}"))))
        .collect();
    assert!(folders.is_empty(), "temporary folders left: {folders:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    eprintln!("team stop {args:?}: {} processes, {:.1} s", processes.len(), started.elapsed().as_secs_f64());
    assert_eq!(json(&troupe(p).args(["--json", "team", "list"]).output().unwrap()), serde_json::json!([]));
}

fn start(p: &TestProject, args: &[&str], env: &[(OsString, OsString)]) -> Value {
    let out = troupe(p).args(["--json", "team", "start"]).args(args).envs(env.iter().cloned()).output().unwrap();
    assert!(out.status.success(), "team start: {}", String::from_utf8_lossy(&out.stderr));
    json(&out)
}

/// Three panes on `socket` arranged as `layout` says, `first` the coordinator's.
fn assert_layout(layout: &str, socket: &str, first: &str) {
    let all = panes(socket);
    assert_eq!(all.len(), 3, "{layout}: {all:?}");
    let first = all.iter().find(|(id, ..)| id == first).unwrap();
    let tops: BTreeSet<u32> = all.iter().map(|p| p.2).collect();
    let lefts: BTreeSet<u32> = all.iter().map(|p| p.1).collect();
    match layout {
        // The coordinator full height on the left, the others stacked beside it.
        "split" => assert!(first.1 == 0 && first.4 == 60 && all.iter().all(|p| p == first || p.1 > 0), "{all:?}"),
        "horizontal" => assert!(tops.len() == 1 && lefts.len() == 3 && all.iter().all(|p| p.4 == 60), "{all:?}"),
        "vertical" => assert!(lefts.len() == 1 && tops.len() == 3 && all.iter().all(|p| p.3 == 240), "{all:?}"),
        _ => assert!(tops.len() == 2 && lefts.len() == 2, "{all:?}"),
    }
}

#[test]
fn every_layout_fits_sixteen_panes_fit_and_stop_leaves_nothing() {
    let p = TestProject::new();
    configure(&p, "\n[engines.custom.sleeper]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"sleep 600\", \"sh\"]\n", 600);
    for layout in ["split", "horizontal", "vertical", "tiled"] {
        let team = start(&p, &["sleeper", "sleeper", "sleeper", "--layout", layout, "--coordinator", "sleeper-2"], &[]);
        let socket = team["socket"]["name"].as_str().unwrap().to_string();
        let _server = Server(socket.clone());
        let agents = team["agents"].as_array().unwrap();
        assert_eq!(agents.len(), 3);
        let coordinator = agents.iter().find(|a| a["agent"] == "sleeper-2").unwrap();
        assert_eq!(coordinator["role"], "coordinator");
        assert_layout(layout, &socket, coordinator["pane"].as_str().unwrap());
        stop_leaves_nothing(&p, &socket, &[]);
    }
    // 16 panes in a detached session: each one made, each one registered.
    // Half of them ignore SIGINT and SIGTERM, and `[shutdown]` is the default
    // (30 s): the graceful stop asks all 16 at once and escalates to SIGKILL
    // in time for the 10 s.
    let config = p.path(".troupe/config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replacen("timeout_ms = 600\n", "", 1);
    std::fs::write(&config, format!("{text}\n[engines.custom.stubborn]\ncommand = \"/bin/sh\"\n{STUBBORN}\n")).unwrap();
    let sixteen: Vec<&str> = ["sleeper", "stubborn"].into_iter().cycle().take(16).collect();
    let team = start(&p, &sixteen, &[]);
    let socket = team["socket"]["name"].as_str().unwrap().to_string();
    let _server = Server(socket.clone());
    assert_eq!(team["agents"].as_array().unwrap().len(), 16);
    assert_eq!(panes(&socket).len(), 16);
    let list = json(&troupe(&p).args(["--json", "team", "list"]).output().unwrap());
    assert!(list.as_array().unwrap().iter().all(|m| m["status"] == "READY" && m["alive"] == true), "{list}");
    // Every stubborn agent has set its traps (its `sleep` runs) before the stop.
    let until = Instant::now() + Duration::from_secs(30);
    let sleeping = || {
        let comm = |pid: &u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        team_processes(&p).iter().filter(|pid| comm(pid).trim() == "sleep").count()
    };
    while sleeping() < 16 {
        assert!(Instant::now() < until, "an agent never started: {:?}", team_sessions(&p));
        std::thread::sleep(Duration::from_millis(50));
    }
    stop_leaves_nothing(&p, &socket, &[]);
}

/// An agent that ignores SIGINT, SIGTERM and SIGHUP (its `sleep` inherits that): only SIGKILL ends it.
const STUBBORN: &str = r#"args = ["-c", "trap '' INT TERM HUP; sleep 600; true", "sh"]"#;

/// `--role NAME=ROLE` takes the roles `agent run --role` takes: a role the
/// project's skills define runs as itself (registry, member, the agent's
/// `TROUPE_ROLE`), and a typo is refused before any pane is made, with the
/// role meant.
#[test]
fn a_team_agent_takes_a_role_the_skills_define() {
    let p = TestProject::new();
    configure(&p, "\n[engines.custom.sleeper]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"sleep 600\", \"sh\"]\n", 600);
    crate::talk::skill(
        &p,
        "mentoring",
        "allowedRoles: [mentor]\nallowedTools: [builtin__read]",
        "Explain, never edit.",
    );
    let typo = troupe(&p).args(["team", "start", "sleeper", "--role", "sleeper=mentr"]).output().unwrap();
    assert_eq!(typo.status.code(), Some(2), "{typo:?}");
    let err = String::from_utf8_lossy(&typo.stderr);
    assert!(err.contains("unknown role 'mentr' (did you mean 'mentor'?) for sleeper"), "{err}");
    assert!(err.contains("; of the skills: adhoc, mentor, orchestrator"), "{err}");
    assert!(!Layout::new(p.root()).state_dir().join("team").exists(), "no pane was made");

    let team = start(&p, &["sleeper", "sleeper", "--role", "sleeper=mentor"], &[]);
    let socket = team["socket"]["name"].as_str().unwrap().to_string();
    let _server = Server(socket.clone());
    let roles: Vec<(&str, &str)> = team["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["agent"].as_str().unwrap(), a["role"].as_str().unwrap()))
        .collect();
    assert_eq!(roles, [("sleeper", "mentor"), ("sleeper-2", "builder")]);
    assert_eq!(store(&p).agent("sleeper").unwrap().role, "mentor");
    // The agent itself runs as the skill role: its hooks and gateway read TROUPE_ROLE.
    let pane = team["agents"][0]["pid"].as_u64().unwrap() as u32;
    let until = Instant::now() + Duration::from_secs(30);
    let env = loop {
        // Of the pane's children (the agent, the guardian of its sandbox's
        // folder), the agent is the one with a TROUPE_ROLE, once it has
        // executed (between fork and exec it shows the pane's environment).
        let children = std::fs::read_to_string(format!("/proc/{pane}/task/{pane}/children")).unwrap_or_default();
        let agent = children.split_whitespace().find_map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            env.split(|b| *b == 0).any(|kv| kv.starts_with(b"TROUPE_ROLE=")).then_some(env)
        });
        if let Some(env) = agent {
            break env;
        }
        assert!(Instant::now() < until, "the pane never started its agent");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(env.split(|b| *b == 0).any(|kv| kv == b"TROUPE_ROLE=mentor"), "{}", String::from_utf8_lossy(&env));
    stop_leaves_nothing(&p, &socket, &["--force"]);
}

/// A model that answers every prompt with one line. Armed to hold, its next
/// turn waits until the test releases it, so its agent is at work for as long
/// as the test needs; armed to wait, its next turn runs a shell command that
/// waits until the test makes the file `go`, so its agent is inside a tool call.
struct Live {
    hold_armed: AtomicBool,
    released: AtomicBool,
    wait_armed: AtomicBool,
    go: std::path::PathBuf,
    /// Once armed: the next turn answers the agent's latest shutdown request
    /// (database, agent, approve, reason), as `respond_shutdown` takes it.
    shutdown: std::sync::Mutex<Option<(std::path::PathBuf, String, bool, String)>>,
    /// Once armed: the next turns, one each.
    steps: std::sync::Mutex<std::collections::VecDeque<Step>>,
}

/// One turn of a model's armed steps, from the request it answers.
type Step = Box<dyn FnOnce(&Conversation) -> Turn + Send>;

/// Model turns held together: each waits in [`Gate::pass`] until the test
/// opens the gate, which it does once all it expects are waiting.
#[derive(Default)]
struct Gate {
    waiting: AtomicUsize,
    open: AtomicBool,
}

impl Gate {
    /// Waits until the gate opens (at most 3 minutes, so that a failed test still ends).
    fn pass(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(180);
        while !self.open.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Opens the gate once `n` turns wait in it.
    fn open_when(&self, n: usize) {
        let until = Instant::now() + Duration::from_secs(60);
        while self.waiting.load(Ordering::SeqCst) < n {
            assert!(
                Instant::now() < until,
                "{} of {n} model turns reached the gate",
                self.waiting.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.open.store(true, Ordering::SeqCst);
    }
}

/// Troupe tool `tool` as `agent`'s engine names it, which the request must offer.
fn gateway_tool(c: &Conversation, agent: &str, tool: &str) -> String {
    let name = engine_tool_name(McpNaming::of_engine(agent), tool);
    assert!(c.tools.contains(&name), "{agent} is not offered {name}: {:?}", c.tools);
    name
}

/// The message that the armed model answers with the waiting command.
const WAIT_FOR_GO: &str = "wait for the go file";

impl Responder for Live {
    fn respond(&self, c: &Conversation) -> Turn {
        // Armed rather than read from the prompt: a delivered message reaches
        // a CLI as a hook's added context, which the stub's prompt may not hold.
        let step = self.steps.lock().unwrap().pop_front();
        if let Some(step) = step {
            return step(c);
        }
        if self.hold_armed.swap(false, Ordering::SeqCst) {
            // A model that takes its time: it answers once the test releases
            // it (at most 3 minutes, so that a failed test still ends).
            let until = Instant::now() + Duration::from_secs(180);
            while !self.released.swap(false, Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            return Turn::text("working");
        }
        if let Some((db, agent, approve, reason)) = self.shutdown.lock().unwrap().take() {
            let inbox = SqliteStore::open(&db).unwrap().inbox(&agent, false).unwrap();
            let request = inbox.iter().rev().find(|m| m.kind == troupe_store::MessageKind::ShutdownRequest).unwrap();
            return Turn::tool(
                gateway_tool(c, &agent, RESPOND_SHUTDOWN),
                serde_json::json!({"request_id": request.id, "approve": approve, "reason": reason}),
            );
        }
        if self.wait_armed.swap(false, Ordering::SeqCst) {
            let wait = format!("while [ ! -e {} ]; do sleep 0.1; done", self.go.display());
            let offered = |t: &str| c.tools.iter().any(|o| o == t);
            // Each CLI's own shell tool: Claude Code's; Codex's, which its
            // interactive session offers a model only through the JavaScript
            // of its `exec` tool; Gemini CLI's.
            return if offered("Bash") {
                Turn::tool("Bash", serde_json::json!({"command": wait, "description": "wait"}))
            } else if offered("exec") {
                let cmd = serde_json::json!({"cmd": wait, "yield_time_ms": 30000});
                Turn::freeform_tool("exec", format!("const r = await tools.exec_command({cmd});\ntext(r.output);"))
            } else {
                Turn::tool("run_shell_command", serde_json::json!({"command": wait}))
            };
        }
        Turn::text("ok")
    }
}

fn live(go: &std::path::Path) -> Arc<Live> {
    Arc::new(Live {
        hold_armed: AtomicBool::new(false),
        released: AtomicBool::new(false),
        wait_armed: AtomicBool::new(false),
        go: go.to_path_buf(),
        shutdown: std::sync::Mutex::new(None),
        steps: std::sync::Mutex::new(std::collections::VecDeque::new()),
    })
}

fn store(p: &TestProject) -> SqliteStore {
    SqliteStore::open(&Layout::new(p.root()).database_file()).unwrap()
}

/// Waits until `agent` sits at its prompt (the registry's status, kept by its hooks).
fn wait_ready(p: &TestProject, agent: &str, seen: &dyn Fn() -> usize) {
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = store(p).agent(agent).is_ok_and(|a| a.status.as_str() == "READY");
        if ready && seen() > 0 {
            return;
        }
        assert!(Instant::now() < until, "{agent} never went idle after its first prompt");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn send(p: &TestProject, to: &str, text: &str) -> Value {
    let out = troupe(p).args(["--json", "msg", "send", to, text, "--priority", "4"]).output().unwrap();
    assert!(out.status.success(), "msg send: {}", String::from_utf8_lossy(&out.stderr));
    json(&out)[0].clone()
}

/// The team of the real-CLI tests, one agent per CLI.
const AGENTS: [&str; 3] = ["claude", "gemini", "codex"];

fn said(requests: &[Value], text: &str) -> bool {
    requests.iter().any(|r| r.to_string().contains(text))
}

/// The three stubs, their CLIs' scratch homes, and the environment that points
/// the CLIs at the stubs (one HOME: Claude's, with Gemini's settings in it;
/// Codex reads CODEX_HOME).
struct Peers {
    claude_api: AnthropicStub,
    gemini_api: GeminiStub,
    codex_api: ResponsesStub,
    _homes: (Claude, GeminiCli, Codex),
    env: Vec<(OsString, OsString)>,
    /// Each agent's model, to arm.
    models: [(&'static str, Arc<Live>); 3],
    /// Outside the project: the post-run check would take the test's file for the agent's write.
    _scratch: tempfile::TempDir,
}

impl Peers {
    fn new(p: &TestProject) -> Peers {
        let scratch = tempfile::tempdir().unwrap();
        let models = ["claude", "gemini", "codex"].map(|a| (a, live(&scratch.path().join(format!("go-{a}")))));
        let (claude_api, gemini_api, codex_api) = (
            AnthropicStub::with_responder(models[0].1.clone()),
            GeminiStub::with_responder(models[1].1.clone()),
            ResponsesStub::with_responder(models[2].1.clone()),
        );
        let claude = Claude::new(&claude_api.url());
        claude.ready_for_tui();
        let gemini = GeminiCli::new(&gemini_api.url());
        let codex = Codex::new(&codex_api.url());
        std::fs::create_dir_all(claude.home().join(".gemini")).unwrap();
        std::fs::copy(gemini.home().join(".gemini/settings.json"), claude.home().join(".gemini/settings.json"))
            .unwrap();
        let mut env = claude.env();
        env.extend(gemini.env().into_iter().filter(|(k, _)| k != "HOME"));
        env.extend(codex.env().into_iter().filter(|(k, _)| k != "HOME"));
        env.push(("TERM".into(), "xterm-256color".into()));
        configure(
            p,
            &format!(
                // Codex's TUI offers a newer model first to a session of an older one.
                "\n[engines.commands]\nclaude = \"{}\"\ngemini = \"{}\"\ncodex = \"{}\"\n\
                 \n[engines.models.codex]\nt2 = \"gpt-6.1-sol\"\nt3 = \"gpt-6.1-sol\"\n",
                peers::bin("claude").display(),
                peers::bin("gemini").display(),
                peers::bin("codex").display()
            ),
            2000,
        );
        Peers { claude_api, gemini_api, codex_api, _homes: (claude, gemini, codex), env, models, _scratch: scratch }
    }

    fn model(&self, agent: &str) -> &Live {
        &self.models.iter().find(|(a, _)| *a == agent).unwrap().1
    }

    /// The index of `agent`'s first model request that says `text`, once there is one.
    fn first_request_with(&self, agent: &str, text: &str) -> usize {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(i) = self.requests(agent).iter().position(|r| r.to_string().contains(text)) {
                return i;
            }
            assert!(Instant::now() < until, "{agent}'s model never saw {text:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn requests(&self, agent: &str) -> Vec<Value> {
        match agent {
            "claude" => self.claude_api.model_requests(),
            "gemini" => self.gemini_api.model_requests(),
            _ => self.codex_api.model_requests(),
        }
    }

    /// `team start claude gemini codex`, each agent idle after its first prompt.
    fn start_team(&self, p: &TestProject) -> Server {
        // No coordinator: each runs shell commands (a coordinator may not).
        // In a role of the project's skills that may write any file (a
        // Builder writes only its task group's): plan mode, file locks.
        let roles = ["--role", "claude=planner", "--role", "gemini=planner", "--role", "codex=planner"];
        let team = start(p, &[&AGENTS[..], &roles].concat(), &self.env);
        let socket = Server(team["socket"]["name"].as_str().unwrap().to_string());
        assert_layout("split", &socket.0, team["agents"][0]["pane"].as_str().unwrap());
        for agent in AGENTS {
            wait_ready(p, agent, &|| self.requests(agent).len());
            let first = format!("You are {agent}, one agent of a live team");
            assert!(said(&self.requests(agent), &first), "{agent}'s first prompt");
        }
        socket
    }

    /// Sends `agent` a message while it is idle: one notice wakes it, its
    /// prompt hook hands it the message, its model sees it.
    fn idle_message(&self, p: &TestProject, agent: &str, text: &str) -> u64 {
        let sent = send(p, agent, text);
        let pastes = sent["wake"]["delivered"].as_u64();
        assert!(pastes.is_some_and(|n| n >= 1), "{agent}: {sent}");
        assert!(store(p).message(sent["id"].as_i64().unwrap()).unwrap().read_at.is_some());
        let until = Instant::now() + Duration::from_secs(60);
        while !said(&self.requests(agent), text) {
            assert!(Instant::now() < until, "{agent}'s model never saw {text:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_ready(p, agent, &|| 1);
        pastes.unwrap()
    }

    /// Sends `agent` a message while it is inside a tool call (a shell command
    /// that waits for its `go` file): no notice is pasted, and the message comes
    /// with the tool's result, in the model request right after the call.
    fn tool_call_message(&self, p: &TestProject, agent: &str) {
        wait_ready(p, agent, &|| 1);
        self.model(agent).wait_armed.store(true, Ordering::SeqCst);
        let wait = format!("{WAIT_FOR_GO}, {agent}");
        send(p, agent, &wait);
        // Its model answers this request with the waiting command.
        let called = self.first_request_with(agent, &wait);
        let note = format!("note for {agent} during a tool call");
        let during = send(p, agent, &note);
        assert_eq!(during["wake"], "busy", "{agent}: {during}");
        std::fs::write(self.model(agent).go.as_path(), "").unwrap();
        let seen = self.first_request_with(agent, &note);
        assert_eq!(seen, called + 1, "{agent}: {:#}", self.requests(agent)[seen]);
        wait_ready(p, agent, &|| 1);
    }

    /// Plan mode (seed 003 B3) in a pane: Claude, sent a `--plan-mode`
    /// message, tries to write (its hook refuses: plan mode), submits its plan
    /// with the gateway tool and waits; once a person approves, the write goes
    /// through.
    fn plan_mode(&self, p: &TestProject) {
        wait_ready(p, "claude", &|| 1);
        let file = p.path("data/plan.json");
        let write = {
            let file = file.display().to_string();
            move |_: &Conversation| Turn::tool("Write", serde_json::json!({"file_path": file, "content": "{}\n"}))
        };
        let submit = |c: &Conversation| {
            let plan = serde_json::json!({"plan": "1. write data/plan.json", "wait_seconds": 120});
            Turn::tool(offered(c, "troupe__request_plan_approval"), plan)
        };
        let steps: [Step; 4] = [
            Box::new(write.clone()),
            Box::new(submit),
            Box::new(write),
            Box::new(|_: &Conversation| Turn::text("done")),
        ];
        self.model("claude").steps.lock().unwrap().extend(steps);
        let out = troupe(p).args(["--json", "msg", "send", "claude", "Write data/plan.json", "--plan-mode"]).output();
        assert!(out.unwrap().status.success());
        let until = Instant::now() + Duration::from_secs(60);
        let plan = loop {
            let list = json(&troupe(p).args(["--json", "approve", "--list"]).output().unwrap());
            if let Some(plan) = list.as_array().unwrap().iter().find(|m| m["from"] == "claude") {
                break plan["id"].to_string();
            }
            assert!(Instant::now() < until, "claude never submitted a plan");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(!file.exists(), "nothing is written before the plan is approved");
        assert!(said(&self.requests("claude"), "plan mode: submit your plan with request_plan_approval"));
        troupe(p).args(["approve", &plan]).assert().success();
        let until = Instant::now() + Duration::from_secs(60);
        while !file.exists() {
            assert!(Instant::now() < until, "the approved write never came");
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_ready(p, "claude", &|| 1);
    }

    /// A file Claude locked: Gemini CLI's and Codex's writes to it are refused
    /// by their hooks, with who holds it (Codex's patch goes through the
    /// JavaScript of its `exec` tool, as its interactive session offers it).
    fn locked_write(&self, p: &TestProject) {
        troupe(p).args(["lock", "data/locked.json", "--agent", "claude"]).assert().success();
        let file = p.path("data/locked.json");
        let path = file.display().to_string();
        let gemini: [Step; 2] = [
            Box::new(move |_: &Conversation| {
                Turn::tool("write_file", serde_json::json!({"file_path": path, "content": "{}\n"}))
            }),
            Box::new(|_: &Conversation| Turn::text("done")),
        ];
        let patch = troupe_testkit::codex::add_file_patch("data/locked.json", "{}");
        let codex: [Step; 2] = [
            Box::new(move |_: &Conversation| {
                Turn::freeform_tool(
                    "exec",
                    format!("const r = await tools.apply_patch({});\ntext(r);", serde_json::json!(patch)),
                )
            }),
            Box::new(|_: &Conversation| Turn::text("done")),
        ];
        self.model("gemini").steps.lock().unwrap().extend(gemini);
        self.model("codex").steps.lock().unwrap().extend(codex);
        for agent in ["gemini", "codex"] {
            let note = format!("write data/locked.json, {agent}");
            send(p, agent, &note);
            let refused = "troupe file lock: data/locked.json is locked by claude since ";
            let until = Instant::now() + Duration::from_secs(60);
            while !said(&self.requests(agent), refused) {
                assert!(Instant::now() < until, "{agent} was never refused");
                std::thread::sleep(Duration::from_millis(50));
            }
            wait_ready(p, agent, &|| 1);
            assert!(!file.exists(), "{agent} wrote a file claude locked");
        }
        troupe(p).args(["unlock", "data/locked.json", "--agent", "claude"]).assert().success();
    }

    /// Claude Code and Gemini CLI call the gateway's `lock_file` on one file
    /// at the same moment: both models' turns are held until both requests
    /// are in, then answered together. Exactly one holds the lock (the store's
    /// lock and its events), the other's call is refused naming the holder
    /// (its model's next request carries that result); then the holder, as
    /// its result told it, unlocks.
    fn lock_race(&self, p: &TestProject) {
        const RACED: &str = "data/race.json";
        let (racers, started) = (["claude", "gemini"], Instant::now());
        let mark = store(p).last_event_id().unwrap();
        // Held twice: until both lock calls are made, and until both results are in.
        let (call, result) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        for agent in racers {
            let (call, result, locked) = (call.clone(), result.clone(), format!(r#""locked":"{RACED}""#));
            let steps: [Step; 2] = [
                Box::new(move |c: &Conversation| {
                    call.pass();
                    Turn::tool(gateway_tool(c, agent, LOCK_FILE), serde_json::json!({"path": RACED}))
                }),
                Box::new(move |c: &Conversation| {
                    result.pass();
                    // Its call's result says whether it holds the lock.
                    if c.results.last().is_some_and(|r| r.contains(&locked)) {
                        Turn::tool(gateway_tool(c, agent, UNLOCK_FILE), serde_json::json!({"path": RACED}))
                    } else {
                        Turn::text("waiting for the lock")
                    }
                }),
            ];
            wait_ready(p, agent, &|| 1);
            self.model(agent).steps.lock().unwrap().extend(steps);
        }
        let notes = racers.map(|agent| format!("lock {RACED}, {agent}"));
        for (agent, note) in racers.iter().zip(&notes) {
            send(p, agent, note);
        }
        call.open_when(racers.len());
        result.open_when(racers.len());
        // Both calls are answered and neither model has gone on: the store holds one lock.
        let locks: Vec<_> = store(p).file_locks().unwrap().into_iter().filter(|l| l.path == RACED).collect();
        assert_eq!(locks.len(), 1, "{locks:?}");
        let holder = locks[0].agent.clone();
        let loser = *racers.iter().find(|a| **a != holder).unwrap_or_else(|| panic!("held by {holder}"));
        let refused = format!("{RACED} is locked by {holder} since ");
        // The lock tool's success, as its result's JSON sits in a request: as
        // an object or inside a text.
        let won = |r: &str| {
            [format!(r#""locked":"{RACED}""#), format!(r#"\"locked\":\"{RACED}\""#)].iter().any(|w| r.contains(w))
        };
        for (agent, note) in racers.iter().zip(&notes) {
            // The request right after the one answered with the lock call carries its result.
            let called = self.first_request_with(agent, note);
            let answered = self.requests(agent)[called + 1].to_string();
            let outcome = (won(&answered), answered.contains(&refused));
            assert_eq!(outcome, (*agent == holder, *agent == loser), "{agent}: {answered}");
        }
        let until = Instant::now() + Duration::from_secs(60);
        while store(p).file_lock(RACED).unwrap().is_some() {
            assert!(Instant::now() < until, "{holder} never unlocked {RACED}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let events: Vec<(String, Option<String>, Value)> = store(p)
            .events_since(mark, 10_000)
            .unwrap()
            .into_iter()
            .filter(|e| e.subject.as_deref() == Some(RACED))
            .map(|e| (e.kind, e.actor, e.data["reason"].clone()))
            .collect();
        let expected = [
            (lock_kind::LOCK_ACQUIRED.to_string(), Some(holder.clone()), Value::Null),
            (lock_kind::LOCK_RELEASED.to_string(), Some(holder.clone()), Value::from("released")),
        ];
        assert_eq!(events, expected);
        for agent in racers {
            wait_ready(p, agent, &|| 1);
        }
        eprintln!("lock race: {holder} won, {loser} refused, in {:.1} s", started.elapsed().as_secs_f64());
    }

    /// Arms Claude's model for delegate mode (seed 003 B5): its next turns,
    /// the first prompt of a coordinator started with `--delegate-mode`, try a
    /// write and then create a board task through the gateway. As Claude Code
    /// tells a model to, one whose gateway is still connecting (its tools not
    /// offered yet: a loaded machine) waits for it with `WaitForMcpServers`
    /// first.
    fn delegate(&self, p: &TestProject) {
        let file = p.path("data/delegated.json").display().to_string();
        let task = serde_json::json!({"summary": "write data/delegated.json", "task_id": "delegated"});
        let waited = std::sync::Arc::new(AtomicBool::new(false));
        let (waits, waited_then) = (waited.clone(), waited);
        let create = move |c: &Conversation| Turn::tool(offered(c, "troupe__board_create"), task);
        let steps: [Step; 4] = [
            Box::new(move |_: &Conversation| {
                Turn::tool("Write", serde_json::json!({"file_path": file, "content": "{}\n"}))
            }),
            Box::new(move |c: &Conversation| {
                let connecting = !c.tools.iter().any(|t| t.ends_with("troupe__board_create"))
                    && c.tools.iter().any(|t| t == "WaitForMcpServers");
                if connecting {
                    eprintln!("claude's gateway is still connecting: the model waits for it");
                    waits.store(true, Ordering::SeqCst);
                    return Turn::tool("WaitForMcpServers", serde_json::json!({}));
                }
                create(c)
            }),
            Box::new(move |c: &Conversation| match waited_then.load(Ordering::SeqCst) {
                true => Turn::tool(offered(c, "troupe__board_create"), {
                    serde_json::json!({"summary": "write data/delegated.json", "task_id": "delegated"})
                }),
                false => Turn::text("delegated"),
            }),
            Box::new(|_: &Conversation| Turn::text("delegated")),
        ];
        self.model("claude").steps.lock().unwrap().extend(steps);
    }

    /// After [`Peers::delegate`]: the coordinator got the delegate
    /// instructions, was refused the write (a coordinator's role policy
    /// refuses it already, and offers it no `lock_file`) and created the task.
    fn delegated(&self, p: &TestProject) {
        let until = Instant::now() + Duration::from_secs(60);
        let task = loop {
            let board = json(&troupe(p).args(["--json", "board", "list"]).output().unwrap());
            if let Some(task) = board.as_array().unwrap().iter().find(|t| t["id"] == "delegated") {
                break task.clone();
            }
            assert!(Instant::now() < until, "claude never created the task");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(task["created_by"], "claude", "{task}");
        assert!(!p.path("data/delegated.json").exists(), "the coordinator's write was refused");
        let requests = self.requests("claude");
        assert!(said(&requests, "Delegate mode: you are the coordinator"), "the delegate instructions");
        assert!(said(&requests, "troupe role policy: Coordinator may not use Write"));
    }

    /// Broadcasts `n` messages to the team: the first to each agent idle (one
    /// notice wakes it, and its model holds that turn), the rest while they
    /// work, each left to their hooks (`"wake": "busy"`, no keystroke); once
    /// released, they reach each model in one request. Counted from what each
    /// model received.
    fn notices(&self, p: &TestProject, n: usize) {
        let started = Instant::now();
        for agent in AGENTS {
            wait_ready(p, agent, &|| 1);
            self.model(agent).hold_armed.store(true, Ordering::SeqCst);
        }
        let texts: Vec<String> = (1..=n).map(|i| format!("notice {i} of {n} to the team.")).collect();
        for (i, text) in texts.iter().enumerate() {
            let out = troupe(p).args(["--json", "msg", "send", "*", text]).output().unwrap();
            assert!(out.status.success(), "msg send: {}", String::from_utf8_lossy(&out.stderr));
            let sent = json(&out);
            let sent: BTreeSet<(String, String)> =
                sent.as_array().unwrap().iter().map(|m| (m["to"].to_string(), m["wake"].to_string())).collect();
            let woken = |agent: &str| {
                let wake = if i == 0 { r#"{"delivered":1}"# } else { r#""busy""# };
                (format!("{agent:?}"), wake.to_string())
            };
            assert_eq!(sent, AGENTS.map(woken).into(), "notice {}", i + 1);
        }
        for agent in AGENTS {
            self.model(agent).released.store(true, Ordering::SeqCst);
        }
        for agent in AGENTS {
            let batch = self.first_request_with(agent, &texts[1]);
            let request = self.requests(agent)[batch].to_string();
            let arrived = texts.iter().filter(|t| said(&self.requests(agent), t)).count();
            let in_batch = texts[1..].iter().filter(|t| request.contains(t.as_str())).count();
            assert_eq!((arrived, in_batch), (n, n - 1), "{agent}: {request}");
            let told = format!("you have {} new messages, most urgent first", n - 1);
            assert!(request.contains(&told), "{agent}: {request}");
            assert!(store(p).inbox(agent, true).unwrap().is_empty(), "{agent}: every message was read");
            wait_ready(p, agent, &|| 1);
        }
        eprintln!("{n}/{n} notices arrived at each of {AGENTS:?} in {:.1} s", started.elapsed().as_secs_f64());
    }
}

#[test]
fn claude_gemini_and_codex_in_panes_take_messages_idle_and_busy() {
    let p = TestProject::new();
    let peers = Peers::new(&p);
    crate::talk::skill(&p, "planning", "allowedRoles: [planner]\nallowedTools: [\"*\"]", "Plan, then build.");
    std::fs::create_dir_all(p.path("data")).unwrap();
    let socket = peers.start_team(&p);
    // Idle: one pasted notice wakes each, and its prompt hook hands it the message.
    for agent in AGENTS {
        peers.idle_message(&p, agent, &format!("idle note for {agent}"));
        assert!(said(&peers.requests(agent), "from user (priority 4)"), "the sender is the store's");
    }

    peers.plan_mode(&p);
    peers.locked_write(&p);
    // Two CLIs racing for one lock through the gateway: exactly one wins.
    peers.lock_race(&p);

    // Inside a tool call: the message comes with the tool's result (PostToolUse's,
    // AfterTool's added context), in the model request right after the call.
    for agent in AGENTS {
        peers.tool_call_message(&p, agent);
    }

    // The issue's 100 notices to each, sent to all three at once: the first
    // wakes each idle agent (one paste), whose model then takes its time; the
    // other 99, sent while they work, are typed at nobody and reach each in
    // one batch through its Stop hook (Gemini's AfterAgent), most urgent first.
    peers.notices(&p, 100);

    // `troupe kill` wakes an idle agent with its request, and the answer decides:
    // a refusal keeps it working, an approval stops it, no answer stops it too.
    let arm = |approve: bool, reason: &str| {
        let db = Layout::new(p.root()).database_file();
        *peers.model("claude").shutdown.lock().unwrap() = Some((db, "claude".into(), approve, reason.into()));
    };
    arm(false, "mid-merge");
    let refused = troupe(&p).args(["kill", "claude"]).output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(err.contains("error: claude refused: mid-merge") && err.contains("hint: troupe kill claude -f"), "{err}");
    wait_ready(&p, "claude", &|| 1);
    arm(true, "");
    let approved = json(&troupe(&p).args(["--json", "kill", "claude"]).output().unwrap());
    assert_eq!((approved["answer"].as_str(), approved["stopped"].as_bool()), (Some("approved"), Some(true)));
    let silent = json(&troupe(&p).args(["--json", "kill", "gemini"]).output().unwrap());
    assert_eq!(silent["answer"], "no answer", "gemini's model never answers a shutdown request: {silent}");
    for pid in [approved["pid"].as_u64().unwrap(), silent["pid"].as_u64().unwrap()] {
        let until = Instant::now() + Duration::from_secs(10);
        while alive(pid as u32) {
            assert!(Instant::now() < until, "{pid} outlived its kill");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    stop_leaves_nothing(&p, &socket.0, &[]);

    // Every other layout with the real CLIs: started, arranged, stopped with
    // nothing left; in the last, Claude a delegating coordinator.
    for layout in ["horizontal", "vertical", "tiled"] {
        let mut args = vec!["claude", "gemini", "codex", "--coordinator", "claude", "--layout", layout];
        if layout == "tiled" {
            args.push("--delegate-mode");
            peers.delegate(&p);
        }
        let team = start(&p, &args, &peers.env);
        let socket = Server(team["socket"]["name"].as_str().unwrap().to_string());
        assert_layout(layout, &socket.0, team["agents"][0]["pane"].as_str().unwrap());
        // Each pane runs its CLI (a process besides the pane's own) before it is stopped.
        let until = Instant::now() + Duration::from_secs(60);
        while team_sessions(&p).values().any(|s| s.len() < 2) {
            assert!(Instant::now() < until, "{layout}: a CLI never started: {:?}", team_sessions(&p));
            std::thread::sleep(Duration::from_millis(50));
        }
        if layout == "tiled" {
            peers.delegated(&p);
        }
        stop_leaves_nothing(&p, &socket.0, &[]);
    }
}

/// The issue's measure at its slowest: 100 notices to each of Claude Code,
/// Gemini CLI and Codex, idle each time (100 wakes each), and all 100 arrive.
/// About 10 minutes on a loaded 2-core machine, so not in CI (which sends
/// one to each idle, then 100 mostly while they work, above):
/// `cargo test -p troupe-cli --test it team::hundred_notices -- --ignored --nocapture`
/// (`TROUPE_NOTICES=N` sends N instead). Recorded in BENCHMARKS.md.
#[test]
#[ignore = "about 10 minutes; run by hand, see BENCHMARKS.md"]
fn hundred_notices_to_each_cli_all_arrive() {
    let n: usize = std::env::var("TROUPE_NOTICES").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let p = TestProject::new();
    let peers = Peers::new(&p);
    let socket = peers.start_team(&p);
    for agent in ["claude", "gemini", "codex"] {
        let started = Instant::now();
        let mut pastes = Vec::new();
        for i in 0..n {
            pastes.push(peers.idle_message(&p, agent, &format!("notice {i} of {n} for {agent}")));
        }
        let retried = pastes.iter().filter(|&&k| k > 1).count();
        eprintln!(
            "{agent}: {n}/{n} arrived in {:.1} s ({:.2} s each); {retried} needed more than one paste (most {})",
            started.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64() / n as f64,
            pastes.iter().max().unwrap()
        );
    }
    stop_leaves_nothing(&p, &socket.0, &[]);
}

#[test]
fn a_teammate_sends_as_the_agent_its_gateway_token_belongs_to() {
    let p = TestProject::new();
    p.troupe().args(["msg", "send", "nobody", "make the db"]).assert().success();
    let s = store(&p);
    s.register(troupe_store::NewAgent::new("gemini", "builder", "gemini")).unwrap();
    s.set_gateway_token("gemini", &troupe_store::token::hash("secret-of-gemini")).unwrap();
    let as_gemini = |args: &[&str]| {
        troupe(&p).env(troupe_store::token::ENV, "secret-of-gemini").args(["--json", "msg", "send"]).args(args).output()
    };
    let sent = as_gemini(&["claude", "hi", "--reply-to", "1"]).unwrap();
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let sent = json(&sent)[0].clone();
    assert_eq!((sent["from"].as_str(), sent["in_reply_to"].as_i64()), (Some("gemini"), Some(1)));
    let forged = as_gemini(&["claude", "hi", "--from", "lead"]).unwrap();
    assert_eq!(forged.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&forged.stdout).contains("gemini cannot send as 'lead'"), "{forged:?}");
}
