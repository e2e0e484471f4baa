//! Plan mode (seed 003 B3) on both backends: a plan-mode message holds its
//! recipient until a plan it sent afterwards is approved; plans waiting for a
//! decision are listed from the store.

use troupe_store::approval::{PlanState, decide_plan};
use troupe_store::{BROADCAST, MessageKind, NewMessage, StoreError};

use crate::conformance;

fn plan(from: &str, to: &str, body: &str) -> NewMessage {
    NewMessage { kind: MessageKind::Plan, ..NewMessage::text(from, to, body) }
}

conformance! {
    fn a_plan_mode_request_holds_its_agent_until_a_plan_is_approved(s) {
        assert_eq!(s.plan_gate("builder-1").unwrap(), None, "no request, no gate");
        // A plan sent before the request does not count for it.
        let early = s.send(plan("builder-1", "user", "old plan")).unwrap().remove(0);
        decide_plan(&*s, early.id, true, "user", "").unwrap();
        let request = s.send_plan_mode(NewMessage::text("user", "builder-1", "add a login page")).unwrap();
        let events = s.events_since(0, 100).unwrap();
        assert_eq!(events.last().unwrap().data["plan_mode"], true, "{events:?}");
        let gate = s.plan_gate("builder-1").unwrap().unwrap();
        assert_eq!((gate.request.id, gate.state()), (request.id, PlanState::Planning));
        assert_eq!(s.plan_gate("builder-2").unwrap(), None, "another agent is not held");

        let first = s.send(plan("builder-1", "user", "1. rewrite everything")).unwrap().remove(0);
        assert_eq!(s.plan_gate("builder-1").unwrap().unwrap().state(), PlanState::Submitted { plan: first.id });
        let pending: Vec<i64> = s.pending_plans().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(pending, [first.id]);

        decide_plan(&*s, first.id, false, "user", "keep the old pages").unwrap();
        match s.plan_gate("builder-1").unwrap().unwrap().state() {
            PlanState::Rejected { plan, decision } => {
                assert_eq!((plan, decision.reason.as_str()), (first.id, "keep the old pages"));
            }
            other => panic!("{other:?}"),
        }
        assert!(s.pending_plans().unwrap().is_empty());

        let second = s.send(plan("builder-1", "user", "1. add the page")).unwrap().remove(0);
        decide_plan(&*s, second.id, true, "ana", "").unwrap();
        let gate = s.plan_gate("builder-1").unwrap().unwrap();
        assert!(gate.approved(), "{gate:?}");
        assert_eq!(gate.plans.len(), 2);

        // A new request holds the agent again.
        let again = s.send_plan_mode(NewMessage::text("user", "builder-1", "and a logout page")).unwrap();
        let gate = s.plan_gate("builder-1").unwrap().unwrap();
        assert_eq!((gate.request.id, gate.state()), (again.id, PlanState::Planning));
    }
}

conformance! {
    fn a_plan_mode_message_goes_to_one_agent(s) {
        let err = s.send_plan_mode(NewMessage::text("user", BROADCAST, "everyone plan")).unwrap_err();
        assert!(matches!(err, StoreError::PlanModeBroadcast), "{err}");
        assert!(matches!(
            s.send_plan_mode(NewMessage { priority: 9, ..NewMessage::text("user", "b", "x") }).unwrap_err(),
            StoreError::InvalidPriority(9)
        ));
        assert!(s.events_since(0, 10).unwrap().is_empty(), "nothing was written");
    }
}
