//! The supervisor against the scripted fake agent: environment, logs,
//! subscribers, outcomes of crashes and garbage, hang detection, signal
//! escalation, and no process left behind.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use troupe_core::event::{AgentEvent, ParsedOutput, ResultType};
use troupe_core::liveness::QuietLimits;
use troupe_engine::Invocation;
use troupe_engine::parse::StreamFormat;
use troupe_engine::supervisor::{AgentInfo, AgentSink, Body, Grace, NoSink, Record, SpawnSpec, StopMode, spawn};
use troupe_testkit::fake_agent::{FakeAgent, process_exists, process_running, read_pid};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!("{}/tests/fixtures/{name}.jsonl", env!("CARGO_MANIFEST_DIR")))
}

fn spec(agent: &Path, dir: &Path, format: StreamFormat) -> SpawnSpec {
    SpawnSpec {
        agent_id: "builder-1".into(),
        role: "builder".into(),
        feature: Some("login".into()),
        task_id: Some("T3".into()),
        project: dir.to_path_buf(),
        cwd: dir.to_path_buf(),
        engine: "fake".into(),
        model: Some("m".into()),
        invocation: Invocation {
            program: agent.to_string_lossy().into_owned(),
            args: vec!["--flag".into(), "the prompt".into()],
            stdin: None,
            format,
            ignored: vec![],
            env: vec![],
        },
        env: vec![],
        log_path: Some(dir.join("logs/builder-1.jsonl")),
        quiet_limits: None,
        sandbox: None,
    }
}

fn log_records(dir: &Path) -> Vec<Record> {
    std::fs::read_to_string(dir.join("logs/builder-1.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad log line {l}: {e}")))
        .collect()
}

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl AgentSink for Recorder {
    fn started(&self, info: &AgentInfo) {
        self.0.lock().unwrap().push(format!("started {} {} {}", info.id, info.role, info.engine));
    }
    fn session(&self, agent: &str, session_id: &str) {
        self.0.lock().unwrap().push(format!("session {agent} {session_id}"));
    }
    fn unresponsive(&self, agent: &str, _: Duration) {
        self.0.lock().unwrap().push(format!("unresponsive {agent}"));
    }
    fn finished(&self, agent: &str, outcome: &ParsedOutput) {
        self.0.lock().unwrap().push(format!("finished {agent} {}", outcome.kind.as_str()));
    }
}

#[tokio::test]
async fn runs_with_troupe_env_logs_every_record_and_reports_to_the_sink() {
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("env");
    let args_file = dir.path().join("args");
    let agent = FakeAgent::new()
        .dump_env(&env_file)
        .dump_args(&args_file)
        .emit_file(&fixture("claude-write-success"))
        .install();
    let sink = Arc::new(Recorder::default());
    let mut handle = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), sink.clone()).unwrap();
    let mut sub = handle.records().unwrap();
    let pid = handle.pid();
    let out = handle.wait().await;
    assert_eq!(out.output.kind, ResultType::Success);
    assert_eq!(out.output.result.as_deref(), Some("Done. Wrote hello.txt"));
    assert_eq!(out.exit_code, Some(0));

    let env = std::fs::read_to_string(&env_file).unwrap();
    for want in ["TROUPE_AGENT_ID=builder-1", "TROUPE_ROLE=builder", "TROUPE_FEATURE=login", "TROUPE_TASK_ID=T3"] {
        assert!(env.lines().any(|l| l == want), "{want} missing");
    }
    assert!(env.lines().any(|l| l == format!("TROUPE_PROJECT={}", dir.path().display())));
    assert_eq!(std::fs::read_to_string(&args_file).unwrap(), "--flag\nthe prompt\n");

    let records = log_records(dir.path());
    assert!(
        matches!(&records[0].body, Body::Spawned { engine, model: Some(m), pid: p, .. } if engine == "fake" && m == "m" && *p == pid)
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(&r.body, Body::Event { event: AgentEvent::ToolUse { name, .. } } if name == "Write"))
    );
    assert!(
        matches!(&records.last().unwrap().body, Body::Exited { exit_code: Some(0), outcome, .. } if outcome.kind == ResultType::Success)
    );
    assert!(records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    // The subscriber saw exactly what the log holds.
    let mut seen = Vec::new();
    while let Some(r) = sub.try_recv() {
        seen.push((*r).clone());
    }
    assert_eq!(seen, records);
    assert_eq!(
        *sink.0.lock().unwrap(),
        [
            "started builder-1 builder fake",
            "session builder-1 e816a659-0852-4e85-9ed7-a5424c93b692",
            "finished builder-1 success"
        ]
    );
    assert!(!process_exists(pid), "the child must be reaped, not left a zombie");
}

#[tokio::test]
async fn prompt_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("stdin");
    let agent = FakeAgent::new().read_stdin(&got).install();
    let mut s = spec(agent.path(), dir.path(), StreamFormat::Text);
    s.invocation.stdin = Some("--prompt that looks like a flag".into());
    spawn(s, Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(std::fs::read_to_string(got).unwrap(), "--prompt that looks like a flag");
}

#[tokio::test]
async fn a_crash_is_interrupted_and_a_failure_is_an_error_with_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new().emit(r#"{"type":"system","subtype":"init","session_id":"s1"}"#).crash().install();
    let out = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(out.output.kind, ResultType::Interrupted);
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.output.session_id.as_deref(), Some("s1"));

    let agent = FakeAgent::new().stderr("fatal: model not found").exit(3).install();
    let out = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(out.output.kind, ResultType::Error);
    let msg = out.output.error_message.unwrap();
    assert!(msg.contains("status 3") && msg.contains("model not found"), "{msg}");
}

#[tokio::test]
async fn garbage_and_a_huge_line_become_raw_events() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new()
        .emit("this is not json")
        .huge_line(20 * 1024 * 1024)
        .emit_file(&fixture("codex-success"))
        .install();
    let out = spawn(spec(agent.path(), dir.path(), StreamFormat::Codex), Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(out.output.kind, ResultType::Success);
    let records = log_records(dir.path());
    let raws = records.iter().filter(|r| matches!(&r.body, Body::Event { event: AgentEvent::Raw { .. } })).count();
    // One for the garbage line, two for the 20 MiB line cut at the 16 MiB limit.
    assert_eq!(raws, 3);
}

#[tokio::test]
async fn many_lines_are_all_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new().many_lines(5000).install();
    let out = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(out.output.kind, ResultType::Interrupted);
    let texts = log_records(dir.path())
        .iter()
        .filter(|r| matches!(&r.body, Body::Event { event: AgentEvent::Text { .. } }))
        .count();
    assert_eq!(texts, 5000);
}

#[tokio::test]
async fn silence_is_reported_as_unresponsive() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new().emit(r#"{"type":"system","subtype":"init","session_id":"s"}"#).sleep(1.0).install();
    let sink = Arc::new(Recorder::default());
    let mut s = spec(agent.path(), dir.path(), StreamFormat::Claude);
    s.quiet_limits =
        Some(QuietLimits { hang: Duration::from_millis(200), startup: Duration::ZERO, tool: Duration::ZERO });
    spawn(s, sink.clone()).unwrap().wait().await;
    let hangs = hangs(dir.path());
    assert_eq!(hangs.len(), 1, "reported once per silence");
    assert!(hangs[0] >= 200);
    assert!(sink.0.lock().unwrap().contains(&"unresponsive builder-1".to_string()));
}

fn hangs(dir: &Path) -> Vec<u64> {
    log_records(dir)
        .iter()
        .filter_map(|r| match r.body {
            Body::Unresponsive { silent_ms } => Some(silent_ms),
            _ => None,
        })
        .collect()
}

/// The Lead's rule (`troupe_core::liveness`): silence before the first event
/// of the session is start-up, and silence while a tool call runs is the
/// tool's; only the silence of a model turn counts against the hang timeout.
#[tokio::test]
async fn start_up_and_a_running_tool_get_their_allowances_and_a_silent_turn_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new()
        .sleep(0.6)
        // One write, so that no silence of a loaded machine falls between the two.
        .emit(concat!(
            r#"{"type":"system","subtype":"init","session_id":"s"}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#
        ))
        .sleep(0.6)
        .emit(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#)
        .sleep(1.0)
        .install();
    let mut s = spec(agent.path(), dir.path(), StreamFormat::Claude);
    let limits = QuietLimits {
        hang: Duration::from_millis(300),
        startup: Duration::from_secs(30),
        tool: Duration::from_secs(30),
    };
    s.quiet_limits = Some(limits);
    spawn(s, Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(hangs(dir.path()).len(), 1, "only the quiet turn after the tool's result is a hang");
}

fn signals(dir: &Path) -> Vec<String> {
    log_records(dir)
        .into_iter()
        .filter_map(|r| match r.body {
            Body::Stopping { signal } => Some(signal),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn stop_escalates_from_sigint_to_sigkill_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let grandchild = dir.path().join("grandchild.pid");
    let agent = FakeAgent::new().ignore_signals().spawn_grandchild(&grandchild).sleep(60.0).install();
    let handle = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap();
    let gc = tokio::task::spawn_blocking(move || read_pid(&grandchild)).await.unwrap();
    let pid = handle.pid();
    let t = Instant::now();
    handle.stop(StopMode::Graceful(Grace {
        interrupt: Duration::from_millis(200),
        terminate: Duration::from_millis(200),
    }));
    let out = handle.wait().await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.output.kind, ResultType::Interrupted);
    assert_eq!(signals(dir.path()), ["SIGINT", "SIGTERM", "SIGKILL"]);
    assert!(!process_exists(pid), "leader reaped");
    wait_gone(gc).await;
}

#[tokio::test]
async fn a_well_behaved_agent_stops_at_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new().exit_on_interrupt().sleep(60.0).install();
    let handle = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.stop(StopMode::Graceful(Grace::default()));
    let out = handle.wait().await;
    assert_eq!(out.exit_code, Some(130));
    assert_eq!(out.output.kind, ResultType::Interrupted);
    assert_eq!(signals(dir.path()), ["SIGINT"]);
}

#[tokio::test]
async fn force_kills_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new().ignore_signals().sleep(60.0).install();
    let handle = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap();
    let t = Instant::now();
    handle.stop(StopMode::Force);
    let out = handle.wait().await;
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(signals(dir.path()), ["SIGKILL"]);
    assert_eq!(out.signal, Some(9));
}

#[tokio::test]
async fn grandchildren_do_not_outlive_a_finished_agent() {
    let dir = tempfile::tempdir().unwrap();
    let grandchild = dir.path().join("gc.pid");
    let agent = FakeAgent::new().spawn_grandchild(&grandchild).emit_file(&fixture("claude-write-success")).install();
    let out = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap().wait().await;
    assert_eq!(out.output.kind, ResultType::Success);
    wait_gone(read_pid(&dir.path().join("gc.pid"))).await;
}

/// A command the agent started in a session of its own (as Claude Code's
/// Bash tool does) is out of its group's reach; it goes when the agent ends.
#[tokio::test]
async fn a_descendant_in_its_own_session_does_not_outlive_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.sh");
    let escaped = dir.path().join("escaped.pid");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh
setsid sh -c 'echo $$ > {0}.tmp; mv {0}.tmp {0}; exec sleep 30' &
while [ ! -e {0} ]; do sleep 0.05; done
",
            escaped.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    spawn(spec(&agent, dir.path(), StreamFormat::Claude), Arc::new(NoSink)).unwrap().wait().await;
    wait_gone(read_pid(&escaped)).await;
}

#[test]
fn stop_from_another_process_escalates_on_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let gc_file = dir.path().join("gc.pid");
    let agent = FakeAgent::new().ignore_signals().spawn_grandchild(&gc_file).sleep(60.0).install();
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(agent.path()).process_group(0).spawn().unwrap();
    let gc = read_pid(&gc_file);
    let g = Grace { interrupt: Duration::from_millis(100), terminate: Duration::from_millis(100) };
    let last = troupe_engine::supervisor::stop_group_blocking(child.id(), StopMode::Graceful(g)).unwrap();
    assert_eq!(last, Some(nix::sys::signal::Signal::SIGKILL));
    child.wait().unwrap();
    assert!(!troupe_engine::supervisor::group_alive(child.id()));
    assert!(!process_running(gc));
}

async fn wait_gone(pid: u32) {
    let until = Instant::now() + Duration::from_secs(3);
    while process_running(pid) {
        assert!(Instant::now() < until, "process {pid} outlived the agent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_store_registry_records_the_agent_and_its_outcome() {
    use troupe_store::{AgentStatus, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn troupe_store::Store> = Arc::new(SqliteStore::open(&dir.path().join("troupe.db")).unwrap());
    let agent = FakeAgent::new().emit_file(&fixture("claude-write-success")).install();
    let sink = Arc::new(troupe_engine::supervisor::StoreSink::new(store.clone(), "test-run"));
    let handle = spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), sink).unwrap();
    let pid = handle.pid();
    handle.wait().await;
    let a = store.agent("builder-1").unwrap();
    assert_eq!(a.status, AgentStatus::Done);
    assert_eq!((a.role.as_str(), a.engine.as_str(), a.model.as_deref()), ("builder", "fake", Some("m")));
    assert_eq!((a.feature.as_deref(), a.task.as_deref(), a.pid), (Some("login"), Some("T3"), Some(pid)));
    assert_eq!(a.session_id.as_deref(), Some("e816a659-0852-4e85-9ed7-a5424c93b692"));
    let events = store.events_since(0, 100).unwrap();
    let finished = events.iter().find(|e| e.kind == "agent.finished").expect("agent.finished event");
    assert_eq!(finished.data["result"], "Done. Wrote hello.txt");
    assert_eq!(finished.data["type"], "success");

    let failing = FakeAgent::new().exit(2).install();
    let mut s = spec(failing.path(), dir.path(), StreamFormat::Claude);
    s.agent_id = "builder-2".into();
    spawn(s, Arc::new(troupe_engine::supervisor::StoreSink::new(store.clone(), "test-run"))).unwrap().wait().await;
    assert_eq!(store.agent("builder-2").unwrap().status, AgentStatus::Failed);
}

#[tokio::test]
async fn thinking_blocks_are_recorded_for_the_gateways_thinking_signatures() {
    use troupe_store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn troupe_store::Store> = Arc::new(SqliteStore::open(&dir.path().join("troupe.db")).unwrap());
    let agent = FakeAgent::new().emit_file(&fixture("claude-thinking")).install();
    let sink = Arc::new(troupe_engine::supervisor::StoreSink::new(store.clone(), "test-run"));
    spawn(spec(agent.path(), dir.path(), StreamFormat::Claude), sink).unwrap().wait().await;
    let events = store.events_since(0, 100).unwrap();
    let thinking: Vec<_> = events.iter().filter(|e| e.kind == troupe_engine::supervisor::THINKING_EVENT).collect();
    assert!(!thinking.is_empty(), "no thinking event in {:?}", events.iter().map(|e| &e.kind).collect::<Vec<_>>());
    let t = &thinking[0];
    assert_eq!(t.actor.as_deref(), Some("builder-1"));
    assert!(!t.data["thinking"].as_str().unwrap().is_empty());
    assert_eq!(t.data["type"], "extended_thinking");
    assert!(t.data["modelId"].is_string(), "the init event's model labels the block: {}", t.data);
}
