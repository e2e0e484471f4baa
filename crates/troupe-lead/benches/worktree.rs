//! Worktree isolation's git cost per Builder group (issue 18: "worktree
//! creation and removal per group under 200 ms on a repository of 10k
//! files"), on a repository of 10,000 committed files, in process, through
//! the driver's own module, in the order a run does it:
//!
//! - `Worktrees::prepare` when the run starts (a spare checked out in the
//!   background while the Lead designs and plans; its time is reported, but
//!   it is off the Lead's path), then a commit on the line (the plan);
//! - per group, one after another as a wave's successors do:
//!   `Worktrees::open` (a spare moved in and the group's branch put there:
//!   its name only when the spare is at the line's commit, else a checkout
//!   of what differs; spec files copied in), a commit on the line (the
//!   group's merge, not timed), `Worktrees::close` (detach, park as a spare,
//!   branch delete; its reset and clean run in the background, and the next
//!   open waits for them, so their cost is in the next open's figure);
//! - `close_all` (the end of the run).
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
    let t = Instant::now();
    rt.block_on(w.prepare());
    assert_eq!(rt.block_on(w.prepared()), 1, "the spare is checked out");
    let prepared = t.elapsed();
    let mut merged = 0;
    let mut merge = |root: &std::path::Path| {
        merged += 1;
        std::fs::write(root.join(".troupe/specs/bench/tasks.yaml"), format!("tasks: [] # {merged}\n")).unwrap();
        git(root, &["commit", "-q", "-am", "the line moves on"]);
    };
    merge(&root);
    let (mut open, mut close) = (Vec::new(), Vec::new());
    for g in 0..GROUPS {
        let group = format!("G{g}");
        let t = Instant::now();
        rt.block_on(w.open(&group)).unwrap();
        open.push(t.elapsed());
        merge(&root);
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
        "worktree: {FILES} files, {GROUPS} groups in {}: spare prepared in the background in {:.0} ms; open+close per group p50 {:.0} ms, max {:.0} ms (open {:?} ms, close {:?} ms); end of run (spare removed) {:.0} ms",
        root.display(),
        ms(&prepared),
        ms(&sorted[GROUPS / 2]),
        ms(&sorted[GROUPS - 1]),
        open.iter().map(|d| ms(d).round()).collect::<Vec<_>>(),
        close.iter().map(|d| ms(d).round()).collect::<Vec<_>>(),
        ms(&end),
    );
}
