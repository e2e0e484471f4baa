//! `[team] executors = "workers"` with real Claude Code Builders (issue 20):
//! two `troupe worker`s, each in its own clone of a bare repository standing
//! for the shared remote and with its own Claude Code `HOME`, run a two-wave
//! `troupe run` whose Builders are the real CLI against the testkit's
//! obedient stub model (its turns derived from the prompt troupe rendered),
//! the shared store on a private PostgreSQL cluster. Design and planning are
//! scripted on the Lead's host. All groups merge, the board completes, each
//! job's events come in order, nothing is left behind, and the teammates'
//! hooks and gateway ran on the workers against the shared store: G2's
//! Builder first writes outside its group (its one step off the prompt),
//! the hook on its worker denies it and records the denial in the shared
//! audit, where the gateway's board calls of both Builders are too.
//!
//! Where the machine allows it, each worker runs in its own network
//! namespace (`troupe_testkit::netns`): its Claude Code, hooks and gateway
//! reach PostgreSQL and the stub model over the worker's link, not loopback.

use std::path::Path;
use std::process::Command as Std;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe_store::worker::JobState;
use troupe_store::{AuditFilter, AuditLog, Decision, EventLog, PgStore, Workers};
use troupe_testkit::anthropic::AnthropicStub;
use troupe_testkit::claude::Claude;
use troupe_testkit::obedient::{Assignment, Knowledge, Obedient};
use troupe_testkit::{Conversation, Responder, Turn};

use crate::lead_claude::{TASKS_YAML, git, project};
use crate::support::json;
use crate::workers::{
    Worker, assert_job_events, assert_nothing_stale, logs, shared_remote, start_lead, start_worker, troupe_bin,
};

/// What the demo's Builders write.
struct Demo;

impl Knowledge for Demo {
    fn file(&self, _: &Assignment, path: &str) -> Option<String> {
        let text = match path {
            "src/add.sh" => "add() { echo $(($1 + $2)); }\n",
            "tests/test_add.sh" => ". src/add.sh\n[ \"$(add 2 3)\" = 5 ] || exit 1\n",
            "src/double.sh" => ". src/add.sh\ndouble() { add \"$1\" \"$1\"; }\n",
            "tests/test_double.sh" => ". src/double.sh\n[ \"$(double 4)\" = 8 ] || exit 1\n",
            _ => return None,
        };
        Some(text.to_string())
    }
}

/// The obedient model, except that `group`'s Builder first writes
/// `src/util.sh` (outside its group) in its working directory; the rest of
/// its conversation reaches the model without that call, as if unmade.
struct Trespass {
    model: Arc<Obedient>,
    group: &'static str,
}

impl Responder for Trespass {
    fn respond(&self, c: &Conversation) -> Turn {
        let a = Assignment::parse(&c.prompt).unwrap_or_default();
        if a.role != "Builder" || a.group.as_deref() != Some(self.group) {
            return self.model.respond(c);
        }
        if c.turns == 0 {
            let cwd = c
                .prompt
                .lines()
                .find_map(|l| l.trim().trim_start_matches("- ").strip_prefix("Primary working directory: "));
            let path = Path::new(cwd.unwrap_or(".").trim()).join("src/util.sh");
            return Turn::tool("Write", json!({"file_path": path.display().to_string(), "content": "util() { :; }\n"}));
        }
        let mut rest = c.clone();
        rest.turns -= 1;
        rest.results.remove(0);
        if !rest.failed.is_empty() {
            rest.failed.remove(0);
        }
        self.model.respond(&rest)
    }
}

fn task_generator() -> String {
    let plan: String = TASKS_YAML.lines().map(|l| format!("            {l}\n")).collect();
    format!(
        "\n  task-generator:\n    - - write:\n          path: \".troupe/specs/{{feature}}/tasks.yaml\"\n          content: |\n{plan}      - report: \"TASKGEN_COMPLETE\\nTasks: 2\\nWaves: 2\"\n"
    )
}

#[test]
fn workers_run_real_claude_code_builders_whose_hooks_and_gateway_use_the_shared_store() {
    let _serial = crate::obedient_run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Declared first, dropped last: the namespaces outlive the workers in them.
    let hosts = troupe_testkit::netns::Hosts::start(2);
    let url = hosts.local_url();
    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        "[engines]\ndefault = \"scripted\"\n\n[engines.phases]\nimpl = \"claude\"\n\n[engines.commands]\nclaude = \"{}\"\n\n[team]\nhang_timeout_seconds = 60\nisolation = \"worktree\"\nexecutors = \"workers\"\n\n[shutdown]\ntimeout_ms = 300\n\n[workers]\nremote = \"origin\"\npoll_ms = 50\n",
        Claude::bin().display()
    );
    let p = project(&config, Some(&format!("agents:{}{}", crate::lead::DESIGN, task_generator())));
    let (bare, checkouts) = shared_remote(p.root(), tmp.path(), 2);
    // The Builders work in the workers' clones, not under the project: the
    // model's files are wherever the CLI's working directory is.
    let model = Obedient::new(std::env::temp_dir().canonicalize().unwrap(), Demo);
    let stub = AnthropicStub::with_responder_on(hosts.server_ip(), Trespass { model: model.clone(), group: "G2" });
    let model_url = format!("http://{}", hosts.reach(stub.server().addr()));
    let clis: Vec<Claude> = checkouts.iter().map(|_| Claude::new(&model_url)).collect();
    let workers: Vec<Worker> = checkouts
        .iter()
        .zip(&clis)
        .enumerate()
        .map(|(i, (checkout, cli))| {
            let mut cmd = hosts.command(i, troupe_bin());
            cli.apply_env(&mut cmd);
            start_worker(cmd, checkout, &format!("w{i}"), &["--engines", "claude"], &hosts.url(i), tmp.path())
        })
        .collect();

    let lead = start_lead(p.root(), &url, &["add and double numbers", "--no-review"]);
    let out = crate::workers::wait_with_deadline(lead, Duration::from_secs(300));
    model.assert_obeyed();
    let report = json(&out);
    assert_eq!(report["outcome"], "completed", "{}\n{}", String::from_utf8_lossy(&out.stderr), logs(&workers));
    // The idle workers still hold their store sessions.
    hosts.assert_connected_over_links();

    // Both groups merged, in wave order; the suite is green on the line.
    let merges = git(p.root(), &["log", "--merges", "--format=%(trailers:key=Troupe-Merge,valueonly)"]);
    let merges: Vec<&str> = merges.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(merges, ["login/G2@1.0", "login/G1@1.0"]);
    assert!(!p.path("src/util.sh").exists(), "the denied write left nothing");
    let suite = Std::new("sh").arg("check.sh").current_dir(p.root()).output().unwrap();
    assert!(suite.status.success(), "{}", String::from_utf8_lossy(&suite.stdout));

    // Every Builder was a Claude Code teammate on a worker, once.
    let store = PgStore::open(&url).unwrap();
    let jobs = store.jobs(Some("login")).unwrap();
    assert_eq!(jobs.len(), 2, "{jobs:#?}");
    assert!(
        jobs.iter().all(|j| j.state == JobState::Done && j.queued.engine == "claude" && j.host.is_some()),
        "{jobs:#?}"
    );
    let board = json(&p.troupe().env("TROUPE_DATABASE_URL", &url).args(["--json", "board", "list"]).output().unwrap());
    let tasks = board.as_array().unwrap();
    assert!(!tasks.is_empty() && tasks.iter().all(|t| t["status"] == "completed"), "{board:#}");
    let events = store.events_since(0, 100_000).unwrap();
    assert_job_events(&events, &jobs);
    assert_nothing_stale(&store, &bare);

    // The hooks and the gateway ran on the workers, against the shared store.
    let agent = |group: &str| {
        jobs.iter().find(|j| j.queued.agent.starts_with(&format!("builder-{group}-"))).unwrap().queued.agent.clone()
    };
    let denied = store
        .audit(&AuditFilter { agent: Some(agent("g2")), decision: Some(Decision::Denied), ..AuditFilter::default() })
        .unwrap();
    assert!(
        denied.iter().any(|r| r.tool == "Write" && r.reason.as_deref().unwrap_or("").contains("src/util.sh")),
        "{denied:#?}"
    );
    for group in ["g1", "g2"] {
        let calls = store.audit(&AuditFilter { agent: Some(agent(group)), ..AuditFilter::default() }).unwrap();
        assert!(
            calls.iter().any(|r| r.tool.ends_with("board_claim") && r.decision == Decision::Allowed),
            "{group}: {calls:#?}"
        );
    }
    drop(workers);
}
