//! Counting a gateway call against rate limits (`GatewayAccess::count_call`),
//! through the library API on a real database file, with an agent that already
//! made `n` calls in the last minute (the gateway benchmark's shape: a limit
//! of `u32::MAX`, so every call is kept and counted).
//!
//! Run: `cargo bench -p troupe-store --bench gateway_calls`. Prints p50/p99;
//! asserts nothing.

use std::time::{Duration, Instant};

use troupe_store::{GatewayAccess, SqliteStore};

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!("troupe-store gateway call counting (SQLite, WAL, synchronous=NORMAL)");
    for n in [100, 1_000, 5_500] {
        let store = SqliteStore::open(&dir.path().join(format!("calls-{n}.db"))).unwrap();
        let admit = |_: &troupe_store::CallCounts| None;
        for i in 0..n {
            store.count_call("builder-1", if i % 2 == 0 { "troupe__board_list" } else { "x__y" }, &admit).unwrap();
        }
        let mut times: Vec<Duration> = (0..1_000)
            .map(|_| {
                let started = Instant::now();
                store.count_call("builder-1", "troupe__board_list", &admit).unwrap();
                started.elapsed()
            })
            .collect();
        times.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "count_call with {n} calls in the window: p50 {:.0} µs, p99 {:.0} µs",
            us(times[times.len() / 2]),
            us(times[times.len() * 99 / 100])
        );
    }
}
