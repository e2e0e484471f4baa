//! `troupe board claim` end to end (process start to exit), on a board of
//! 10,000 tasks, beside `troupe --version` (the cost of starting the binary at
//! all). Run: `cargo bench -p troupe-cli --bench board`. Prints p50/p99;
//! asserts nothing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use troupe_core::layout::Layout;
use troupe_store::{Board, NewTask, SqliteStore};

const RUNS: usize = 300;
const WARMUP: usize = 20;

fn main() {
    let troupe = env!("CARGO_BIN_EXE_troupe");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".troupe")).unwrap();
    {
        let store = SqliteStore::open_project(&Layout::new(root)).unwrap();
        let batch: Vec<NewTask> = (0..10_000)
            .map(|i| {
                let mut t = NewTask::new(format!("task {i}"), "lead").with_id(format!("f/{i}"));
                if i % 4 != 0 {
                    t.blocked_by = vec![format!("f/{}", i - 1)];
                }
                t
            })
            .collect();
        store.create_tasks(batch).unwrap();
        // A long-lived board is in the database file, not in a fresh 5 MB WAL.
        store.checkpoint().unwrap();
    }
    println!("troupe CLI on a board of 10,000 tasks (2,500 available), {RUNS} runs each after {WARMUP} warm-up runs");
    report("troupe --version", &time(|| cmd(troupe, root, &["--version"])));
    report("troupe board claim --next", &time(|| cmd(troupe, root, &["board", "claim", "--next", "--agent", "a"])));
    let mut i = 0;
    let by_id = time(|| {
        // Every fourth task is unblocked; the first 320 went to --next above.
        i += 1;
        let id = format!("f/{}", (320 + i) * 4);
        cmd(troupe, root, &["board", "claim", &id, "--agent", "b"])
    });
    report("troupe board claim <id>", &by_id);
    report("troupe board show <id>", &time(|| cmd(troupe, root, &["board", "show", "f/5000"])));
    // During a team run the Lead and the gateway keep the database open, so a
    // CLI process is never the last connection and never checkpoints on exit.
    let held = SqliteStore::open_project(&Layout::new(root)).unwrap();
    println!("with another process holding the database open (as during a team run):");
    report("troupe board claim --next", &time(|| cmd(troupe, root, &["board", "claim", "--next", "--agent", "c"])));
    let mut j = 0;
    let by_id = time(|| {
        j += 1;
        let id = format!("f/{}", (1_500 + j) * 4);
        cmd(troupe, root, &["board", "claim", &id, "--agent", "d"])
    });
    report("troupe board claim <id>", &by_id);
    report("troupe board show <id>", &time(|| cmd(troupe, root, &["board", "show", "f/5000"])));
    drop(held);
}

fn cmd(troupe: &str, root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(troupe);
    c.arg("-C").arg(root).args(args).env_remove("TROUPE_AGENT_ID");
    c
}

fn time(mut make: impl FnMut() -> Command) -> Vec<Duration> {
    let mut times = Vec::with_capacity(RUNS);
    for i in 0..RUNS + WARMUP {
        let mut c = make();
        let started = Instant::now();
        let status = c.stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
        let elapsed = started.elapsed();
        assert!(status.success(), "{c:?} failed");
        if i >= WARMUP {
            times.push(elapsed);
        }
    }
    times.sort();
    times
}

fn report(what: &str, sorted: &[Duration]) {
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("  {what:<28} p50 {:>7.2} ms   p99 {:>7.2} ms", ms(pct(0.5)), ms(pct(0.99)));
}
