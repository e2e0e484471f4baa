//! The feature's line: the branch its groups are merged into, in wave order.
//! Outside a roadmap it is the project's current branch, checked out in the
//! project itself. In a roadmap wave it is the feature's own integration
//! branch, checked out in a worktree of its own ([`line_dir`]), so sibling
//! features never see each other's partial files, and it lands on the
//! current branch once the feature's final gate passed ([`Worktrees::land`]).
//!
//! Merges move the line's ref without touching its checkout; the checkout
//! is brought in step ([`Worktrees::sync_line`]) only when something reads
//! it: a gate on the line, a commit there, the run's end. While it lags, a
//! mark under `.troupe/state/lines/` says what it holds, so that the next
//! run catches up a checkout a killed run left behind.

use std::path::{Path, PathBuf};

use super::super::git::{Identity, commit_lock, git, git_in};
use super::{Worktrees, abort_merge, line_branch, line_dir};

impl Worktrees {
    /// Where the feature's line is checked out (the project folder in it):
    /// its own line's worktree while open, else the project root. The merged
    /// and final gates run here.
    pub fn line_workdir(&self) -> &Path {
        self.line.as_deref().unwrap_or(&self.root)
    }

    /// The repository folder of the line (where `git merge` runs).
    pub(super) fn line_top(&self) -> PathBuf {
        match &self.line {
            Some(_) => line_dir(&self.layout, &self.feature),
            None => self.root.clone(),
        }
    }

    /// Whether the feature's own line branch exists.
    pub(super) async fn has_line_branch(&self) -> bool {
        let name = format!("refs/heads/{}", line_branch(&self.feature));
        git(&self.root, &["rev-parse", "-q", "--verify", &name]).await.is_ok()
    }

    /// Check out the feature's own line (a roadmap wave), keeping the branch
    /// an earlier run left (its merges are kept) or cutting it from `HEAD`.
    pub(super) async fn open_line(&mut self) -> Result<(), String> {
        if !self.own_line || self.line.is_some() {
            return Ok(());
        }
        let path = line_dir(&self.layout, &self.feature);
        self.remove_line_worktree().await;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let (at, name) = (path.to_string_lossy().into_owned(), line_branch(&self.feature));
        match self.has_line_branch().await {
            true => git(&self.root, &["worktree", "add", "-q", &at, &name]).await?,
            false => git(&self.root, &["worktree", "add", "-q", "-b", &name, &at, "HEAD"]).await?,
        };
        let workdir = path.join(&self.prefix);
        self.copy_spec(&workdir)?;
        self.line = Some(workdir);
        Ok(())
    }

    /// Best effort: the own line's worktree gone (its branch stays).
    pub(super) async fn remove_line_worktree(&mut self) {
        (self.line, self.line_head) = (None, None);
        if self.own_line {
            self.behind = None;
        }
        if !self.own_line {
            return;
        }
        let path = line_dir(&self.layout, &self.feature);
        if path.exists() {
            let _ = git(&self.root, &["worktree", "remove", "--force", "--force", &path.to_string_lossy()]).await;
            let _ = std::fs::remove_dir_all(&path);
        }
        let _ = git(&self.root, &["worktree", "prune"]).await;
    }

    /// Merge the feature's own line into the current branch with `message`,
    /// then remove its worktree and branch. Returns the merge commit (`None`:
    /// no own line, or nothing new on it). A conflict aborts the merge and
    /// keeps the branch, so no merged group is lost.
    pub async fn land(&mut self, message: &str) -> Result<Option<String>, String> {
        if !self.own_line || !self.has_line_branch().await {
            return Ok(None);
        }
        self.remove_line_worktree().await;
        let name = line_branch(&self.feature);
        let landed = {
            let _one_at_a_time = commit_lock().lock().await;
            let before = git(&self.root, &["rev-parse", "HEAD"]).await?;
            match merge_branch(&self.root, &name, message, self.identity).await? {
                Some(said) => {
                    return Err(format!(
                        "merging {name} into the current branch conflicted with what landed before it (the branch is kept):\n{said}"
                    ));
                }
                None => {
                    let after = git(&self.root, &["rev-parse", "HEAD"]).await?;
                    (after != before).then_some(git(&self.root, &["rev-parse", "--short", "HEAD"]).await?)
                }
            }
        };
        git(&self.root, &["branch", "-q", "-D", &name]).await?;
        Ok(landed)
    }

    /// Move the line from `before` to `after` if it is still at `before`,
    /// through the run's `update-ref --stdin` (one transaction); when that
    /// fails, the one-shot `update-ref` says whether the line moved.
    pub(super) async fn move_line(&mut self, reflog: &str, after: &str, before: &str) -> Result<(), String> {
        let line = match self.own_line {
            true => format!("refs/heads/{}", line_branch(&self.feature)),
            false => "HEAD".to_string(),
        };
        if self.refs.update(&format!("update {line} {after} {before}\n")).await {
            return Ok(());
        }
        let top = self.line_top();
        match git(&top, &["update-ref", "-m", reflog, "HEAD", after, before]).await {
            Ok(_) => Ok(()),
            // The served process moved it before it ended.
            Err(_) if git(&top, &["rev-parse", "--verify", "HEAD^{commit}"]).await.is_ok_and(|at| at == after) => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Write to the line's checkout the merges it lags behind (the diff
    /// from what it holds to the line's commit, `read-tree -m -u`): what a
    /// gate on the line, a commit there or the end of the run must see. A
    /// local change in the way of a merged file fails it, naming the file
    /// (the line keeps its merges).
    pub async fn sync_line(&mut self) -> Result<(), String> {
        if self.behind.is_none() {
            return Ok(());
        }
        let _one_at_a_time = commit_lock().lock().await;
        self.sync_line_locked().await
    }

    /// [`Worktrees::sync_line`] under the commit lock.
    pub(super) async fn sync_line_locked(&mut self) -> Result<(), String> {
        let Some(holds) = self.behind.clone() else { return Ok(()) };
        let top = self.line_top();
        let head = git(&top, &["rev-parse", "--verify", "HEAD^{commit}"]).await?;
        git(&top, &["read-tree", "-m", "-u", &holds, &head]).await.map_err(|e| {
            format!(
                "the line's checkout at {} cannot take the merges (a local change in their way?): {e}",
                top.display()
            )
        })?;
        self.behind = None;
        self.settle_mark();
        Ok(())
    }

    /// Where a run notes what the project's checkout holds while the line
    /// (its current branch) is ahead of it. An own line's worktree needs no
    /// note: a recovery checks it out afresh.
    pub(super) fn behind_mark(&self) -> Option<PathBuf> {
        (!self.own_line).then(|| self.layout.state_dir().join("lines").join(format!(".{}.checkout", self.feature)))
    }

    pub(super) fn mark_behind(&self, holds: &str) -> Result<(), String> {
        let Some(mark) = self.behind_mark() else { return Ok(()) };
        if self.behind.is_some() && mark.exists() {
            return Ok(());
        }
        if let Some(dir) = mark.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(&mark, holds).map_err(|e| format!("cannot write {}: {e}", mark.display()))
    }

    /// The note gone once the checkout is in step (best effort: a stale one
    /// only makes a recovery write an empty diff).
    pub(super) fn settle_mark(&self) {
        if self.behind.is_none()
            && let Some(mark) = self.behind_mark()
        {
            let _ = std::fs::remove_file(mark);
        }
    }

    /// A killed run left the project's checkout behind its line: write what it lacks.
    pub(super) async fn catch_up_killed(&mut self) -> Result<(), String> {
        let Some(mark) = self.behind_mark() else { return Ok(()) };
        let Ok(holds) = std::fs::read_to_string(&mark) else { return Ok(()) };
        self.behind = Some(holds.trim().to_string());
        self.sync_line().await
    }

    /// The Lead committed on the line itself (the project's current branch):
    /// the next group opens at the line's commit read again.
    pub fn line_moved(&mut self) {
        self.line_head = None;
    }

    /// Return the line to `to`, keeping uncommitted changes (the run's own
    /// notes); refuses rather than overwrite one.
    pub async fn undo(&mut self, to: &str) -> Result<(), String> {
        let _one_at_a_time = commit_lock().lock().await;
        self.sync_line_locked().await?;
        self.line_head = None;
        git(&self.line_top(), &["reset", "-q", "--keep", to]).await.map(drop)
    }
}

/// `git merge --no-ff` of `branch` into the branch checked out at `top` (a
/// roadmap feature's line landing, once a run);
/// `Some(what git said)` when it refused or conflicted (the merge aborted,
/// the tree as it was).
async fn merge_branch(top: &Path, branch: &str, message: &str, identity: Identity) -> Result<Option<String>, String> {
    let mut args = identity.args().to_vec();
    args.extend(["merge", "-q", "--no-ff", "--no-edit", "-m", message, branch]);
    let out = git_in(top).args(&args).output().await.map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        return Ok(None);
    }
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    abort_merge(top).await?;
    Ok(Some(said.trim().to_string()))
}
