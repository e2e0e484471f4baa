//! Many claimers on one board, PostgreSQL next to SQLite: 64 concurrent
//! claimers in 4 processes (16 threads each) take 5,000 independent tasks with `claim_next` + `complete` until none is
//! left. Prints claim latency (p50/p99), claim+complete per second, and checks
//! every task was claimed and completed exactly once (from the event log),
//! also after a claimer process is SIGKILLed mid-run. Then the mailbox
//! wake-up: a waiter blocked in `EventLog::wait_for_event` against a message
//! sent from another connection (p50/p95).
//!
//! A process opens one store and its claimer threads share it, as `troupe
//! serve`, a worker or the Lead share theirs: on PostgreSQL its connection
//! pool (`pool_max_conns` in the URL) bounds the backends a process puts on
//! the server. `TROUPE_BENCH_POOL=4,8,16` runs the PostgreSQL loops once per
//! pool size (default: the store's default); `TROUPE_BENCH_STORE=per-claimer`
//! gives every thread its own opener instead (one backend per claimer), for
//! comparison.
//!
//! PostgreSQL runs in a private cluster (troupe-testkit) with its default
//! durability (fsync and synchronous_commit on); SQLite in WAL mode with
//! synchronous=NORMAL, its shipped settings.
//!
//! Two ways to load the board. Closed loop: each claimer claims again as
//! soon as its complete returns, so 64 claimers saturate the server and the
//! latency is the queue they form. Open loop: each claimer is offered a fixed
//! rate (`TROUPE_BENCH_RATE` claim+complete per second in total, default
//! 1,000, spread evenly over the claimers and staggered between them), and a
//! claim's latency counts from the moment it was due, not from when the
//! claimer got round to it: a claimer that falls behind carries its lateness
//! into every later claim, so queueing shows (no coordinated omission).
//!
//! Each run also prints the CPU time one claim+complete costs: the server's
//! (PostgreSQL's postmaster and backends, from `/proc`) and the claimer
//! processes' (user + system), and the load average it started at: on a
//! shared machine, CPU per claim times the target rate against the cores
//! says whether the target can be met at all.
//!
//! Run: `cargo bench -p troupe-store --bench claimers`. `TROUPE_BENCH_ONLY=wake-up`
//! for the wake-up alone, `=postgres` for the PostgreSQL run alone;
//! `TROUPE_BENCH_CLAIMERS=8x2` for 8 processes of 2 threads (default `4x16`);
//! `TROUPE_BENCH_RATE=2000` for the open loop's offered rate;
//! `TROUPE_BENCH_POOL` and `TROUPE_BENCH_STORE` as above;
//! `TROUPE_BENCH_STATEMENTS=1` loads `pg_stat_statements` into the cluster
//! and prints, after each PostgreSQL run, the statements the server ran per
//! claim+complete (calls, server time, buffers; nested statements included),
//! which is how round trips and the server's time per call are counted.
//! Asserts only exactly-once.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use troupe_store::{EventLog, Mailbox, NewMessage, NewTask, PgStore, SqliteStore, Store, TaskFilter};

const WORKER_FLAG: &str = "--claimers";
const TASKS: usize = 5_000;
/// Claimer processes x threads in each, unless `TROUPE_BENCH_CLAIMERS` says otherwise.
const CLAIMERS: (usize, usize) = (4, 16);
/// Claim+complete per second offered in total in the open loop, unless `TROUPE_BENCH_RATE` says otherwise.
const RATE: f64 = 1_000.0;

/// How a claimer process opens the store, unless `TROUPE_BENCH_STORE=per-claimer`.
const SHARED: &str = "shared";

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
        let n = |k: usize| args[i + k].parse::<u64>().unwrap();
        let pace = Pace { interval_us: n(4), first: n(5), of: n(6) };
        claimers(&args[i + 1], &args[i + 2], n(3) as usize, pace, args[i + 7] == SHARED);
        return;
    }
    let statements = std::env::var_os("TROUPE_BENCH_STATEMENTS").is_some();
    let cluster = if statements {
        let options = "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all";
        troupe_testkit::postgres::Cluster::start_with(true, options, |_| {})
    } else {
        troupe_testkit::postgres::Cluster::start(true)
    };
    let only = std::env::var("TROUPE_BENCH_ONLY").unwrap_or_default();
    // `TROUPE_BENCH_ONLY=wake-up`: the mailbox wake-up alone (seconds, not minutes).
    if only == "wake-up" {
        return wake_up(&cluster.create_database());
    }
    let (processes, threads) = std::env::var("TROUPE_BENCH_CLAIMERS")
        .ok()
        .and_then(|v| v.split_once('x').and_then(|(p, t)| Some((p.parse().ok()?, t.parse().ok()?))))
        .unwrap_or(CLAIMERS);
    let rate = std::env::var("TROUPE_BENCH_RATE").ok().and_then(|v| v.parse().ok()).unwrap_or(RATE);
    let stores = std::env::var("TROUPE_BENCH_STORE").unwrap_or_else(|_| SHARED.into());
    // Each pool size as the URL's query and as the runs' label.
    let pools: Vec<(String, String)> = std::env::var("TROUPE_BENCH_POOL")
        .map(|v| {
            v.split(',').map(|n| (format!("?pool_max_conns={}", n.trim()), format!(", pool {}", n.trim()))).collect()
        })
        .unwrap_or_else(|_| vec![(String::new(), String::new())]);
    let shape = Shape { processes, threads, server: Server::of(&cluster), stores, statements };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = |name: &str| dir.path().join(name).display().to_string();
    println!(
        "{} claimers ({processes} processes x {threads} threads, stores: {}) over {TASKS} tasks",
        processes * threads,
        shape.stores
    );
    let (closed, open) = (Load::Closed, Load::Open { per_second: rate });
    for (query, label) in &pools {
        let url = || cluster.create_database() + query;
        run(&format!("PostgreSQL 15, local, durable, closed loop{label}"), &url(), closed, &shape);
        run(&format!("PostgreSQL, open loop at {rate:.0}/s{label}"), &url(), open, &shape);
    }
    if only == "postgres" {
        return;
    }
    run("SQLite, WAL, synchronous=NORMAL, closed loop", &sqlite("closed.db"), closed, &shape);
    run(&format!("SQLite, open loop at {rate:.0}/s"), &sqlite("open.db"), open, &shape);
    let (query, label) = &pools[0];
    let url = cluster.create_database() + query;
    run(&format!("PostgreSQL, one claimer process SIGKILLed mid-run{label}"), &url, Load::KillOne, &shape);
    wake_up(&cluster.create_database());
}

/// How many claimers a run starts, how they open the store, and the server whose CPU it counts.
struct Shape {
    processes: usize,
    threads: usize,
    server: Server,
    /// [`SHARED`]: one store per process; anything else: one per claimer thread.
    stores: String,
    /// Print the server's statements per claim+complete after each PostgreSQL run.
    statements: bool,
}

/// How the claimers are driven.
#[derive(Clone, Copy)]
enum Load {
    /// Each claimer claims again as soon as its complete returns.
    Closed,
    /// Closed, and one claimer process is SIGKILLed mid-run.
    KillOne,
    /// Each claimer is offered `per_second / claimers`, latency counted from when a claim was due.
    Open { per_second: f64 },
}

/// An open-loop claimer's schedule: a claim every `interval_us` (0: closed
/// loop); thread `t` of this process is claimer `first + t` of `of`, which
/// staggers its first claim so the claimers' claims spread evenly.
#[derive(Clone, Copy)]
struct Pace {
    interval_us: u64,
    first: u64,
    of: u64,
}

fn run(name: &str, place: &str, load: Load, shape: &Shape) {
    let kill_one = matches!(load, Load::KillOne);
    let claimers = shape.processes * shape.threads;
    let interval_us = match load {
        Load::Open { per_second } => (claimers as f64 * 1e6 / per_second) as u64,
        Load::Closed | Load::KillOne => 0,
    };
    let pace = |p: usize| {
        let [interval, first, of] = [interval_us, (p * shape.threads) as u64, claimers as u64].map(|n| n.to_string());
        [interval, first, of, shape.stores.clone()]
    };
    let store = open(place);
    let batch: Vec<NewTask> =
        (0..TASKS).map(|i| NewTask::new(format!("task {i}"), "lead").with_id(format!("c/{i}"))).collect();
    store.create_tasks(batch).unwrap();
    let exe = std::env::current_exe().unwrap();
    let threads = shape.threads.to_string();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let statements = (shape.statements && place.starts_with("postgres")).then(|| Statements::reset(place));
    let cpu_before = (shape.server.cpu(), children_cpu());
    let started = Instant::now();
    let mut children: Vec<Child> = (0..shape.processes)
        .map(|p| {
            Command::new(&exe)
                .args([WORKER_FLAG, place, &format!("p{p}"), &threads])
                .args(pace(p))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    if kill_one {
        // Once it has done some work: the kill lands inside its transactions' stream.
        let mut lines = BufReader::new(children[0].stdout.take().unwrap()).lines();
        let _ = lines.next();
        std::thread::sleep(Duration::from_millis(300));
        children[0].kill().unwrap();
        children[0].wait().unwrap();
        // Tasks the dead process held are released as the Lead's recovery
        // would, and a survivor takes them; again while any turn up. The
        // server finishes a statement the dead process sent just before the
        // kill: a claim may commit after the first look, a complete after it
        // (that task is done, not lost), as a lost host's leases are swept
        // more than once.
        for round in 0.. {
            let mut released = 0;
            let filter =
                troupe_store::ListFilter { status: Some(troupe_store::TaskStatus::InProgress), ..Default::default() };
            for t in store.list(&filter).unwrap() {
                if t.assignee.as_deref().is_some_and(|a| a.starts_with("p0-")) {
                    match store.release(&t.id, None, "lead") {
                        Ok(_) => released += 1,
                        Err(troupe_store::StoreError::WrongStatus {
                            status: troupe_store::TaskStatus::Completed,
                            ..
                        }) => {}
                        Err(e) => panic!("release {}: {e}", t.id),
                    }
                }
            }
            if round > 0 && released == 0 {
                break;
            }
            let mut again = Command::new(&exe)
                .args([WORKER_FLAG, place, "p9", &threads])
                .args(pace(0))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let _ = BufReader::new(again.stdout.take().unwrap()).lines().map_while(Result::ok).last();
            again.wait().unwrap();
        }
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
    let (server, client) = (shape.server.cpu() - cpu_before.0, children_cpu() - cpu_before.1);
    let events = store.events_since(0, u32::MAX).unwrap();
    let mut completed = std::collections::HashMap::<String, usize>::new();
    for e in events.iter().filter(|e| e.kind == "task_completed") {
        *completed.entry(e.subject.clone().unwrap_or_default()).or_default() += 1;
    }
    assert_eq!(completed.len(), TASKS, "{name}: every task completed");
    assert!(completed.values().all(|&n| n == 1), "{name}: no task completed twice");
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies.get(((latencies.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0.0);
    let per_claim = |seconds: f64| seconds * 1e6 / TASKS as f64;
    println!(
        "{name}: claim p50 {:.2} ms, p99 {:.2} ms; {:.0} claim+complete/s ({TASKS} in {:.1} s); exactly once: yes\n  \
         CPU per claim+complete: server {:.0} us, claimers {:.0} us; load average at start {}",
        pct(0.5),
        pct(0.99),
        TASKS as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64(),
        per_claim(if place.starts_with("postgres") { server } else { 0.0 }),
        per_claim(client),
        load.split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    if let Some(mut statements) = statements {
        statements.print();
    }
}

/// The server's statements in one database, from `pg_stat_statements`.
struct Statements {
    client: postgres::Client,
}

impl Statements {
    /// Connect to `url`'s database and forget what the server counted so far.
    fn reset(url: &str) -> Statements {
        let url = url.split('?').next().unwrap();
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        client.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").unwrap();
        client.execute("SELECT pg_stat_statements_reset()", &[]).unwrap();
        Statements { client }
    }

    /// Print the statements that took the most server time, per claim+complete.
    fn print(&mut self) {
        let per = TASKS as f64;
        let rows = self
            .client
            .query(
                "SELECT calls, total_exec_time, shared_blks_hit + shared_blks_read, toplevel, \
                        left(regexp_replace(query, '\\s+', ' ', 'g'), 100) \
                   FROM pg_stat_statements \
                  WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                    AND query NOT LIKE '%pg_stat_statements%' \
                  ORDER BY total_exec_time DESC",
                &[],
            )
            .unwrap();
        let sent: i64 = rows.iter().filter(|r| r.get::<_, bool>(3)).map(|r| r.get::<_, i64>(0)).sum();
        let time: f64 = rows.iter().filter(|r| r.get::<_, bool>(3)).map(|r| r.get::<_, f64>(1)).sum();
        println!(
            "  statements sent per claim+complete {:.2}, their server time {:.3} ms (pg_stat_statements; per call below)",
            sent as f64 / per,
            time / per
        );
        for r in rows.iter().take(12) {
            let calls: i64 = r.get(0);
            println!(
                "    {} {:>5.2} calls, {:.3} ms, {:>5.1} blocks/call: {}",
                if r.get::<_, bool>(3) { "top " } else { "nest" },
                calls as f64 / per,
                r.get::<_, f64>(1) / per,
                r.get::<_, i64>(2) as f64 / calls.max(1) as f64,
                r.get::<_, String>(4)
            );
        }
    }
}

/// The PostgreSQL server's processes, for their CPU time.
struct Server {
    postmaster: u32,
    tick: f64,
}

impl Server {
    fn of(cluster: &troupe_testkit::postgres::Cluster) -> Server {
        let pid = std::fs::read_to_string(cluster.dir().join("data").join("postmaster.pid")).unwrap();
        let tick = Command::new("getconf").arg("CLK_TCK").output().unwrap();
        Server {
            postmaster: pid.lines().next().unwrap().trim().parse().unwrap(),
            tick: String::from_utf8_lossy(&tick.stdout).trim().parse().unwrap(),
        }
    }

    /// CPU seconds (user + system) of the postmaster, its live backends and
    /// the backends it has reaped (which the kernel adds to its children's time).
    fn cpu(&self) -> f64 {
        let mut ticks = 0;
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Some(stat) = stat(&format!("/proc/{pid}/stat")) else { continue };
            if pid == self.postmaster {
                ticks += stat[11] + stat[12] + stat[13] + stat[14];
            } else if stat[1] == u64::from(self.postmaster) {
                ticks += stat[11] + stat[12];
            }
        }
        ticks as f64 / self.tick
    }
}

/// CPU seconds of this process's finished children (the claimer processes).
fn children_cpu() -> f64 {
    let stat = stat("/proc/self/stat").unwrap();
    let tick = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    (stat[13] + stat[14]) as f64 / String::from_utf8_lossy(&tick.stdout).trim().parse::<f64>().unwrap()
}

/// The numeric fields of `/proc/<pid>/stat` after the command name, from
/// `state` on (so index 1 is the parent's pid, 11..=14 utime, stime,
/// cutime, cstime); the state letter reads as 0.
fn stat(path: &str) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(path).ok()?;
    let after = &text[text.rfind(')')? + 2..];
    Some(after.split(' ').map(|v| v.trim().parse().unwrap_or(0)).collect())
}

/// A worker process: `threads` claimers until the board is empty, paced by
/// `pace`, sharing one store (`shared`) or each opening its own; prints one
/// line of claim latencies (ms) per thread, and `started` first. In the open
/// loop a claim's latency counts from when it was due.
fn claimers(place: &str, name: &str, threads: usize, pace: Pace, shared: bool) {
    println!("started");
    let process_store = shared.then(|| open(place));
    let lines: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..threads)
            .map(|t| {
                let process_store = process_store.as_deref();
                scope.spawn(move || {
                    let own = if process_store.is_none() { Some(open(place)) } else { None };
                    let store = process_store.or(own.as_deref()).unwrap();
                    let me = format!("{name}-{t}");
                    let mut times = Vec::new();
                    let interval = Duration::from_micros(pace.interval_us);
                    let first = Instant::now() + interval * (pace.first + t as u64) as u32 / pace.of as u32;
                    for k in 0u32.. {
                        // Closed loop: due now. Open loop: due on the schedule, however late we are.
                        let at = if pace.interval_us == 0 { Instant::now() } else { first + interval * k };
                        if let Some(wait) = at.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
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
