//! Plan import at scale: tasks.yaml text of 10,000 / 40,000 / 100,000 work
//! items through every step the Lead takes (`TaskPlan::from_yaml`, `validate`
//! with computed waves, `plan::plan_tasks`, `Board::import_plan` into a SQLite
//! file), each step timed. Target: 100,000 work items < 2 s in all.
//!
//! Run: `cargo bench -p troupe-store --bench plan_import`. Prints the times;
//! asserts nothing but that the import created every task.

use std::fmt::Write as _;
use std::time::Instant;

use troupe_core::plan::TaskPlan;
use troupe_store::{Board, ImportOutcome, SqliteStore, plan};

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!("plan import (tasks of 4 subtasks; chains of 10 tasks, each depending on the one before)");
    for n in [10_000, 40_000, 100_000] {
        let text = tasks_yaml(n);
        let started = Instant::now();
        let parsed = TaskPlan::from_yaml(&text).unwrap();
        let parse = started.elapsed();
        let schedule = parsed.validate().unwrap();
        let validate = started.elapsed() - parse;
        let tasks = plan::plan_tasks("bench", &parsed, &schedule, "lead");
        let convert = started.elapsed() - parse - validate;
        let store = SqliteStore::open(&dir.path().join(format!("plan-{n}.db"))).unwrap();
        let before_import = started.elapsed();
        let outcome = store.import_plan(tasks).unwrap();
        let import = started.elapsed() - before_import;
        assert_eq!(outcome, ImportOutcome::Imported { created: n, completed: 0 });
        println!(
            "{n:>7} work items, {:>6} waves: parse {:>6.0} ms, validate {:>5.0} ms, convert {:>5.0} ms, \
             import {:>6.0} ms; total {:>6.0} ms",
            schedule.waves.len(),
            ms(parse),
            ms(validate),
            ms(convert),
            ms(import),
            ms(started.elapsed())
        );
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

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
