//! [`Worktrees`]' spares against a real repository: prepared in the
//! background, reused with what a fresh worktree would hold, kept by a
//! resume's recovery, and gone when the run ends.

use std::path::Path;

use super::*;

fn run(root: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
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
    w.prepare().await;
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
    assert!(!g1.exists());
    assert_eq!(run(root, &["branch", "--list", "troupe/*"]), "", "the branch goes at once");
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

#[tokio::test]
async fn recovery_removes_a_killed_runs_worktrees_and_keeps_this_runs_spare() {
    let d = repo();
    let root = d.path();
    // A killed run left a group's worktree and a spare.
    let mut killed = worktrees(root).await;
    killed.open("G1").await.unwrap();
    killed.open("G2").await.unwrap();
    killed.close("G2").await.unwrap();
    assert_eq!(killed.prepared().await, 1);
    drop(killed);
    let mut w = worktrees(root).await;
    w.prepare().await;
    assert_eq!(w.recover(crate::machine::MERGE_TRAILER).await.unwrap(), Vec::<String>::new());
    assert_eq!(run(root, &["branch", "--list", "troupe/*"]), "");
    let left: Vec<String> = std::fs::read_dir(feature_dir(&Layout::new(root), "f"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [".spare-1"], "the killed run's G1 and .spare-0 are gone, this run's spare is kept");
    let dir = w.open("G1").await.unwrap();
    assert_eq!(run(&dir, &["status", "--porcelain", "--ignored"]), "");
    w.close_all().await.unwrap();
    assert_gone(root);
}
