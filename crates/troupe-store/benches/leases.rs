//! A lost host's tasks: how long after its holder's last heartbeat its
//! claimed tasks are free again, with the shipped lease (`[store]
//! lease_seconds = 30`, `lease::DEFAULT_LEASE`) and the Lead's sweep every
//! sixth of a lease (troupe-lead's `LeaseKeeper`), on PostgreSQL and SQLite
//! at once. A holder claims 100 tasks and locks 10 files, beats, and goes
//! silent; a sweeper on another connection sweeps on its schedule until the
//! tasks are released. Prints the time from the last heartbeat to the
//! release; the target is ≤ 60 s.
//!
//! Run: `cargo bench -p troupe-store --bench leases` (about 35 s).
//! `TROUPE_BENCH_LEASE_MS` shortens the lease for a quick look.

use std::time::{Duration, Instant};

use troupe_store::lease::DEFAULT_LEASE;
use troupe_store::{NewAgent, NewLock, NewTask, PgStore, SqliteStore, Store};

const TASKS: usize = 100;

fn main() {
    let lease = std::env::var("TROUPE_BENCH_LEASE_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(DEFAULT_LEASE, Duration::from_millis);
    let sweep_every = lease / 6;
    let cluster = troupe_testkit::postgres::Cluster::start(true);
    let dir = tempfile::tempdir().unwrap();
    let pg = cluster.create_database();
    let sqlite = dir.path().join("leases.db");
    println!("lease {lease:?}, sweep every {sweep_every:?}; {TASKS} tasks and 10 locks held");
    std::thread::scope(|scope| {
        let runs = [
            ("PostgreSQL 15, local", scope.spawn(|| lost_host(&|| Box::new(PgStore::open(&pg).unwrap()), lease))),
            ("SQLite, WAL", scope.spawn(|| lost_host(&|| Box::new(SqliteStore::open(&sqlite).unwrap()), lease))),
        ];
        for (name, run) in runs {
            let released = run.join().unwrap();
            println!(
                "{name}: lost host's tasks released {:.1} s after its last heartbeat (target <= 60 s: {})",
                released.as_secs_f64(),
                if released <= Duration::from_secs(60) { "met" } else { "missed" }
            );
        }
    });
}

/// The time from the holder's last heartbeat to the sweep that released its tasks.
fn lost_host(open: &(dyn Fn() -> Box<dyn Store> + Sync), lease: Duration) -> Duration {
    let holder = open();
    let tasks: Vec<NewTask> = (0..TASKS).map(|i| NewTask::new(format!("task {i}"), "lead")).collect();
    let tasks = holder.create_tasks(tasks).unwrap();
    holder.register(NewAgent { lease: Some(lease), ..NewAgent::new("builder-lost", "builder", "claude") }).unwrap();
    for t in &tasks {
        holder.claim(&t.id, "builder-lost").unwrap();
    }
    for i in 0..10 {
        let lock = NewLock {
            path: format!("src/{i}.rs"),
            agent: "builder-lost".into(),
            pid: None,
            task: None,
            ttl_seconds: 600,
        };
        holder.lock_file(lock).unwrap();
    }
    holder.renew_lease("builder-lost", lease).unwrap();
    let last_beat = Instant::now();
    drop(holder);
    let sweeper = open();
    loop {
        std::thread::sleep(lease / 6);
        let swept = sweeper.expire_leases().unwrap();
        if let Some(e) = swept.first() {
            assert_eq!(e.tasks.len(), TASKS, "every task released");
            assert_eq!(e.locks.len(), 10, "every lock released");
            return last_beat.elapsed();
        }
    }
}
