//! Commits (seed 000 Spec 14): trunk-based, on the current branch, everything
//! but `.troupe/state/`.

use std::path::Path;

use tokio::process::Command;

/// Whether `root` is inside a git work tree.
pub async fn is_repo(root: &Path) -> bool {
    Command::new("git")
        .args(["rev-parse", "--is-inside-work-tree"])
        .current_dir(root)
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

async fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out =
        Command::new("git").args(args).current_dir(root).output().await.map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Stage everything except `.troupe/state/` and commit with `message`.
/// `Ok(None)` when there was nothing to commit.
pub async fn commit(root: &Path, message: &str) -> Result<Option<String>, String> {
    git(root, &["add", "-A", "--", "."]).await?;
    // .troupe/state/ is git-ignored by `troupe init`; should it not be, it still stays out.
    git(root, &["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", ".troupe/state"]).await?;
    let staged = Command::new("git")
        .args(["diff", "--cached", "--quiet"])
        .current_dir(root)
        .status()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if staged.success() {
        return Ok(None);
    }
    let mut args = vec!["commit", "-q", "-m", message];
    // A machine without a git identity still gets its commits, under troupe's name.
    let has_identity = git(root, &["config", "user.email"]).await.is_ok_and(|e| !e.is_empty());
    let identity = ["-c", "user.name=troupe", "-c", "user.email=troupe@localhost"];
    if !has_identity {
        let mut with = identity.to_vec();
        with.extend(args);
        args = with;
    }
    git(root, &args).await?;
    git(root, &["rev-parse", "--short", "HEAD"]).await.map(Some)
}
