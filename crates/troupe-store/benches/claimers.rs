//! Many claimers on one board, PostgreSQL next to SQLite: 64 concurrent
//! claimers in 4 processes (16 threads each, every thread its own opener)
//! take 5,000 independent tasks with `claim_next` + `complete` until none is
//! left. Prints claim latency (p50/p99), claim+complete per second, and checks
//! every task was claimed and completed exactly once (from the event log),
//! also after a claimer process is SIGKILLed mid-run. Then the mailbox
//! wake-up: a waiter blocked in `EventLog::wait_for_event` against a message
//! sent from another connection (p50/p95).
//!
//! PostgreSQL runs in a private cluster (troupe-testkit) with its default
//! durability (fsync and synchronous_commit on); SQLite in WAL mode with
//! synchronous=NORMAL, its shipped settings.
//!
//! Run: `cargo bench -p troupe-store --bench claimers` (`TROUPE_BENCH_ONLY=wake-up`
//! for the wake-up alone). Asserts only exactly-once.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use troupe_store::{EventLog, Mailbox, NewMessage, NewTask, PgStore, SqliteStore, Store, TaskFilter};

const WORKER_FLAG: &str = "--claimers";
const TASKS: usize = 5_000;
const PROCESSES: usize = 4;
const THREADS: usize = 16;

fn open(place: &str) -> Box<dyn Store> {
    if place.starts_with("postgres") {
        Box::new(PgStore::open(place).unwrap())
    } else {
        Box::new(SqliteStore::open(place.as_ref()).unwrap())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == WORKER_FLAG) {
        claimers(&args[i + 1], &args[i + 2]);
        return;
    }
    let cluster = troupe_testkit::postgres::Cluster::start(true);
    // `TROUPE_BENCH_ONLY=wake-up`: the mailbox wake-up alone (seconds, not minutes).
    if std::env::var("TROUPE_BENCH_ONLY").as_deref() == Ok("wake-up") {
        return wake_up(&cluster.create_database());
    }
    let dir = tempfile::tempdir().unwrap();
    println!("{} claimers ({PROCESSES} processes x {THREADS} threads) over {TASKS} tasks", PROCESSES * THREADS);
    for (name, place) in [
        ("PostgreSQL 15, local, durable", cluster.create_database()),
        ("SQLite, WAL, synchronous=NORMAL", dir.path().join("claims.db").display().to_string()),
    ] {
        run(name, &place, false);
    }
    run("PostgreSQL, one claimer process SIGKILLed mid-run", &cluster.create_database(), true);
    wake_up(&cluster.create_database());
}

fn run(name: &str, place: &str, kill_one: bool) {
    let store = open(place);
    let batch: Vec<NewTask> =
        (0..TASKS).map(|i| NewTask::new(format!("task {i}"), "lead").with_id(format!("c/{i}"))).collect();
    store.create_tasks(batch).unwrap();
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|p| {
            Command::new(&exe).args([WORKER_FLAG, place, &format!("p{p}")]).stdout(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    if kill_one {
        // Once it has done some work: the kill lands inside its transactions' stream.
        let mut lines = BufReader::new(children[0].stdout.take().unwrap()).lines();
        let _ = lines.next();
        std::thread::sleep(Duration::from_millis(300));
        children[0].kill().unwrap();
        children[0].wait().unwrap();
        // Tasks the dead process held are released as the Lead's recovery would.
        for t in store
            .list(&troupe_store::ListFilter {
                status: Some(troupe_store::TaskStatus::InProgress),
                ..Default::default()
            })
            .unwrap()
        {
            if t.assignee.as_deref().is_some_and(|a| a.starts_with("p0-")) {
                store.release(&t.id, None, "lead").unwrap();
            }
        }
        // A survivor takes what was released.
        let mut again = Command::new(&exe).args([WORKER_FLAG, place, "p9"]).stdout(Stdio::piped()).spawn().unwrap();
        let out = BufReader::new(again.stdout.take().unwrap()).lines().map_while(Result::ok).last();
        again.wait().unwrap();
        let _ = out;
    }
    let mut latencies: Vec<f64> = Vec::new();
    for (i, child) in children.iter_mut().enumerate() {
        if kill_one && i == 0 {
            continue;
        }
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines().map_while(Result::ok) {
            latencies.extend(line.split(' ').filter_map(|v| v.parse::<f64>().ok()));
        }
        child.wait().unwrap();
    }
    let elapsed = started.elapsed();
    let events = store.events_since(0, u32::MAX).unwrap();
    let mut completed = std::collections::HashMap::<String, usize>::new();
    for e in events.iter().filter(|e| e.kind == "task_completed") {
        *completed.entry(e.subject.clone().unwrap_or_default()).or_default() += 1;
    }
    assert_eq!(completed.len(), TASKS, "{name}: every task completed");
    assert!(completed.values().all(|&n| n == 1), "{name}: no task completed twice");
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies.get(((latencies.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0.0);
    println!(
        "{name}: claim p50 {:.2} ms, p99 {:.2} ms; {:.0} claim+complete/s ({TASKS} in {:.1} s); exactly once: yes",
        pct(0.5),
        pct(0.99),
        TASKS as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
}

/// A worker process: THREADS claimers until the board is empty; prints one
/// line of claim latencies (ms) per thread, and `started` first.
fn claimers(place: &str, name: &str) {
    println!("started");
    let lines: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                scope.spawn(move || {
                    let store = open(place);
                    let me = format!("{name}-{t}");
                    let mut times = Vec::new();
                    loop {
                        let at = Instant::now();
                        let Some(task) = store.claim_next(&me, &TaskFilter::default()).unwrap() else { break };
                        times.push(format!("{:.3}", at.elapsed().as_secs_f64() * 1000.0));
                        store.complete(&task.id, &me).unwrap();
                    }
                    times.join(" ")
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for line in lines {
        println!("{line}");
    }
}

/// Mailbox wake-up: how long from `send` returning to the waiter waking.
fn wake_up(url: &str) {
    let store = PgStore::open(url).unwrap();
    let sender = PgStore::open(url).unwrap();
    let mut times = Vec::new();
    for i in 0..50 {
        let last = store.events_since(0, u32::MAX).unwrap().last().map_or(0, |e| e.id);
        let woke = std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                store.wait_for_event(last, Duration::from_secs(10)).unwrap();
                Instant::now()
            });
            std::thread::sleep(Duration::from_millis(20));
            let sent = Instant::now();
            sender.send(NewMessage::text("lead", "builder-1", format!("wake {i}"))).unwrap();
            waiter.join().unwrap().saturating_duration_since(sent)
        });
        times.push(woke.as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "mailbox wake-up (LISTEN/NOTIFY, send -> waiter awake): p50 {:.2} ms, p95 {:.2} ms",
        times[times.len() / 2],
        times[times.len() * 95 / 100]
    );
}
