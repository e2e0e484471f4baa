//! Worktree isolation's git cost per Builder group (issue 18: "worktree
//! creation and removal per group under 200 ms on a repository of 10k
//! files"): `Worktrees::open` (the first: worktree add of the whole tree;
//! later ones: a closed group's spare moved in and its branch checked out;
//! spec files copied in) and `Worktrees::close` (reset, clean, detach and
//! park it as a spare, branch delete), one group after another as a wave's
//! successors do, on a repository of 10,000 committed files, in process,
//! through the driver's own module; then `close_all` (the end of the run).
//!
//! Run: `cargo bench -p troupe-lead --bench worktree` (set `TROUPE_BENCH_DIR`
//! to put the repository on another file system, e.g. /dev/shm).

use std::process::Command;
use std::time::{Duration, Instant};

use troupe_lead::driver::worktree::Worktrees;

const FILES: usize = 10_000;
const GROUPS: usize = 10;

fn git(root: &std::path::Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn main() {
    let base = std::env::var_os("TROUPE_BENCH_DIR").map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let root = dir.path().to_path_buf();
    for d in 0..FILES / 100 {
        let sub = root.join(format!("src/d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::write(sub.join(format!("f{f}.rs")), format!("// {d} {f}\n")).unwrap();
        }
    }
    std::fs::create_dir_all(root.join(".troupe/specs/bench")).unwrap();
    std::fs::write(root.join(".troupe/specs/bench/tasks.yaml"), "tasks: []\n").unwrap();
    std::fs::write(root.join(".gitignore"), ".troupe/state/\n").unwrap();
    git(&root, &["init", "-q"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "10k files"]);
    let layout = troupe_core::layout::Layout::new(&root);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut w = rt.block_on(Worktrees::new(layout, root.clone(), "bench".into(), false)).unwrap();
    let (mut open, mut close) = (Vec::new(), Vec::new());
    for g in 0..GROUPS {
        let group = format!("G{g}");
        let t = Instant::now();
        rt.block_on(w.open(&group)).unwrap();
        open.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(w.close(&group)).unwrap();
        close.push(t.elapsed());
    }
    let t = Instant::now();
    rt.block_on(w.close_all()).unwrap();
    let end = t.elapsed();
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    let total: Vec<Duration> = open.iter().zip(&close).map(|(a, b)| *a + *b).collect();
    let mut sorted = total.clone();
    sorted.sort();
    println!(
        "worktree: {FILES} files, {GROUPS} groups in {}: open+close per group p50 {:.0} ms, max {:.0} ms (open {:?} ms, close {:?} ms); end of run (spare removed) {:.0} ms",
        root.display(),
        ms(&sorted[GROUPS / 2]),
        ms(&sorted[GROUPS - 1]),
        open.iter().map(|d| ms(d).round()).collect::<Vec<_>>(),
        close.iter().map(|d| ms(d).round()).collect::<Vec<_>>(),
        ms(&end),
    );
}
