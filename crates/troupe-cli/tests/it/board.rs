//! `troupe board …` through the real binary: the verbs, their errors, and
//! 24 processes racing to claim 2,000 tasks.

use std::collections::HashSet;
use std::process::Command as StdCommand;

use troupe_core::layout::Layout;
use troupe_store::{Board, EventLog, ListFilter, NewTask, SqliteStore, TaskStatus};

use crate::support::{TestProject, json};

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn create_claim_complete_and_unblock() {
    let p = TestProject::new();
    // `board complete` runs the on_task_completed quality gate (steering's Test and Lint); make it pass.
    std::fs::write(p.path(".troupe/steering/tech.md"), "## Common Commands\n- Test: `true`\n").unwrap();
    let a = p.troupe().args(["board", "create", "design the parser"]).output().unwrap();
    assert!(a.status.success());
    assert_eq!(out(&a), "t1");
    let b = p.troupe().args(["board", "create", "build it", "--blocked-by", "t1", "-d", "details"]).output().unwrap();
    assert_eq!(out(&b), "t2");

    let list = p.troupe().args(["board", "list"]).output().unwrap();
    let text = out(&list);
    assert!(text.starts_with("ID  STATUS   ASSIGNEE  SUBJECT\n"), "{text}");
    assert!(text.contains("\nt1  pending  -         design the parser\n"), "{text}");
    assert!(text.contains("\nt2  blocked  -         build it"), "{text}");
    // On a narrow terminal the widest column is cut with `…`; --json keeps it whole.
    let narrow = out(&p.troupe().args(["board", "list"]).env("COLUMNS", "30").output().unwrap());
    assert!(narrow.contains("\nt1  pending  -         design …\n"), "{narrow}");

    // t2 is blocked: refused with the reason and a hint.
    p.troupe()
        .args(["board", "claim", "t2", "--agent", "alice"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("cannot claim task `t2` for `alice`: it is blocked by t1"))
        .stderr(predicates::str::contains("hint:"));

    let claimed = p.troupe().args(["board", "claim", "--next"]).env("TROUPE_AGENT_ID", "alice").output().unwrap();
    assert!(claimed.status.success(), "{}", String::from_utf8_lossy(&claimed.stderr));
    assert_eq!(out(&claimed), "t1");
    // Idempotent for the holder.
    p.troupe().args(["board", "claim", "t1", "--agent", "alice"]).assert().success().stdout("t1\n");
    p.troupe()
        .args(["board", "complete", "t1", "--agent", "bob"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("`bob` cannot complete task `t1`: it is held by `alice`"));
    let done = p.troupe().args(["--json", "board", "complete", "t1", "--agent", "alice"]).output().unwrap();
    let v = json(&done);
    assert_eq!(v["task"]["status"], "completed");
    assert_eq!(v["unblocked"], serde_json::json!(["t2"]));

    let show = p.troupe().args(["--json", "board", "show", "t2"]).output().unwrap();
    let v = json(&show);
    assert_eq!(v["blocked"], false);
    assert_eq!(v["blocked_by"], serde_json::json!(["t1"]));
    assert_eq!(v["description"], "details");
    let text = out(&p.troupe().args(["board", "show", "t2"]).output().unwrap());
    assert!(text.contains("blocked by:  t1"), "{text}");
}

#[test]
fn complete_prints_what_it_unblocked() {
    let p = TestProject::new();
    // `board complete` runs the on_task_completed quality gate (steering's Test and Lint); make it pass.
    std::fs::write(p.path(".troupe/steering/tech.md"), "## Common Commands\n- Test: `true`\n").unwrap();
    for args in [vec!["a"], vec!["b", "--blocked-by", "t1"], vec!["c", "--blocked-by", "t1"]] {
        p.troupe().args(["board", "create"]).args(args).assert().success();
    }
    p.troupe().args(["board", "claim", "t1", "--agent", "x"]).assert().success();
    p.troupe()
        .args(["board", "complete", "t1", "--agent", "x"])
        .assert()
        .success()
        .stdout("completed t1; unblocked t2, t3\n");
}

#[test]
fn assign_release_and_filters() {
    let p = TestProject::new();
    p.troupe().args(["board", "create", "a", "--feature", "login", "--wave", "1"]).assert().success();
    p.troupe().args(["board", "create", "b", "--feature", "login", "--wave", "2"]).assert().success();
    p.troupe().args(["board", "create", "c", "--feature", "other"]).assert().success();
    p.troupe().args(["board", "assign", "t2", "bob"]).assert().success().stdout("assigned t2 to bob\n");
    let ids = |args: &[&str]| -> Vec<String> {
        let o = p.troupe().arg("--json").args(["board", "list"]).args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        json(&o).as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&["--feature", "login"]), ["t1", "t2"]);
    assert_eq!(ids(&["--feature", "login", "--wave", "2"]), ["t2"]);
    assert_eq!(ids(&["--agent", "bob"]), ["t2"]);
    assert_eq!(ids(&["--available", "--agent", "alice"]), ["t1", "t3"]);
    assert_eq!(ids(&["--available", "--agent", "bob"]), ["t1", "t2", "t3"]);
    // bob's reserved task comes first for bob.
    p.troupe().args(["board", "claim", "--next", "--agent", "bob"]).assert().success().stdout("t2\n");
    assert_eq!(ids(&["--status", "in_progress"]), ["t2"]);
    p.troupe()
        .args(["board", "release", "t2", "--agent", "carol"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("`carol` cannot release task `t2`: it is held by `bob`"));
    p.troupe().args(["board", "release", "t2"]).assert().success().stdout("released t2\n");
    assert_eq!(ids(&["--status", "pending"]), ["t1", "t2", "t3"]);
    p.troupe()
        .args(["board", "list", "--status", "doing"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown task status `doing`"));
    p.troupe()
        .args(["board", "claim", "--next", "--feature", "nothing-here", "--agent", "a"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("no task is available for `a`"));
}

#[test]
fn an_agent_id_is_required_and_the_error_says_how_to_give_one() {
    let p = TestProject::new();
    p.troupe().args(["board", "create", "a"]).assert().success();
    for verb in [vec!["claim", "t1"], vec!["claim", "--next"], vec!["complete", "t1"]] {
        p.troupe()
            .arg("board")
            .args(&verb)
            .assert()
            .code(2)
            .stderr(predicates::str::contains("needs an agent id, and none was given"))
            .stderr(predicates::str::contains("hint: pass `--agent <id>`, or set TROUPE_AGENT_ID"));
    }
    let o = p.troupe().args(["--json", "board", "claim", "t1"]).output().unwrap();
    assert_eq!(json(&o)["error"]["kind"], "usage");
}

#[test]
fn bad_input_changes_nothing() {
    let p = TestProject::new();
    p.troupe().args(["board", "create", "a"]).assert().success();
    p.troupe()
        .args(["board", "create", "b", "--blocked-by", "t9"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("task `t2` is blocked by `t9`, which is not on the board"));
    p.troupe().args(["board", "create", "  "]).assert().code(1).stderr(predicates::str::contains("non-empty subject"));
    p.troupe().args(["board", "create", "dup", "--id", "t1"]).assert().code(1);
    p.troupe()
        .args(["board", "show", "t7"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("no task `t7` on the board"))
        .stderr(predicates::str::contains("hint: `troupe board list`"));
    let o = p.troupe().args(["--json", "board", "list"]).output().unwrap();
    assert_eq!(json(&o).as_array().unwrap().len(), 1);
}

#[test]
fn a_corrupted_database_is_a_clear_error_not_a_panic() {
    let p = TestProject::new();
    let layout = Layout::new(p.root());
    std::fs::create_dir_all(layout.state_dir()).unwrap();
    std::fs::write(layout.database_file(), "not a database at all\n".repeat(100)).unwrap();
    let o = p.troupe().args(["board", "list"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("troupe.db is not a usable troupe database (damaged or not SQLite)"), "{err}");
    assert!(err.contains("hint: move the file aside"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // A foreign SQLite file (some other program's) is refused the same way.
    std::fs::remove_file(layout.database_file()).unwrap();
    let made = StdCommand::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table x(y)'); c.commit()")
        .arg(layout.database_file())
        .status()
        .expect("python3 makes the foreign database");
    assert!(made.success());
    let o = p.troupe().args(["--json", "board", "claim", "--next", "--agent", "a"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    let v = json(&o);
    assert!(v["error"]["message"].as_str().unwrap().contains("is an SQLite database, but not troupe's"), "{v}");
}

/// 24 processes of the real binary claim from 2,000 tasks at once, each in a loop
/// until nothing is left: every task is claimed exactly once.
#[test]
fn twenty_four_processes_claim_two_thousand_tasks_exactly_once() {
    const TASKS: usize = 2_000;
    const WORKERS: usize = 24;
    let p = TestProject::new();
    let layout = Layout::new(p.root());
    {
        let store = SqliteStore::open_project(&layout).unwrap();
        let batch: Vec<NewTask> = (0..TASKS).map(|i| NewTask::new(format!("task {i}"), "lead")).collect();
        store.create_tasks(batch).unwrap();
    }
    let bin = assert_cmd::cargo::cargo_bin("troupe");
    let root = p.root().to_path_buf();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let bin = bin.clone();
            let root = root.clone();
            std::thread::spawn(move || {
                let agent = format!("worker-{w}");
                let mut claimed = Vec::new();
                loop {
                    let o = StdCommand::new(&bin)
                        .args(["-C"])
                        .arg(&root)
                        .args(["board", "claim", "--next", "--agent", &agent])
                        .env_remove("TROUPE_AGENT_ID")
                        .output()
                        .unwrap();
                    if o.status.success() {
                        claimed.push((String::from_utf8(o.stdout).unwrap().trim().to_string(), agent.clone()));
                        continue;
                    }
                    let err = String::from_utf8_lossy(&o.stderr);
                    assert!(err.contains(&format!("no task is available for `{agent}`")), "worker {w} failed: {err}");
                    return claimed;
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.join().unwrap());
    }
    assert_eq!(all.len(), TASKS, "every task claimed, none twice");
    let unique: HashSet<&String> = all.iter().map(|(id, _)| id).collect();
    assert_eq!(unique.len(), TASKS);

    let store = SqliteStore::open_project(&layout).unwrap();
    let tasks = store.list(&ListFilter::default()).unwrap();
    let holder: std::collections::HashMap<&str, &str> = all.iter().map(|(t, a)| (t.as_str(), a.as_str())).collect();
    for t in &tasks {
        assert_eq!(t.status, TaskStatus::InProgress, "{}", t.id);
        assert_eq!(t.assignee.as_deref(), holder.get(t.id.as_str()).copied(), "{} is held by its claimant", t.id);
    }
    let claims = store.events_since(0, u32::MAX).unwrap().into_iter().filter(|e| e.kind == "task_claimed").count();
    assert_eq!(claims, TASKS);
    assert!(store.verify().unwrap().is_empty());
    let busy_workers = all.iter().map(|(_, a)| a).collect::<HashSet<_>>().len();
    assert!(busy_workers > 1, "the claims were spread over several processes");
}

const PLAN: &str = "tasks:
  - id: '1'
    summary: Model
    status: pending
    subtasks:
      - id: '1.1'
        summary: Session struct
        status: done
      - id: '1.2'
        summary: Login handler
        depends: ['1.1']
        status: pending
  - id: '2'
    summary: Docs
    depends: ['1']
    status: pending
execution:
  - wave: 1
    groups:
      - id: G1
        tasks: ['1.1', '1.2']
        files: [src/session.rs, src/login.rs]
  - wave: 2
    groups:
      - id: G2
        tasks: ['2']
        files: [README.md]
";

#[test]
fn import_a_plan_once_and_refuse_a_changed_one() {
    let p = TestProject::new();
    let tasks_file = Layout::new(p.root()).tasks_file("login");
    p.troupe()
        .args(["board", "import", "login"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("tasks.yaml does not exist"));
    std::fs::create_dir_all(tasks_file.parent().unwrap()).unwrap();
    std::fs::write(&tasks_file, "tasks:\n  - id: '1'\n    summary: x\n    depends: ['9']\n").unwrap();
    p.troupe().args(["board", "import", "login"]).assert().code(3).stderr(predicates::str::contains("Caused by:"));
    let o = p.troupe().args(["--json", "board", "list"]).output().unwrap();
    assert_eq!(json(&o).as_array().unwrap().len(), 0, "an invalid plan puts nothing on the board");

    std::fs::write(&tasks_file, PLAN).unwrap();
    p.troupe()
        .args(["board", "import", "login"])
        .assert()
        .success()
        .stdout("imported 3 tasks of login (1 already done)\n");
    let o = p.troupe().args(["--json", "board", "import", "login"]).output().unwrap();
    assert_eq!(json(&o)["result"]["outcome"], "unchanged");

    let o = p.troupe().args(["--json", "board", "show", "login/2"]).output().unwrap();
    let v = json(&o);
    assert_eq!(v["blocked_by"], serde_json::json!(["login/1.1", "login/1.2"]));
    assert_eq!((v["wave"].as_u64(), v["group"].as_str()), (Some(2), Some("G2")));
    assert_eq!(v["files"], serde_json::json!(["README.md"]));
    p.troupe()
        .args(["board", "claim", "--next", "--agent", "b", "--wave", "1"])
        .assert()
        .success()
        .stdout("login/1.2\n");

    std::fs::write(&tasks_file, PLAN.replace("summary: Docs", "summary: Documentation")).unwrap();
    p.troupe()
        .args(["board", "import", "login"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("error: the plan of `login` changed since it was imported"))
        .stderr(predicates::str::contains("Caused by: login/2 changed its summary"));
    let o = p.troupe().args(["--json", "board", "show", "login/2"]).output().unwrap();
    assert_eq!(json(&o)["subject"], "Docs", "nothing was merged");
    // --replace: refused while login/1.2 is in progress, then done once released.
    p.troupe()
        .args(["board", "import", "login", "--replace"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("cannot be replaced while login/1.2 is in progress"));
    p.troupe().args(["board", "release", "login/1.2"]).assert().success();
    p.troupe()
        .args(["board", "import", "login", "--replace"])
        .assert()
        .success()
        .stdout("imported 3 tasks of login (1 already done)\n");
    let o = p.troupe().args(["--json", "board", "show", "login/2"]).output().unwrap();
    assert_eq!(json(&o)["subject"], "Documentation");
}

/// Ctrl-C while `board complete` runs the quality gate: troupe dies of it as
/// any command does, and the guardian stops the gate's command, which runs in
/// a process group of its own that the terminal's Ctrl-C does not reach.
#[test]
fn ctrl_c_during_a_board_gate_leaves_no_gate_command_running() {
    let p = TestProject::new();
    std::fs::write(p.path(".troupe/steering/tech.md"), "## Common Commands\n- Test: `sh gate.sh`\n").unwrap();
    std::fs::write(p.path("gate.sh"), "echo $$ > gate.pid\nexec sleep 600\n").unwrap();
    p.troupe().args(["board", "create", "a task"]).assert().success();
    p.troupe().args(["board", "claim", "t1", "--agent", "alice"]).assert().success();
    let mut troupe = StdCommand::new(assert_cmd::cargo::cargo_bin("troupe"))
        .arg("-C")
        .arg(p.root())
        .args(["board", "complete", "t1", "--agent", "alice"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = |what: &str, done: &mut dyn FnMut() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let mut gate = None;
    until("the gate never started", &mut || {
        gate = std::fs::read_to_string(p.path("gate.pid")).ok().and_then(|s| s.trim().parse::<u32>().ok());
        gate.is_some()
    });
    assert!(StdCommand::new("kill").args(["-INT", &troupe.id().to_string()]).status().unwrap().success());
    let status = troupe.wait().unwrap();
    assert!(!status.success(), "an interrupted completion is no success");
    let gate = gate.unwrap();
    until("the gate's command outlived troupe", &mut || !troupe_testkit::fake_agent::process_running(gate));
    let task = json(&p.troupe().args(["--json", "board", "show", "t1"]).output().unwrap());
    assert_eq!(task["status"], "in_progress", "{task}");
}
