//! The pool of spare worktrees: how many a run keeps ready, checking them
//! out (or taking back those a killed run left) in the background.
//!
//! A group's open is fast only on a ready spare; without one it checks out
//! the whole tree on the Lead's path (most of a second for 10k files). The
//! groups of a wave open one right after another, so a wave of N groups
//! needs N spares ready, and a successor, opened after the close of the
//! group whose merge unblocked it, needs one more when a merged gate runs
//! commands: an idle spare has the merge's diff written during the gate.
//! A closed group's worktree is parked as it is (its reset is left to
//! whoever takes it, to the commit it is taken at), so every open costs one
//! git process: a diff written on a clean spare, or a parked one reset.
//!
//! A group that finds no ready spare waits for the first spare whose
//! background work ends, not for a given one: a parked worktree's reset
//! ends long before a checkout under way, and checkouts end one at a time
//! (`worktree add`s run one at a time, see `git.rs`), so a wave that opens
//! while its pool is still being checked out pays at most one checkout per
//! group, the floor for a worktree nobody checked out before.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::Poll;

use crate::machine::PlanLoad;
use crate::plan::BuildPlan;

use super::super::git::ServedRefs;
use super::{Worktrees, admin, feature_dir, git, line_branch};

/// How many spare worktrees a run of `plan` keeps, with at most `cap`
/// teammates at once: the widest wave's groups still to build (capped),
/// plus one for a successor, and never more than there are groups to build.
pub fn pool_size(plan: &BuildPlan, cap: usize) -> usize {
    let done = plan.done_ids();
    let mut waves: BTreeMap<u32, usize> = BTreeMap::new();
    for g in plan.groups.iter().filter(|g| !g.tasks.iter().all(|t| done.contains(t))) {
        *waves.entry(g.wave).or_default() += 1;
    }
    let (widest, todo) = (waves.values().copied().max().unwrap_or(0), waves.values().sum::<usize>());
    (widest.min(cap.max(1)) + 1).min(todo)
}

impl Worktrees {
    /// Make sure `wanted` spares exist at the line's commit, each made ready
    /// in the background: first the spares a killed run of the feature left
    /// (reset and cleaned, which writes only what differs), then new
    /// checkouts. Spares already there count (ready or not); none is removed.
    /// The Lead calls it when the run starts (one spare, or a resumed plan's
    /// pool) and again once the plan is known ([`pool_size`]). A failure
    /// only means a group checks out its own worktree.
    pub async fn prepare(&mut self, wanted: usize) {
        if self.spares.len() >= wanted {
            return;
        }
        let from = match self.has_line_branch().await {
            true => line_branch(&self.feature),
            false => "HEAD".to_string(),
        };
        let Ok(at) = git(&self.root, &["rev-parse", "--verify", &format!("{from}^{{commit}}")]).await else { return };
        for path in self.left_spares().await {
            if self.spares.len() >= wanted {
                break;
            }
            let (root, dir, commit) = (self.root.clone(), path.clone(), at.clone());
            let ready = tokio::spawn(async move { take_back(&root, &dir, &commit).await });
            self.spares.push(Spare { path, at: at.clone(), ready: Some(ready), closed: None, dirty: false });
        }
        while self.spares.len() < wanted {
            let path = self.next_spare();
            let (root, dir, commit) = (self.root.clone(), path.clone(), at.clone());
            let ready = tokio::spawn(async move { check_out_spare(&root, &dir, &commit).await });
            self.spares.push(Spare { path, at: at.clone(), ready: Some(ready), closed: None, dirty: false });
        }
    }

    /// The plan is being written (the TaskGenerator's teammate is still at
    /// work): when `tasks` changed since last seen and holds a valid plan,
    /// the pool it asks for (with at most `cap` teammates at once) is noted
    /// for [`Worktrees::grow`]. Its checkouts so start while the TaskGenerator
    /// finishes its report, seconds before the Lead loads the plan. Cheap
    /// when nothing changed (one `stat`).
    pub fn notice_plan(&mut self, tasks: &Path, cap: usize) {
        let Ok(modified) = std::fs::metadata(tasks).and_then(|m| m.modified()) else { return };
        if self.plan_seen == Some(modified) {
            return;
        }
        self.plan_seen = Some(modified);
        if let PlanLoad::Loaded(plan) = crate::driver::plan_io::load(tasks) {
            self.noticed = Some(pool_size(&plan, cap));
        }
    }

    /// Start the pool [`Worktrees::notice_plan`] noted, once.
    pub async fn grow(&mut self) {
        if let Some(wanted) = self.noticed.take() {
            self.prepare(wanted).await;
        }
    }

    /// A merged gate runs commands on the line, just moved by a merge: one
    /// spare is moved to the line's commit meanwhile (`refresh`).
    /// Without a command there is nothing to overlap: the group that merge
    /// unblocks opens at once, on the merged group's own worktree being
    /// reset to the line's commit, or by writing the diff itself; and most
    /// merges of a wave unblock nobody, so a spare moved after each would be
    /// moved again before anyone took it.
    pub fn merged_gate_starts(&mut self) {
        if let Some(at) = self.line_head.clone() {
            self.refresh(&at);
        }
    }

    /// The line moved to `at` (a merge): one spare elsewhere is moved to it
    /// in the background by writing the merge's diff, so the successor this
    /// merge unblocks, opened after the merged gate, finds a
    /// spare at the line's commit and only takes its branch name. An idle
    /// spare is clean, so its diff is all it needs (tens of milliseconds, not
    /// the two walks of a reset and clean); with none idle, the one whose
    /// work started first is moved once that work ends. One per merge: a
    /// merge unblocks successors one at a time.
    pub(super) fn refresh(&mut self, at: &str) {
        if self.spares.iter().any(|s| !s.dirty && s.at == at) {
            return;
        }
        let i = self.spares.iter().position(|s| s.ready.as_ref().is_none_or(|r| r.is_finished())).unwrap_or(0);
        let Some(spare) = self.spares.get_mut(i) else { return };
        let (root, dir, from, to) = (self.root.clone(), spare.path.clone(), spare.at.clone(), at.to_string());
        let refs = self.refs.clone();
        let before = spare.ready.take();
        let dirty = std::mem::take(&mut spare.dirty);
        spare.at = at.to_string();
        spare.ready = Some(tokio::spawn(async move {
            // A spare whose last work failed is gone already.
            if let Some(before) = before
                && !before.await.unwrap_or(false)
            {
                return false;
            }
            match dirty {
                true => reset_spare(&root, &dir, &to).await,
                false => advance_spare(&root, &refs, &dir, &from, &to).await,
            }
        }));
    }

    /// The ready spare a group opening at `from` takes (out of the pool):
    /// one at `from` (it only takes the branch name), else one elsewhere (it
    /// writes what differs), else the first whose background work ends.
    /// `None` when there is none, or every one failed.
    pub(super) async fn take_spare(&mut self, from: &str) -> Option<Spare> {
        loop {
            while self.spares.iter().any(|s| s.ready.as_ref().is_some_and(|r| r.is_finished())) {
                self.first_done().await;
            }
            let idle = |s: &Spare| s.ready.is_none();
            let at_from = self.spares.iter().position(|s| idle(s) && !s.dirty && s.at == from);
            // One on its way to `from` (moved there while the merged gate
            // ran) is waited for: writing the diff on another spare here
            // would take about as long, in one git process more.
            if at_from.is_none() && self.spares.iter().any(|s| !idle(s) && !s.dirty && s.at == from) {
                self.first_done().await;
                continue;
            }
            // Else a clean one elsewhere (it writes what differs), else a
            // closed group's (it is reset): either is one git process.
            let clean = self.spares.iter().position(|s| idle(s) && !s.dirty);
            if let Some(i) = at_from.or(clean).or_else(|| self.spares.iter().position(idle)) {
                return Some(self.spares.remove(i));
            }
            if !self.first_done().await {
                return None;
            }
        }
    }

    /// Wait until the background work of any spare ends: a spare it made
    /// ready is marked so, one it failed is dropped (the work removed it).
    /// False when no work is under way.
    pub(super) async fn first_done(&mut self) -> bool {
        if self.spares.iter().all(|s| s.ready.is_none()) {
            return false;
        }
        let (i, ok) = std::future::poll_fn(|cx| {
            for (i, s) in self.spares.iter_mut().enumerate() {
                if let Some(work) = s.ready.as_mut()
                    && let Poll::Ready(done) = Pin::new(work).poll(cx)
                {
                    return Poll::Ready((i, done.unwrap_or(false)));
                }
            }
            Poll::Pending
        })
        .await;
        match ok {
            true => self.spares[i].ready = None,
            false => drop(self.spares.remove(i)),
        }
        true
    }

    /// Wait until every spare is ready; how many are. (What a run's design
    /// and plan phases give the spares [`Worktrees::prepare`] starts.)
    pub async fn prepared(&mut self) -> usize {
        let mut ready = Vec::new();
        for mut s in std::mem::take(&mut self.spares) {
            if s.wait().await {
                ready.push(Spare { ready: None, ..s });
            }
        }
        self.spares = ready;
        self.spares.len()
    }

    /// The spares an earlier, killed run of the feature left that are whole
    /// worktrees of this repository (their own top level), in name order.
    /// Anything else there is left to the recovery's sweep.
    async fn left_spares(&self) -> Vec<PathBuf> {
        let mut left: Vec<PathBuf> = std::fs::read_dir(feature_dir(&self.layout, &self.feature))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        left.retain(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".spare-")));
        left.retain(|p| !self.spares.iter().any(|s| &s.path == p));
        left.sort();
        let mut whole = Vec::new();
        for path in left {
            // A folder without its `.git` file would let git find the
            // project's own repository above it: never reset that one.
            let top = git(&path, &["rev-parse", "--show-toplevel"]).await.map(PathBuf::from);
            if top.is_ok_and(|t| path.canonicalize().is_ok_and(|p| p == t)) {
                whole.push(path);
            }
        }
        whole
    }
}

/// A new spare worktree at `path`, detached at `at`; false (and nothing
/// left) when git fails.
async fn check_out_spare(root: &Path, path: &Path, at: &str) -> bool {
    let made = match path.parent().map(std::fs::create_dir_all) {
        Some(Err(_)) => false,
        _ => git(root, &["worktree", "add", "-q", "--detach", &path.to_string_lossy(), at]).await.is_ok(),
    };
    if !made {
        discard(root, path).await;
    }
    made
}

/// A killed run's spare at `path` made this run's, detached at `at`: it may
/// have been locked mid-checkout (git refuses to move a locked worktree) or
/// still name a branch (a reset would move that branch). False (and the
/// spare removed) when git fails.
async fn take_back(root: &Path, path: &Path, at: &str) -> bool {
    let _ = git(root, &["worktree", "unlock", &path.to_string_lossy()]).await;
    if git(path, &["update-ref", "--no-deref", "HEAD", "HEAD"]).await.is_err() {
        discard(root, path).await;
        return false;
    }
    reset_spare(root, path, at).await
}

/// A worktree of the run kept aside for the next group: detached at `at`,
/// clean (what a fresh worktree holds) once `ready` says so.
#[derive(Debug)]
pub(super) struct Spare {
    pub(super) path: PathBuf,
    /// The commit it is checked out at (a full hash).
    pub(super) at: String,
    /// The background work that makes it ready (`None`: it is): true when
    /// it is, false when it failed (the spare is then removed).
    pub(super) ready: Option<tokio::task::JoinHandle<bool>>,
    /// The group whose closed worktree it is (its branch deleted as part of `ready`).
    pub(super) closed: Option<String>,
    /// Its files are still the closed group's: whoever takes it next (a
    /// group's open, or a move to the line) resets it to where it goes,
    /// rather than the close resetting it to a commit the line leaves
    /// before anyone takes it (the successors of a wave open together,
    /// after the wave's merges).
    pub(super) dirty: bool,
}

impl Spare {
    /// Wait until the spare is ready; whether it is.
    pub(super) async fn wait(&mut self) -> bool {
        match self.ready.take() {
            None => true,
            Some(work) => work.await.unwrap_or(false),
        }
    }
}

/// The spare at `path` reset to `at` and cleaned of every file git does not
/// track (ignored ones too; `git clean` runs only when there is one, see
/// [`admin::clean_but_empty_folders`]): exactly what a fresh worktree would hold. False
/// (and the spare removed) when git fails.
pub(super) async fn reset_spare(root: &Path, path: &Path, at: &str) -> bool {
    // `clean` only when the reset tree holds something git does not track
    // but empty folders (most closed groups hold nothing else: their commit
    // took their files, their spec copies are removed before the reset).
    let clean = git(path, &["reset", "-q", "--hard", at]).await.is_ok()
        && (admin::clean_but_empty_folders(path) || git(path, &["clean", "-q", "-f", "-d", "-x"]).await.is_ok());
    if !clean {
        discard(root, path).await;
    }
    clean
}

/// The clean spare at `path`, detached at `from`, moved to `to` by writing
/// only the files that differ (`read-tree -m -u`, the two-tree merge a
/// checkout makes, without the lstat of every file that `checkout` and
/// `reset --hard` start with: a merge's diff is a few files, the tree 10k).
/// When git refuses (a file changed since the spare was made clean), the
/// full reset and clean instead. False (and the spare removed) when that
/// fails too.
pub(super) async fn advance_spare(root: &Path, refs: &ServedRefs, path: &Path, from: &str, to: &str) -> bool {
    if from == to {
        return true;
    }
    let advanced = write_diff(path, from, to).await && detach(refs, path, to).await;
    advanced || reset_spare(root, path, to).await
}

/// The worktree at `path` detached at `at`: through the run's served
/// `update-ref` (its `HEAD` named `worktrees/<id>/HEAD` there), else the
/// one-shot command in the worktree.
pub(super) async fn detach(refs: &ServedRefs, path: &Path, at: &str) -> bool {
    if let Some(id) = admin::id(path)
        && refs.update(&format!("option no-deref\nupdate worktrees/{id}/HEAD {at}\n")).await
    {
        return true;
    }
    git(path, &["update-ref", "--no-deref", "HEAD", at]).await.is_ok()
}

/// The clean checkout at `path` moved from commit `from` to `to` by writing
/// only the files that differ (`read-tree -m -u`); its HEAD is the caller's.
pub(super) async fn write_diff(path: &Path, from: &str, to: &str) -> bool {
    git(path, &["read-tree", "-m", "-u", from, to]).await.is_ok()
}

/// Best effort: the worktree at `path` and its folder gone, whatever state they are in.
pub(super) async fn discard(root: &Path, path: &Path) {
    if path.exists() {
        let _ = git(root, &["worktree", "remove", "--force", "--force", &path.to_string_lossy()]).await;
        let _ = std::fs::remove_dir_all(path);
    }
    let _ = git(root, &["worktree", "prune"]).await;
}
