//! Plan approval (seed 003 B3): the `plan_decision` message that answers a
//! teammate's `plan`. One format for every writer (the Lead's policy, the
//! HTTP API's approve and reject, a future `troupe approve`) and for the
//! reader (the gateway's `request_plan_approval`).

use serde::{Deserialize, Serialize};

/// The message kind of a decision.
pub const PLAN_DECISION: &str = "plan_decision";

/// The body of a `plan_decision` message, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanDecision {
    /// The `plan` message this answers.
    pub request_id: i64,
    /// Go ahead (true) or revise (false).
    pub approved: bool,
    /// Who decided (`lead`, a person, an API client).
    pub decided_by: String,
    /// Why; for a rejection, what to change.
    pub reason: String,
}

impl PlanDecision {
    /// The message body.
    pub fn body(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A decision read back from a message body; `None` when it is not one.
    pub fn parse(body: &str) -> Option<Self> {
        serde_json::from_str(body).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_reads_back() {
        let d = PlanDecision { request_id: 7, approved: false, decided_by: "ana".into(), reason: "use OAuth".into() };
        assert_eq!(PlanDecision::parse(&d.body()), Some(d));
        assert_eq!(PlanDecision::parse("approved"), None);
    }
}
