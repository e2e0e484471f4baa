//! Worktree isolation's git cost per Builder group (issue 18: "worktree
//! creation and removal per group under 200 ms on a repository of 10k
//! files"), on a repository of 10,000 committed files, in process, through
//! the driver's own module, in the order a run does it. Three cases, each a
//! run of its own on the same repository:
//!
//! - `sequential`: `Worktrees::prepare(1)` when the run starts (a spare
//!   checked out in the background while the Lead designs and plans; its
//!   time is reported, but it is off the Lead's path), a commit on the line
//!   (the plan), the pool the plan asks for (`pool_size` of a chain of 10
//!   waves: 2) made ready as in `wave, pool ready`, then 10 groups one after
//!   another as a chain of waves does:
//!   `Worktrees::open` (a spare moved in and the group's branch put there),
//!   `Worktrees::merge` (a file of the group committed on its branch and
//!   merged into the line; not timed; it starts an idle spare's reset to the
//!   merge in the background), `Worktrees::close` (detach, park as a spare,
//!   branch delete; its reset and clean run in the background). The next
//!   open comes right after the close: no merged gate runs in between (the
//!   worst case: a project without gate commands), so what the background
//!   started is still under way.
//! - `wave, pool ready`: as a run with a first wave of N groups and N
//!   successors (`TROUPE_BENCH_WAVE`, default 4): once the plan is known the
//!   pool is sized (`pool_size`: N + 1) and checked out in the background,
//!   and ready before the wave opens (what the TaskGenerator's last turn
//!   gives it: the driver sizes the pool when tasks.yaml is written, before
//!   the report). Then the N groups open at once (one after another on the
//!   Lead's loop, as the driver carries out a wave's `OpenWorktree`s), and
//!   each closes after its merge with its successor opened right after, as
//!   the merge that unblocks it does.
//! - `wave, pool just started`: the same, the wave opening right when the
//!   pool is sized (no head start: a plan the Lead loads with nothing before
//!   the Builders, e.g. a TaskGenerator that wrote tasks.yaml in its last
//!   moment), so the opens wait for checkouts under way.
//!
//! Each case prints per-group open+close p50 and max, every open and close,
//! the CPU time of the process and its git children over the case, and the
//! load average before and after it.
//!
//! Run: `cargo bench -p troupe-lead --bench worktree` (set `TROUPE_BENCH_DIR`
//! to put the repository on another file system, e.g. /dev/shm).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use troupe_lead::driver::worktree::{Merge, Worktrees, pool_size};
use troupe_lead::plan::{BuildPlan, PlanGroup, PlanTask};

const FILES: usize = 10_000;
const GROUPS: usize = 10;

fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A repository of 10k committed files at `root`.
fn repository(root: &Path) {
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
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "10k files"]);
}

/// The plan is committed on the line (as the Lead commits it before the
/// Builders): the spare prepared before it is one commit behind.
fn commit_plan(root: &Path) {
    static PLANS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PLANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::fs::write(root.join(".troupe/specs/bench/tasks.yaml"), format!("tasks: [] # {n}\n")).unwrap();
    git(root, &["commit", "-q", "-am", "the plan"]);
}

/// CPU time (user + system) of this process and its waited-for children
/// (every `git`), from /proc/self/stat in clock ticks of 10 ms.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) start at 3.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<u64> = after.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    let ticks: u64 = fields.iter().skip(11).take(4).sum();
    Duration::from_millis(ticks * 10)
}

fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    avg.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn ms(d: &Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn list(ds: &[Duration]) -> String {
    ds.iter().map(|d| format!("{:.0}", ms(d))).collect::<Vec<_>>().join(" ")
}

/// "p50 X ms, max Y ms" of `ds`.
fn spread(ds: &[Duration]) -> String {
    let mut sorted = ds.to_vec();
    sorted.sort();
    format!("p50 {:.0} ms, max {:.0} ms", ms(&sorted[sorted.len() / 2]), ms(&sorted[sorted.len() - 1]))
}

/// A plan of `groups`, each `(id, wave, the group it depends on)`.
fn plan_of(groups: &[(String, u32, Option<String>)]) -> BuildPlan {
    let mut plan = BuildPlan::default();
    for (id, wave, after) in groups {
        let depends = after.iter().cloned().collect();
        plan.tasks.push(PlanTask { summary: id.clone(), id: id.clone(), depends, done: false });
        plan.groups.push(PlanGroup {
            tasks: vec![id.clone()],
            files: vec![format!("src/{id}.rs")],
            id: id.clone(),
            wave: *wave,
            reported_files: Vec::new(),
        });
    }
    plan
}

/// A plan of `n` groups in wave 1, each with a successor in wave 2.
fn wave_plan(n: usize) -> BuildPlan {
    let firsts = (0..n).map(|g| (format!("A{g}"), 1, None));
    plan_of(&firsts.chain((0..n).map(|g| (format!("B{g}"), 2, Some(format!("A{g}"))))).collect::<Vec<_>>())
}

/// A chain of `n` groups, one per wave, each after the one before.
fn chain_plan(n: usize) -> BuildPlan {
    plan_of(
        &(0..n).map(|g| (format!("G{g}"), g as u32 + 1, g.checked_sub(1).map(|p| format!("G{p}")))).collect::<Vec<_>>(),
    )
}

struct Case {
    rt: tokio::runtime::Runtime,
    w: Worktrees,
    cpu: Duration,
    load: String,
}

impl Case {
    /// A run starts: its spare is checked out while the Lead designs and
    /// plans (waited for: the design takes far longer), then the plan is
    /// committed. Returns the case and how long the spare took.
    fn start(root: &Path) -> (Case, Duration) {
        let (cpu, load) = (cpu(), load());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let layout = troupe_core::layout::Layout::new(root);
        let mut w = rt.block_on(Worktrees::new(layout, root.to_path_buf(), "bench".into(), false)).unwrap();
        let t = Instant::now();
        rt.block_on(w.prepare(1));
        assert_eq!(rt.block_on(w.prepared()), 1, "the spare is checked out");
        let spare = t.elapsed();
        commit_plan(root);
        (Case { rt, w, cpu, load }, spare)
    }

    fn timed<T>(&mut self, f: impl AsyncFnOnce(&mut Worktrees) -> T) -> (T, Duration) {
        let t = Instant::now();
        let out = self.rt.block_on(f(&mut self.w));
        (out, t.elapsed())
    }

    fn open(&mut self, group: &str) -> Duration {
        let (opened, took) = self.timed(async |w| w.open(group).await);
        opened.unwrap();
        took
    }

    /// The group's merge (untimed: its Builder's file committed on its
    /// branch, merged into the line), then its close.
    fn merge_and_close(&mut self, group: &str) -> Duration {
        let file = format!("src/{group}.rs");
        let dir = self.w.workdir(group).unwrap().to_path_buf();
        std::fs::write(dir.join(&file), group).unwrap();
        self.w.own(group, &[file]);
        let merged = self.rt.block_on(self.w.merge(group, &format!("merge {group}"))).unwrap();
        assert!(matches!(merged, Merge::Merged { .. }), "{merged:?}");
        let (closed, took) = self.timed(async |w| w.close(group).await);
        closed.unwrap();
        took
    }

    /// The run ends: every worktree removed. Its time, the case's CPU time
    /// and the load average before and after.
    fn end(mut self) -> String {
        let ((), took) = self.timed(async |w| w.close_all().await.unwrap());
        format!(
            "end of run {:.0} ms; CPU {:.2} s; load {} -> {}",
            ms(&took),
            (cpu() - self.cpu).as_secs_f64(),
            self.load,
            load()
        )
    }
}

fn sequential(root: &Path) {
    let (mut case, spare) = Case::start(root);
    let wanted = pool_size(&chain_plan(GROUPS), 24);
    case.rt.block_on(case.w.prepare(wanted));
    assert_eq!(case.rt.block_on(case.w.prepared()), wanted, "the pool is checked out");
    let (mut open, mut close) = (Vec::new(), Vec::new());
    for g in 0..GROUPS {
        let group = format!("G{g}");
        open.push(case.open(&group));
        close.push(case.merge_and_close(&group));
    }
    let total: Vec<Duration> = open.iter().zip(&close).map(|(a, b)| *a + *b).collect();
    println!(
        "worktree, sequential: {FILES} files, {GROUPS} groups one after another, pool of {wanted}: open+close per group {}; open [{}] ms, close [{}] ms; spare prepared in the background in {:.0} ms; {}",
        spread(&total),
        list(&open),
        list(&close),
        ms(&spare),
        case.end()
    );
}

fn wave(root: &Path, n: usize, ready: bool) {
    let (mut case, _) = Case::start(root);
    let wanted = pool_size(&wave_plan(n), 24);
    let t = Instant::now();
    let ((), sizing) = case.timed(async |w| w.prepare(wanted).await);
    let pool = match ready {
        true => {
            assert_eq!(case.rt.block_on(case.w.prepared()), wanted, "the pool is checked out");
            format!("pool of {wanted} ready in {:.0} ms", ms(&t.elapsed()))
        }
        false => format!("pool of {wanted} sized in {:.0} ms", ms(&sizing)),
    };
    let first: Vec<Duration> = (0..n).map(|g| case.open(&format!("A{g}"))).collect();
    let (mut closed, mut next_open, mut next_close) = (Vec::new(), Vec::new(), Vec::new());
    for g in 0..n {
        closed.push(case.merge_and_close(&format!("A{g}")));
        next_open.push(case.open(&format!("B{g}")));
    }
    for g in 0..n {
        next_close.push(case.merge_and_close(&format!("B{g}")));
    }
    let sum = |a: &[Duration], b: &[Duration]| a.iter().zip(b).map(|(x, y)| *x + *y).collect::<Vec<_>>();
    println!(
        "worktree, wave of {n}, {}: {FILES} files; {pool}; first wave open+close per group {} (open [{}] ms, close [{}] ms); successors open+close per group {} (open [{}] ms, close [{}] ms); {}",
        if ready { "pool ready" } else { "pool just started" },
        spread(&sum(&first, &closed)),
        list(&first),
        list(&closed),
        spread(&sum(&next_open, &next_close)),
        list(&next_open),
        list(&next_close),
        case.end()
    );
}

fn main() {
    let base = std::env::var_os("TROUPE_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let n: usize = std::env::var("TROUPE_BENCH_WAVE").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let dir = tempfile::tempdir_in(base).unwrap();
    repository(dir.path());
    println!("worktree: repository in {}", dir.path().display());
    sequential(dir.path());
    wave(dir.path(), n, true);
    wave(dir.path(), n, false);
}
