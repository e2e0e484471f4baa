//! The Lead's orchestration overhead (issue: "with instant scripted teammates, a
//! 200-task, 10-wave plan completes with total Lead overhead under 2 seconds, and
//! the time from a task's completion to its unblocked successor's spawn is under
//! 50 ms p99").
//!
//! Two measurements:
//! 1. `machine`: the state machine alone, teammates answering instantly in
//!    process. Time inside `handle_event` / `poll_command`, and per completion
//!    the time until the successor's `Spawn` is emitted.
//! 2. `driver`: `troupe resume` end to end through the real driver, every
//!    teammate a real `troupe scripted-agent` process that writes its group's
//!    file and reports at once, with the store, tasks.yaml edits, handover
//!    files and quality gates (an empty gate command); then the same with
//!    `[team] isolation = "worktree"` in a git repository: each group in its
//!    own worktree, committed, merged into the line in wave order, the
//!    merged gate run there, the worktrees reused from the pool. Lead overhead = wall time minus the time teammate processes
//!    ran on the critical path is not separable here, so the wall time is
//!    reported as an upper bound, and completion→spawn is measured from the
//!    driver's receipt of the report to the successor's spawn.
//!
//! Run: `cargo bench -p troupe-lead --bench lead [-- <part>]` (the driver part needs the
//! `troupe` binary: it uses `TROUPE_BIN`, else `target/release/troupe`, else
//! `target/debug/troupe`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use troupe_core::spec::Spec;
use troupe_lead::driver::{Observer, RunOptions};
use troupe_lead::machine::{Command, Event, GateKind, GateVerdict, Job, Lead, LeadConfig, PlanLoad, RunStats};
use troupe_lead::plan::{BuildPlan, PlanGroup, PlanTask};

const WAVES: usize = 10;
const PER_WAVE: usize = 20;

fn id(w: usize, i: usize) -> String {
    format!("{}.{}", w + 1, i + 1)
}

/// 200 tasks, 10 waves of 20; each task depends on the same-index task of the wave before.
fn plan() -> BuildPlan {
    let mut tasks = Vec::new();
    let mut groups = Vec::new();
    for w in 0..WAVES {
        for i in 0..PER_WAVE {
            let depends = if w == 0 { vec![] } else { vec![id(w - 1, i)] };
            tasks.push(PlanTask { id: id(w, i), summary: format!("task {}", id(w, i)), depends, done: false });
            groups.push(PlanGroup {
                id: format!("G{}-{}", w + 1, i + 1),
                wave: (w + 1) as u32,
                tasks: vec![id(w, i)],
                files: vec![format!("src/f{}_{}.rs", w + 1, i + 1)],
                reported_files: Vec::new(),
            });
        }
    }
    BuildPlan { tasks, groups }
}

fn tasks_yaml() -> String {
    let mut s = String::from("tasks:\n");
    for w in 0..WAVES {
        for i in 0..PER_WAVE {
            s.push_str(&format!("  - id: \"{}\"\n    summary: t\n    status: pending\n", id(w, i)));
            if w > 0 {
                s.push_str(&format!("    depends: [\"{}\"]\n", id(w - 1, i)));
            }
        }
    }
    s.push_str("execution:\n");
    for w in 0..WAVES {
        s.push_str(&format!("  - wave: {}\n    groups:\n", w + 1));
        for i in 0..PER_WAVE {
            s.push_str(&format!(
                "      - id: G{}-{}\n        tasks: [\"{}\"]\n        files: [src/f{}_{}.rs]\n",
                w + 1,
                i + 1,
                id(w, i),
                w + 1,
                i + 1
            ));
        }
    }
    s
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// `worktrees`: `[team] isolation = "worktree"`, git answered instantly
/// (worktree opened, merge made, merged gate passed), so the machine's own
/// cost of merging in wave order shows.
fn machine(worktrees: bool) {
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut spec = Spec::new("bench", now);
    spec.mark_design_generated(now, "d").unwrap();
    let config = LeadConfig { worktrees, ..LeadConfig::default() };
    let mut lead = Lead::new(spec, Job::Resume, config, now);
    let label = if worktrees { "machine, worktrees" } else { "machine" };
    let mut inside = Duration::ZERO;
    let mut queue: Vec<Event> = Vec::new();
    let mut finished_at: HashMap<String, Instant> = HashMap::new();
    let mut latencies = Vec::new();
    let mut spawns = 0;
    let t = Instant::now();
    lead.start(now);
    loop {
        let s = Instant::now();
        let mut cmds = Vec::new();
        while let Some(c) = lead.poll_command() {
            cmds.push(c);
        }
        inside += s.elapsed();
        let mut done = false;
        for c in cmds {
            match c {
                Command::LoadPlan => queue.push(Event::PlanLoaded(PlanLoad::Loaded(plan()))),
                Command::ImportPlan { .. } => queue.push(Event::PlanImported { completed: vec![] }),
                Command::Spawn(req) => {
                    spawns += 1;
                    // The latest completion of a dependency of this task, if any.
                    if let Some(dep) =
                        req.tasks.first().and_then(|t| plan().task(t).and_then(|x| x.depends.first().cloned()))
                        && let Some(at) = finished_at.get(&dep)
                    {
                        latencies.push(at.elapsed());
                    }
                    // Every field the report parser requires (without them the run escalates).
                    let report = format!(
                        "BUILDER_COMPLETE\nFeature: bench\nTasks completed: {}\nFiles: x\nTests: ok\nStatus: done",
                        req.tasks.join(", ")
                    );
                    queue.push(Event::TeammateFinished {
                        id: req.id.clone(),
                        report: Some(report.into()),
                        stats: RunStats::default(),
                    });
                }
                Command::RunGate { run, kind } => {
                    if let GateKind::TaskCompleted { tasks, .. } = &kind {
                        for t in tasks {
                            finished_at.insert(t.clone(), Instant::now());
                        }
                    }
                    queue.push(Event::GateFinished { run, verdict: GateVerdict::Passed, output: String::new() })
                }
                Command::Commit { .. } => queue.push(Event::Committed { sha: Some("x".into()) }),
                Command::RecoverWorktrees => queue.push(Event::WorktreesRecovered { merged: vec![] }),
                Command::LandLine { .. } => queue.push(Event::LineLanded { sha: None }),
                Command::MergeGroup { group, .. } => {
                    queue.push(Event::GroupMerged { group, before: "a".into(), after: "b".into() })
                }
                Command::Finish(o) => {
                    println!("{label}: outcome {o:?}");
                    done = true;
                }
                _ => {}
            }
        }
        if done {
            break;
        }
        let Some(e) = (if queue.is_empty() { None } else { Some(queue.remove(0)) }) else { panic!("stalled") };
        let s = Instant::now();
        lead.handle_event(e, now);
        inside += s.elapsed();
    }
    let wall = t.elapsed();
    println!(
        "{label}: {} tasks, {WAVES} waves, {spawns} Builders: time inside the machine {:.1} ms (wall with the fake teammates {:.1} ms)",
        WAVES * PER_WAVE,
        inside.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e3
    );
    let n = latencies.len();
    println!(
        "{label}: completion -> successor spawn over {n} successors: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        percentile(&mut latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&mut latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
}

struct Timing {
    reported: HashMap<String, Instant>,
    agent_tasks: HashMap<String, Vec<String>>,
    latencies: Vec<Duration>,
    spawned: usize,
}

impl Observer for Timing {
    fn command(&mut self, command: &Command, _lead: &Lead) {
        if let Command::Spawn(req) = command {
            self.spawned += 1;
            self.agent_tasks.insert(req.id.clone(), req.tasks.clone());
            let deps: Vec<String> =
                req.tasks.iter().filter_map(|t| plan().task(t).and_then(|x| x.depends.first().cloned())).collect();
            if let Some(at) = deps.iter().filter_map(|d| self.reported.get(d)).max() {
                self.latencies.push(at.elapsed());
            }
        }
    }
    fn event(&mut self, event: &Event, _lead: &Lead) {
        if let Event::TeammateEnded { id, .. } | Event::TeammateFinished { id, .. } = event {
            for t in self.agent_tasks.get(id).cloned().unwrap_or_default() {
                self.reported.insert(t, Instant::now());
            }
        }
    }
}

fn troupe_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TROUPE_BIN") {
        return Some(PathBuf::from(p));
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    ["release", "debug"].iter().map(|p| target.join(p).join("troupe")).find(|p| p.exists())
}

/// The scripted Builders: each group's Builder writes its file and reports
/// every field the report parser requires.
fn builders_script() -> String {
    let mut s = String::from("agents:\n");
    for w in 0..WAVES {
        for i in 0..PER_WAVE {
            let (g, file) = (format!("G{}-{}", w + 1, i + 1), format!("src/f{}_{}.rs", w + 1, i + 1));
            s.push_str(&format!(
                "  builder/{g}:\n    - - write: {{path: {file}, content: \"// {g}\"}}\n      - report: \"BUILDER_COMPLETE\\nFeature: bench\\nTasks completed: {}\\nFiles: {file}\\nTests: none\\nStatus: done\"\n",
                id(w, i)
            ));
        }
    }
    s
}

/// `git args` in `root`, which must succeed.
fn git(root: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git").args(args).current_dir(root).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn driver(gate: bool, worktrees: bool) {
    let Some(troupe) = troupe_bin() else {
        println!("driver: skipped: no troupe binary (build it, or set TROUPE_BIN)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let project = troupe_project::Project::at(root);
    let layout = project.layout().clone();
    std::fs::create_dir_all(layout.spec_dir("bench")).unwrap();
    let now = Timestamp::now();
    let mut spec = Spec::new("bench", now);
    spec.mark_design_generated(now, "d").unwrap();
    std::fs::write(layout.spec_file("bench"), spec.to_yaml()).unwrap();
    std::fs::write(layout.tasks_file("bench"), tasks_yaml()).unwrap();
    if gate {
        std::fs::create_dir_all(layout.steering_dir()).unwrap();
        std::fs::write(layout.steering_dir().join("tech.md"), "## Common Commands\n\n- Test: `true`\n- Lint: `true`\n")
            .unwrap();
    }
    let label = match (gate, worktrees) {
        (_, true) => "driver, worktrees, no gate command",
        (true, false) => "driver, gate `true && true`",
        (false, false) => "driver, no gate command",
    };
    let script = root.join("script.yaml");
    std::fs::write(&script, builders_script()).unwrap();
    if worktrees {
        // `isolation = "worktree"` is the default; it applies to a run that commits, in a repository.
        std::fs::write(root.join(".gitignore"), ".troupe/state/\nscript.yaml\n").unwrap();
        git(root, &["init", "-q"]);
        git(root, &["config", "user.email", "bench@localhost"]);
        git(root, &["config", "user.name", "bench"]);
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "the plan"]);
    }
    let opts = RunOptions {
        feature: "bench".into(),
        job: Job::Resume,
        engine: Some("scripted".into()),
        commit: worktrees,
        troupe: troupe.clone(),
        script: Some(script),
        budget: None,
    };
    let mut timing =
        Timing { reported: HashMap::new(), agent_tasks: HashMap::new(), latencies: Vec::new(), spawned: 0 };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let t = Instant::now();
    let report = rt.block_on(troupe_lead::driver::run(&project, opts, &mut timing)).unwrap();
    let wall = t.elapsed();
    // One scripted teammate alone, to subtract the teammates' own cost.
    let one = Instant::now();
    let out = std::process::Command::new(&troupe)
        .args(["scripted-agent", "--script"])
        .arg(root.join("script.yaml"))
        .envs([("TROUPE_ROLE", "builder"), ("TROUPE_GROUP", "G1-1"), ("TROUPE_FEATURE", "bench")])
        .envs([("TROUPE_OWNED_FILES", "src/f1_1.rs")])
        .env("TROUPE_PROJECT", root)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let per_agent = one.elapsed();
    let critical = per_agent * WAVES as u32;
    println!(
        "{label}: {} ({}), {} Builders as real processes: wall {:.0} ms; one scripted teammate alone takes {:.1} ms, so the critical path of {WAVES} waves holds >= {:.0} ms of teammate time",
        report.outcome,
        troupe.display(),
        timing.spawned,
        wall.as_secs_f64() * 1e3,
        per_agent.as_secs_f64() * 1e3,
        critical.as_secs_f64() * 1e3
    );
    let n = timing.latencies.len();
    println!(
        "{label}: completion -> successor spawn over {n} successors (report received -> quality gate -> tasks.yaml/board -> spawn): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&mut timing.latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&mut timing.latencies, 0.99).as_secs_f64() * 1e3,
        timing.latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
}

/// Every part, or those whose name holds one of the arguments (`cargo bench
/// -p troupe-lead --bench lead -- "driver, worktrees"`).
fn main() {
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| name.contains(o.as_str()));
    let parts: [(&str, fn()); 5] = [
        ("machine", || machine(false)),
        ("machine, worktrees", || machine(true)),
        ("driver, no gate command", || driver(false, false)),
        ("driver, gate", || driver(true, false)),
        ("driver, worktrees", || driver(false, true)),
    ];
    for (name, part) in parts {
        if wanted(name) {
            part();
        }
    }
}
