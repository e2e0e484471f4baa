//! Fault injection (issue 12): `troupe run` with the scripted engine, killed by
//! SIGINT, SIGTERM or SIGKILL at a random point — the kill points are spread
//! over the whole run (design, both reviews, each wave, the commits) by
//! counting the Lead's decisions in `decisions.md`, never by sleeping — and
//! each followed by `troupe resume`. Every trial must end with the run
//! finished, no completed task redone, no process of the run alive, spec.yaml,
//! tasks.yaml and the store intact, `files_created` complete and `git status`
//! clean.
//!
//! `TROUPE_FAULT_TRIALS` sets the trials per signal: 50 under CI (`CI=true`,
//! as `.ci/run` runs), 3 otherwise to keep a developer's suite fast;
//! `TROUPE_FAULT_SEED` replays a sequence; `TROUPE_FAULT_ONLY=TERM:20` replays
//! one trial (a signal and the decision count to kill at).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::lead::{full_script, git, is_zombie, project, reviewers};
use crate::support::{TestProject, json};

const SIGNALS: [&str; 3] = ["INT", "TERM", "KILL"];

/// Which tasks each group of the script's plan holds.
const GROUPS: [(&str, &[&str]); 3] = [("g1", &["1.1"]), ("g2", &["1.2"]), ("g3", &["2"])];

fn script() -> String {
    // The Auditors wait a little for the Inspectors, not 1.5 s.
    format!("{}{}", full_script(), reviewers("GO").replace("sleep: 1500", "sleep: 200"))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift, so that a failing trial can be replayed from its seed.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn decisions(p: &TestProject) -> usize {
    std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).map(|s| s.lines().count()).unwrap_or(0)
}

fn start_run(p: &TestProject) -> std::process::Child {
    Command::new(assert_cmd::cargo::cargo_bin("troupe"))
        .arg("-C")
        .arg(p.root())
        .args(["run", "login", "users log in", "--engine", "scripted"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Processes whose environment names this project (teammates, their commands).
pub(crate) fn processes_of(root: &Path) -> Vec<i32> {
    let needle = format!("TROUPE_PROJECT={}", root.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else { continue };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) && !is_zombie(pid) {
            found.push(pid);
        }
    }
    found
}

/// The tasks tasks.yaml says are done.
fn done_tasks(p: &TestProject) -> Vec<String> {
    let text = std::fs::read_to_string(p.path(".troupe/specs/login/tasks.yaml")).unwrap_or_default();
    let Ok(plan) = troupe_core::plan::TaskPlan::from_yaml(&text) else { return Vec::new() };
    let mut done = Vec::new();
    for t in &plan.tasks {
        if t.status == "done" {
            done.push(t.id.clone());
        }
        for s in &t.subtasks {
            if s.status == "done" {
                done.push(s.id.clone());
            }
        }
    }
    done
}

/// When each Builder of `group` ran, from its log: (spawned, exited), the end
/// unknown when its process was killed with the Lead.
fn builder_runs(p: &TestProject, group: &str) -> Vec<(String, jiff::Timestamp, Option<jiff::Timestamp>)> {
    let mut runs = Vec::new();
    let Ok(dir) = std::fs::read_dir(p.path(".troupe/state/logs")) else { return runs };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&format!("builder-{group}-")) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut spawned = None;
        for line in text.lines() {
            let Ok(r) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let ts = r["ts"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok());
            match r["kind"].as_str() {
                Some("spawned") => spawned = ts,
                Some("exited") => {
                    if let Some(s) = spawned.take() {
                        runs.push((name.clone(), s, ts));
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = spawned {
            runs.push((name.clone(), s, None));
        }
    }
    runs
}

/// No two Builders of one group ever ran at once (a run killed without an
/// end record ended before the resume's first spawn: checked by the caller
/// waiting for every process of the run to be gone first).
fn one_builder_per_group(p: &TestProject) -> Result<(), String> {
    for (group, _) in GROUPS {
        let runs = builder_runs(p, group);
        // Every group was built by some Builder, and each Builder's log says
        // when it started: its process writes that record itself before it
        // executes, so no kill of the Lead can lose it.
        if runs.is_empty() {
            return Err(format!("no Builder of group {group} left a `spawned` record in its log"));
        }
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                let (Some(a_end), Some(b_end)) = (a.2, b.2) else { continue };
                if a.1 < b_end && b.1 < a_end {
                    return Err(format!("{} and {} worked group {group} at once", a.0, b.0));
                }
            }
        }
    }
    Ok(())
}

/// One trial: kill the run after `at` decisions with `signal`, resume, check.
fn trial(signal: &str, at: usize) -> Result<(), String> {
    let p = project(&script());
    let root = p.root().canonicalize().unwrap();
    let mut run = start_run(&p);
    let run_pid = run.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    let ended_by_itself = loop {
        if decisions(&p) >= at {
            break false;
        }
        if run.try_wait().unwrap().is_some() {
            break true;
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            return Err(format!("the run never reached decision {at}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if !ended_by_itself {
        let _ = Command::new("kill").args([format!("-{signal}"), run.id().to_string()]).status();
    }
    let waited = Instant::now() + Duration::from_secs(60);
    while run.try_wait().unwrap().is_none() {
        if Instant::now() > waited {
            let _ = run.kill();
            return Err(format!("troupe run did not end after SIG{signal}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every process of the killed run goes (the guardian's work after SIGKILL).
    let gone = Instant::now() + Duration::from_secs(15);
    while !processes_of(&root).is_empty() {
        if Instant::now() > gone {
            return Err(format!("processes of the killed run still alive: {:?}", processes_of(&root)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // And the sandbox's temporary folders of its teammates (`troupe-<agent>-<Lead's pid>`):
    // after a SIGKILL their supervisors died with the Lead, and the guardian removes them.
    let leftovers = || -> Vec<String> {
        let suffix = format!("-{run_pid}");
        std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("troupe-") && n.ends_with(&suffix))
            .collect()
    };
    while !leftovers().is_empty() {
        if Instant::now() > gone {
            return Err(format!("temporary folders of the killed run left: {:?}", leftovers()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let done_before = done_tasks(&p);
    let spec_exists = p.path(".troupe/specs/login/spec.yaml").exists();
    let out = if spec_exists {
        p.troupe().args(["--json", "resume", "login"]).output().unwrap()
    } else {
        // Killed before the spec was written: the run is started again.
        p.troupe().args(["--json", "run", "login", "users log in", "--engine", "scripted"]).output().unwrap()
    };
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    if !out.status.success() || report["outcome"] != "completed" {
        return Err(format!(
            "resume did not finish (exit {:?}): {}\n{}\ndecisions:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(p.path(".troupe/handover/decisions.md")).unwrap_or_default()
        ));
    }
    // No completed task is redone.
    for t in report["teammates"].as_array().into_iter().flatten() {
        let id = t["id"].as_str().unwrap_or_default();
        for (group, tasks) in GROUPS {
            if id.starts_with(&format!("builder-{group}-")) && tasks.iter().all(|x| done_before.iter().any(|d| d == x))
            {
                return Err(format!("{id} redid group {group}, done before the interruption ({done_before:?})"));
            }
        }
    }
    if !processes_of(&root).is_empty() {
        return Err(format!("processes alive after resume: {:?}", processes_of(&root)));
    }
    let spec = json(&p.troupe().args(["--json", "spec", "show", "login"]).output().unwrap());
    if spec["phase"] != "implementation-complete" {
        return Err(format!("spec.yaml after resume: {spec}"));
    }
    let files = &spec["implementation"]["files_created"];
    if *files != serde_json::json!(["a.txt", "b.txt", "c.txt"]) {
        return Err(format!("files_created is {files}"));
    }
    let tasks = p.troupe().args(["tasks", "validate", "login"]).output().unwrap();
    if !tasks.status.success() {
        return Err(format!("tasks.yaml: {}", String::from_utf8_lossy(&tasks.stderr)));
    }
    let store = troupe_store::SqliteStore::open_project(&troupe_core::layout::Layout::new(p.root()))
        .map_err(|e| format!("the store: {e}"))?;
    let problems = store.verify().map_err(|e| format!("the store: {e}"))?;
    if !problems.is_empty() {
        return Err(format!("the store: {problems:?}"));
    }
    one_builder_per_group(&p)?;
    let status = git(p.root(), &["status", "--porcelain"]);
    if !status.is_empty() {
        return Err(format!("git status after resume:\n{status}"));
    }
    Ok(())
}

#[test]
fn a_run_killed_anywhere_is_finished_by_resume() {
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let per_signal = env_number("TROUPE_FAULT_TRIALS", if in_ci { 50 } else { 3 }) as usize;
    // `TROUPE_FAULT_ONLY=TERM:20` replays one trial.
    let only = std::env::var("TROUPE_FAULT_ONLY").ok();
    let mut seed = env_number("TROUPE_FAULT_SEED", 0x5eed_1234_abcd) | 1;
    // How many decisions a whole run makes, so that kill points cover all of it.
    let calibrate = project(&script());
    let out = calibrate.troupe().args(["run", "login", "users log in", "--engine", "scripted"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let total = decisions(&calibrate);
    assert!(total > 10, "{total} decisions");
    let mut plan = Vec::new();
    if let Some((signal, at)) = only.as_deref().and_then(|o| o.split_once(':')) {
        let signal = SIGNALS.into_iter().find(|s| *s == signal).expect("TROUPE_FAULT_ONLY=INT|TERM|KILL:<decision>");
        plan.push((signal, at.parse().expect("a decision number")));
    }
    for signal in SIGNALS.into_iter().filter(|_| only.is_none()) {
        for _ in 0..per_signal {
            let at = 1 + (next(&mut seed) % (total as u64 - 1)) as usize;
            plan.push((signal, at));
        }
    }
    // Two workers, each taking the next trial when its last one ends: each
    // trial runs a Lead and its teammates.
    let next_trial = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while let Some(&(name, at)) = plan.get(next_trial.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    if let Err(e) = trial(name, at) {
                        failures.lock().unwrap().push(format!("SIG{name} after decision {at}/{total}: {e}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} trials failed:\n{}", failures.len(), plan.len(), failures.join("\n\n"));
}

/// A Claude Builder's turns: write its file, verify, complete its task on the
/// board, report. `first` runs before them (the hung tool call of the first run).
fn claude_builder(
    root: &Path,
    group: &str,
    task: &str,
    file: &str,
    first: Option<troupe_testkit::Turn>,
) -> troupe_testkit::Script {
    use crate::lead_claude::{bash, troupe_bin, write};
    let t = troupe_bin();
    // `.txt` files are documents: the skill gate wants their rules loaded first.
    let mut turns = vec![bash(&format!("{} skill use document-quality-rules", t.display()))];
    turns.extend(first);
    turns.extend([
        // In its own worktree (`[team] isolation = "worktree"`, the default).
        write(&crate::lead_claude::worktree(root, group).join(file), &format!("{group}\n")),
        bash("sh check.sh"),
        bash(&format!("{} skill use verification-before-completion", t.display())),
        bash(&format!("{t} board claim login/{task} && {t} board complete login/{task}", t = t.display())),
        troupe_testkit::Turn::text(format!(
            "BUILDER_COMPLETE\nFeature: login\nTasks completed: {task}\nFiles: {file}\nTests: ok\nStatus: done"
        )),
    ]);
    troupe_testkit::Script::new(turns)
}

/// The same with a real Claude Code Builder killed with the Lead in the middle
/// of a tool call (a Bash command that outlives any timeout), then the run
/// resumed: the Builder and its command are gone, and the group is built once
/// more by a fresh Builder, nothing else again.
#[test]
fn a_run_killed_while_a_claude_builder_is_in_a_tool_call_is_finished_by_resume() {
    use troupe_testkit::anthropic::AnthropicStub;
    use troupe_testkit::claude::Claude;
    let p = project(&format!("agents:{}", crate::lead::design_and_tasks()));
    let root = p.root().canonicalize().unwrap();
    // Its own file holds the pid of the command (a write within its group).
    let hung = crate::lead_claude::bash("echo $$ > a.txt && tail -f /dev/null");
    let stubs = [
        AnthropicStub::start(claude_builder(&root, "G1", "1.1", "a.txt", Some(hung))),
        // Claude writes over a file only after reading it.
        AnthropicStub::start(claude_builder(
            &root,
            "G1",
            "1.1",
            "a.txt",
            Some(troupe_testkit::Turn::tool(
                "Read",
                serde_json::json!({"file_path": crate::lead_claude::worktree(&root, "G1").join("a.txt")}),
            )),
        )),
        AnthropicStub::start(claude_builder(&root, "G2", "1.2", "b.txt", None)),
        AnthropicStub::start(claude_builder(&root, "G3", "2", "c.txt", None)),
    ];
    // G1's first Builder talks to the hanging stub; any later one (after the
    // resume: the test leaves `killed` once it killed the run) to the second.
    let bin = tempfile::tempdir().unwrap();
    let killed = bin.path().join("killed");
    let wrapper = bin.path().join("claude-wrapper.sh");
    let sh = format!(
        "#!/bin/sh\ncase \"$TROUPE_GROUP\" in\n  G1) if [ -e {killed} ]; then u={g1b}; else u={g1a}; fi ;;\n  G2) u={g2} ;;\n  G3) u={g3} ;;\n  *) echo \"no stub for $TROUPE_GROUP\" >&2; exit 3 ;;\nesac\nexport ANTHROPIC_BASE_URL=$u\nexec {claude} \"$@\"\n",
        killed = killed.display(),
        g1a = stubs[0].url(),
        g1b = stubs[1].url(),
        g2 = stubs[2].url(),
        g3 = stubs[3].url(),
        claude = Claude::bin().display()
    );
    std::fs::write(&wrapper, sh).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        p.path(".troupe/config.toml"),
        format!(
            "[engines]\ndefault = \"scripted\"\n\n[engines.phases]\nimpl = \"claude\"\n\n[engines.commands]\nclaude = \"{}\"\n",
            wrapper.display()
        ),
    )
    .unwrap();
    git(p.root(), &["commit", "-q", "-am", "config"]);
    let claude = Claude::new(&stubs[0].url());
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("troupe"));
    for k in Claude::inherited_to_remove() {
        cmd.env_remove(k);
    }
    let mut run = cmd
        .envs(claude.env())
        .arg("-C")
        .arg(p.root())
        .args(["run", "login", "users log in", "--no-review"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(bin.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(bin.path().join("run.err")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    let busy: i32 = loop {
        let a = p.path(".troupe/state/worktrees/login/G1/a.txt");
        if let Some(pid) = std::fs::read_to_string(a).ok().and_then(|s| s.trim().parse().ok()) {
            break pid;
        }
        if run.try_wait().unwrap().is_some() {
            let seen: Vec<String> = stubs[0]
                .model_requests()
                .iter()
                .map(|r| r.to_string())
                .filter_map(|r| r.find("tool_result").map(|i| r[i..(i + 400).min(r.len())].to_string()))
                .collect();
            panic!("the run ended before G1's tool call:\n{}\n{seen:#?}", said());
        }
        assert!(Instant::now() < deadline, "G1's Builder never reached its tool call");
        std::thread::sleep(Duration::from_millis(20));
    };
    run.kill().unwrap();
    run.wait().unwrap();
    std::fs::write(&killed, "").unwrap();
    let gone = Instant::now() + Duration::from_secs(20);
    while !processes_of(&root).is_empty() || (Path::new(&format!("/proc/{busy}")).exists() && !is_zombie(busy)) {
        let alive: Vec<String> = processes_of(&root)
            .iter()
            .map(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                format!(
                    "{pid}: {} [{}]",
                    String::from_utf8_lossy(&cmd).replace('\0', " "),
                    stat.chars().take(120).collect::<String>()
                )
            })
            .collect();
        assert!(Instant::now() < gone, "alive after the Lead was killed: {alive:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let done_before = done_tasks(&p);
    let out = crate::lead_claude::run_troupe(&p, &claude, &["--json", "resume", "login"]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    let report = json(&out);
    assert_eq!(report["outcome"], "completed", "{report}");
    for t in report["teammates"].as_array().unwrap() {
        let id = t["id"].as_str().unwrap();
        assert!(!id.starts_with("architect") && !id.starts_with("task-generator"), "{id} ran again");
        for (group, tasks) in GROUPS {
            let redone = id.starts_with(&format!("builder-{group}-"))
                && tasks.iter().all(|x| done_before.contains(&x.to_string()));
            assert!(!redone, "{id} redid group {group}: done before ({done_before:?})");
        }
    }
    assert!(
        report["teammates"].as_array().unwrap().iter().any(|t| t["id"].as_str().unwrap().starts_with("builder-g1-")),
        "{report}"
    );
    let spec = json(&p.troupe().args(["--json", "spec", "show", "login"]).output().unwrap());
    assert_eq!(spec["implementation"]["files_created"], serde_json::json!(["a.txt", "b.txt", "c.txt"]), "{spec}");
    assert!(processes_of(&root).is_empty());
    assert_eq!(std::fs::read_to_string(p.path("a.txt")).unwrap(), "G1\n", "the second G1 Builder wrote it");
    assert_eq!(git(p.root(), &["status", "--porcelain"]), "");
}
