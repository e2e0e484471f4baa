//! The dashboard's server side over real HTTP: login by link into a cookie,
//! the pages behind the token rule, and the per-feature engine override
//! endpoint writing spec.yaml. (The browser tests are troupe-cli's
//! `dashboard`, against a real `troupe serve` and a real run.)

use serde_json::json;
use troupe_project::Project;
use troupe_project::specs::Specs;
use troupe_server::auth::Auth;

use crate::support::{Server, answer, assert_error};

fn http() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into()
}

fn page(s: &Server, path: &str, cookie: Option<&str>) -> (u16, String) {
    let mut req = http().get(&format!("{}{path}", s.url));
    if let Some(c) = cookie {
        req = req.header("Cookie", c);
    }
    let mut res = req.call().unwrap();
    (res.status().as_u16(), res.body_mut().read_to_string().unwrap_or_default())
}

#[test]
fn a_login_link_puts_the_token_in_a_cookie_and_every_page_needs_it() {
    let s = Server::start_with(Auth::bearer("s3cret"));
    let res = http().get(&format!("{}/ui/login?token=s3cret", s.url)).call().unwrap();
    assert_eq!(res.status().as_u16(), 303);
    assert_eq!(res.headers()["location"], "/", "the token leaves the address bar");
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("troupe_token=s3cret;") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict")
    );
    let jar = "troupe_token=s3cret";
    for path in ["/", "/ui/agents", "/ui/features", "/ui/approvals", "/ui/engines", "/ui/audit", "/ui/runs"] {
        let (status, body) = page(&s, path, Some(jar));
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.starts_with("<!doctype html>") && body.contains("data-last-event="), "{path}");
        assert_eq!(page(&s, path, None).0, 401, "{path} without the cookie");
        assert_eq!(page(&s, path, Some("troupe_token=wrong")).0, 401, "{path} with a wrong cookie");
    }
    let (status, body) = page(&s, "/ui/login?token=wrong", None);
    assert_eq!(status, 401);
    assert!(body.contains(r#"data-testid="login-token""#), "the form, to try again: {body}");
    // The cookie also opens the JSON API, for the page's own script.
    assert_eq!(page(&s, "/tasks/board", Some(jar)).0, 200);
}

#[test]
fn the_engine_override_endpoint_writes_spec_yaml() {
    let s = Server::start();
    let project = Project::at(s.root());
    Specs::new(&project).create("login", "users log in", jiff::Timestamp::now()).unwrap();
    let put = |path: &str, body: serde_json::Value| answer(http().put(&format!("{}{path}", s.url)).send_json(body));
    let (status, body) =
        put("/specs/login/engine_override", json!({"phases": {"inspection": "gemini", "impl": "codex"}}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["engine_override"], json!({"impl": "codex", "inspection": "gemini"}));
    let (_, body) = put("/specs/login/engine_override", json!({"phases": {"impl": null}}));
    assert_eq!(body["engine_override"], json!({"inspection": "gemini"}));
    let spec = Specs::new(&project).load("login").unwrap();
    assert_eq!(spec.engine_override.get("inspection").map(String::as_str), Some("gemini"));
    assert!(!spec.engine_override.contains_key("impl"));
    let (status, body) = put("/specs/login/engine_override", json!({"phases": {"inspection": "nope"}}));
    assert_eq!(status, 400);
    assert_error(&body, "bad_request");
    let (status, body) = put("/specs/login/engine_override", json!({"phases": {"deploy": "claude"}}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = put("/specs/nosuch/engine_override", json!({"phases": {}}));
    assert_eq!(status, 404, "{body}");
    // The feature page offers the override and shows the phase machine.
    let (status, html) = page(&s, "/ui/features/login", None);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains(r#"data-testid="override-inspection""#) && html.contains(r#"data-testid="phase-machine""#));
}

#[test]
fn the_agents_page_shows_each_agents_cost_from_the_usage_ledger() {
    let s = Server::start();
    crate::endpoints::register(&s, "builder-1", "calc");
    crate::endpoints::book(&s, "builder-1", "builder", "msg-1", 0.25);
    crate::endpoints::book(&s, "builder-1", "builder", "msg-2", 0.15);
    // The same turn reported twice (a resumed stream) is booked once.
    crate::endpoints::book(&s, "builder-1", "builder", "msg-2", 0.15);
    let (status, body) = page(&s, "/ui/agents", None);
    assert_eq!(status, 200, "{body}");
    let row = body.split(r#"<tr data-testid="agent-builder-1">"#).nth(1).and_then(|r| r.split("</tr>").next());
    assert!(row.is_some_and(|r| r.contains("<td>$0.4000</td>")), "{body}");
}

#[test]
fn the_live_stream_carries_each_task_events_card_as_rendered_now() {
    use troupe_testkit::sse::Stream;
    let s = Server::start();
    s.post("/tasks/board", json!({"subject": "write <the> parser"}));
    s.post("/tasks/board/t1/claim", json!({"agent": "claude"}));
    // `/ui/events` is `/events` plus, on each task event, the task's card.
    let mut live = Stream::connect(&format!("{}/ui", s.url), "", None, None);
    let (first, created) = live.event();
    assert_eq!(created["kind"], "task_created");
    let card = created["card"].as_str().unwrap_or_default();
    assert!(
        card.contains(r#"data-task="t1""#) && card.contains("write &lt;the&gt; parser"),
        "the card, escaped: {created}"
    );
    assert!(card.contains(r#"data-col="in_progress""#), "rendered now, not as it was: {card}");
    let (_, claimed) = live.event();
    assert_eq!((claimed["kind"].as_str(), claimed["card"].as_str()), (Some("task_claimed"), Some(card)));
    // Resumed after an id like `/events`; the API's own stream carries no card.
    let mut resumed = Stream::connect(&format!("{}/ui", s.url), "", Some(first), None);
    assert_eq!(resumed.event().1["kind"], "task_claimed");
    let mut api = Stream::connect(&s.url, "", None, None);
    assert!(api.event().1.get("card").is_none());
}
