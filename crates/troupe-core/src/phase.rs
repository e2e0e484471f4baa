//! The phases of a spec and the operations that move between them
//! (seed 000, Spec 5 and the Phase State Machine).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a spec stands. `Unknown` keeps a value troupe does not know, so that a
/// hand-edited `spec.yaml` is reported by the gate (`Unknown phase '...'`)
/// instead of failing to load.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Created; no design yet.
    Initialized,
    /// The Architect's design.md and research.md exist.
    DesignGenerated,
    /// All Builders finished.
    ImplementationComplete,
    /// Waiting for an upstream feature (see `blocked_info`).
    Blocked,
    /// A value troupe does not know.
    Unknown(String),
}

impl Phase {
    /// The spelling used in `spec.yaml`.
    pub fn as_str(&self) -> &str {
        match self {
            Phase::Initialized => "initialized",
            Phase::DesignGenerated => "design-generated",
            Phase::ImplementationComplete => "implementation-complete",
            Phase::Blocked => "blocked",
            Phase::Unknown(s) => s,
        }
    }

    /// The phases troupe knows, in pipeline order.
    pub const KNOWN: [Phase; 4] =
        [Phase::Initialized, Phase::DesignGenerated, Phase::ImplementationComplete, Phase::Blocked];
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Phase {
    fn from(s: &str) -> Self {
        match s {
            "initialized" => Phase::Initialized,
            "design-generated" => Phase::DesignGenerated,
            "implementation-complete" => Phase::ImplementationComplete,
            "blocked" => Phase::Blocked,
            other => Phase::Unknown(other.to_string()),
        }
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Phase::from(s.as_str()))
    }
}

/// What a command wants to do with a spec; the gate decides whether the phase allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Spawn the Architect (`troupe design`).
    Design,
    /// Spawn the TaskGenerator and Builders (`troupe impl`).
    Impl,
    /// Review the design (`troupe review design`).
    ReviewDesign,
    /// Review the implementation (`troupe review impl`).
    ReviewImpl,
    /// Look for dead code (`troupe review dead-code`).
    ReviewDeadCode,
    /// Start a revision (`troupe spec revise`).
    Revise,
}

impl Operation {
    /// Every operation, for help texts and tests.
    pub const ALL: [Operation; 6] = [
        Operation::Design,
        Operation::Impl,
        Operation::ReviewDesign,
        Operation::ReviewImpl,
        Operation::ReviewDeadCode,
        Operation::Revise,
    ];

    /// The spelling on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Design => "design",
            Operation::Impl => "impl",
            Operation::ReviewDesign => "review-design",
            Operation::ReviewImpl => "review-impl",
            Operation::ReviewDeadCode => "review-dead-code",
            Operation::Revise => "revise",
        }
    }

    /// The phases in which this operation may run.
    pub fn allowed_phases(self) -> &'static [Phase] {
        match self {
            Operation::Design => &[Phase::Initialized, Phase::DesignGenerated],
            Operation::Impl => &[Phase::DesignGenerated],
            Operation::ReviewDesign => &[Phase::DesignGenerated, Phase::ImplementationComplete],
            Operation::ReviewImpl | Operation::ReviewDeadCode | Operation::Revise => &[Phase::ImplementationComplete],
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation name that troupe does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown operation '{0}' (expected one of: design, impl, review-design, review-impl, review-dead-code, revise)"
)]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL.into_iter().find(|op| op.as_str() == s).ok_or_else(|| UnknownOperation(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_round_trips_and_keeps_unknown_values() {
        for p in Phase::KNOWN {
            assert_eq!(Phase::from(p.as_str()), p);
        }
        assert_eq!(Phase::from("designing"), Phase::Unknown("designing".into()));
        assert_eq!(Phase::from("designing").as_str(), "designing");
    }

    #[test]
    fn operations_parse() {
        for op in Operation::ALL {
            assert_eq!(op.as_str().parse::<Operation>().unwrap(), op);
        }
        assert!("deploy".parse::<Operation>().is_err());
    }
}
