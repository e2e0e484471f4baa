//! The record of a run that `troupe replay` needs to run it again without a
//! model: `.troupe/state/runs/<run>/run.json` (the job and flags, the git
//! tree and HEAD as the run found them, the store's last event before it, its
//! block of agent numbers, and at its end the last event and the board) and
//! `store.db`, an SQLite snapshot of the store taken before the run changed
//! it. The teammates' normalised logs (`.troupe/state/logs/<agent>.jsonl`)
//! are the rest: agent ids never repeat within a project, so the run's
//! teammates are the ids numbered from its block.
//!
//! A roadmap run (`troupe roadmap run`) is recorded the same way as a whole
//! (`roadmap`): its start before any feature's run, and at its end every
//! feature's run and board.
//!
//! Recording never stops a run: a record that cannot be written is a note to
//! the user, and that run cannot be replayed.

mod roadmap;

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use troupe_core::layout::Layout;
use troupe_store::{ListFilter, Store, Task};

use crate::machine::{Job, Raise};

pub use roadmap::{AGENT_NUMBERS_ENV, FeatureRun, Roadmap, RoadmapStart, pinned_agent_numbers, start_roadmap};

/// The file name of a run's record in its folder.
pub const RECORD_FILE: &str = "run.json";
/// The file name of the store's snapshot in a run's folder.
pub const STORE_FILE: &str = "store.db";

/// The git state a run started from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GitStart {
    /// HEAD's commit, when the repository had one.
    pub head: Option<String>,
    /// The tree of every file not ignored, as the work tree held it
    /// (uncommitted and untracked files included), written as a git tree
    /// object (reachable through `refs/troupe/runs/<run>` so it is kept).
    pub tree: String,
}

/// A task of the board as a run left it: what replay compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardTask {
    /// The task id.
    pub id: String,
    /// Its status.
    pub status: String,
    /// Who holds it.
    pub assignee: Option<String>,
    /// What blocks it.
    pub blocked_by: Vec<String>,
}

impl BoardTask {
    /// The parts of `t` a replay must reproduce (not its timestamps).
    pub fn of(t: &Task) -> BoardTask {
        BoardTask {
            id: t.id.clone(),
            status: t.status.as_str().to_string(),
            assignee: t.assignee.clone(),
            blocked_by: t.blocked_by.clone(),
        }
    }
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id in the usage ledger (`<feature>@<start>`).
    pub run: String,
    /// The feature (empty for a roadmap run).
    pub feature: String,
    /// What was asked for (`None`: a roadmap run, see `roadmap`).
    pub job: Option<Job>,
    /// `--engine`, when given.
    pub engine: Option<String>,
    /// Whether the run committed.
    pub commit: bool,
    /// `--budget`, when given.
    pub budget: Option<Raise>,
    /// When it started.
    pub started: Timestamp,
    /// The git state it started from; `None` outside a git repository.
    pub git: Option<GitStart>,
    /// The newest event of the store before the run.
    pub events_before: i64,
    /// The first agent number of the run's block.
    pub first_agent_number: u64,
    /// How many numbers the block holds.
    pub agent_numbers: u64,
    /// The newest event when the run ended (`None`: it never ended cleanly).
    pub events_after: Option<i64>,
    /// The feature's board when the run ended.
    pub board: Option<Vec<BoardTask>>,
    /// How the run ended.
    pub outcome: Option<String>,
    /// A roadmap run's own part: its review flags, and at its end its features' runs and boards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roadmap: Option<Roadmap>,
}

impl RunRecord {
    /// True when agent `id` is one of this run's teammates (its trailing
    /// number is in the run's block, or a roadmap's feature run's).
    pub fn owns_agent(&self, id: &str) -> bool {
        let digits = id.rsplit('-').next().unwrap_or("");
        let Ok(n) = digits.parse::<u64>() else { return false };
        let within = |first: u64, count: u64| n >= first && n < first + count;
        within(self.first_agent_number, self.agent_numbers)
            || self.roadmap.iter().flat_map(|r| &r.runs).any(|f| within(f.first_agent_number, f.agent_numbers))
    }

    /// Read `run.json` of the run folder `dir`.
    pub fn load(dir: &Path) -> Result<RunRecord, String> {
        let path = dir.join(RECORD_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn save(&self, dir: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).expect("a record serializes");
        troupe_project::fsutil::write_atomic(&dir.join(RECORD_FILE), text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", dir.join(RECORD_FILE).display()))
    }
}

/// The folder of run `run` (its id with `:` made file-safe).
pub fn run_dir(layout: &Layout, run: &str) -> PathBuf {
    layout.runs_dir().join(run.replace(':', "-"))
}

/// A run being recorded.
#[derive(Debug)]
pub struct Recording {
    dir: PathBuf,
    record: RunRecord,
}

/// What a run is, for its record.
pub struct Start<'a> {
    /// The run id.
    pub run: &'a str,
    /// The run's options.
    pub opts: &'a super::RunOptions,
    /// The project root.
    pub root: &'a Path,
    /// Where the store is ([`troupe_store::place`]).
    pub store_place: &'a str,
}

/// Record the start of a run: the git tree, then the store's snapshot. Call
/// before the run changes anything (before it reserves its agent numbers).
pub fn start(layout: &Layout, s: Start<'_>) -> Result<Recording, String> {
    let (dir, git, events_before) = begin(layout, s.run, s.root, s.store_place)?;
    let record = RunRecord {
        run: s.run.to_string(),
        feature: s.opts.feature.clone(),
        job: Some(s.opts.job.clone()),
        engine: s.opts.engine.clone(),
        commit: s.opts.commit,
        budget: s.opts.budget,
        started: Timestamp::now(),
        git,
        events_before,
        first_agent_number: 0,
        agent_numbers: 0,
        events_after: None,
        board: None,
        outcome: None,
        roadmap: None,
    };
    Ok(Recording { dir, record })
}

/// The run's folder, the git state and the store's snapshot (its last event).
fn begin(
    layout: &Layout,
    run: &str,
    root: &Path,
    store_place: &str,
) -> Result<(PathBuf, Option<GitStart>, i64), String> {
    let dir = run_dir(layout, run);
    if dir.exists() {
        return Err(format!("{} exists already (two runs of the feature in one second)", dir.display()));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let git = git_start(root, run)?;
    let events_before = troupe_store::copy::snapshot(store_place, &dir.join(STORE_FILE))
        .map_err(|e| format!("cannot snapshot the store: {e}"))?;
    Ok((dir, git, events_before))
}

impl Recording {
    /// The run's block of agent numbers, once reserved.
    pub fn numbered(&mut self, first: u64, count: u64) -> Result<(), String> {
        (self.record.first_agent_number, self.record.agent_numbers) = (first, count);
        self.record.save(&self.dir)
    }

    /// The end of the run: its last event, the feature's board, its outcome.
    pub fn finish(mut self, store: &dyn Store, outcome: &str) -> Result<(), String> {
        self.record.events_after = Some(last_event(store, self.record.events_before)?);
        self.record.board = Some(board(store, &self.record.feature)?);
        self.record.outcome = Some(outcome.to_string());
        self.record.save(&self.dir)
    }
}

/// The newest event of `store` (`after` when there is none past it).
fn last_event(store: &dyn Store, after: i64) -> Result<i64, String> {
    let mut last = after;
    loop {
        let page = store.events_since(last, 10_000).map_err(|e| e.to_string())?;
        match page.last() {
            Some(e) => last = e.id,
            None => return Ok(last),
        }
    }
}

/// `feature`'s board as replay compares it.
pub fn board(store: &dyn Store, feature: &str) -> Result<Vec<BoardTask>, String> {
    let filter = ListFilter { feature: Some(feature.to_string()), ..Default::default() };
    Ok(store.list(&filter).map_err(|e| e.to_string())?.iter().map(BoardTask::of).collect())
}

/// HEAD and the tree of the work tree as it is (an index of its own, so the
/// user's staging area is untouched), kept by a ref. `None` outside git.
fn git_start(root: &Path, run: &str) -> Result<Option<GitStart>, String> {
    let git = |args: &[&str], index: Option<&Path>| -> Result<String, String> {
        let mut cmd = troupe_project::git::command(root);
        // The kept commit needs an author; the user's identity may not be set.
        cmd.args(args).envs([
            ("GIT_AUTHOR_NAME", "troupe"),
            ("GIT_AUTHOR_EMAIL", "troupe@localhost"),
            ("GIT_COMMITTER_NAME", "troupe"),
            ("GIT_COMMITTER_EMAIL", "troupe@localhost"),
        ]);
        if let Some(i) = index {
            cmd.env("GIT_INDEX_FILE", i);
        }
        let out = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            false => Err(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())),
        }
    };
    if git(&["rev-parse", "--is-inside-work-tree"], None).is_err() {
        return Ok(None);
    }
    let head = git(&["rev-parse", "--verify", "-q", "HEAD"], None).ok().filter(|h| !h.is_empty());
    let git_dir = PathBuf::from(git(&["rev-parse", "--absolute-git-dir"], None)?);
    let index = git_dir.join(format!("troupe-replay-index-{}-{}", std::process::id(), run.replace([':', '@'], "-")));
    // Start from the real index, so git's stat cache spares re-hashing every file.
    let real = git_dir.join("index");
    if real.exists() {
        std::fs::copy(&real, &index).map_err(|e| format!("cannot copy the git index: {e}"))?;
    }
    let added = git(&["add", "-A", "--", "."], Some(&index));
    let tree = added.and_then(|_| git(&["write-tree"], Some(&index)));
    let _ = std::fs::remove_file(&index);
    let tree = tree?;
    let mut commit = vec!["commit-tree", tree.as_str(), "-m", run];
    if let Some(h) = &head {
        commit.extend(["-p", h.as_str()]);
    }
    let kept = git(&commit, None)?;
    let name = format!("refs/troupe/runs/{}", run.replace([':', '@'], "-"));
    git(&["update-ref", &name, &kept], None)?;
    Ok(Some(GitStart { head, tree }))
}
