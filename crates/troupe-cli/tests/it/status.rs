//! `troupe status`: where each feature stands and the command to type next.

use troupe_core::layout::Layout;
use troupe_store::{AgentStatus, NewAgent, Registry, SqliteStore};

use crate::support::{TestProject, json};

fn set_phase(p: &TestProject, feature: &str, phase: &str) {
    let path = p.path(&format!(".troupe/specs/{feature}/spec.yaml"));
    let text = std::fs::read_to_string(&path).unwrap().replace("phase: initialized", &format!("phase: {phase}"));
    std::fs::write(&path, text).unwrap();
}

#[test]
fn status_names_the_next_command_by_phase_and_flags_a_broken_spec_without_hiding_the_others() {
    let p = TestProject::new();
    for f in ["checkout", "hello", "done", "broken"] {
        p.troupe().args(["spec", "new", f]).assert().success();
    }
    set_phase(&p, "hello", "design-generated");
    set_phase(&p, "done", "implementation-complete");
    std::fs::write(p.path(".troupe/specs/broken/spec.yaml"), "feature_name: [unclosed\n").unwrap();

    let out = p.troupe().args(["--json", "status"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    let by = |f: &str| doc.as_array().unwrap().iter().find(|s| s["feature"] == f).unwrap().clone();
    assert_eq!(by("checkout")["next_command"], "troupe design checkout");
    assert_eq!(by("hello")["next_command"], "troupe impl hello");
    assert!(by("done")["next_command"].as_str().unwrap().starts_with("troupe revise done \"<change>\""));
    assert_eq!(by("broken")["phase"], "unreadable");
    assert!(by("broken")["error"].as_str().is_some_and(|e| !e.is_empty()));

    let text = p.troupe().arg("status").output().unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("hello: design-generated\n  next:    troupe impl hello"), "{stdout}");
    assert!(stdout.contains("broken: unreadable\n  error:   "), "{stdout}");

    // Asked for by name, a broken spec is an error.
    p.troupe().args(["status", "broken"]).assert().code(3);
}

#[test]
fn a_teammate_whose_process_is_gone_is_not_running() {
    let p = TestProject::new();
    p.troupe().args(["spec", "new", "login"]).assert().success();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    {
        let store = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
        for (id, pid) in [("builder-live", std::process::id()), ("builder-dead", dead_pid)] {
            let mut a = NewAgent::new(id, "builder", "claude");
            a.pid = Some(pid);
            a.feature = Some("login".into());
            store.register(a).unwrap();
            store.set_status(id, AgentStatus::Processing).unwrap();
        }
    }
    let doc = json(&p.troupe().args(["--json", "status", "login"]).output().unwrap());
    let running: Vec<&str> = doc[0]["running"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(running, ["builder-live"]);
    assert_eq!(doc[0]["next_command"], "troupe agent logs builder-live --follow   # a run is in progress");
}

#[test]
fn no_features_is_a_hint_on_stderr_and_nothing_on_stdout() {
    let p = TestProject::new();
    let out = p.troupe().arg("status").output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no features yet"));
}
