//! What recording a run for `troupe replay` adds to it (issue 21): the
//! record's start (the work tree as a git tree, through a private index, and
//! the store's `VACUUM INTO` snapshot) and its end (the last event, the
//! board, `run.json`), timed in process on a project of `FILES` committed
//! files (some changed, some untracked) and a store of `EVENTS` events, and
//! the bytes a run's folder takes. The teammates' logs are not counted: the
//! supervisor writes them for `troupe agent logs` with or without replay.
//!
//! Run: `cargo bench -p troupe-lead --bench record` (`TROUPE_BENCH_DIR` puts
//! the project elsewhere, `/dev/shm` for tmpfs).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use troupe_core::config::StoreConfig;
use troupe_core::layout::Layout;
use troupe_lead::driver::RunOptions;
use troupe_lead::driver::record::{self, Start};
use troupe_lead::machine::Job;
use troupe_store::NewEvent;

const FILES: usize = 2_000;
const EVENTS: usize = 10_000;
const RUNS: usize = 10;

fn git(root: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .expect("git runs")
        .status
        .success();
    assert!(ok, "git {args:?}");
}

/// CPU seconds of this process and its waited-for children (git) so far,
/// from `/proc/self/stat`: on a loaded machine wall time is mostly waiting.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, then stime, cutime, cstime.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest.split_whitespace().skip(11).take(4).filter_map(|t| t.parse::<u64>().ok()).sum();
    ticks as f64 / 100.0
}

fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().flatten().map(|e| e.metadata().unwrap().len()).sum()
}

fn main() {
    let base = std::env::var_os("TROUPE_BENCH_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new().prefix("troupe-record-bench-").tempdir_in(base).unwrap();
    let root = dir.path();
    for i in 0..FILES {
        let path = root.join(format!("src/m{}/f{i}.rs", i % 40));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("// file {i}\n{}", "fn x() {}\n".repeat(100))).unwrap();
    }
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "start"]);
    for i in 0..20 {
        std::fs::write(root.join(format!("src/m0/f{i}.rs")), "changed\n").unwrap();
        std::fs::write(root.join(format!("new{i}.txt")), "untracked\n").unwrap();
    }
    let layout = Layout::new(root);
    let store = troupe_store::open_checked(&layout, &StoreConfig::default()).unwrap();
    for i in 0..EVENTS {
        let data = serde_json::json!({"task": format!("login/{i}"), "by": "builder-g1-4", "note": "x".repeat(80)});
        let e = NewEvent { kind: "task_claimed".into(), actor: Some("builder-g1-4".into()), subject: None, data };
        store.append_event(e).unwrap();
    }
    let place = troupe_store::place(&layout, &StoreConfig::default()).unwrap();
    let opts = RunOptions {
        feature: "login".into(),
        job: Job::Run,
        engine: None,
        commit: true,
        troupe: "troupe".into(),
        script: None,
        budget: None,
    };
    let (mut starts, mut ends, mut snapshots) = (Vec::new(), Vec::new(), Vec::new());
    let mut bytes = 0;
    let mut cpu = 0.0;
    for n in 0..RUNS {
        let before = cpu_seconds();
        let run = format!("login@bench-{n}");
        let t = Instant::now();
        let mut rec = record::start(&layout, Start { run: &run, opts: &opts, root, store_place: &place }).unwrap();
        rec.numbered(1 + 100 * n as u64, 100).unwrap();
        starts.push(t.elapsed());
        let t = Instant::now();
        rec.finish(store.as_ref(), "completed").unwrap();
        ends.push(t.elapsed());
        cpu += cpu_seconds() - before;
        bytes = folder_bytes(&record::run_dir(&layout, &run));
        // The snapshot alone, for its share of the start.
        let to = root.join(format!("snapshot-{n}.db"));
        let t = Instant::now();
        troupe_store::copy::snapshot(&place, &to).unwrap();
        snapshots.push(t.elapsed());
    }
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (s, e, snap) = (median(&mut starts), median(&mut ends), median(&mut snapshots));
    println!("recording a run: {FILES} files (20 changed, 20 untracked), {EVENTS} events, {RUNS} runs, median");
    println!("  start (git tree + store snapshot): {:.1} ms (max {:.1})", ms(&s), ms(starts.last().unwrap()));
    println!("    of which the store's snapshot: {:.1} ms", ms(&snap));
    println!("  CPU (user + system, git included) per recorded run: {:.0} ms", cpu * 1000.0 / RUNS as f64);
    println!("  end (last event, board, run.json): {:.1} ms (max {:.1})", ms(&e), ms(ends.last().unwrap()));
    println!("  run folder: {} KiB ({:.0} bytes per event of the store)", bytes / 1024, bytes as f64 / EVENTS as f64);
}
