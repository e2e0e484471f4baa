//! Seed 003 B3: approve and reject a teammate's plan over HTTP, answered
//! with the `plan_decision` message the gateway's plan tool waits for.

use serde_json::json;
use troupe_core::approval::PlanDecision;
use troupe_store::{MessageKind, NewMessage};

use crate::support::{Server, assert_error};

fn submit_plan(s: &Server, from: &str) -> i64 {
    let plan = NewMessage { kind: MessageKind::Plan, ..NewMessage::text(from, "lead", "1. write the parser") };
    s.store.send(plan).unwrap()[0].id
}

#[test]
fn approve_and_reject_answer_the_plan_once() {
    let s = Server::start();
    let plan = submit_plan(&s, "builder-1");
    let (status, body) = s.post(&format!("/tasks/{plan}/approve"), json!({"by": "ana"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["to"].as_str(), &body["approved"]), (Some("builder-1"), &json!(true)));
    let inbox = s.store.inbox("builder-1", true).unwrap();
    let decision = inbox.iter().find(|m| m.kind == MessageKind::PlanDecision).unwrap();
    assert_eq!(decision.in_reply_to, Some(plan));
    let parsed = PlanDecision::parse(&decision.body).unwrap();
    assert_eq!((parsed.approved, parsed.decided_by.as_str(), parsed.request_id), (true, "ana", plan));
    // Decided once.
    let (status, body) = s.post(&format!("/tasks/{plan}/reject"), json!({"reason": "too late"}));
    assert_eq!(status, 409, "{body}");
    assert_error(&body, "conflict");

    let second = submit_plan(&s, "builder-2");
    let (status, body) = s.post(&format!("/tasks/{second}/reject"), json!({}));
    assert_eq!(status, 400, "a rejection needs a reason: {body}");
    let (status, body) = s.post(&format!("/tasks/{second}/reject"), json!({"reason": "use OAuth"}));
    assert_eq!((status, &body["approved"]), (200, &json!(false)), "{body}");
    let decision = s.store.inbox("builder-2", true).unwrap().pop().unwrap();
    assert_eq!(PlanDecision::parse(&decision.body).unwrap().reason, "use OAuth");

    let text = s.store.send(NewMessage::text("lead", "builder-1", "hello")).unwrap()[0].id;
    let (status, _) = s.post(&format!("/tasks/{text}/approve"), json!({}));
    assert_eq!(status, 409, "only a plan can be approved");
    let (status, _) = s.post("/tasks/99999/approve", json!({}));
    assert_eq!(status, 404);
    let (status, _) = s.post("/tasks/abc/approve", json!({}));
    assert_eq!(status, 400);
}

/// What waits for a decision, from every source (a teammate's plan, a call
/// held in adhoc mode: a `plan` to the user), is one list: `GET /approvals`,
/// which the dashboard's Approvals page shows too; a decided one leaves it.
#[test]
fn approvals_lists_every_undecided_plan_and_the_page_shows_the_same() {
    let s = Server::start();
    let plan = submit_plan(&s, "builder-1");
    let held = NewMessage {
        kind: MessageKind::Plan,
        ..NewMessage::text("assistant-1", "user", "approve Bash \"rm -rf build\"?")
    };
    let held = s.store.send(held).unwrap()[0].id;
    s.store.send(NewMessage::text("lead", "builder-1", "not a plan")).unwrap();
    let ids = |s: &Server| -> Vec<i64> {
        let (status, body) = s.get("/approvals");
        assert_eq!(status, 200, "{body}");
        body["messages"].as_array().unwrap().iter().map(|m| m["id"].as_i64().unwrap()).collect()
    };
    assert_eq!(ids(&s), [plan, held], "oldest first, text messages left out");
    let (_, body) = s.get("/approvals");
    assert_eq!(
        (body["messages"][1]["from"].as_str(), body["messages"][1]["kind"].as_str()),
        (Some("assistant-1"), Some("plan"))
    );
    let page = |s: &Server| {
        let mut res = ureq::get(&format!("{}/ui/approvals", s.url)).call().unwrap();
        res.body_mut().read_to_string().unwrap()
    };
    let html = page(&s);
    assert!(
        html.contains(&format!(r#"data-testid="plan-{plan}""#))
            && html.contains(&format!(r#"data-testid="plan-{held}""#)),
        "{html}"
    );
    let (status, _) = s.post(&format!("/tasks/{held}/approve"), json!({"by": "ana"}));
    assert_eq!(status, 200);
    assert_eq!(ids(&s), [plan]);
    assert!(!page(&s).contains(&format!(r#"data-testid="plan-{held}""#)));
}
