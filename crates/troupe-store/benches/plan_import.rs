//! Plan import at scale: tasks.yaml text of 10,000 / 40,000 / 100,000 work
//! items through every step the Lead takes (`TaskPlan::from_yaml`, `validate`
//! with computed waves, `plan::plan_tasks`, `Board::import_plan` into a SQLite
//! file), each step timed. Target: 100,000 work items < 2 s in all.
//!
//! Run: `cargo bench -p troupe-store --bench plan_import`. Prints the times
//! (wall, and the CPU time the thread ran: on a machine shared with other
//! work the wall time is mostly waiting for a core); asserts nothing but that
//! the import created every task. Below each size, the import's own phases
//! (`troupe_store::phases`): which of them to cut next.

use std::fmt::Write as _;
use std::time::Instant;

use troupe_core::plan::TaskPlan;
use troupe_store::phases::thread_cpu as cpu;
use troupe_store::{Board, ImportOutcome, SqliteStore, plan};

/// The allocator of the `troupe` binary, which imports plans (its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!("plan import (tasks of 4 subtasks; chains of 10 tasks, each depending on the one before)");
    for n in [10_000, 40_000, 100_000] {
        let text = tasks_yaml(n);
        let started = Instant::now();
        let mut step = Step::start();
        let parsed = TaskPlan::from_yaml(&text).unwrap();
        let parse = step.next();
        let checked = parsed.check().unwrap();
        let validate = step.next();
        let tasks = plan::plan_tasks("bench", &checked, "lead");
        let convert = step.next();
        let store = SqliteStore::open(&dir.path().join(format!("plan-{n}.db"))).unwrap();
        step.next();
        let written = bytes_written();
        let (outcome, phases) = troupe_store::phases::record(|| store.import_plan(tasks));
        let outcome = outcome.unwrap();
        let import = step.next();
        let written = bytes_written() - written;
        assert_eq!(outcome, ImportOutcome::Imported { created: n, completed: 0 });
        let total = |f: fn(&(f64, f64)) -> f64| [parse, validate, convert, import].iter().map(f).sum::<f64>();
        println!(
            "{n:>7} work items, {:>6} waves (wall / CPU ms): parse {:>5.0} / {:>5.0}, validate {:>5.0} / {:>5.0}, \
             convert {:>5.0} / {:>5.0}, import {:>5.0} / {:>5.0}; total {:>5.0} / {:>5.0} ({:.0} ms in all)",
            checked.schedule.waves.len(),
            parse.0,
            parse.1,
            validate.0,
            validate.1,
            convert.0,
            convert.1,
            import.0,
            import.1,
            total(|s| s.0),
            total(|s| s.1),
            ms(started.elapsed()),
        );
        // Inside the import, wall / CPU ms per phase (a phase met twice is summed).
        let mut inside: Vec<(&str, f64, f64)> = Vec::new();
        for (phase, wall, cpu) in phases {
            match inside.iter_mut().find(|(p, _, _)| *p == phase) {
                Some((_, w, c)) => (*w, *c) = (*w + ms(wall), *c + ms(cpu)),
                None => inside.push((phase, ms(wall), ms(cpu))),
            }
        }
        let inside: Vec<String> = inside.iter().map(|(p, w, c)| format!("{p} {w:.0} / {c:.0}")).collect();
        println!("          import phases (wall / CPU ms): {}", inside.join(", "));
        let size = |suffix: &str| {
            let path = dir.path().join(format!("plan-{n}.db{suffix}"));
            std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6)
        };
        println!(
            "          the import wrote {:.1} MB (the WAL and the checkpoint); database file {:.1} MB, WAL file {:.1} MB",
            written as f64 / 1e6,
            size(""),
            size("-wal"),
        );
    }
}

/// Wall and CPU time of consecutive steps.
struct Step {
    wall: Instant,
    cpu: std::time::Duration,
}

impl Step {
    fn start() -> Self {
        Step { wall: Instant::now(), cpu: cpu() }
    }

    /// (wall ms, CPU ms) since the last call.
    fn next(&mut self) -> (f64, f64) {
        let (wall, cpu) = (self.wall.elapsed(), cpu() - self.cpu);
        *self = Step::start();
        (ms(wall), ms(cpu))
    }
}

/// `n` work items: `n / 4` tasks of 4 subtasks; task `i` depends on task
/// `i - 1` except at the start of each chain of 10.
fn tasks_yaml(n: usize) -> String {
    let mut out = String::from("tasks:\n");
    for t in 0..n / 4 {
        let _ = writeln!(out, "  - id: \"{t}\"\n    summary: implement part {t}");
        if t % 10 != 0 {
            let _ = writeln!(out, "    depends: [\"{}\"]", t - 1);
        }
        out.push_str("    subtasks:\n");
        for s in 1..=4 {
            let _ = writeln!(
                out,
                "      - id: \"{t}.{s}\"\n        summary: step {s} of part {t}\n        details: [write the test, make it pass]"
            );
        }
    }
    out
}

/// Bytes this thread has passed to `write` calls (`/proc/thread-self/io`,
/// `wchar`; zero where it cannot be read): what the import's commit and
/// checkpoint wrote.
fn bytes_written() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/io").unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("wchar: ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
