//! What the Landlock sandbox adds to a teammate's spawn: `/bin/true` spawned
//! and reaped with and without a ruleset (built from a typical grant: a few
//! owned files, a folder, the temporary folder), alternating, median and p99.
//! Run with `cargo bench -p troupe-engine --bench sandbox`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use troupe_engine::sandbox::Policy;

fn spawn(policy: Option<&Policy>) -> Duration {
    let start = Instant::now();
    let mut cmd = Command::new("/bin/true");
    let prepared = policy.map(|p| p.prepare().expect("a ruleset"));
    if let Some(p) = &prepared {
        p.apply_to_std(&mut cmd);
    }
    let status = cmd.status().expect("spawn /bin/true");
    assert!(status.success());
    start.elapsed()
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p) as usize]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let files: Vec<PathBuf> = (0..8).map(|i| root.join(format!("f{i}.rs"))).collect();
    for f in &files {
        std::fs::write(f, "").unwrap();
    }
    std::fs::create_dir(root.join("new")).unwrap();
    std::fs::create_dir(root.join("tmp")).unwrap();
    let policy =
        Policy { dirs: vec![root.join("new"), root.join("tmp")], files, tmp: Some(root.join("tmp")), readonly: vec![] };
    let (mut plain, mut boxed) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        spawn(None);
        spawn(Some(&policy));
    }
    for _ in 0..500 {
        plain.push(spawn(None));
        boxed.push(spawn(Some(&policy)));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "spawn+wait /bin/true, 500 each: plain p50 {:.3} ms p99 {:.3} ms; sandboxed p50 {:.3} ms p99 {:.3} ms",
        ms(percentile(plain.clone(), 0.5)),
        ms(percentile(plain, 0.99)),
        ms(percentile(boxed.clone(), 0.5)),
        ms(percentile(boxed, 0.99)),
    );
}
