//! A roadmap: several features run in dependency waves (seed 000, Spec 5 and
//! the phase diagram's `blocked` state).
//!
//! A feature's wave is one more than the deepest wave among the features it
//! depends on, so every feature of wave N can run in parallel once waves
//! 1..N-1 are done. When a feature fails, every feature downstream of it (its
//! dependents, transitively) is blocked with `reason: upstream_failure`; fixing or
//! skipping the failed feature unblocks them and restores the phase they were in.
//!
//! ```
//! use troupe_core::roadmap::{Dependency, Roadmap};
//!
//! let deps: Vec<Dependency> = vec!["checkout:payments".parse().unwrap()];
//! let roadmap = Roadmap::new(&["payments".into(), "checkout".into(), "search".into()], &deps).unwrap();
//! assert_eq!(roadmap.waves(), vec![vec!["payments", "search"], vec!["checkout"]]);
//! assert_eq!(roadmap.downstream("payments"), vec!["checkout"]);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::layout::is_valid_feature_name;
use crate::phase::Phase;
use crate::spec::{REASON_UPSTREAM_FAILURE, RoadmapInfo, Spec};

/// `--depends a:b`: feature `a` depends on feature `b` (b runs first).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dependency {
    /// The dependent feature.
    pub feature: String,
    /// The feature it waits for.
    pub depends_on: String,
}

impl FromStr for Dependency {
    type Err = RoadmapError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() && !b.contains(':') => {
                Ok(Dependency { feature: a.trim().to_string(), depends_on: b.trim().to_string() })
            }
            _ => Err(RoadmapError::BadDependency(s.to_string())),
        }
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.feature, self.depends_on)
    }
}

/// Where a feature stands in the roadmap's run (its pipeline phase is in spec.yaml).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureStatus {
    /// Not run yet, or to be run again after a fix.
    #[default]
    Pending,
    /// Its pipeline completed.
    Done,
    /// Its pipeline failed; its dependents are blocked.
    Failed,
    /// The user chose to go on without it; its dependents no longer wait for it.
    Skipped,
}

impl FeatureStatus {
    /// The spelling in roadmap.yaml and in `troupe roadmap status`.
    pub fn as_str(self) -> &'static str {
        match self {
            FeatureStatus::Pending => "pending",
            FeatureStatus::Done => "done",
            FeatureStatus::Failed => "failed",
            FeatureStatus::Skipped => "skipped",
        }
    }
}

impl fmt::Display for FeatureStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so that table columns (`{:<8}`) line up.
        f.pad(self.as_str())
    }
}

/// One feature of a roadmap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoadmapFeature {
    /// The feature's name (its spec folder).
    pub name: String,
    /// Features that must be done (or skipped) before this one runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Where it stands in the run.
    #[serde(default)]
    pub status: FeatureStatus,
}

/// The roadmap of a project (`.troupe/roadmap.yaml`), in the order the user listed the features.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roadmap {
    /// The features, in creation order.
    pub features: Vec<RoadmapFeature>,
}

/// A roadmap that cannot be built or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoadmapError {
    /// `--depends` was not `feature:dependency`.
    #[error("'{0}' is not a dependency: write FEATURE:DEPENDS_ON, for example checkout:payments")]
    BadDependency(String),
    /// A roadmap needs at least one feature.
    #[error("a roadmap needs at least one feature")]
    Empty,
    /// Not usable as a feature name.
    #[error("'{0}' is not a valid feature name")]
    InvalidName(String),
    /// The same feature was listed twice.
    #[error("feature '{0}' is listed twice")]
    Duplicate(String),
    /// A dependency names a feature that is not in the roadmap.
    #[error("dependency {dependency} names '{unknown}', which is not in the roadmap")]
    UnknownFeature {
        /// The dependency as written.
        dependency: String,
        /// The feature that is not listed.
        unknown: String,
    },
    /// `a:a`.
    #[error("feature '{0}' cannot depend on itself")]
    SelfDependency(String),
    /// The dependencies form a cycle, which has no wave order.
    #[error("dependency cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// A feature that is not in the roadmap was asked for.
    #[error("feature '{0}' is not in the roadmap")]
    NotInRoadmap(String),
    /// roadmap.yaml text that could not be read.
    #[error("roadmap.yaml: {0}")]
    Parse(String),
}

impl Roadmap {
    /// Build a roadmap from features in order and their dependencies. Every
    /// problem (bad name, duplicate, unknown feature, self-dependency, cycle) is an error.
    pub fn new(features: &[String], dependencies: &[Dependency]) -> Result<Roadmap, RoadmapError> {
        if features.is_empty() {
            return Err(RoadmapError::Empty);
        }
        let mut seen = BTreeSet::new();
        for f in features {
            if !is_valid_feature_name(f) {
                return Err(RoadmapError::InvalidName(f.clone()));
            }
            if !seen.insert(f.as_str()) {
                return Err(RoadmapError::Duplicate(f.clone()));
            }
        }
        let mut roadmap = Roadmap {
            features: features
                .iter()
                .map(|name| RoadmapFeature {
                    name: name.clone(),
                    depends_on: Vec::new(),
                    status: FeatureStatus::Pending,
                })
                .collect(),
        };
        for d in dependencies {
            for name in [&d.feature, &d.depends_on] {
                if !seen.contains(name.as_str()) {
                    return Err(RoadmapError::UnknownFeature { dependency: d.to_string(), unknown: name.clone() });
                }
            }
            if d.feature == d.depends_on {
                return Err(RoadmapError::SelfDependency(d.feature.clone()));
            }
            let f = roadmap.features.iter_mut().find(|f| f.name == d.feature).expect("checked above");
            if !f.depends_on.contains(&d.depends_on) {
                f.depends_on.push(d.depends_on.clone());
            }
        }
        roadmap.validate()?;
        Ok(roadmap)
    }

    /// Parse `.troupe/roadmap.yaml` and validate it like [`Roadmap::new`].
    pub fn from_yaml(text: &str) -> Result<Roadmap, RoadmapError> {
        let roadmap: Roadmap = yaml_serde::from_str(text).map_err(|e| RoadmapError::Parse(e.to_string()))?;
        let names: Vec<String> = roadmap.features.iter().map(|f| f.name.clone()).collect();
        let deps: Vec<Dependency> = roadmap
            .features
            .iter()
            .flat_map(|f| f.depends_on.iter().map(|d| Dependency { feature: f.name.clone(), depends_on: d.clone() }))
            .collect();
        let mut checked = Roadmap::new(&names, &deps)?;
        for (f, parsed) in checked.features.iter_mut().zip(&roadmap.features) {
            f.status = parsed.status;
        }
        Ok(checked)
    }

    /// Render as `.troupe/roadmap.yaml` text.
    pub fn to_yaml(&self) -> String {
        yaml_serde::to_string(self).expect("a Roadmap always serializes")
    }

    fn validate(&self) -> Result<(), RoadmapError> {
        if let Some(cycle) = self.find_cycle() {
            return Err(RoadmapError::Cycle(cycle));
        }
        Ok(())
    }

    fn get(&self, name: &str) -> Option<&RoadmapFeature> {
        self.features.iter().find(|f| f.name == name)
    }

    /// Is `name` one of the roadmap's features?
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// A cycle as a path that starts and ends at the same feature, if there is one.
    fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnPath,
            Done,
        }
        fn visit(r: &Roadmap, at: usize, marks: &mut [Mark], path: &mut Vec<usize>) -> Option<Vec<String>> {
            marks[at] = Mark::OnPath;
            path.push(at);
            for dep in &r.features[at].depends_on {
                let next = r.features.iter().position(|f| &f.name == dep)?;
                match marks[next] {
                    Mark::OnPath => {
                        let start = path.iter().position(|&i| i == next).expect("on the path");
                        let mut cycle: Vec<String> =
                            path[start..].iter().map(|&i| r.features[i].name.clone()).collect();
                        cycle.push(r.features[next].name.clone());
                        return Some(cycle);
                    }
                    Mark::New => {
                        if let Some(c) = visit(r, next, marks, path) {
                            return Some(c);
                        }
                    }
                    Mark::Done => {}
                }
            }
            path.pop();
            marks[at] = Mark::Done;
            None
        }
        let mut marks = vec![Mark::New; self.features.len()];
        for i in 0..self.features.len() {
            if marks[i] == Mark::New
                && let Some(c) = visit(self, i, &mut marks, &mut Vec::new())
            {
                return Some(c);
            }
        }
        None
    }

    /// Each feature's wave, 1-based. The roadmap is acyclic (checked on construction).
    fn wave_numbers(&self) -> BTreeMap<&str, u32> {
        let mut waves: BTreeMap<&str, u32> = BTreeMap::new();
        // At most `len` rounds: each round settles at least one more feature.
        while waves.len() < self.features.len() {
            for f in &self.features {
                if waves.contains_key(f.name.as_str()) {
                    continue;
                }
                let deps: Option<Vec<u32>> = f.depends_on.iter().map(|d| waves.get(d.as_str()).copied()).collect();
                if let Some(deps) = deps {
                    waves.insert(&f.name, deps.into_iter().max().unwrap_or(0) + 1);
                }
            }
        }
        waves
    }

    /// The features by wave: `waves()[0]` is wave 1. Within a wave, creation order.
    pub fn waves(&self) -> Vec<Vec<&str>> {
        let numbers = self.wave_numbers();
        let count = numbers.values().copied().max().unwrap_or(0) as usize;
        let mut waves = vec![Vec::new(); count];
        for f in &self.features {
            waves[numbers[f.name.as_str()] as usize - 1].push(f.name.as_str());
        }
        waves
    }

    /// The wave (1-based) `feature` runs in.
    pub fn wave_of(&self, feature: &str) -> Option<u32> {
        self.wave_numbers().get(feature).copied()
    }

    /// Every feature that depends on `feature`, directly or through others, in wave order.
    pub fn downstream(&self, feature: &str) -> Vec<&str> {
        let mut found: BTreeSet<&str> = BTreeSet::new();
        let mut frontier = vec![feature];
        while let Some(at) = frontier.pop() {
            for f in &self.features {
                if f.depends_on.iter().any(|d| d == at) && found.insert(f.name.as_str()) {
                    frontier.push(f.name.as_str());
                }
            }
        }
        self.waves().into_iter().flatten().filter(|f| found.contains(f)).collect()
    }

    /// The status of `feature`.
    pub fn status(&self, feature: &str) -> Option<FeatureStatus> {
        self.get(feature).map(|f| f.status)
    }

    /// Set the status of `feature`.
    pub fn set_status(&mut self, feature: &str, status: FeatureStatus) -> Result<(), RoadmapError> {
        let f = self
            .features
            .iter_mut()
            .find(|f| f.name == feature)
            .ok_or_else(|| RoadmapError::NotInRoadmap(feature.to_string()))?;
        f.status = status;
        Ok(())
    }

    /// Pending features whose dependencies are all done or skipped, in wave
    /// order: what `troupe roadmap run` may start now.
    pub fn ready(&self) -> Vec<&str> {
        self.waves()
            .into_iter()
            .flatten()
            .filter(|name| {
                let f = self.get(name).expect("from the roadmap");
                f.status == FeatureStatus::Pending
                    && f.depends_on
                        .iter()
                        .all(|d| matches!(self.status(d), Some(FeatureStatus::Done | FeatureStatus::Skipped)))
            })
            .collect()
    }

    /// True when every feature is done or skipped.
    pub fn is_complete(&self) -> bool {
        self.features.iter().all(|f| matches!(f.status, FeatureStatus::Done | FeatureStatus::Skipped))
    }

    /// The `roadmap` field to record in `feature`'s spec.yaml.
    pub fn spec_info(&self, feature: &str) -> Option<RoadmapInfo> {
        let f = self.get(feature)?;
        Some(RoadmapInfo { wave: self.wave_of(feature)?, dependencies: f.depends_on.clone() })
    }
}

/// What happened to one downstream spec when its upstream failed or was unblocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockOutcome {
    /// The spec changed phase (to `blocked`, or back to `blocked_at_phase`).
    Changed {
        /// The feature.
        feature: String,
        /// Its phase after the change.
        phase: Phase,
    },
    /// The spec was left alone, with the reason (already blocked, already complete, ...).
    Unchanged {
        /// The feature.
        feature: String,
        /// Why it did not change.
        reason: String,
    },
}

/// Block every spec downstream of `failed` with `blocked_by: failed`,
/// `reason: upstream_failure`, remembering each one's phase. `specs` holds the
/// roadmap's specs (others are ignored); a downstream feature without a spec in
/// `specs` is reported unchanged. Marks `failed` as failed in the roadmap.
pub fn block_downstream(
    roadmap: &mut Roadmap,
    specs: &mut [Spec],
    failed: &str,
    now: Timestamp,
) -> Result<Vec<BlockOutcome>, RoadmapError> {
    roadmap.set_status(failed, FeatureStatus::Failed)?;
    let downstream: Vec<String> = roadmap.downstream(failed).into_iter().map(str::to_string).collect();
    Ok(downstream
        .into_iter()
        .map(|feature| match specs.iter_mut().find(|s| s.feature_name == feature) {
            None => BlockOutcome::Unchanged { feature, reason: "no spec.yaml yet".into() },
            Some(spec) => match spec.block(now, failed, REASON_UPSTREAM_FAILURE) {
                Ok(()) => BlockOutcome::Changed { feature, phase: spec.phase.clone() },
                Err(e) => BlockOutcome::Unchanged { feature, reason: e.to_string() },
            },
        })
        .collect())
}

/// How the user unblocked a failed feature's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unblock {
    /// The failed feature will be run again: it goes back to pending.
    Fix,
    /// Go on without it: it is marked skipped, so its dependents no longer wait for it.
    Skip,
}

/// `troupe roadmap fix|skip <feature>`: unblock every spec blocked by
/// `feature`, restoring `blocked_at_phase`, and set `feature`'s roadmap status.
///
/// `feature` may also be a blocked feature itself: then only that spec is
/// unblocked (its upstream stays as it is).
pub fn unblock(
    roadmap: &mut Roadmap,
    specs: &mut [Spec],
    feature: &str,
    how: Unblock,
    now: Timestamp,
) -> Result<Vec<BlockOutcome>, RoadmapError> {
    if !roadmap.contains(feature) {
        return Err(RoadmapError::NotInRoadmap(feature.to_string()));
    }
    let verb = match how {
        Unblock::Fix => "fixed",
        Unblock::Skip => "skipped",
    };
    let blocked_self = specs.iter().any(|s| s.feature_name == feature && s.phase == Phase::Blocked);
    if blocked_self {
        let spec = specs.iter_mut().find(|s| s.feature_name == feature).expect("found above");
        let by = spec.blocked_by().unwrap_or("its upstream").to_string();
        let outcome = match spec.unblock(now, &format!("unblocked by the user ({verb}): upstream {by}")) {
            Ok(()) => BlockOutcome::Changed { feature: feature.to_string(), phase: spec.phase.clone() },
            Err(e) => BlockOutcome::Unchanged { feature: feature.to_string(), reason: e.to_string() },
        };
        if how == Unblock::Skip {
            roadmap.set_status(feature, FeatureStatus::Skipped)?;
        }
        return Ok(vec![outcome]);
    }
    roadmap.set_status(
        feature,
        match how {
            Unblock::Fix => FeatureStatus::Pending,
            Unblock::Skip => FeatureStatus::Skipped,
        },
    )?;
    Ok(specs
        .iter_mut()
        .filter(|s| s.phase == Phase::Blocked && s.blocked_by() == Some(feature))
        .map(|spec| {
            let name = spec.feature_name.clone();
            match spec.unblock(now, &format!("upstream {feature} {verb}")) {
                Ok(()) => BlockOutcome::Changed { feature: name, phase: spec.phase.clone() },
                Err(e) => BlockOutcome::Unchanged { feature: name, reason: e.to_string() },
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn deps(v: &[&str]) -> Vec<Dependency> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn roadmap(features: &[&str], d: &[&str]) -> Result<Roadmap, RoadmapError> {
        Roadmap::new(&names(features), &deps(d))
    }

    fn t(n: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + n).unwrap()
    }

    #[test]
    fn dependency_syntax() {
        let d: Dependency = "a:b".parse().unwrap();
        assert_eq!((d.feature.as_str(), d.depends_on.as_str()), ("a", "b"));
        for bad in ["a", ":b", "a:", "a:b:c", ""] {
            assert!(matches!(bad.parse::<Dependency>(), Err(RoadmapError::BadDependency(_))), "{bad}");
        }
    }

    #[test]
    fn waves_follow_the_deepest_dependency() {
        type Case<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a [&'a str]]);
        let cases: &[Case] = &[
            (&["a"], &[], &[&["a"]]),
            (&["a", "b", "c"], &[], &[&["a", "b", "c"]]),
            (&["a", "b", "c"], &["b:a", "c:b"], &[&["a"], &["b"], &["c"]]),
            (&["c", "b", "a"], &["b:a", "c:b"], &[&["a"], &["b"], &["c"]]),
            (&["a", "b", "c", "d"], &["d:a", "d:c", "c:b"], &[&["a", "b"], &["c"], &["d"]]),
        ];
        for (features, d, expected) in cases {
            let r = roadmap(features, d).unwrap();
            let want: Vec<Vec<&str>> = expected.iter().map(|w| w.to_vec()).collect();
            assert_eq!(r.waves(), want, "{features:?} {d:?}");
        }
    }

    #[test]
    fn bad_roadmaps_are_refused_with_the_culprit() {
        let cases: &[(&[&str], &[&str], &str)] = &[
            (&[], &[], "at least one"),
            (&["a", "a"], &[], "listed twice"),
            (&["A"], &[], "'A' is not a valid"),
            (&["a"], &["a:x"], "names 'x'"),
            (&["a"], &["a:a"], "itself"),
            (&["a", "b", "c"], &["a:b", "b:c", "c:a"], "dependency cycle: a -> b -> c -> a"),
        ];
        for (features, d, msg) in cases {
            let err = roadmap(features, d).unwrap_err().to_string();
            assert!(err.contains(msg), "{features:?} {d:?}: {err}");
        }
    }

    #[test]
    fn downstream_is_transitive_and_in_wave_order() {
        let r = roadmap(&["d", "c", "b", "a", "x"], &["b:a", "c:b", "d:a"]).unwrap();
        assert_eq!(r.downstream("a"), vec!["d", "b", "c"], "wave 2 in creation order, then wave 3");
        assert_eq!(r.downstream("c"), Vec::<&str>::new());
    }

    #[test]
    fn ready_waits_for_done_or_skipped_dependencies() {
        let mut r = roadmap(&["a", "b", "c"], &["b:a", "c:b"]).unwrap();
        assert_eq!(r.ready(), vec!["a"]);
        r.set_status("a", FeatureStatus::Done).unwrap();
        assert_eq!(r.ready(), vec!["b"]);
        r.set_status("b", FeatureStatus::Failed).unwrap();
        assert!(r.ready().is_empty());
        r.set_status("b", FeatureStatus::Skipped).unwrap();
        assert_eq!(r.ready(), vec!["c"]);
        r.set_status("c", FeatureStatus::Done).unwrap();
        assert!(r.is_complete());
    }

    #[test]
    fn yaml_round_trip_keeps_status_and_validates() {
        let mut r = roadmap(&["a", "b"], &["b:a"]).unwrap();
        r.set_status("a", FeatureStatus::Failed).unwrap();
        let back = Roadmap::from_yaml(&r.to_yaml()).unwrap();
        assert_eq!(back, r);
        let err = Roadmap::from_yaml("features:\n- name: a\n  depends_on: [a]\n").unwrap_err();
        assert!(err.to_string().contains("itself"), "{err}");
        assert!(matches!(Roadmap::from_yaml("features: 3"), Err(RoadmapError::Parse(_))));
    }

    #[test]
    fn spec_info_names_wave_and_dependencies() {
        let r = roadmap(&["a", "b"], &["b:a"]).unwrap();
        assert_eq!(r.spec_info("b"), Some(RoadmapInfo { wave: 2, dependencies: vec!["a".into()] }));
        assert_eq!(r.spec_info("zz"), None);
    }

    #[test]
    fn failure_blocks_downstream_and_fix_restores_their_phases() {
        let mut r = roadmap(&["pay", "cart", "checkout", "other"], &["cart:pay", "checkout:cart"]).unwrap();
        let mut specs = vec![Spec::new("pay", t(0)), Spec::new("cart", t(0)), Spec::new("checkout", t(0))];
        specs[1].mark_design_generated(t(1), "d").unwrap();
        let out = block_downstream(&mut r, &mut specs, "pay", t(2)).unwrap();
        assert_eq!(
            out,
            vec![
                BlockOutcome::Changed { feature: "cart".into(), phase: Phase::Blocked },
                BlockOutcome::Changed { feature: "checkout".into(), phase: Phase::Blocked },
            ]
        );
        let info = specs[1].blocked_info.clone().unwrap();
        assert_eq!(info.blocked_by, "pay");
        assert_eq!(info.reason, REASON_UPSTREAM_FAILURE);
        assert_eq!(info.blocked_at_phase, Phase::DesignGenerated);
        assert_eq!(specs[2].blocked_by(), Some("pay"), "transitive dependents name the failed feature");
        assert_eq!(r.status("pay"), Some(FeatureStatus::Failed));

        let out = unblock(&mut r, &mut specs, "pay", Unblock::Fix, t(3)).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(specs[1].phase, Phase::DesignGenerated);
        assert_eq!(specs[2].phase, Phase::Initialized);
        assert_eq!(r.status("pay"), Some(FeatureStatus::Pending));
    }

    #[test]
    fn skip_lets_dependents_run_and_a_blocked_feature_can_be_unblocked_alone() {
        let mut r = roadmap(&["pay", "cart", "checkout"], &["cart:pay", "checkout:pay"]).unwrap();
        let mut specs = vec![Spec::new("pay", t(0)), Spec::new("cart", t(0)), Spec::new("checkout", t(0))];
        block_downstream(&mut r, &mut specs, "pay", t(1)).unwrap();
        let out = unblock(&mut r, &mut specs, "cart", Unblock::Fix, t(2)).unwrap();
        assert_eq!(out, vec![BlockOutcome::Changed { feature: "cart".into(), phase: Phase::Initialized }]);
        assert_eq!(specs[2].phase, Phase::Blocked, "only cart was unblocked");
        unblock(&mut r, &mut specs, "pay", Unblock::Skip, t(3)).unwrap();
        assert_eq!(specs[2].phase, Phase::Initialized);
        assert_eq!(r.status("pay"), Some(FeatureStatus::Skipped));
        assert_eq!(r.ready(), vec!["cart", "checkout"]);
        assert!(matches!(unblock(&mut r, &mut specs, "nope", Unblock::Fix, t(4)), Err(RoadmapError::NotInRoadmap(_))));
    }

    #[test]
    fn completed_downstream_specs_are_reported_not_blocked() {
        let mut r = roadmap(&["a", "b"], &["b:a"]).unwrap();
        let mut b = Spec::new("b", t(0));
        b.mark_design_generated(t(1), "d").unwrap();
        b.mark_implementation_complete(t(2), &[], "i").unwrap();
        let mut specs = vec![b];
        let out = block_downstream(&mut r, &mut specs, "a", t(3)).unwrap();
        assert!(matches!(&out[0], BlockOutcome::Unchanged { feature, .. } if feature == "b"));
        assert_eq!(specs[0].phase, Phase::ImplementationComplete);
    }
}
