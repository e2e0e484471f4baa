//! The roadmap on disk: `.troupe/roadmap.yaml` (features, dependencies and
//! each feature's run status) plus every feature's `roadmap {wave,
//! dependencies}` and `blocked_info` in its spec.yaml.
//!
//! The rules (waves, downstream blocking, fix and skip) are
//! [`troupe_core::roadmap`]'s; this module loads, applies and saves, checking
//! everything it can before it writes anything.

use std::io;
use std::path::PathBuf;

use crate::Project;
use crate::specs::{SpecFileError, Specs};
use jiff::Timestamp;
use serde::Serialize;
use troupe_core::layout::Layout;
use troupe_core::phase::Phase;
use troupe_core::roadmap::{self as core, BlockOutcome, Dependency, FeatureStatus, Roadmap, RoadmapError, Unblock};
use troupe_core::spec::Spec;

/// Why a roadmap operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RoadmapFileError {
    /// No `.troupe/roadmap.yaml`.
    #[error("there is no roadmap ({} does not exist)", .0.display())]
    NoRoadmap(PathBuf),
    /// `create` when one exists and is not complete.
    #[error("a roadmap already exists at {} and is not complete", .0.display())]
    Exists(PathBuf),
    /// The roadmap's rules refused it.
    #[error(transparent)]
    Roadmap(#[from] RoadmapError),
    /// roadmap.yaml exists but is not a valid roadmap.
    #[error("{}: {error}", .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: RoadmapError,
    },
    /// A spec could not be read or written.
    #[error(transparent)]
    Spec(#[from] SpecFileError),
    /// roadmap.yaml could not be read or written.
    #[error("cannot access {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// `.troupe/roadmap.yaml`.
pub fn roadmap_file(layout: &Layout) -> PathBuf {
    layout.troupe_dir().join("roadmap.yaml")
}

/// The roadmap, if there is one.
pub fn load(project: &Project) -> Result<Option<Roadmap>, RoadmapFileError> {
    let path = roadmap_file(project.layout());
    match std::fs::read_to_string(&path) {
        Ok(text) => Roadmap::from_yaml(&text).map(Some).map_err(|error| RoadmapFileError::Malformed { path, error }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RoadmapFileError::Io { path, source }),
    }
}

/// The roadmap, or [`RoadmapFileError::NoRoadmap`].
pub fn require(project: &Project) -> Result<Roadmap, RoadmapFileError> {
    load(project)?.ok_or_else(|| RoadmapFileError::NoRoadmap(roadmap_file(project.layout())))
}

/// Write roadmap.yaml atomically.
pub fn save(project: &Project, roadmap: &Roadmap) -> Result<(), RoadmapFileError> {
    let path = roadmap_file(project.layout());
    crate::write_atomic(&path, roadmap.to_yaml().as_bytes()).map_err(|source| RoadmapFileError::Io { path, source })
}

/// Is `feature` part of an active (not yet complete) roadmap?
pub fn is_active_for(project: &Project, feature: &str) -> Result<bool, RoadmapFileError> {
    Ok(load(project)?.is_some_and(|r| r.contains(feature) && !r.is_complete()))
}

/// `troupe roadmap create`: validate, create the specs that do not exist,
/// record each spec's wave and dependencies, write roadmap.yaml. Returns the
/// roadmap and the features whose spec was created. Nothing is written when
/// anything is wrong (a cycle, an unreadable spec, an unfinished roadmap).
pub fn create(
    project: &Project,
    features: &[String],
    dependencies: &[Dependency],
    now: Timestamp,
) -> Result<(Roadmap, Vec<String>), RoadmapFileError> {
    let roadmap = Roadmap::new(features, dependencies)?;
    if let Some(existing) = load(project)?
        && !existing.is_complete()
    {
        return Err(RoadmapFileError::Exists(roadmap_file(project.layout())));
    }
    let specs = Specs::new(project);
    let mut loaded: Vec<Option<Spec>> = Vec::new();
    for f in features {
        match specs.load(f) {
            Ok(s) => loaded.push(Some(s)),
            Err(SpecFileError::NotFound { .. }) => loaded.push(None),
            Err(e) => return Err(e.into()),
        }
    }
    let mut created = Vec::new();
    for (f, existing) in features.iter().zip(loaded) {
        let mut spec = match existing {
            Some(s) => s,
            None => {
                created.push(f.clone());
                Spec::new(f, now)
            }
        };
        let info = roadmap.spec_info(f).expect("a roadmap feature");
        let summary = format!("roadmap wave {}{}", info.wave, deps_text(&info.dependencies));
        spec.roadmap = Some(info);
        spec.note(now, "roadmap", &summary);
        specs.save(&spec)?;
    }
    save(project, &roadmap)?;
    Ok((roadmap, created))
}

fn deps_text(deps: &[String]) -> String {
    if deps.is_empty() { String::new() } else { format!(", after {}", deps.join(", ")) }
}

fn load_specs(project: &Project, roadmap: &Roadmap) -> Result<Vec<Spec>, RoadmapFileError> {
    let specs = Specs::new(project);
    let mut out = Vec::new();
    for f in &roadmap.features {
        match specs.load(&f.name) {
            Ok(s) => out.push(s),
            Err(SpecFileError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

fn save_changed(project: &Project, before: &[Spec], after: &[Spec]) -> Result<(), RoadmapFileError> {
    let specs = Specs::new(project);
    for (b, a) in before.iter().zip(after) {
        if b != a {
            specs.save(a)?;
        }
    }
    Ok(())
}

/// A feature failed in `troupe roadmap run`: mark it failed and block everything downstream.
pub fn fail(project: &Project, feature: &str, now: Timestamp) -> Result<Vec<BlockOutcome>, RoadmapFileError> {
    let mut roadmap = require(project)?;
    let before = load_specs(project, &roadmap)?;
    let mut after = before.clone();
    let outcomes = core::block_downstream(&mut roadmap, &mut after, feature, now)?;
    save_changed(project, &before, &after)?;
    save(project, &roadmap)?;
    Ok(outcomes)
}

/// Mark a feature's run status (done after its pipeline completed, ...).
pub fn set_status(project: &Project, feature: &str, status: FeatureStatus) -> Result<(), RoadmapFileError> {
    let mut roadmap = require(project)?;
    roadmap.set_status(feature, status)?;
    save(project, &roadmap)
}

/// `troupe roadmap fix|skip <feature>`.
pub fn unblock(
    project: &Project,
    feature: &str,
    how: Unblock,
    now: Timestamp,
) -> Result<Vec<BlockOutcome>, RoadmapFileError> {
    let mut roadmap = require(project)?;
    let before = load_specs(project, &roadmap)?;
    let mut after = before.clone();
    let outcomes = core::unblock(&mut roadmap, &mut after, feature, how, now)?;
    save_changed(project, &before, &after)?;
    save(project, &roadmap)?;
    Ok(outcomes)
}

/// One feature as `troupe roadmap status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeatureView {
    /// The feature.
    pub feature: String,
    /// Its wave (1-based).
    pub wave: u32,
    /// What it depends on.
    pub depends_on: Vec<String>,
    /// Its run status in the roadmap.
    pub status: FeatureStatus,
    /// Its spec's phase (`none` without a spec).
    pub phase: String,
    /// What blocks it.
    pub blocked_by: Option<String>,
    /// Phase to restore on unblock.
    pub blocked_at_phase: Option<String>,
}

/// Every feature in wave order, with its status and phase.
pub fn status(project: &Project) -> Result<Vec<FeatureView>, RoadmapFileError> {
    let roadmap = require(project)?;
    let specs = load_specs(project, &roadmap)?;
    let mut out = Vec::new();
    for (i, wave) in roadmap.waves().iter().enumerate() {
        for name in wave {
            let f = roadmap.features.iter().find(|f| f.name == *name).expect("from the roadmap");
            let spec = specs.iter().find(|s| s.feature_name == *name);
            out.push(FeatureView {
                feature: name.to_string(),
                wave: i as u32 + 1,
                depends_on: f.depends_on.clone(),
                status: f.status,
                phase: spec.map(|s| s.phase.to_string()).unwrap_or_else(|| "none".into()),
                blocked_by: spec.and_then(|s| s.blocked_by()).map(str::to_string),
                blocked_at_phase: spec.and_then(|s| s.blocked_info.as_ref()).map(|b| b.blocked_at_phase.to_string()),
            });
        }
    }
    Ok(out)
}

/// `troupe revise <feature> "<change>"` within the roadmap: the feature runs
/// again (pending), and so do features downstream that were already done,
/// since they were built on the old version.
pub fn revise(project: &Project, feature: &str) -> Result<Vec<String>, RoadmapFileError> {
    let mut roadmap = require(project)?;
    let mut again = vec![feature.to_string()];
    roadmap.set_status(feature, FeatureStatus::Pending)?;
    let downstream: Vec<String> = roadmap.downstream(feature).into_iter().map(str::to_string).collect();
    for d in downstream {
        if roadmap.status(&d) == Some(FeatureStatus::Done) {
            roadmap.set_status(&d, FeatureStatus::Pending)?;
            again.push(d);
        }
    }
    save(project, &roadmap)?;
    Ok(again)
}

/// True when `spec` may start its pipeline in a roadmap run (not blocked, not done).
pub fn runnable(spec: &Spec) -> bool {
    matches!(spec.phase, Phase::Initialized | Phase::DesignGenerated)
}

/// How `team.max_concurrent` (`cap`) is shared by the `features` of one wave
/// that run at the same time: one part per feature that runs at once, each at
/// least one teammate, all together never more than the cap. With more
/// features than the cap allows, only the first `cap` run at once (one
/// teammate each); a feature that finishes hands its part to the next one.
pub fn split_cap(cap: usize, features: usize) -> Vec<usize> {
    let cap = cap.max(1);
    let at_once = features.min(cap);
    if at_once == 0 {
        return Vec::new();
    }
    (0..at_once).map(|i| cap / at_once + usize::from(i < cap % at_once)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_split_and_never_exceeded() {
        assert_eq!(split_cap(24, 1), vec![24]);
        assert_eq!(split_cap(24, 2), vec![12, 12]);
        assert_eq!(split_cap(24, 5), vec![5, 5, 5, 5, 4]);
        assert_eq!(split_cap(2, 3), vec![1, 1], "more features than slots: two at a time");
        assert_eq!(split_cap(0, 2), vec![1], "a zero cap still runs one teammate");
        assert!(split_cap(24, 0).is_empty());
        for cap in 1..40 {
            for n in 1..40 {
                let parts = split_cap(cap, n);
                assert_eq!(parts.iter().sum::<usize>(), cap, "the whole cap is used ({cap}, {n})");
                assert_eq!(parts.len(), n.min(cap));
                assert!(parts.iter().all(|&p| p >= 1));
                assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1, "fair");
            }
        }
    }

    fn project() -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe/specs")).unwrap();
        let p = Project::at(dir.path());
        (dir, p)
    }

    fn t() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn create_fail_fix_round_trip_on_disk() {
        let (_d, p) = project();
        let deps = vec!["cart:pay".parse().unwrap(), "checkout:cart".parse().unwrap()];
        let (r, created) = create(&p, &names(&["pay", "cart", "checkout"]), &deps, t()).unwrap();
        assert_eq!(created, names(&["pay", "cart", "checkout"]));
        assert_eq!(r.waves().len(), 3);
        let spec = Specs::new(&p).load("checkout").unwrap();
        assert_eq!(spec.roadmap.as_ref().unwrap().wave, 3);
        assert!(is_active_for(&p, "cart").unwrap());

        let again = create(&p, &names(&["x"]), &[], t()).unwrap_err();
        assert!(matches!(again, RoadmapFileError::Exists(_)), "{again}");

        let out = fail(&p, "pay", t()).unwrap();
        assert_eq!(out.len(), 2);
        let view = status(&p).unwrap();
        assert_eq!(view[0].status, FeatureStatus::Failed);
        assert_eq!(view[1].phase, "blocked");
        assert_eq!(view[1].blocked_by.as_deref(), Some("pay"));
        assert_eq!(view[1].blocked_at_phase.as_deref(), Some("initialized"));

        unblock(&p, "pay", Unblock::Skip, t()).unwrap();
        let view = status(&p).unwrap();
        assert_eq!(view[0].status, FeatureStatus::Skipped);
        assert_eq!(view[2].phase, "initialized");
    }

    #[test]
    fn bad_input_changes_nothing() {
        let (d, p) = project();
        let cyc = vec!["a:b".parse().unwrap(), "b:a".parse().unwrap()];
        assert!(create(&p, &names(&["a", "b"]), &cyc, t()).is_err());
        assert!(!d.path().join(".troupe/specs/a").exists());
        assert!(!roadmap_file(p.layout()).exists());
        std::fs::create_dir_all(d.path().join(".troupe/specs/b")).unwrap();
        std::fs::write(d.path().join(".troupe/specs/b/spec.yaml"), "phase: [oops").unwrap();
        assert!(create(&p, &names(&["a", "b"]), &[], t()).is_err());
        assert!(!d.path().join(".troupe/specs/a").exists(), "a is not created when b is unreadable");
        assert!(matches!(status(&p), Err(RoadmapFileError::NoRoadmap(_))));
    }

    #[test]
    fn revise_reruns_the_feature_and_done_dependents() {
        let (_d, p) = project();
        create(&p, &names(&["a", "b", "c"]), &["b:a".parse().unwrap()], t()).unwrap();
        for f in ["a", "b", "c"] {
            set_status(&p, f, FeatureStatus::Done).unwrap();
        }
        assert!(!is_active_for(&p, "a").unwrap(), "complete");
        assert_eq!(revise(&p, "a").unwrap(), names(&["a", "b"]));
        assert_eq!(require(&p).unwrap().status("c"), Some(FeatureStatus::Done));
    }
}
