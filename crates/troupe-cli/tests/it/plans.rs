//! `troupe approve` / `troupe reject` (seed 003 B3) through the binary.

use crate::support::{TestProject, json};

#[test]
fn a_person_lists_approves_and_rejects_plans_and_the_teammate_receives_the_decision() {
    let p = TestProject::new();
    let plan = |from: &str, body: &str| {
        let o = p.troupe().args(["--json", "msg", "send", "lead", body, "--kind", "plan", "--from", from]).output();
        json(&o.unwrap())[0]["id"].as_i64().unwrap().to_string()
    };
    let first = plan("builder-1", "1. write the test\n2. make it pass");
    let second = plan("builder-2", "rewrite everything");
    let pending = json(&p.troupe().args(["--json", "approve", "--list"]).output().unwrap());
    assert_eq!(pending.as_array().unwrap().len(), 2, "{pending}");
    let text = p.troupe().args(["approve", "--list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("1. write the test"), "{text:?}");

    p.troupe().args(["approve", &first, "--by", "alice"]).assert().success();
    let inbox = json(&p.troupe().args(["--json", "msg", "inbox", "--agent", "builder-1"]).output().unwrap());
    assert_eq!(inbox[0]["kind"], "plan_decision");
    assert!(inbox[0]["body"].as_str().unwrap().contains("\"approved\":true"), "{inbox}");
    let again = p.troupe().args(["approve", &first]).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already approved by `alice`"), "{again:?}");

    assert_eq!(
        p.troupe().args(["reject", &second, " "]).output().unwrap().status.code(),
        Some(2),
        "a reason is needed"
    );
    p.troupe().args(["reject", &second, "use OAuth instead"]).assert().success();
    let inbox = json(&p.troupe().args(["--json", "msg", "inbox", "--agent", "builder-2"]).output().unwrap());
    assert!(inbox[0]["body"].as_str().unwrap().contains("use OAuth instead"), "{inbox}");
    assert_eq!(json(&p.troupe().args(["--json", "approve", "--list"]).output().unwrap()), serde_json::json!([]));
}
