//! Reading a shell command (`troupe_gate::shell::read`: brush-parser's parse
//! and the walk for writes), the part of a Bash PreToolUse that grows with the
//! command. Typical commands an agent runs, a 40-line script, and commands of
//! 10 KiB, 100 KiB (parsed; time per KiB should stay flat: linear) and 1 MiB
//! (over the parser's 256 KiB limit: the linear fallback).
//!
//! Run: `cargo bench -p troupe-gate --bench shell`. Prints p50 / p99 per case;
//! asserts nothing about time.

use std::time::{Duration, Instant};

use troupe_gate::shell;

fn main() {
    let typical = [
        "cargo test -p troupe-gate --lib shell 2>&1 | tail -20",
        "uv run pytest -q tests/test_login.py",
        "git status --porcelain && git diff --stat",
        "cd src && sed -i 's/old/new/' a.rs b.rs && cargo fmt",
        "find . -name '*.rs' -exec grep -l 'fn main' {} +",
    ];
    let script: String = (0..40).map(|i| format!("if [ -f f{i} ]; then cp f{i} out/{i}.txt; fi\n")).collect();
    for (name, commands, runs) in [
        ("typical command (5 kinds)", typical.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 2000),
        ("40-line script", vec![script], 300),
    ] {
        // A fresh process reads each command once: vary the text so that no
        // cache inside the parser answers from an earlier run.
        let mut n = 0u64;
        let times = time(runs, || {
            n += 1;
            for c in &commands {
                std::hint::black_box(shell::read(&format!("{c} # run {n}")));
            }
        });
        report(name, &times, commands.len());
    }
    for kib in [10usize, 100, 1024] {
        let one = "echo a > b.txt && cat b.txt | tee -a log.txt; ";
        let command = one.repeat(kib * 1024 / one.len());
        let times = time(if kib > 100 { 5 } else { 30 }, || std::hint::black_box(shell::read(&command)));
        let p50 = times[times.len() / 2];
        println!("{kib:>5} KiB command: p50 {:>8.2} ms ({:.3} ms per KiB)", ms(p50), ms(p50) / kib as f64);
    }
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    let mut out: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    out.sort();
    out
}

fn report(name: &str, times: &[Duration], per_run: usize) {
    let p = |q: f64| ms(times[((times.len() - 1) as f64 * q) as usize]) / per_run as f64;
    println!("{name}: p50 {:.3} ms, p99 {:.3} ms per command", p(0.5), p(0.99));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
