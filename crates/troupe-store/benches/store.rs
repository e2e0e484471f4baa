//! The board's speed targets, through the library API, on a real database file:
//! `available` at 10,000 and 100,000 tasks, claim / claim_next / complete /
//! create latency at 10,000 tasks, and claim+complete throughput with 8 processes.
//!
//! Run: `cargo bench -p troupe-store --bench store`. Prints p50/p99 (and the
//! mean for throughput); asserts nothing.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use troupe_store::{Board, NewTask, SqliteStore, TaskFilter};

const WORKER_FLAG: &str = "--claim-worker";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == WORKER_FLAG) {
        worker(Path::new(&args[i + 1]), &args[i + 2]);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    println!("troupe-store board benchmark (SQLite, WAL, synchronous=NORMAL, one file on local disk)");
    println!();
    board_at(dir.path(), 10_000);
    board_at(dir.path(), 100_000);
    throughput(dir.path(), 8, 20_000);
}

/// A plan-shaped board of `n` tasks: chains of 4 (each task blocked by the one
/// before it), so a quarter of the tasks are available, like a real plan's first
/// wave; plus the same size with no dependencies, the worst case for `available`.
fn board_at(dir: &Path, n: usize) {
    for (shape, chained) in [("plan-shaped, 25% available", true), ("no dependencies, 100% available", false)] {
        let path = dir.join(format!("board-{n}-{chained}.db"));
        let store = SqliteStore::open(&path).unwrap();
        let started = Instant::now();
        let batch: Vec<NewTask> = (0..n)
            .map(|i| {
                let mut t = NewTask::new(format!("task {i}: implement part {i} of the feature"), "lead")
                    .with_id(format!("f/{i}"));
                t.description = "A description of a realistic length, with a sentence or two of detail.".into();
                // Ten features; a chain of four stays within one feature.
                t.feature = Some(format!("f{}", (i / 4) % 10));
                t.wave = Some(u32::try_from(i % 4).unwrap() + 1);
                t.files = vec![format!("src/part_{i}.rs")];
                if chained && i % 4 != 0 {
                    t.blocked_by = vec![format!("f/{}", i - 1)];
                }
                t
            })
            .collect();
        store.create_tasks(batch).unwrap();
        let load = started.elapsed();
        println!("{n} tasks, {shape} (bulk create: {:.0} ms)", ms(load));

        let filter = TaskFilter::default();
        let count = store.available("bench", &filter).unwrap().len();
        let times = repeat(if n > 10_000 { 30 } else { 200 }, || {
            store.available("bench", &filter).unwrap();
        });
        report(&format!("available ({count} rows)"), &times);
        let feature = TaskFilter { feature: Some("f3".into()), ..TaskFilter::default() };
        let rows = store.available("bench", &feature).unwrap().len();
        let times = repeat(if n > 10_000 { 30 } else { 200 }, || {
            store.available("bench", &feature).unwrap();
        });
        report(&format!("available, one feature ({rows})"), &times);

        if n <= 10_000 && chained {
            let ready: Vec<String> =
                store.available("bench", &filter).unwrap().into_iter().map(|t| t.id).take(1_000).collect();
            let mut it = ready.iter();
            let times = repeat(500, || {
                store.claim(it.next().unwrap(), "bench").unwrap();
            });
            report("claim(id)", &times);
            let mut held = ready.iter();
            let times = repeat(500, || {
                store.complete(held.next().unwrap(), "bench").unwrap();
            });
            report("complete (unblocks 1)", &times);
            let times = repeat(500, || {
                store.claim_next("bench-next", &filter).unwrap().unwrap();
            });
            report("claim_next", &times);
            let mut i = 0;
            let times = repeat(500, || {
                i += 1;
                store.create_task(NewTask::new(format!("new task {i}"), "lead").blocked_by(["f/0"])).unwrap();
            });
            report("create (1 blocker)", &times);
            let times = repeat(500, || {
                store.task("f/5001").unwrap();
            });
            report("task(id)", &times);
        }
        println!();
    }
}

/// `processes` processes of this binary, each claiming and completing until the
/// board is empty. The rate is completed tasks per second of wall time.
fn throughput(dir: &Path, processes: usize, tasks: usize) {
    let path = dir.join("throughput.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        let batch: Vec<NewTask> = (0..tasks).map(|i| NewTask::new(format!("task {i}"), "lead")).collect();
        store.create_tasks(batch).unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|w| {
            Command::new(&exe)
                .arg(WORKER_FLAG)
                .arg(&path)
                .arg(format!("worker-{w}"))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut done = 0usize;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        done += String::from_utf8_lossy(&out.stdout).trim().parse::<usize>().unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(done, tasks, "every task completed once");
    println!(
        "{processes} processes, claim_next + complete over {tasks} tasks: {:.0} ms, {:.0} claim+complete/s",
        ms(elapsed),
        tasks as f64 / elapsed.as_secs_f64()
    );
}

fn worker(path: &Path, agent: &str) {
    let store = SqliteStore::open(path).unwrap();
    let mut done = 0usize;
    while let Some(task) = store.claim_next(agent, &TaskFilter::default()).unwrap() {
        store.complete(&task.id, agent).unwrap();
        done += 1;
    }
    println!("{done}");
}

fn repeat(runs: usize, mut f: impl FnMut()) -> Vec<Duration> {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times
}

fn report(what: &str, sorted: &[Duration]) {
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    println!("  {what:<28} p50 {:>8.3} ms   p99 {:>8.3} ms", ms(pct(0.5)), ms(pct(0.99)));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
