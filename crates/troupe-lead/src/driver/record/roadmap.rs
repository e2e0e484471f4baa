//! A roadmap run's record: `troupe roadmap run` is recorded as a whole, its
//! start (git tree, store snapshot) taken before any feature's run, so that
//! `troupe replay` runs every wave of it again. Each feature's run is also
//! recorded as usual; at the end the roadmap's record names them (their
//! blocks of agent numbers say whose teammates' logs are the roadmap's) and
//! keeps every feature's board.
//!
//! The features of a wave start together and reserve their agent numbers in
//! whatever order they get there; a replay gives each feature the block its
//! recorded run had ([`AGENT_NUMBERS_ENV`]), so every teammate has its
//! recorded id and plays its own log.

use std::collections::BTreeMap;
use std::path::Path;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use troupe_core::layout::Layout;
use troupe_store::Store;

use super::{BoardTask, Recording, RunRecord, begin, board, last_event};
use crate::machine::{Job, Raise};

/// Where a roadmap's replay gives each feature's run its recorded first
/// agent number (`pay=1,search=101`).
pub const AGENT_NUMBERS_ENV: &str = "TROUPE_REPLAY_AGENT_NUMBERS";

/// A roadmap run's own part of its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roadmap {
    /// `troupe roadmap run`'s review flags as given (`--no-review`, `--consensus 3`).
    pub review_args: Vec<String>,
    /// Its features' runs, in the order they started (known at its end).
    #[serde(default)]
    pub runs: Vec<FeatureRun>,
    /// The board of each feature that ran, when the roadmap run ended.
    #[serde(default)]
    pub boards: BTreeMap<String, Vec<BoardTask>>,
}

impl Roadmap {
    /// [`AGENT_NUMBERS_ENV`]'s value for a replay of this roadmap run.
    pub fn pinned_numbers(&self) -> String {
        let pins: Vec<String> = self.runs.iter().map(|r| format!("{}={}", r.feature, r.first_agent_number)).collect();
        pins.join(",")
    }
}

/// One feature's run within a roadmap run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureRun {
    /// The feature.
    pub feature: String,
    /// Its run's id.
    pub run: String,
    /// The first agent number of its block.
    pub first_agent_number: u64,
    /// How many numbers the block holds.
    pub agent_numbers: u64,
}

/// What a roadmap run is, for its record.
pub struct RoadmapStart<'a> {
    /// The run id (`roadmap@<start>`).
    pub run: &'a str,
    /// The project root.
    pub root: &'a Path,
    /// Where the store is ([`troupe_store::place`]).
    pub store_place: &'a str,
    /// `--engine`, when given.
    pub engine: Option<String>,
    /// Whether its runs commit.
    pub commit: bool,
    /// `--budget`, when given.
    pub budget: Option<Raise>,
    /// Its review flags as given.
    pub review_args: Vec<String>,
}

/// Record the start of a roadmap run, before any of its features' runs.
pub fn start_roadmap(layout: &Layout, s: RoadmapStart<'_>) -> Result<Recording, String> {
    let (dir, git, events_before) = begin(layout, s.run, s.root, s.store_place)?;
    let record = RunRecord {
        run: s.run.to_string(),
        feature: String::new(),
        job: None,
        engine: s.engine,
        commit: s.commit,
        budget: s.budget,
        started: Timestamp::now(),
        git,
        events_before,
        first_agent_number: 0,
        agent_numbers: 0,
        events_after: None,
        board: None,
        outcome: None,
        roadmap: Some(Roadmap { review_args: s.review_args, runs: Vec::new(), boards: BTreeMap::new() }),
    };
    record.save(&dir)?;
    Ok(Recording { dir, record })
}

impl Recording {
    /// The end of a roadmap run: the feature runs recorded since it started,
    /// each feature's board, its last event and its outcome.
    pub fn finish_roadmap(mut self, layout: &Layout, store: &dyn Store, outcome: &str) -> Result<(), String> {
        let started = self.record.started;
        let mut runs: Vec<RunRecord> = std::fs::read_dir(layout.runs_dir())
            .map_err(|e| format!("cannot read {}: {e}", layout.runs_dir().display()))?
            .flatten()
            .filter_map(|e| RunRecord::load(&e.path()).ok())
            .filter(|r| r.started >= started && matches!(r.job, Some(Job::InRoadmap { .. })))
            .collect();
        runs.sort_by_key(|r| r.started);
        let mut boards = BTreeMap::new();
        for r in &runs {
            boards.insert(r.feature.clone(), board(store, &r.feature)?);
        }
        let runs = runs
            .into_iter()
            .map(|r| FeatureRun {
                feature: r.feature,
                run: r.run,
                first_agent_number: r.first_agent_number,
                agent_numbers: r.agent_numbers,
            })
            .collect();
        let review_args = self.record.roadmap.take().map(|r| r.review_args).unwrap_or_default();
        self.record.roadmap = Some(Roadmap { review_args, runs, boards });
        self.record.events_after = Some(last_event(store, self.record.events_before)?);
        self.record.outcome = Some(outcome.to_string());
        self.record.save(&self.dir)
    }
}

/// The first agent number a roadmap's replay gives `feature`'s run, from
/// [`AGENT_NUMBERS_ENV`]; `None` outside such a replay.
pub fn pinned_agent_numbers(feature: &str) -> Option<u64> {
    let pins = std::env::var(AGENT_NUMBERS_ENV).ok()?;
    pins.split(',').find_map(|pin| pin.split_once('=').filter(|(f, _)| *f == feature)?.1.parse().ok())
}
