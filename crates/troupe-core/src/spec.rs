//! `spec.yaml`: the single source of truth of a feature's pipeline state
//! (seed 000, Spec 3 and 5). Only the Lead changes it, and every change goes
//! through a method here that records a changelog entry and bumps `updated_at`.
//!
//! Fields troupe does not know are kept in [`Spec::extra`] and written back
//! unchanged, so hand-added keys survive a rewrite.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::phase::Phase;

/// At most this many auto-fix rounds (`orchestration.retry_count`).
pub const MAX_RETRY_COUNT: u32 = 5;
/// At most this many spec updates from reviews (`orchestration.spec_update_count`).
pub const MAX_SPEC_UPDATE_COUNT: u32 = 2;

/// The contents of one `spec.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The feature's name; also its folder name under `.troupe/specs/`.
    pub feature_name: String,
    /// What the feature is for, as the user described it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The language artifacts are written in.
    #[serde(default = "default_language")]
    pub language: String,
    /// The spec's version: `MAJOR.MINOR`; a revision bumps MINOR.
    #[serde(default = "default_version")]
    pub version: String,
    /// Which spec version the design and the implementation were made for.
    #[serde(default)]
    pub version_refs: VersionRefs,
    /// Where the spec stands.
    pub phase: Phase,
    /// What the Builders produced.
    #[serde(default)]
    pub implementation: Implementation,
    /// Counters of the review loops.
    #[serde(default)]
    pub orchestration: Orchestration,
    /// Why the spec is blocked; present only while `phase` is `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_info: Option<BlockedInfo>,
    /// Place in a roadmap, when the feature is part of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roadmap: Option<RoadmapInfo>,
    /// Engine per pipeline phase for this spec only (`design: gemini`),
    /// overriding `.troupe/config.toml`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engine_override: BTreeMap<String, String>,
    /// Every change, oldest first.
    #[serde(default)]
    pub changelog: Vec<ChangelogEntry>,
    /// When the spec was created.
    pub created_at: Timestamp,
    /// When the spec last changed.
    pub updated_at: Timestamp,
    /// Keys troupe does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: BTreeMap<String, yaml_serde::Value>,
}

fn default_language() -> String {
    "en".to_string()
}

fn default_version() -> String {
    "1.0".to_string()
}

/// The spec versions the artifacts were made for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRefs {
    /// Version of the spec when design.md was generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<String>,
    /// Version of the spec when implementation completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
}

/// What the implementation produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Implementation {
    /// Files the Builders created or changed, relative to the project root.
    #[serde(default)]
    pub files_created: Vec<String>,
}

/// Counters that bound the review loops.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orchestration {
    /// Auto-fix rounds so far (at most [`MAX_RETRY_COUNT`]).
    #[serde(default)]
    pub retry_count: u32,
    /// Spec updates requested by reviews so far (at most [`MAX_SPEC_UPDATE_COUNT`]).
    #[serde(default)]
    pub spec_update_count: u32,
    /// The last pipeline action the Lead took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_phase_action: Option<String>,
}

/// Why a spec is blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedInfo {
    /// The feature that blocks this one.
    pub blocked_by: String,
    /// `upstream_failure` when set by a roadmap, otherwise the user's reason.
    pub reason: String,
    /// The phase to restore on unblock.
    pub blocked_at_phase: Phase,
}

/// The reason a roadmap records when an upstream feature fails.
pub const REASON_UPSTREAM_FAILURE: &str = "upstream_failure";

/// A feature's place in a roadmap.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoadmapInfo {
    /// The roadmap wave the feature runs in (1-based).
    pub wave: u32,
    /// Features this one depends on.
    #[serde(default)]
    pub dependencies: Vec<String>,
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangelogEntry {
    /// When it happened.
    pub at: Timestamp,
    /// The spec version after the change.
    pub version: String,
    /// A short machine-readable action (`created`, `design-generated`, `blocked`, ...).
    pub action: String,
    /// The phase before the change, when the phase changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Phase>,
    /// The phase after the change, when the phase changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Phase>,
    /// A human-readable summary.
    pub summary: String,
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The current phase does not allow this transition.
    #[error("{feature} cannot go from '{from}' to '{to}'{hint}")]
    NotAllowed {
        /// The feature.
        feature: String,
        /// Its current phase.
        from: Phase,
        /// The phase that was asked for.
        to: Phase,
        /// What to do instead, starting with "; ", or empty.
        hint: String,
    },
    /// A spec that is already blocked cannot be blocked again.
    #[error("{feature} is already blocked by {by}")]
    AlreadyBlocked {
        /// The feature.
        feature: String,
        /// What blocks it.
        by: String,
    },
    /// `unblock` on a spec that is not blocked.
    #[error("{feature} is not blocked (phase '{phase}')")]
    NotBlocked {
        /// The feature.
        feature: String,
        /// Its current phase.
        phase: Phase,
    },
    /// A feature cannot block itself.
    #[error("{feature} cannot be blocked by itself")]
    SelfBlock {
        /// The feature.
        feature: String,
    },
}

/// `spec.yaml` text that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}{}", location.map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default())]
pub struct SpecParseError {
    /// What the YAML parser or the validation said.
    pub message: String,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
}

impl Spec {
    /// A new spec in phase `initialized`, version 1.0, with a `created` entry.
    pub fn new(feature: &str, now: Timestamp) -> Spec {
        let mut spec = Spec {
            feature_name: feature.to_string(),
            description: String::new(),
            language: default_language(),
            version: default_version(),
            version_refs: VersionRefs::default(),
            phase: Phase::Initialized,
            implementation: Implementation::default(),
            orchestration: Orchestration::default(),
            blocked_info: None,
            roadmap: None,
            engine_override: BTreeMap::new(),
            changelog: Vec::new(),
            created_at: now,
            updated_at: now,
            extra: BTreeMap::new(),
        };
        spec.record(now, "created", None, "spec created");
        spec
    }

    /// Parse `spec.yaml` text. Errors carry the line and column.
    pub fn from_yaml(text: &str) -> Result<Spec, SpecParseError> {
        let spec: Spec = yaml_serde::from_str(text).map_err(|e| SpecParseError {
            message: e.to_string().split(" at line ").next().unwrap_or_default().to_string(),
            location: e.location().map(|l| (l.line(), l.column())),
        })?;
        if spec.feature_name.trim().is_empty() {
            return Err(SpecParseError { message: "feature_name is empty".into(), location: None });
        }
        Ok(spec)
    }

    /// Render as `spec.yaml` text.
    pub fn to_yaml(&self) -> String {
        yaml_serde::to_string(self).expect("a Spec always serializes")
    }

    /// Append a changelog entry and bump `updated_at`. Every mutation calls this.
    fn record(&mut self, now: Timestamp, action: &str, from: Option<Phase>, summary: &str) {
        let to = from.as_ref().map(|_| self.phase.clone());
        self.changelog.push(ChangelogEntry {
            at: now,
            version: self.version.clone(),
            action: action.to_string(),
            from,
            to,
            summary: summary.to_string(),
        });
        self.orchestration.last_phase_action = Some(action.to_string());
        self.updated_at = now;
    }

    fn not_allowed(&self, to: Phase, hint: &str) -> TransitionError {
        TransitionError::NotAllowed {
            feature: self.feature_name.clone(),
            from: self.phase.clone(),
            to,
            hint: if hint.is_empty() { String::new() } else { format!("; {hint}") },
        }
    }

    /// The Architect finished: `initialized | design-generated → design-generated`,
    /// `version_refs.design` set to the current version.
    pub fn mark_design_generated(&mut self, now: Timestamp, summary: &str) -> Result<(), TransitionError> {
        match self.phase {
            Phase::Initialized | Phase::DesignGenerated => {
                let from = std::mem::replace(&mut self.phase, Phase::DesignGenerated);
                self.version_refs.design = Some(self.version.clone());
                self.record(now, "design-generated", Some(from), summary);
                Ok(())
            }
            _ => Err(self.not_allowed(Phase::DesignGenerated, &self.fix_hint())),
        }
    }

    /// All Builders finished: `design-generated → implementation-complete`, with the files they made.
    pub fn mark_implementation_complete(
        &mut self,
        now: Timestamp,
        files: &[String],
        summary: &str,
    ) -> Result<(), TransitionError> {
        if self.phase != Phase::DesignGenerated {
            return Err(self.not_allowed(Phase::ImplementationComplete, &self.fix_hint()));
        }
        let from = std::mem::replace(&mut self.phase, Phase::ImplementationComplete);
        let mut all = self.implementation.files_created.clone();
        for f in files {
            if !all.contains(f) {
                all.push(f.clone());
            }
        }
        all.sort();
        self.implementation.files_created = all;
        self.version_refs.implementation = Some(self.version.clone());
        self.record(now, "implementation-complete", Some(from), summary);
        Ok(())
    }

    /// A revision: `implementation-complete → design-generated`; the version's
    /// minor part goes up so that `version_refs` show what is stale.
    pub fn revise(&mut self, now: Timestamp, summary: &str) -> Result<(), TransitionError> {
        if self.phase != Phase::ImplementationComplete {
            return Err(self.not_allowed(Phase::DesignGenerated, &self.fix_hint()));
        }
        self.version = bump_minor(&self.version);
        let from = std::mem::replace(&mut self.phase, Phase::DesignGenerated);
        self.record(now, "revision", Some(from), summary);
        Ok(())
    }

    /// Block on an upstream feature, remembering the phase to restore.
    /// Allowed from `initialized` and `design-generated` (the seed's diagram).
    pub fn block(&mut self, now: Timestamp, by: &str, reason: &str) -> Result<(), TransitionError> {
        if by == self.feature_name {
            return Err(TransitionError::SelfBlock { feature: self.feature_name.clone() });
        }
        match &self.phase {
            Phase::Initialized | Phase::DesignGenerated => {
                let from = std::mem::replace(&mut self.phase, Phase::Blocked);
                self.blocked_info = Some(BlockedInfo {
                    blocked_by: by.to_string(),
                    reason: reason.to_string(),
                    blocked_at_phase: from.clone(),
                });
                self.record(now, "blocked", Some(from), &format!("blocked by {by}: {reason}"));
                Ok(())
            }
            Phase::Blocked => Err(TransitionError::AlreadyBlocked {
                feature: self.feature_name.clone(),
                by: self.blocked_by().unwrap_or("an unknown feature").to_string(),
            }),
            _ => {
                Err(self
                    .not_allowed(Phase::Blocked, "only specs in 'initialized' or 'design-generated' can be blocked"))
            }
        }
    }

    /// Unblock (fix or skip upstream): restore `blocked_info.blocked_at_phase`.
    pub fn unblock(&mut self, now: Timestamp, summary: &str) -> Result<(), TransitionError> {
        if self.phase != Phase::Blocked {
            return Err(TransitionError::NotBlocked { feature: self.feature_name.clone(), phase: self.phase.clone() });
        }
        let restore = self
            .blocked_info
            .take()
            .map(|b| b.blocked_at_phase)
            .filter(|p| matches!(p, Phase::Initialized | Phase::DesignGenerated))
            .unwrap_or(Phase::Initialized);
        let from = std::mem::replace(&mut self.phase, restore);
        self.record(now, "unblocked", Some(from), summary);
        Ok(())
    }

    /// Count one auto-fix round; `false` when the limit was already reached.
    pub fn count_retry(&mut self, now: Timestamp, summary: &str) -> bool {
        if self.orchestration.retry_count >= MAX_RETRY_COUNT {
            return false;
        }
        self.orchestration.retry_count += 1;
        self.record(now, "auto-fix", None, summary);
        true
    }

    /// Count one spec update; `false` when the limit was already reached.
    pub fn count_spec_update(&mut self, now: Timestamp, summary: &str) -> bool {
        if self.orchestration.spec_update_count >= MAX_SPEC_UPDATE_COUNT {
            return false;
        }
        self.orchestration.spec_update_count += 1;
        self.record(now, "spec-update", None, summary);
        true
    }

    /// Record a change that does not move the phase (a note, an engine override, ...).
    pub fn note(&mut self, now: Timestamp, action: &str, summary: &str) {
        self.record(now, action, None, summary);
    }

    /// A revision is under way: the implementation was made for an older
    /// version than the spec's (seed 000 Spec 5.6).
    pub fn in_revision(&self) -> bool {
        self.version_refs.implementation.as_ref().is_some_and(|v| *v != self.version)
    }

    /// In a revision, whether the design was revised for this version yet.
    pub fn design_is_current(&self) -> bool {
        self.version_refs.design.as_deref() == Some(self.version.as_str())
    }

    /// Whether a changelog entry `action` was recorded at this version (a
    /// revision's steps are told from the previous version's by it).
    pub fn recorded_at_this_version(&self, action: &str) -> bool {
        self.changelog.iter().any(|c| c.action == action && c.version == self.version)
    }

    /// The feature blocking this one, if any.
    pub fn blocked_by(&self) -> Option<&str> {
        self.blocked_info.as_ref().map(|b| b.blocked_by.as_str())
    }

    fn fix_hint(&self) -> String {
        let f = &self.feature_name;
        match &self.phase {
            Phase::Initialized => format!("run `troupe design {f}` first"),
            Phase::DesignGenerated => format!("run `troupe impl {f}` first"),
            Phase::ImplementationComplete => {
                format!("it is implemented; `troupe revise {f} \"<change>\"` revises it and runs the pipeline again")
            }
            Phase::Blocked => format!("run `troupe spec unblock {f}` first"),
            Phase::Unknown(_) => "fix `phase` in spec.yaml".to_string(),
        }
    }
}

/// `1.3` → `1.4`; anything unparsable gets `.1` appended so it still changes.
fn bump_minor(version: &str) -> String {
    let mut parts: Vec<&str> = version.split('.').collect();
    if parts.len() >= 2
        && let Ok(minor) = parts[1].parse::<u64>()
    {
        let bumped = (minor + 1).to_string();
        parts[1] = &bumped;
        parts.truncate(2);
        return parts.join(".");
    }
    format!("{version}.1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + n).unwrap()
    }

    #[test]
    fn new_spec_is_initialized_with_a_changelog_entry() {
        let s = Spec::new("login", t(0));
        assert_eq!(s.phase, Phase::Initialized);
        assert_eq!(s.changelog.len(), 1);
        assert_eq!(s.changelog[0].action, "created");
        assert_eq!(s.version, "1.0");
    }

    #[test]
    fn full_lifecycle_with_revision() {
        let mut s = Spec::new("login", t(0));
        s.mark_design_generated(t(1), "design").unwrap();
        assert_eq!(s.version_refs.design.as_deref(), Some("1.0"));
        s.mark_implementation_complete(t(2), &["src/b.rs".into(), "src/a.rs".into()], "impl").unwrap();
        assert_eq!(s.phase, Phase::ImplementationComplete);
        assert_eq!(s.implementation.files_created, vec!["src/a.rs", "src/b.rs"]);
        assert_eq!(s.version_refs.implementation.as_deref(), Some("1.0"));
        s.revise(t(3), "change").unwrap();
        assert_eq!(s.phase, Phase::DesignGenerated);
        assert_eq!(s.version, "1.1");
        assert_eq!(s.updated_at, t(3));
        assert_eq!(s.changelog.len(), 4);
        let last = s.changelog.last().unwrap();
        assert_eq!(last.from, Some(Phase::ImplementationComplete));
        assert_eq!(last.to, Some(Phase::DesignGenerated));
    }

    #[test]
    fn impl_before_design_is_refused_with_the_fix() {
        let mut s = Spec::new("login", t(0));
        let err = s.mark_implementation_complete(t(1), &[], "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "login cannot go from 'initialized' to 'implementation-complete'; run `troupe design login` first"
        );
        assert_eq!(s.changelog.len(), 1, "nothing recorded on a refused transition");
    }

    #[test]
    fn block_and_unblock_restore_the_phase() {
        for start_designed in [false, true] {
            let mut s = Spec::new("b", t(0));
            if start_designed {
                s.mark_design_generated(t(1), "d").unwrap();
            }
            let before = s.phase.clone();
            s.block(t(2), "a", REASON_UPSTREAM_FAILURE).unwrap();
            assert_eq!(s.phase, Phase::Blocked);
            assert_eq!(s.blocked_info.as_ref().unwrap().blocked_at_phase, before);
            assert!(matches!(s.block(t(3), "c", "x"), Err(TransitionError::AlreadyBlocked { .. })));
            s.unblock(t(4), "fixed").unwrap();
            assert_eq!(s.phase, before);
            assert!(s.blocked_info.is_none());
        }
    }

    #[test]
    fn completed_specs_cannot_be_blocked_and_unblocked_specs_cannot_be_unblocked() {
        let mut s = Spec::new("b", t(0));
        assert!(matches!(s.unblock(t(1), "x"), Err(TransitionError::NotBlocked { .. })));
        assert!(matches!(s.block(t(1), "b", "x"), Err(TransitionError::SelfBlock { .. })));
        s.mark_design_generated(t(1), "d").unwrap();
        s.mark_implementation_complete(t(2), &[], "i").unwrap();
        assert!(s.block(t(3), "a", "x").is_err());
    }

    #[test]
    fn counters_stop_at_their_limits() {
        let mut s = Spec::new("b", t(0));
        for _ in 0..MAX_RETRY_COUNT {
            assert!(s.count_retry(t(1), "r"));
        }
        assert!(!s.count_retry(t(1), "r"));
        for _ in 0..MAX_SPEC_UPDATE_COUNT {
            assert!(s.count_spec_update(t(1), "u"));
        }
        assert!(!s.count_spec_update(t(1), "u"));
    }

    #[test]
    fn yaml_round_trip_keeps_unknown_fields() {
        let mut s = Spec::new("login", t(0));
        s.engine_override.insert("design".into(), "gemini".into());
        let mut text = s.to_yaml();
        text.push_str("custom_field:\n  nested: [1, 2]\nowner: alice\n");
        let parsed = Spec::from_yaml(&text).unwrap();
        assert_eq!(parsed.extra.len(), 2);
        let again = Spec::from_yaml(&parsed.to_yaml()).unwrap();
        assert_eq!(again, parsed);
        assert!(parsed.to_yaml().contains("owner: alice"));
    }

    #[test]
    fn malformed_yaml_reports_line_and_column() {
        let err = Spec::from_yaml("feature_name: x\nphase: [unclosed\n").unwrap_err();
        assert!(err.location.is_some(), "{err}");
        assert!(err.to_string().contains("line"), "{err}");
        let err = Spec::from_yaml("phase: initialized\n").unwrap_err();
        assert!(err.to_string().contains("feature_name"), "{err}");
    }

    #[test]
    fn version_bump() {
        assert_eq!(bump_minor("1.0"), "1.1");
        assert_eq!(bump_minor("2.9.3"), "2.10");
        assert_eq!(bump_minor("x"), "x.1");
    }
}
