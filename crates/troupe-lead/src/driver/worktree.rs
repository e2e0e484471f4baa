//! The git side of worktree isolation (`[team] isolation = "worktree"`): each
//! Builder group's worktree under `.troupe/state/worktrees/<feature>/<group>`
//! on branch `troupe/<feature>/<group>`, its merge into the feature's line,
//! taking a merge back, removing worktree and branch, and the clean-up after a
//! crash. The machine decides when; this module only carries it out.
//!
//! The feature's line is the project's current branch (trunk-based), except
//! in a roadmap wave: there each feature has its own integration branch
//! `troupe-line/<feature>` in its own worktree under
//! `.troupe/state/lines/<feature>`, cut from the current branch when its first
//! group opens, so sibling features never see each other's unfinished work;
//! its merged and final gates run there, and once the final gate passed the
//! line lands on the current branch ([`Worktrees::land`]) and is removed. A
//! line that has not landed outlives a failed or interrupted run as a branch
//! only (its worktree is removed): it holds the merged groups `troupe resume`
//! keeps.
//!
//! Checking out a whole tree is the cost of a worktree (for 10k files, most
//! of a second), so it is paid off the Lead's path: a spare worktree is
//! checked out in the background when the run starts ([`Worktrees::prepare`]),
//! a pool of them once the plan says how many groups open at once
//! ([`pool_size`]: the widest wave and one more, see `worktree_pool.rs`), a
//! closed group's worktree becomes a spare that is reset and cleaned in the
//! background, and a group opens on a ready spare by taking its branch name
//! (or checking out what differs). A killed run's spares are taken back by
//! the next run's [`Worktrees::prepare`], or removed by its recovery.
//!
//! A group's merge never checks the line out to compute it ([`Worktrees::merge`]):
//! `git merge-tree --write-tree` merges the two commits into a tree,
//! `commit-tree` makes the merge commit, `update-ref` moves the line only if it
//! is still at the commit the merge started from. The line's checkout takes
//! the merges' diff (`read-tree -m -u`) only when something reads it
//! ([`Worktrees::sync_line`]), so a conflict writes nothing but objects and
//! the index is never left mid-merge.
//!
//! What is left on the Lead's path is kept short: a group's commit in its
//! worktree is made in the background when its Builder reports
//! ([`Worktrees::commit_early`]), before its merge is due; every ref the run
//! moves (the line's guarded move, a group's branch, a closed group's branch
//! deleted and its worktree detached, a spare's `HEAD`) goes through one
//! `git update-ref --stdin` per run (`ServedRefs`), the merge commit
//! through one `git hash-object`, and the group's branch and a merge's short
//! id through one `git cat-file --batch-check` (all
//! `git::Served`: killed with the run; when one refuses or
//! dies, the one-shot command runs instead and fails, or not, as it always
//! did); and a worktree moved between a spare's name and a
//! group's, or given its branch, has git's files written as git writes them
//! (`worktree_admin.rs`). What is left per group is the early commit's
//! `status`, `add` and `commit`, the merge's `merge-tree`, a closed
//! worktree's `reset --hard` (its `clean -fdx` only when the reset tree holds
//! a file git does not track: `worktree_admin.rs`), made when the next
//! group takes that worktree, or a `read-tree` when it takes a clean spare
//! elsewhere (about 5 git processes in all, against 14 two rounds before).
//!
//! Invariants held here: a merge that fails leaves the line and the work tree
//! as they were (a conflict touches neither; a local change in the way of the
//! merges' diff fails the checkout's catch-up, naming the file, and is never
//! overwritten); a group's commit holds only files its
//! Builder may write (the ownership rule of the hooks), never the spec files
//! copied in for it to read; and after [`Worktrees::close_all`] no worktree or
//! branch of the feature is left.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use troupe_core::layout::Layout;
use troupe_core::ownership::{Writer, may_write};
use troupe_core::role::Role;

use tokio::sync::watch;

use super::git::{Identity, ServedRefs, changed_under, commit_as, commit_lock, git, git_in, git_paths};

#[path = "worktree_admin.rs"]
mod admin;
#[path = "worktree_line.rs"]
mod line;
#[path = "worktree_merge.rs"]
mod merging;

/// Where the worktrees of `feature` live.
pub fn feature_dir(layout: &Layout, feature: &str) -> PathBuf {
    layout.state_dir().join("worktrees").join(feature)
}

/// The branch of `group` of `feature`.
pub fn branch(feature: &str, group: &str) -> String {
    format!("troupe/{feature}/{group}")
}

/// The integration branch of `feature` in a roadmap wave (not under
/// `troupe/<feature>/`: git cannot hold a branch and a folder of branches of
/// one name).
pub fn line_branch(feature: &str) -> String {
    format!("troupe-line/{feature}")
}

/// Where the worktree of `feature`'s own line lives.
pub fn line_dir(layout: &Layout, feature: &str) -> PathBuf {
    layout.state_dir().join("lines").join(feature)
}

/// How a merge went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// Merged: the line's commit before, and the merge commit.
    Merged {
        /// The line before the merge.
        before: String,
        /// The merge commit.
        after: String,
    },
    /// git refused or conflicted; the merge was aborted. What git said.
    Conflict(String),
}

/// The worktrees of one run of one feature.
#[derive(Debug)]
pub struct Worktrees {
    layout: Layout,
    root: PathBuf,
    feature: String,
    /// The project's folder inside its repository (`git rev-parse --show-prefix`).
    prefix: String,
    /// Whose name the groups' commits and merges carry (read once a run:
    /// every worktree shares the repository's config).
    identity: Identity,
    /// Each open group's project folder inside its worktree.
    open: HashMap<String, PathBuf>,
    /// Each group's files (what its Builder was given to write).
    owned: HashMap<String, Vec<String>>,
    /// The spec files copied into each open group's worktree (removed
    /// before its close resets it: `remove_copies`).
    copied: HashMap<String, Vec<PathBuf>>,
    /// Groups whose last open failed.
    failed: HashSet<String>,
    /// Whether the feature has its own line (a roadmap wave), not the current branch.
    own_line: bool,
    /// The project folder inside the own line's worktree, while it is open.
    line: Option<PathBuf>,
    /// The line's commit as this run last left it (a guess: a merge's
    /// `update-ref` checks it, and reads the line again when it moved).
    line_head: Option<String>,
    /// The commit the line's checkout holds while it lags the line (its
    /// merges are written to the checkout only when something reads it:
    /// [`Worktrees::sync_line`]). `None`: the checkout is the line's commit.
    behind: Option<String>,
    /// Worktrees kept for the next group to open, each made ready (checked
    /// out, or reset and cleaned) in the background: switching the few files
    /// that differ is far cheaper than checking out the whole tree again (and
    /// removing it), and the walks of the tree stay off the Lead's path.
    spares: Vec<Spare>,
    /// Spares named so far (names the next one).
    parked: usize,
    /// When tasks.yaml was last read for the pool (its modification time).
    plan_seen: Option<std::time::SystemTime>,
    /// The pool a plan being written asks for, not yet started.
    noticed: Option<usize>,
    /// Each group's commit in its worktree made when its Builder reported
    /// ([`Worktrees::commit_early`]), off the Lead's path: its outcome, once known.
    commits: HashMap<String, Committing>,
    /// How many early commits run at once (as many as the cores), taken in
    /// the order the reports came: when a wave's Builders report together,
    /// the first merge, due at once, waits for its own commit only, not for
    /// all of them sharing the cores; the others are made while the first
    /// ones merge.
    committers: std::sync::Arc<tokio::sync::Semaphore>,
    /// Groups whose worktree ran a gate command after their early commit:
    /// their merge commits again whatever that changed.
    touched: HashSet<String>,
    /// `git update-ref --stdin` in the project, serving every ref the run
    /// moves: the line's guarded moves, the groups' branches, the spares'
    /// `HEAD`s ([`ServedRefs`]).
    refs: ServedRefs,
    /// Whether the repository's refs are files (`git rev-parse
    /// --show-ref-format`): a group's branch is then put in its worktree's
    /// `HEAD` without a git process ([`admin::point_head`]).
    ref_files: bool,
    /// The merges' own served processes and commit identity ([`merging::Merger`]),
    /// whose `cat-file` also serves the merges' abbreviated ids.
    merger: merging::Merger,
    /// The length git abbreviates ids to here, once a merge's was read.
    abbrev: Option<usize>,
}

/// The outcome of a group's early commit, once it ended (see [`settled`]).
pub(crate) type Committing = watch::Receiver<Option<Result<(), String>>>;

/// Wait for an early commit to end: its outcome.
pub(crate) async fn settled(mut commit: Committing) -> Result<(), String> {
    match commit.wait_for(Option::is_some).await {
        Ok(done) => done.clone().unwrap_or(Ok(())),
        Err(_) => Err("the group's commit in its worktree did not finish".into()),
    }
}

impl Worktrees {
    /// The worktrees of `feature` in the project at `root`. With `own_line`
    /// (a roadmap wave), or when an interrupted roadmap run left the feature's
    /// line branch (its merges are kept), the groups merge into the feature's
    /// own line.
    pub async fn new(layout: Layout, root: PathBuf, feature: String, own_line: bool) -> Result<Worktrees, String> {
        // One process for both: the format first, since the prefix may be empty.
        let said = git(&root, &["rev-parse", "--show-ref-format", "--show-prefix"]).await?;
        let (format, prefix) = said.split_once('\n').unwrap_or((said.as_str(), ""));
        let (ref_files, prefix) = (format == "files", prefix.to_string());
        let left = format!("refs/heads/{}", line_branch(&feature));
        let own_line = own_line || git(&root, &["rev-parse", "-q", "--verify", &left]).await.is_ok();
        let identity = Identity::of(&root).await;
        Ok(Worktrees {
            layout,
            refs: ServedRefs::new(&root),
            root,
            feature,
            prefix,
            identity,
            open: HashMap::new(),
            owned: HashMap::new(),
            copied: HashMap::new(),
            failed: HashSet::new(),
            own_line,
            line: None,
            line_head: None,
            behind: None,
            spares: Vec::new(),
            parked: 0,
            plan_seen: None,
            noticed: None,
            commits: HashMap::new(),
            committers: std::sync::Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            )),
            touched: HashSet::new(),
            ref_files,
            merger: merging::Merger::default(),
            abbrev: None,
        })
    }

    /// A name for a new spare that no folder holds (a killed run may have left one).
    fn next_spare(&mut self) -> PathBuf {
        loop {
            let spare = feature_dir(&self.layout, &self.feature).join(format!(".spare-{}", self.parked));
            self.parked += 1;
            if !spare.exists() {
                return spare;
            }
        }
    }

    /// The feature's spec folder and the steering files, copied into a
    /// worktree for its teammates and gates to read (tasks.yaml is not
    /// committed before the Builders run).
    /// The copies' paths are returned.
    fn copy_spec(&self, workdir: &Path) -> Result<Vec<PathBuf>, String> {
        let mut written = Vec::new();
        for dir in [self.layout.spec_dir(&self.feature), self.layout.steering_dir()] {
            let rel = dir.strip_prefix(self.layout.root()).unwrap_or(&dir).to_path_buf();
            copy_dir(&dir, &workdir.join(rel), &mut written)?;
        }
        Ok(written)
    }

    fn path(&self, group: &str) -> PathBuf {
        feature_dir(&self.layout, &self.feature).join(group)
    }

    /// Record the files `group`'s Builder may write (its commit holds no others).
    pub fn own(&mut self, group: &str, files: &[String]) {
        self.owned.insert(group.to_string(), files.to_vec());
    }

    /// The project folder inside `group`'s worktree, while it is open.
    pub fn workdir(&self, group: &str) -> Option<&Path> {
        self.open.get(group).map(PathBuf::as_path)
    }

    /// Open `group`'s worktree, cut from the line's `HEAD`, unless this run
    /// has it open already (a retry of its Builder finishes what is there).
    /// The feature's spec folder and the steering files are copied in for the
    /// Builder to read: tasks.yaml is not committed before the Builders run.
    pub async fn open(&mut self, group: &str) -> Result<PathBuf, String> {
        let opened = self.try_open(group).await;
        match opened.is_ok() {
            true => self.failed.remove(group),
            false => self.failed.insert(group.to_string()),
        };
        opened
    }

    /// Whether the last [`Worktrees::open`] of `group` failed (its Builder must not start).
    pub fn failed(&self, group: &str) -> bool {
        self.failed.contains(group)
    }

    async fn try_open(&mut self, group: &str) -> Result<PathBuf, String> {
        if let Some(dir) = self.open.get(group) {
            return Ok(dir.clone());
        }
        self.open_line().await?;
        // Its last close deletes the branch this open makes.
        self.closed(group).await;
        let path = self.path(group);
        if path.exists() {
            self.remove(group).await;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let at = path.to_string_lossy().into_owned();
        let from = match self.line_head.clone() {
            // Where this run's last merge left the line: the Lead's own
            // commits on it say so ([`Worktrees::line_moved`]), and one made
            // behind its back is found by the next merge.
            Some(head) => head,
            None => {
                let from = if self.own_line { line_branch(&self.feature) } else { "HEAD".to_string() };
                // A spare's HEAD is its own: the line's commit is named in the project.
                git(&self.root, &["rev-parse", "--verify", &format!("{from}^{{commit}}")]).await?
            }
        };
        let name = branch(&self.feature, group);
        if !self.reuse_spare(&path, &name, &from).await {
            git(&self.root, &["worktree", "add", "-q", "-B", &name, &at, &from]).await?;
        }
        let workdir = path.join(&self.prefix);
        let copied = self.copy_spec(&workdir)?;
        self.copied.insert(group.to_string(), copied);
        self.open.insert(group.to_string(), workdir.clone());
        Ok(workdir)
    }

    /// Commit `group`'s work on its branch and merge the branch into the line.
    ///
    /// The merge never checks out the line to compute it: `git merge-tree`
    /// writes the merged tree from the two commits, `commit-tree` makes the
    /// merge commit, and `update-ref` moves the line only if it is still
    /// where the merge started (so a commit that raced it is never lost: the
    /// merge is computed again on top of it). The line's checkout is not
    /// touched: it takes the merges' diff once something reads it
    /// ([`Worktrees::sync_line`]: a gate with a command, a commit, the end of
    /// the run), so a plan whose merged gate runs no command writes each
    /// merge's files once, not once per merge.
    pub async fn merge(&mut self, group: &str, message: &str) -> Result<Merge, String> {
        let workdir = self.open.get(group).cloned().ok_or_else(|| format!("group {group} has no open worktree"))?;
        let early = match self.commits.remove(group) {
            Some(commit) => settled(commit).await,
            None => Err(String::new()),
        };
        // No early commit, one that failed (the one-shot path says why
        // again), or a gate command that ran in the worktree since: commit here.
        if self.touched.remove(group) || early.is_err() {
            let owned = self.owned.get(group).cloned().unwrap_or_default();
            commit_group(&workdir, &self.prefix, self.identity, &self.feature, &owned, message).await?;
        }
        let _one_at_a_time = commit_lock().lock().await;
        let (top, theirs) = (self.line_top(), format!("refs/heads/{}", branch(&self.feature, group)));
        let mut raced = false;
        // The branch's commit, read once: only this group's merge moves it.
        // Its loose ref file, as git wrote it at the group's commit (refs as
        // files), else the run's `cat-file`: one round trip fewer on the loop.
        let loose = self.ref_files.then(|| admin::loose_ref(&self.path(group), &theirs)).flatten();
        let theirs = match loose {
            Some(id) => id,
            None => self.merger.resolve(&self.root, &theirs).await.unwrap_or(theirs),
        };
        loop {
            let before = match self.line_head.take() {
                Some(head) => head,
                None => git(&top, &["rev-parse", "--verify", "HEAD^{commit}"]).await?,
            };
            let tree = match merge_tree(&top, &before, &theirs).await? {
                Ok(tree) => tree,
                Err(said) => {
                    self.line_head = Some(before);
                    return Ok(Merge::Conflict(said));
                }
            };
            let scratch = self.layout.state_dir().join(".merge-commit");
            let parents = [before.as_str(), theirs.as_str()];
            let after = match self.merger.commit(&self.root, &scratch, self.identity, &tree, &parents, message).await {
                Some(after) => after,
                None => {
                    let mut args = self.identity.args().to_vec();
                    args.extend(["commit-tree", &tree, "-p", &before, "-p", &theirs, "-m", message]);
                    git(&top, &args).await?
                }
            };
            let reflog = format!("troupe: merge {}", branch(&self.feature, group));
            // Before the line moves: a killed run's recovery writes what the
            // checkout lacks from what it holds.
            let holds = self.behind.clone().unwrap_or_else(|| before.clone());
            self.mark_behind(&holds)?;
            if let Err(e) = self.move_line(&reflog, &after, &before).await {
                // The line moved since `before` was read (or guessed): once more from where it is.
                self.settle_mark();
                match raced {
                    false => (raced, self.line_head) = (true, None),
                    true => return Err(e),
                }
                // What moved it (a commit in the checkout) left the checkout in step.
                self.sync_line_locked().await?;
                continue;
            }
            self.behind = Some(holds);
            self.line_head = Some(after.clone());
            let short = self.short(&after).await;
            return Ok(Merge::Merged { before, after: short });
        }
    }

    /// Commit `group`'s work in its worktree with `message` in the
    /// background: its Builder reported, and its merge, due once the reports
    /// before it are gated and merged, finds the commit made. One commit at
    /// a time in a worktree: a later one (a Builder's fix) follows the last.
    /// A group with no open worktree commits nothing here: its merge says so.
    pub fn commit_early(&mut self, group: &str, message: &str) {
        let Some(workdir) = self.open.get(group).cloned() else { return };
        let owned = self.owned.get(group).cloned().unwrap_or_default();
        let (prefix, identity, feature, message) =
            (self.prefix.clone(), self.identity, self.feature.clone(), message.to_string());
        let last = self.commits.remove(group);
        let (tx, rx) = watch::channel(None);
        let committers = self.committers.clone();
        tokio::spawn(async move {
            if let Some(last) = last {
                let _ = settled(last).await;
            }
            // Closed only with the run, so always granted.
            let _turn = committers.acquire_owned().await;
            let _ = tx.send(Some(commit_group(&workdir, &prefix, identity, &feature, &owned, &message).await));
        });
        self.commits.insert(group.to_string(), rx);
        self.touched.remove(group);
    }

    /// A gate is about to run commands in `group`'s worktree: what it waits
    /// for first (the group's early commit, which must not see the gate's
    /// files half written), and its merge commits again whatever it changes.
    pub fn gating(&mut self, group: &str) -> Option<Committing> {
        let commit = self.commits.get(group).cloned()?;
        self.touched.insert(group.to_string());
        Some(commit)
    }

    /// The id as git abbreviates it (the run's list of commits is `git log
    /// --format=%h`'s): the length git chose for the first merge of the run,
    /// longer while the run's `cat-file` finds the prefix ambiguous. The
    /// full id when git cannot say, since the merge is made.
    async fn short(&mut self, full: &str) -> String {
        if let Some(len) = self.abbrev.take() {
            for n in len..full.len() {
                match self.merger.look_up(&self.root, &full[..n]).await.as_deref() {
                    Some(found) if found == full => {
                        self.abbrev = Some(len);
                        return full[..n].to_string();
                    }
                    Some(said) if said.ends_with(" ambiguous") => continue,
                    _ => break,
                }
            }
        }
        let Ok(short) = git(&self.root, &["rev-parse", "--short", full]).await else { return full.to_string() };
        self.abbrev = Some(short.len());
        short
    }

    /// Remove `group`'s worktree and branch, off the Lead's path: the
    /// worktree is moved aside as a spare for the next group of this run
    /// and, in the background, its branch deleted, detached and the spec
    /// files copied in for it removed. Whoever takes it next resets it
    /// there and cleans it of every file git does not track (ignored ones
    /// too), so the next group sees exactly what a fresh worktree would
    /// hold: a reset here would be to a commit the line has left by then
    /// when a wave's successors open together after its merges. When it
    /// cannot be moved it is removed instead. A group opened again waits for
    /// its close ([`Worktrees::open`]).
    pub async fn close(&mut self, group: &str) -> Result<(), String> {
        self.open.remove(group);
        self.touched.remove(group);
        // A commit still being made in the worktree ends before it is moved.
        let committing = self.commits.remove(group);
        let copied = self.copied.remove(group).unwrap_or_default();
        let path = self.path(group);
        let name = format!("refs/heads/{}", branch(&self.feature, group));
        if !path.exists() {
            let _ = git(&self.root, &["update-ref", "-d", &name]).await;
            return Ok(());
        }
        // The line's commit as this run last left it, when known: a spare
        // opened later at another commit writes what differs.
        let at = match self.line_head.clone() {
            Some(head) => head,
            None => git(&self.line_top(), &["rev-parse", "--verify", "HEAD^{commit}"]).await?,
        };
        let spare = self.next_spare();
        let (root, dir, commit, refs) = (self.root.clone(), spare.clone(), at.clone(), self.refs.clone());
        let ready = tokio::spawn(async move {
            if let Some(commit) = committing {
                let _ = settled(commit).await;
            }
            let (from, to) = (path.to_string_lossy().into_owned(), dir.to_string_lossy().into_owned());
            if !admin::move_to(&path, &dir) && git(&root, &["worktree", "move", &from, &to]).await.is_err() {
                discard(&root, &path).await;
                let _ = git(&root, &["update-ref", "-d", &name]).await;
                return false;
            }
            // Detached and its branch deleted in one transaction. Apart,
            // `update-ref -d`, not `branch -D`: the parked worktree names
            // the branch until it is detached, which must come after (a
            // reset of a worktree on a deleted branch would make it again).
            let detached = match admin::id(&dir) {
                Some(id) => {
                    let updates = format!("option no-deref\nupdate worktrees/{id}/HEAD {commit}\ndelete {name}\n");
                    refs.update(&updates).await
                }
                None => false,
            };
            if !detached {
                let _ = git(&root, &["update-ref", "-d", &name]).await;
                if git(&dir, &["update-ref", "--no-deref", "HEAD", &commit]).await.is_err() {
                    discard(&root, &dir).await;
                    return false;
                }
            }
            remove_copies(&dir, &path, &copied);
            true
        });
        self.spares.push(Spare { path: spare, at, ready: Some(ready), closed: Some(group.to_string()), dirty: true });
        Ok(())
    }

    /// Wait until the background close of `group` (if any) has ended.
    async fn closed(&mut self, group: &str) {
        while self.spares.iter().any(|s| s.closed.as_deref() == Some(group) && s.ready.is_some()) {
            self.first_done().await;
        }
    }

    /// Move a spare to `path` and put branch `name` there at `from`: a spare
    /// already at `from` only takes the branch name, any other checks out
    /// what differs ([`Worktrees::take_spare`] says which). False when there
    /// is none or it fails (a failed spare is removed).
    async fn reuse_spare(&mut self, path: &Path, name: &str, from: &str) -> bool {
        let Some(spare) = self.take_spare(from).await else { return false };
        let (at, to) = (spare.path.to_string_lossy().into_owned(), path.to_string_lossy().into_owned());
        let branch_ref = format!("refs/heads/{name}");
        // `update-ref`, not `branch -f`: a worktree parked a moment ago may
        // still name the branch (a retry of the same group). The spare's
        // detached HEAD is not moved to `from` first: the branch takes it.
        let ready_at_from = |s: &Spare| !s.dirty && s.at == from;
        let switched = (admin::move_to(&spare.path, path)
            || git(&self.root, &["worktree", "move", &at, &to]).await.is_ok())
            && (ready_at_from(&spare)
                || (!spare.dirty && write_diff(path, &spare.at, from).await)
                || reset_spare(&self.root, path, from).await)
            && (self.refs.update(&format!("update {branch_ref} {from}\n")).await
                || git(&self.root, &["update-ref", &branch_ref, from]).await.is_ok())
            && ((self.ref_files && admin::point_head(path, &branch_ref))
                || git(path, &["symbolic-ref", "HEAD", &branch_ref]).await.is_ok());
        if !switched {
            discard(&self.root, &spare.path).await;
            discard(&self.root, path).await;
        }
        switched
    }

    /// Best effort: worktree, its folder and its branch gone, whatever state they are in.
    async fn remove(&self, group: &str) {
        discard(&self.root, &self.path(group)).await;
        let _ = git(&self.root, &["branch", "-q", "-D", &branch(&self.feature, group)]).await;
    }

    /// Every group of the feature that has a worktree folder (spares too),
    /// and every one that has a branch.
    async fn leftovers(&self) -> (Vec<String>, Vec<String>) {
        let mut folders: Vec<String> = std::fs::read_dir(feature_dir(&self.layout, &self.feature))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        folders.sort();
        let prefix = format!("refs/heads/{}", branch(&self.feature, ""));
        let refs = git(&self.root, &["for-each-ref", "--format=%(refname)", &prefix]).await.unwrap_or_default();
        let branches = refs.lines().filter_map(|r| r.strip_prefix(&prefix)).map(str::to_string).collect();
        (folders, branches)
    }

    /// After a crash: a merge left half done is aborted, every worktree and
    /// group branch of the feature removed (its own line's branch is kept and
    /// checked out again: it holds the merges). Returns the values of the
    /// `trailer` lines on the line's history that name this feature (its merges).
    pub async fn recover(&mut self, trailer: &str) -> Result<Vec<String>, String> {
        self.catch_up_killed().await?;
        abort_merge(&self.root).await?;
        self.sweep().await?;
        self.open_line().await?;
        let format = format!("--format=%(trailers:key={trailer},valueonly)");
        let log = git(&self.line_top(), &["log", &format, "HEAD"]).await?;
        let mine = format!("{}/", self.feature);
        Ok(log.lines().map(str::trim).filter(|l| l.starts_with(&mine)).map(str::to_string).collect())
    }

    /// The run is over: no worktree or group branch of the feature is left
    /// (an own line that has not landed keeps its branch).
    pub async fn close_all(&mut self) -> Result<(), String> {
        // Commits still being made in worktrees end before those are removed.
        for (_, commit) in std::mem::take(&mut self.commits) {
            let _ = settled(commit).await;
        }
        self.touched.clear();
        let synced = self.sync_line().await;
        // A spare still being made is waited for: removed half made, git
        // would keep its entry (locked while it is made) in `worktree list`.
        for mut spare in std::mem::take(&mut self.spares) {
            spare.wait().await;
        }
        self.sweep().await.and(synced)
    }

    /// Every worktree and group branch of the feature removed, but this run's
    /// spares (an interrupted run's are removed too).
    async fn sweep(&mut self) -> Result<(), String> {
        self.open.clear();
        self.copied.clear();
        let keep: Vec<PathBuf> = self.spares.iter().map(|s| s.path.clone()).collect();
        let (folders, branches) = self.leftovers().await;
        // The worktrees first (a branch checked out in one is not deleted),
        // each without a git process when git's files read as expected, and
        // then one `prune` for any a killed run left half made.
        for group in folders {
            let path = self.path(&group);
            if keep.contains(&path) {
                continue;
            }
            if !admin::remove(&path) {
                discard(&self.root, &path).await;
            }
            if path.exists() {
                return Err(format!("cannot remove the worktree {}", path.display()));
            }
        }
        let _ = git(&self.root, &["worktree", "prune"]).await;
        // Every branch in one transaction of the run's `update-ref`.
        let names: Vec<String> = branches.iter().map(|g| branch(&self.feature, g)).collect();
        let deletes: String = names.iter().map(|b| format!("delete refs/heads/{b}\n")).collect();
        if !names.is_empty() && !self.refs.update(&deletes).await {
            for name in &names {
                let _ = git(&self.root, &["branch", "-q", "-D", name]).await;
            }
        }
        let _ = std::fs::remove_dir(feature_dir(&self.layout, &self.feature));
        self.remove_line_worktree().await;
        let _ = std::fs::remove_dir(line_dir(&self.layout, &self.feature).parent().unwrap_or(Path::new("")));
        match line_dir(&self.layout, &self.feature).exists() {
            true => Err(format!("cannot remove the worktree {}", line_dir(&self.layout, &self.feature).display())),
            false => Ok(()),
        }
    }
}

/// Commit on the branch checked out at `workdir` the changes a Builder of
/// `feature` owning `owned` may write (the ownership rule of the hooks),
/// never the spec files copied in for it to read. Nothing changed: no commit.
pub(crate) async fn commit_owned(workdir: &Path, feature: &str, owned: &[String], message: &str) -> Result<(), String> {
    let prefix = git(workdir, &["rev-parse", "--show-prefix"]).await?;
    commit_group(workdir, &prefix, Identity::of(workdir).await, feature, owned, message).await
}

/// [`commit_owned`] for a caller that knows the project's folder inside the
/// repository and the commit's identity (a run's [`Worktrees`]).
async fn commit_group(
    workdir: &Path,
    prefix: &str,
    identity: Identity,
    feature: &str,
    owned: &[String],
    message: &str,
) -> Result<(), String> {
    let writer = Writer { role: Role::Builder, feature: Some(feature), owned_files: owned, agent_name: None };
    let mine: Vec<String> = changed_under(workdir, prefix)
        .await?
        .into_iter()
        .filter(|p| may_write(workdir, Path::new(p), &writer).is_allowed())
        .collect();
    if !mine.is_empty() {
        let paths: Vec<&str> = mine.iter().map(String::as_str).collect();
        git_paths(workdir, &["add", "-A"], &paths).await?;
        commit_as(workdir, message, Some(&paths), identity).await?;
    }
    Ok(())
}

/// `git merge-tree --write-tree` of `ours` and `theirs` in `top`: the merged
/// tree, or (`Err` inside) the conflicted paths and git's messages. Nothing
/// is written but objects: no index, no work tree, no ref.
async fn merge_tree(top: &Path, ours: &str, theirs: &str) -> Result<Result<String, String>, String> {
    let out = git_in(top)
        .args(["merge-tree", "--write-tree", "--name-only", ours, theirs])
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (tree, rest) = stdout.split_once('\n').unwrap_or((stdout.trim(), ""));
    match out.status.code() {
        Some(0) => Ok(Ok(tree.to_string())),
        // 1 with a tree: conflicted. The paths, a blank line, then what git said.
        Some(1) if !tree.is_empty() => Ok(Err(format!("conflicted: {}", rest.trim()))),
        _ => Err(format!("git merge-tree failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
    }
}

/// Abort a merge in progress in `root`, if there is one.
async fn abort_merge(root: &Path) -> Result<(), String> {
    if git(root, &["rev-parse", "-q", "--verify", "MERGE_HEAD"]).await.is_ok() {
        git(root, &["merge", "--abort"]).await?;
    }
    Ok(())
}

/// Copy the files of `from` (recursively) into `to`, adding each copy's path
/// to `written`; a missing `from` copies nothing.
fn copy_dir(from: &Path, to: &Path, written: &mut Vec<PathBuf>) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(from) else { return Ok(()) };
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for entry in entries.flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst, written)?;
        } else if src.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| format!("cannot copy {} into the worktree: {e}", src.display()))?;
            written.push(dst);
        }
    }
    Ok(())
}

/// Remove from the worktree at `top` the spec files copied in for its group
/// (`copied`, paths under `at`, where the worktree was when they were
/// copied), and the folders they leave empty. Before the reset of a closed
/// group's worktree: that reset writes back those git tracks, and what it
/// does not track is gone as `git clean` would remove it, so the clean is
/// not needed for them ([`admin::clean_but_empty_folders`]).
fn remove_copies(top: &Path, at: &Path, copied: &[PathBuf]) {
    let mut dirs = Vec::new();
    for file in copied {
        let Ok(rel) = file.strip_prefix(at) else { continue };
        let _ = std::fs::remove_file(top.join(rel));
        dirs.extend(rel.ancestors().skip(1).filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf));
    }
    // Deepest first; a folder that holds anything else stays.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs.dedup();
    for dir in dirs {
        let _ = std::fs::remove_dir(top.join(dir));
    }
}

/// Where one Builder group stands in worktree isolation, for `troupe status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupBranch {
    /// The group.
    pub group: String,
    /// Its branch (`troupe/<feature>/<group>`), while it exists or once merged.
    pub branch: String,
    /// `merged` (its merge is on the line), `working` (its worktree exists:
    /// a run builds it, or a killed one left it for `troupe resume` to reset)
    /// or `pending`.
    pub state: &'static str,
}

/// Each of `groups` of `spec`'s feature: its branch and merge state, read
/// from git (the merge trailers on the line, the worktree folders).
pub fn group_branches(
    root: &Path,
    layout: &Layout,
    spec: &troupe_core::spec::Spec,
    groups: &[String],
) -> Vec<GroupBranch> {
    let format = format!("--format=%(trailers:key={},valueonly)", crate::machine::MERGE_TRAILER);
    // A roadmap feature's merges are on its own line until it lands.
    let line = format!("--branches={}", line_branch(&spec.feature_name));
    let log = std::process::Command::new("git")
        .current_dir(root)
        .args(troupe_project::git::hardened_args(root))
        .args(["log", &format, "HEAD", &line])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let merged: Vec<&str> = log.lines().map(str::trim).collect();
    let dir = feature_dir(layout, &spec.feature_name);
    groups
        .iter()
        .map(|g| {
            let state = if merged.contains(&crate::machine::merge_trailer(spec, g).as_str()) {
                "merged"
            } else if dir.join(g).exists() {
                "working"
            } else {
                "pending"
            };
            GroupBranch { group: g.clone(), branch: branch(&spec.feature_name, g), state }
        })
        .collect()
}

#[path = "worktree_pool.rs"]
mod pool;

pub use pool::pool_size;
use pool::{Spare, discard, reset_spare, write_diff};

/// `git <args>` in `root` with a test identity and `env`, for the tests of
/// this module and its parts: its trimmed output, or a panic naming it.
#[cfg(test)]
fn test_git(root: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[cfg(test)]
#[path = "worktree_tests.rs"]
mod tests;
