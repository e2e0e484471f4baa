//! [`Worktrees`]' spares against a real repository: prepared in the
//! background, a pool sized by the plan, reused with what a fresh worktree
//! would hold, a killed run's taken back or removed by a resume, and gone
//! when the run ends (or fails).

use std::path::{Path, PathBuf};

use super::*;

fn run(root: &Path, args: &[&str]) -> String {
    super::test_git(root, &[], args)
}

/// A repository with a tracked file, `.troupe/state/` and `*.log` ignored.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    run(d.path(), &["init", "-q"]);
    std::fs::write(d.path().join("a.txt"), "a").unwrap();
    std::fs::write(d.path().join(".gitignore"), ".troupe/state/\n*.log\n").unwrap();
    run(d.path(), &["add", "-A"]);
    run(d.path(), &["commit", "-q", "-m", "start"]);
    d
}

async fn worktrees(root: &Path) -> Worktrees {
    Worktrees::new(Layout::new(root), root.to_path_buf(), "f".into(), false).await.unwrap()
}

/// The line moves on, as a merge moves it.
fn commit(root: &Path, file: &str) -> String {
    std::fs::write(root.join(file), file).unwrap();
    run(root, &["add", "-A"]);
    run(root, &["commit", "-q", "-m", file]);
    run(root, &["rev-parse", "HEAD"])
}

fn assert_gone(root: &Path) {
    let list = run(root, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "only the main tree:\n{list}");
    assert_eq!(run(root, &["branch", "--list", "troupe/*"]), "");
    assert!(!feature_dir(&Layout::new(root), "f").exists());
}

#[tokio::test]
async fn a_prepared_spare_becomes_the_first_groups_worktree_at_the_lines_commit() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    w.prepare(1).await;
    assert_eq!(w.prepared().await, 1);
    // The plan is committed while the spare waits.
    let head = commit(root, "plan.txt");
    let dir = w.open("G1").await.unwrap();
    assert_eq!(dir, feature_dir(&Layout::new(root), "f").join("G1"));
    assert_eq!(run(&dir, &["rev-parse", "HEAD"]), head, "cut from the line");
    assert_eq!(run(&dir, &["symbolic-ref", "HEAD"]), "refs/heads/troupe/f/G1");
    assert_eq!(run(&dir, &["rev-parse", "--show-toplevel"]), dir.canonicalize().unwrap().to_string_lossy());
    assert_eq!(run(&dir, &["status", "--porcelain", "--ignored"]), "");
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_closed_groups_worktree_is_reused_with_only_what_the_line_holds() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    let g1 = w.open("G1").await.unwrap();
    // Its Builder leaves a changed, an untracked and an ignored file.
    std::fs::write(g1.join("a.txt"), "changed").unwrap();
    std::fs::write(g1.join("new.txt"), "new").unwrap();
    std::fs::write(g1.join("build.log"), "ignored").unwrap();
    // Merged: the line moves on before the group closes.
    let merged = commit(root, "g1.txt");
    w.close("G1").await.unwrap();
    w.closed("G1").await;
    assert!(!g1.exists());
    assert_eq!(run(root, &["branch", "--list", "troupe/*"]), "", "the branch goes with the close");
    for (moved_on, group) in [(false, "G2"), (true, "G3")] {
        let head = if moved_on { commit(root, "g2.txt") } else { merged.clone() };
        let dir = w.open(group).await.unwrap();
        assert_eq!(run(&dir, &["rev-parse", "HEAD"]), head);
        assert_eq!(run(&dir, &["symbolic-ref", "HEAD"]), format!("refs/heads/troupe/f/{group}"));
        assert_eq!(run(&dir, &["status", "--porcelain", "--ignored"]), "", "a fresh worktree's content");
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a");
        assert!(!dir.join("new.txt").exists() && !dir.join("build.log").exists());
        std::fs::write(dir.join("b.txt"), group).unwrap();
        w.close(group).await.unwrap();
    }
    w.close_all().await.unwrap();
    assert_gone(root);
}

/// The folders in the feature's worktree folder.
fn folders(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(feature_dir(&Layout::new(root), "f"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// How many worktrees git knows, the main tree aside.
fn worktree_count(root: &Path) -> usize {
    run(root, &["worktree", "list", "--porcelain"]).matches("worktree ").count() - 1
}

#[tokio::test]
async fn a_resume_takes_back_a_killed_runs_spare_and_removes_the_rest() {
    let d = repo();
    let root = d.path();
    // A killed run left a group's worktree and two spares, one of them dirty.
    let mut killed = worktrees(root).await;
    for g in ["G1", "G2", "G3"] {
        killed.open(g).await.unwrap();
    }
    killed.close("G2").await.unwrap();
    killed.close("G3").await.unwrap();
    assert_eq!(killed.prepared().await, 2);
    drop(killed);
    let spare = feature_dir(&Layout::new(root), "f").join(".spare-0");
    std::fs::write(spare.join("a.txt"), "half done").unwrap();
    std::fs::write(spare.join("build.log"), "ignored").unwrap();
    let head = commit(root, "plan.txt");
    // This run needs one spare: the first one left is taken back.
    let mut w = worktrees(root).await;
    w.prepare(1).await;
    assert_eq!(w.recover(crate::machine::MERGE_TRAILER).await.unwrap(), Vec::<String>::new());
    assert_eq!(run(root, &["branch", "--list", "troupe/*"]), "");
    assert_eq!(folders(root), [".spare-0"], "the killed run's G1 and second spare are gone, the first taken back");
    assert_eq!(w.prepared().await, 1);
    assert_eq!(run(&spare, &["status", "--porcelain", "--ignored"]), "", "reset and cleaned");
    let dir = w.open("G1").await.unwrap();
    assert_eq!(run(&dir, &["rev-parse", "HEAD"]), head, "at the line's commit");
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a");
    assert_eq!(folders(root), ["G1"], "opened on the spare taken back, no new checkout");
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[test]
fn the_pool_is_the_widest_wave_to_build_and_one_for_a_successor() {
    use crate::plan::{BuildPlan, PlanGroup, PlanTask};
    let plan = |groups: &[(&str, u32, bool)]| BuildPlan {
        tasks: groups
            .iter()
            .map(|(id, _, done)| PlanTask {
                id: format!("{id}.1"),
                summary: String::new(),
                depends: vec![],
                done: *done,
            })
            .collect(),
        groups: groups
            .iter()
            .map(|(id, wave, _)| PlanGroup {
                id: id.to_string(),
                wave: *wave,
                tasks: vec![format!("{id}.1")],
                files: vec![],
                reported_files: vec![],
            })
            .collect(),
    };
    let three_then_one = plan(&[("G1", 1, false), ("G2", 1, false), ("G3", 1, false), ("G4", 2, false)]);
    assert_eq!(pool_size(&three_then_one, 24), 4);
    assert_eq!(pool_size(&three_then_one, 2), 3, "no more open at once than the cap");
    let chain = plan(&[("G1", 1, false), ("G2", 2, false), ("G3", 3, false)]);
    assert_eq!(pool_size(&chain, 24), 2);
    assert_eq!(pool_size(&plan(&[("G1", 1, false), ("G2", 1, false)]), 24), 2, "no successor: no extra");
    assert_eq!(pool_size(&plan(&[("G1", 1, false)]), 24), 1);
    let resumed = plan(&[("G1", 1, true), ("G2", 1, true), ("G3", 1, false), ("G4", 2, false)]);
    assert_eq!(pool_size(&resumed, 24), 2, "groups done in an earlier run need none");
    assert_eq!(pool_size(&plan(&[("G1", 1, true)]), 24), 0);
}

#[tokio::test]
async fn a_wave_opens_on_its_pool_and_no_worktree_is_made_beyond_it() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    w.prepare(1).await;
    // The plan: two groups in wave 1, two successors in wave 2.
    w.prepare(3).await;
    assert_eq!(w.prepared().await, 3);
    w.prepare(3).await;
    assert_eq!(worktree_count(root), 3, "a pool of three, once");
    let head = commit(root, "plan.txt");
    for g in ["G1", "G2"] {
        let dir = w.open(g).await.unwrap();
        assert_eq!(run(&dir, &["rev-parse", "HEAD"]), head);
    }
    assert_eq!(worktree_count(root), 3, "the wave opened on spares");
    // Each successor opens right after its predecessor's close.
    for (done, next) in [("G1", "G3"), ("G2", "G4")] {
        let merged = commit(root, &format!("{done}.txt"));
        w.close(done).await.unwrap();
        let dir = w.open(next).await.unwrap();
        assert_eq!(run(&dir, &["rev-parse", "HEAD"]), merged);
        assert_eq!(run(&dir, &["status", "--porcelain", "--ignored"]), "");
        assert_eq!(worktree_count(root), 3, "the successor opened on a spare");
    }
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_run_that_fails_while_its_pool_is_checked_out_leaves_no_worktree() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    w.prepare(4).await;
    // The run ends (an escalation, a signal) before any spare is ready.
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn the_plan_being_written_starts_its_pool_once() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    let tasks = Layout::new(root).tasks_file("f");
    w.notice_plan(&tasks, 24);
    w.grow().await;
    assert_eq!(w.prepared().await, 0, "no plan yet");
    std::fs::create_dir_all(tasks.parent().unwrap()).unwrap();
    std::fs::write(&tasks, "tasks: [").unwrap();
    w.notice_plan(&tasks, 24);
    w.grow().await;
    assert_eq!(w.prepared().await, 0, "a plan half written asks for nothing");
    // Two groups in wave 1, one successor: three spares.
    let plan = "tasks:\n  - {id: '1', summary: a, status: pending}\n  - {id: '2', summary: b, status: pending}\n  - {id: '3', summary: c, depends: ['1'], status: pending}\nexecution:\n  - wave: 1\n    groups:\n      - {id: G1, tasks: ['1'], files: [a.rs]}\n      - {id: G2, tasks: ['2'], files: [b.rs]}\n  - wave: 2\n    groups:\n      - {id: G3, tasks: ['3'], files: [c.rs]}\n";
    std::fs::write(&tasks, plan).unwrap();
    // A different modification time than the half-written file's.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
    std::fs::File::options().write(true).open(&tasks).unwrap().set_modified(later).unwrap();
    w.notice_plan(&tasks, 24);
    w.grow().await;
    assert_eq!(w.prepared().await, 3);
    // Seen once: a Builder's open takes a spare and none is made again.
    w.open("G1").await.unwrap();
    w.notice_plan(&tasks, 24);
    w.grow().await;
    assert_eq!(worktree_count(root), 3);
    w.close_all().await.unwrap();
    assert_gone(root);
}

/// A pool of two ready spares; G1 opens on one and writes `file` ("g1"),
/// the other (returned) stays idle.
async fn g1_writes_beside_an_idle_spare(root: &Path, file: &str) -> (Worktrees, PathBuf) {
    let mut w = worktrees(root).await;
    w.prepare(2).await;
    assert_eq!(w.prepared().await, 2);
    let g1 = w.open("G1").await.unwrap();
    w.own("G1", &[file.to_string()]);
    std::fs::write(g1.join(file), "g1").unwrap();
    (w, feature_dir(&Layout::new(root), "f").join(".spare-1"))
}

/// `group` merged into the line.
async fn merge(w: &mut Worktrees, group: &str) {
    assert!(matches!(w.merge(group, &format!("{group} merged")).await.unwrap(), Merge::Merged { .. }));
}

#[tokio::test]
async fn a_merge_writes_its_diff_on_an_idle_spare_for_the_successor() {
    let d = repo();
    let root = d.path();
    let (mut w, idle) = g1_writes_beside_an_idle_spare(root, "g1.txt").await;
    merge(&mut w, "G1").await;
    let merged = run(root, &["rev-parse", "HEAD"]);
    // The merged gate runs commands meanwhile; the idle spare is moved to the merge.
    w.merged_gate_starts();
    assert_eq!(w.prepared().await, 1);
    assert_eq!(run(&idle, &["rev-parse", "HEAD"]), merged);
    assert_eq!(run(&idle, &["status", "--porcelain", "--ignored"]), "");
    w.close("G1").await.unwrap();
    let g2 = w.open("G2").await.unwrap();
    assert_eq!(run(&g2, &["rev-parse", "HEAD"]), merged);
    assert_eq!(std::fs::read_to_string(g2.join("g1.txt")).unwrap(), "g1");
    w.closed("G1").await;
    assert_eq!(folders(root), [".spare-2", "G2"], "G2 opened on the spare made ready for it, G1's is parked");
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn with_no_merged_gate_command_no_spare_moves_and_a_closed_worktree_waits_for_its_next_group() {
    let d = repo();
    let root = d.path();
    let (mut w, idle) = g1_writes_beside_an_idle_spare(root, "g1.txt").await;
    let before = run(&idle, &["rev-parse", "HEAD"]);
    merge(&mut w, "G1").await;
    let merged = run(root, &["rev-parse", "HEAD"]);
    // No gate command: no spare moves, and G1's worktree is only parked.
    w.close("G1").await.unwrap();
    assert_eq!(w.prepared().await, 2);
    assert_eq!(run(&idle, &["rev-parse", "HEAD"]), before, "the idle spare was not moved");
    let parked = feature_dir(&Layout::new(root), "f").join(".spare-2");
    assert_eq!(std::fs::read_to_string(parked.join("g1.txt")).unwrap(), "g1", "not reset at its close");
    // G2 opens on the clean spare (writing the merge's diff), G3 on G1's (reset).
    let g2 = w.open("G2").await.unwrap();
    assert_eq!(folders(root), [".spare-2", "G2"]);
    let g3 = w.open("G3").await.unwrap();
    assert_eq!(folders(root), ["G2", "G3"]);
    for g in [&g2, &g3] {
        assert_eq!(run(g, &["rev-parse", "HEAD"]), merged);
        assert_eq!(std::fs::read_to_string(g.join("g1.txt")).unwrap(), "g1");
        assert_eq!(run(g, &["status", "--porcelain", "--ignored"]), "");
    }
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_closed_groups_spec_copies_and_what_git_does_not_track_are_gone_from_its_spare() {
    let d = repo();
    let root = d.path();
    let layout = Layout::new(root);
    // The steering files are committed, the feature's tasks.yaml is not yet.
    std::fs::create_dir_all(layout.steering_dir()).unwrap();
    std::fs::write(layout.steering_dir().join("tech.md"), "committed").unwrap();
    run(root, &["add", "-A"]);
    run(root, &["commit", "-q", "-m", "steering"]);
    std::fs::write(layout.steering_dir().join("tech.md"), "changed since").unwrap();
    std::fs::create_dir_all(layout.spec_dir("f").join("reviews")).unwrap();
    std::fs::write(layout.tasks_file("f"), "tasks").unwrap();
    std::fs::write(layout.spec_dir("f").join("reviews").join("r.md"), "review").unwrap();
    let mut w = worktrees(root).await;
    let spec = |top: &Path| Layout::new(top).spec_dir("f");
    for (leave_untracked, group) in [(false, "G1"), (true, "G2"), (false, "G3")] {
        let g = w.open(group).await.unwrap();
        // What its open copied in, on what a fresh worktree holds.
        let status = run(&g, &["status", "--porcelain", "--ignored", "--untracked-files=all"]);
        assert_eq!(
            status,
            "M .troupe/steering/tech.md\n?? .troupe/specs/f/reviews/r.md\n?? .troupe/specs/f/tasks.yaml"
        );
        assert!(!g.join("empty").exists() && !g.join("build.log").exists());
        assert_eq!(std::fs::read_to_string(Layout::new(&g).tasks_file("f")).unwrap(), "tasks", "copied in");
        if leave_untracked {
            std::fs::create_dir_all(g.join("empty")).unwrap();
            std::fs::write(g.join("build.log"), "ignored").unwrap();
        }
        w.close(group).await.unwrap();
        assert_eq!(w.prepared().await, 1);
        let spare = &w.spares[0].path;
        assert!(!spec(spare).exists(), "the copies and the folders they leave empty are gone");
        assert!(!Layout::new(spare).steering_dir().join("tech.md").exists(), "the tracked copy too, until the reset");
    }
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_spare_changed_since_it_was_made_clean_is_reset_and_cleaned_in_full() {
    let d = repo();
    let root = d.path();
    let (mut w, idle) = g1_writes_beside_an_idle_spare(root, "a.txt").await;
    // Something wrote into the idle spare: the file the merge changes, and more.
    std::fs::write(idle.join("a.txt"), "dirty").unwrap();
    std::fs::write(idle.join("junk.txt"), "junk").unwrap();
    std::fs::write(idle.join("build.log"), "ignored").unwrap();
    merge(&mut w, "G1").await;
    w.merged_gate_starts();
    assert_eq!(w.prepared().await, 1);
    assert_eq!(run(&idle, &["rev-parse", "HEAD"]), run(root, &["rev-parse", "HEAD"]));
    assert_eq!(run(&idle, &["status", "--porcelain", "--ignored"]), "", "a fresh worktree's content");
    assert_eq!(std::fs::read_to_string(idle.join("a.txt")).unwrap(), "g1");
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_merge_with_no_idle_spare_moves_the_parked_one_once_it_is_clean() {
    let d = repo();
    let root = d.path();
    let (mut w, g1, _) = two_groups_own_files(root).await;
    std::fs::write(g1.join("build.log"), "ignored").unwrap();
    merge(&mut w, "G1").await;
    // G1's worktree is parked (reset and cleaned in the background) when G2's merge comes.
    w.close("G1").await.unwrap();
    merge(&mut w, "G2").await;
    w.merged_gate_starts();
    let merged = run(root, &["rev-parse", "HEAD"]);
    assert_eq!(w.prepared().await, 1);
    let parked = feature_dir(&Layout::new(root), "f").join(".spare-0");
    assert_eq!(run(&parked, &["rev-parse", "HEAD"]), merged, "moved on to the second merge");
    assert_eq!(run(&parked, &["status", "--porcelain", "--ignored"]), "");
    let g3 = w.open("G3").await.unwrap();
    assert_eq!(std::fs::read_to_string(g3.join("G1.txt")).unwrap(), "G1");
    assert_eq!(std::fs::read_to_string(g3.join("G2.txt")).unwrap(), "G2");
    w.close_all().await.unwrap();
    assert_gone(root);
}

/// A spare's background work held until `go` fires (then it ends as `ok`;
/// a failed one removes the spare first, as a real one does).
fn held(root: &Path, spare: &Path, ok: bool) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<bool>) {
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let (root, spare) = (root.to_path_buf(), spare.to_path_buf());
    let work = tokio::spawn(async move {
        let _ = wait.await;
        if !ok {
            discard(&root, &spare).await;
        }
        ok
    });
    (go, work)
}

#[tokio::test]
async fn a_group_with_no_ready_spare_opens_on_the_first_whose_work_ends() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    w.prepare(3).await;
    assert_eq!(w.prepared().await, 3);
    // Three spares still at work (say, checkouts under way): the first
    // ends last, the second fails, the third ends first.
    let mut goes = Vec::new();
    for (spare, ok) in w.spares.iter_mut().zip([true, false, true]) {
        let (go, work) = held(root, &spare.path, ok);
        spare.ready = Some(work);
        goes.push(go);
    }
    let first = goes.remove(0);
    let (fails, ends_first) = (goes.remove(0), goes.remove(0));
    // The failed one's work (its worktree removed) ends before the open
    // looks, so that the folders below are the open's doing alone.
    let failed = w.spares[1].path.clone();
    fails.send(()).unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while failed.exists() && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    ends_first.send(()).unwrap();
    // Waiting for the first listed would wait for good: a bound that fails instead.
    let opened = tokio::time::timeout(std::time::Duration::from_secs(60), w.open("G1")).await;
    let dir = opened.expect("opened without the first spare's work ending").unwrap();
    assert_eq!(folders(root), [".spare-0", "G1"], "neither the first listed nor the failed one");
    assert_eq!(run(&dir, &["status", "--porcelain", "--ignored"]), "");
    first.send(()).unwrap();
    w.close_all().await.unwrap();
    assert_gone(root);
}

/// G1 and G2 open side by side; each writes `file` with its own name.
/// G1 and G2 open, each having written its own `<group>.txt`: their worktrees.
async fn two_groups_own_files(root: &Path) -> (Worktrees, PathBuf, PathBuf) {
    let mut w = worktrees(root).await;
    let (g1, g2) = (w.open("G1").await.unwrap(), w.open("G2").await.unwrap());
    for (g, dir) in [("G1", &g1), ("G2", &g2)] {
        w.own(g, &[format!("{g}.txt")]);
        std::fs::write(dir.join(format!("{g}.txt")), g).unwrap();
    }
    (w, g1, g2)
}

async fn two_groups_write(root: &Path, file: &str) -> Worktrees {
    let mut w = worktrees(root).await;
    for g in ["G1", "G2"] {
        let dir = w.open(g).await.unwrap();
        w.own(g, &[file.to_string(), format!("{g}.txt")]);
        std::fs::write(dir.join(file), g).unwrap();
    }
    w
}

fn assert_clean_line(root: &Path) {
    assert_eq!(run(root, &["status", "--porcelain", "--untracked-files=all"]), "", "the line's checkout is its commit");
    assert!(!root.join(".git/MERGE_HEAD").exists(), "no merge in progress");
}

#[tokio::test]
async fn a_conflicting_merge_writes_nothing_on_the_line() {
    let d = repo();
    let root = d.path();
    let mut w = two_groups_write(root, "s.txt").await;
    let Merge::Merged { after, .. } = w.merge("G1", "G1 merged").await.unwrap() else { panic!("G1 conflicted") };
    assert_eq!(after, run(root, &["rev-parse", "--short", "HEAD"]), "as `git log --format=%h` names it");
    let merged = run(root, &["rev-parse", "HEAD"]);
    let Merge::Conflict(said) = w.merge("G2", "G2 merged").await.unwrap() else { panic!("G2 merged over G1's s.txt") };
    assert!(said.contains("s.txt") && said.contains("CONFLICT"), "names the path and what git said: {said}");
    assert_eq!(run(root, &["rev-parse", "HEAD"]), merged, "the line stays at G1's merge");
    w.sync_line().await.unwrap();
    assert_eq!(std::fs::read_to_string(root.join("s.txt")).unwrap(), "G1");
    assert_clean_line(root);
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_commit_that_moved_the_line_since_the_last_merge_is_merged_on_not_lost() {
    let d = repo();
    let root = d.path();
    let (mut w, ..) = two_groups_own_files(root).await;
    merge(&mut w, "G1").await;
    // The line moves behind the run's back (a commit in the checkout, once
    // it holds the merge): the next merge's `update-ref` finds it elsewhere.
    w.sync_line().await.unwrap();
    let moved = commit(root, "user.txt");
    merge(&mut w, "G2").await;
    w.sync_line().await.unwrap();
    assert_eq!(run(root, &["rev-parse", "HEAD^1"]), moved, "merged on top of the commit that raced it");
    for f in ["G1.txt", "G2.txt", "user.txt"] {
        assert!(root.join(f).exists(), "{f} on the line");
    }
    assert_clean_line(root);
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn a_local_change_in_the_way_of_a_merge_fails_the_checkouts_catch_up_naming_it() {
    let d = repo();
    let root = d.path();
    let mut w = worktrees(root).await;
    let g1 = w.open("G1").await.unwrap();
    w.own("G1", &["a.txt".to_string()]);
    std::fs::write(g1.join("a.txt"), "G1").unwrap();
    std::fs::write(root.join("a.txt"), "the user's edit").unwrap();
    merge(&mut w, "G1").await;
    let e = w.sync_line().await.unwrap_err();
    assert!(e.contains("a.txt"), "{e}");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "the user's edit", "never overwritten");
    assert!(w.close_all().await.is_err(), "the end of the run says so too");
    assert_gone(root);
}

#[tokio::test]
async fn merges_reach_the_checkout_when_it_is_read_or_after_a_kill() {
    let d = repo();
    let root = d.path();
    let (mut w, ..) = two_groups_own_files(root).await;
    merge(&mut w, "G1").await;
    merge(&mut w, "G2").await;
    assert!(!root.join("G1.txt").exists(), "no gate read the line: its checkout waits");
    // Killed here: the next run's recovery writes both merges.
    drop(w);
    let mut w = worktrees(root).await;
    w.recover(crate::machine::MERGE_TRAILER).await.unwrap();
    assert_eq!(std::fs::read_to_string(root.join("G1.txt")).unwrap(), "G1");
    assert_eq!(std::fs::read_to_string(root.join("G2.txt")).unwrap(), "G2");
    assert_clean_line(root);
    assert!(!Layout::new(root).state_dir().join("lines/.f.checkout").exists(), "the note is gone");
    w.close_all().await.unwrap();
    assert_gone(root);
}

#[tokio::test]
async fn early_commits_are_merged_and_what_a_gate_changed_since_is_committed_too() {
    let d = repo();
    let root = d.path();
    let (mut w, g1, _) = two_groups_own_files(root).await;
    w.commit_early("G1", "G1 merged");
    w.commit_early("G2", "G2 merged");
    // A gate command runs in G1's worktree once its commit ended, and rewrites its file.
    settled(w.gating("G1").expect("G1 is committing")).await.unwrap();
    assert_eq!(run(&g1, &["log", "-1", "--format=%s"]), "G1 merged", "committed at the report");
    std::fs::write(g1.join("G1.txt"), "G1, formatted").unwrap();
    merge(&mut w, "G1").await;
    let Merge::Merged { after, .. } = w.merge("G2", "G2 merged").await.unwrap() else { panic!("G2 conflicted") };
    assert_eq!(after, run(root, &["rev-parse", "--short", "HEAD"]), "the run's cat-file abbreviates as git does");
    w.sync_line().await.unwrap();
    assert_eq!(std::fs::read_to_string(root.join("G1.txt")).unwrap(), "G1, formatted");
    assert_eq!(std::fs::read_to_string(root.join("G2.txt")).unwrap(), "G2");
    assert_clean_line(root);
    w.close_all().await.unwrap();
    assert_gone(root);
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
#[tokio::test]
async fn early_commits_wait_for_a_turn_among_as_many_as_the_cores() {
    let d = repo();
    let root = d.path();
    let (mut w, g1, g2) = two_groups_own_files(root).await;
    // One commit at a time, and that turn taken (as by a commit under way).
    w.committers = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
    let busy = w.committers.clone().acquire_owned().await.unwrap();
    let start = run(root, &["rev-parse", "HEAD"]);
    w.commit_early("G1", "G1 merged");
    w.commit_early("G2", "G2 merged");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for g in [&g1, &g2] {
        assert_eq!(run(g, &["rev-parse", "HEAD"]), start, "no commit before its turn");
    }
    drop(busy);
    let (c1, c2) = (w.commits["G1"].clone(), w.commits["G2"].clone());
    settled(c2).await.unwrap();
    settled(c1).await.unwrap();
    for (g, dir) in [("G1", &g1), ("G2", &g2)] {
        assert_eq!(run(dir, &["log", "-1", "--format=%s"]), format!("{g} merged"));
    }
    merge(&mut w, "G1").await;
    merge(&mut w, "G2").await;
    w.sync_line().await.unwrap();
    assert_clean_line(root);
    w.close_all().await.unwrap();
    assert_gone(root);
}

fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
}

#[tokio::test]
async fn the_runs_git_servers_end_with_it_and_a_killed_one_is_replaced() {
    let d = repo();
    let root = d.path();
    let (mut w, ..) = two_groups_own_files(root).await;
    merge(&mut w, "G1").await;
    let killed = w.refs.pid().await.expect("update-ref serves the merges");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(killed as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    merge(&mut w, "G2").await;
    w.sync_line().await.unwrap();
    assert!(root.join("G1.txt").exists() && root.join("G2.txt").exists());
    let merges = run(root, &["log", "--first-parent", "--format=%s", "-3"]);
    assert_eq!(merges, "G2 merged\nG1 merged\nstart", "each merged once, by the one-shot update-ref after the kill");
    let mut served: Vec<u32> = w.refs.pid().await.into_iter().collect();
    let merging = w.merger.pids();
    assert_eq!(merging.len(), 2, "cat-file and hash-object serve the merges");
    served.extend(merging);
    assert!(!served.is_empty() && !served.contains(&killed), "{served:?}");
    w.close_all().await.unwrap();
    drop(w);
    for pid in served {
        let mut polls = 0;
        while !ended(pid) && polls < 200 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            polls += 1;
        }
        assert!(ended(pid), "git {pid} outlived the run");
    }
    assert_gone(root);
}
