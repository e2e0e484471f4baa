//! The phase gate (seed 000, Spec 5 and Flow 1): checked before any teammate is
//! spawned. Its messages for blocked and unknown phases are the seed's, verbatim.

pub use crate::phase::Operation;
use crate::phase::Phase;
use crate::spec::Spec;

/// Why an operation may not run now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The spec is blocked by another feature.
    #[error("{feature} is blocked by {blocked_by}")]
    Blocked {
        /// The blocked feature.
        feature: String,
        /// What blocks it (`blocked_info.blocked_by`).
        blocked_by: String,
    },
    /// `phase` holds a value troupe does not know.
    #[error("Unknown phase '{0}'")]
    UnknownPhase(String),
    /// The phase is known but not one the operation runs in.
    #[error("{operation} of {feature} needs phase {needs}, but it is '{phase}'; {fix}")]
    WrongPhase {
        /// The feature.
        feature: String,
        /// What was asked for.
        operation: Operation,
        /// The current phase.
        phase: Phase,
        /// The phases that would allow it, quoted and joined with "or".
        needs: String,
        /// The command that gets there.
        fix: String,
    },
}

/// May `operation` run on `spec` now? `Ok` means spawn; `Err` says why not and how to get there.
pub fn check(spec: &Spec, operation: Operation) -> Result<(), GateError> {
    let feature = &spec.feature_name;
    match &spec.phase {
        Phase::Blocked => {
            return Err(GateError::Blocked {
                feature: feature.clone(),
                blocked_by: spec.blocked_by().unwrap_or("an unknown feature").to_string(),
            });
        }
        Phase::Unknown(p) => return Err(GateError::UnknownPhase(p.clone())),
        _ => {}
    }
    let allowed = operation.allowed_phases();
    if allowed.contains(&spec.phase) {
        return Ok(());
    }
    let needs = allowed.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(" or ");
    let fix = match (&spec.phase, operation) {
        (Phase::Initialized, _) => format!("run `troupe design {feature}` first"),
        (Phase::DesignGenerated, _) => format!("run `troupe impl {feature}` first"),
        (Phase::ImplementationComplete, Operation::Impl) => {
            format!(
                "it is already implemented; `troupe revise {feature} \"<change>\"` revises it and runs the pipeline again"
            )
        }
        (Phase::ImplementationComplete, _) => {
            format!("it is implemented; `troupe revise {feature} \"<change>\"` revises it and runs the pipeline again")
        }
        (Phase::Blocked | Phase::Unknown(_), _) => unreachable!("handled above"),
    };
    Err(GateError::WrongPhase { feature: feature.clone(), operation, phase: spec.phase.clone(), needs, fix })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::REASON_UPSTREAM_FAILURE;

    fn spec_in(phase: &str) -> Spec {
        let mut s = Spec::new("login", jiff::Timestamp::UNIX_EPOCH);
        s.phase = Phase::from(phase);
        s
    }

    #[test]
    fn blocked_message_is_the_seeds() {
        let mut s = Spec::new("checkout", jiff::Timestamp::UNIX_EPOCH);
        s.block(jiff::Timestamp::UNIX_EPOCH, "payments", REASON_UPSTREAM_FAILURE).unwrap();
        for op in Operation::ALL {
            assert_eq!(check(&s, op).unwrap_err().to_string(), "checkout is blocked by payments");
        }
    }

    #[test]
    fn unknown_phase_message_is_the_seeds() {
        let s = spec_in("designing");
        assert_eq!(check(&s, Operation::Design).unwrap_err().to_string(), "Unknown phase 'designing'");
    }

    #[test]
    fn table_of_phases_and_operations() {
        use Operation::*;
        let cases: &[(&str, Operation, bool)] = &[
            ("initialized", Design, true),
            ("initialized", Impl, false),
            ("initialized", ReviewDesign, false),
            ("initialized", ReviewImpl, false),
            ("initialized", Revise, false),
            ("design-generated", Design, true),
            ("design-generated", Impl, true),
            ("design-generated", ReviewDesign, true),
            ("design-generated", ReviewImpl, false),
            ("design-generated", Revise, false),
            ("implementation-complete", Design, false),
            ("implementation-complete", Impl, false),
            ("implementation-complete", ReviewDesign, true),
            ("implementation-complete", ReviewImpl, true),
            ("implementation-complete", ReviewDeadCode, true),
            ("implementation-complete", Revise, true),
        ];
        for (phase, op, ok) in cases {
            assert_eq!(check(&spec_in(phase), *op).is_ok(), *ok, "{phase} {op}");
        }
    }

    #[test]
    fn wrong_phase_names_the_needed_phase_and_the_command() {
        let err = check(&spec_in("initialized"), Operation::Impl).unwrap_err().to_string();
        assert_eq!(
            err,
            "impl of login needs phase 'design-generated', but it is 'initialized'; run `troupe design login` first"
        );
        let err = check(&spec_in("implementation-complete"), Operation::Design).unwrap_err().to_string();
        assert!(err.contains("'initialized' or 'design-generated'"), "{err}");
        assert!(err.contains("`troupe revise login \"<change>\"`"), "{err}");
    }
}
