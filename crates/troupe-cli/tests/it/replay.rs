//! `troupe replay`: a recorded run runs again with scripted teammates from
//! its normalised logs, in a scratch copy, with the same events and board;
//! `--until` stops at an exact event. The demo's run here; a recorded
//! real-Claude run in `lead_claude::run_with_real_claude_code_as_every_teammate`
//! (through [`assert_replays`], which also checks that no model was asked).

use std::path::Path;

use crate::support::{json, troupe};

/// The events in `root`'s SQLite store.
fn event_count(root: &Path) -> u64 {
    use troupe_store::EventLog;
    let store = troupe_store::SqliteStore::open(&root.join(".troupe/state/troupe.db")).unwrap();
    store.events_since(0, u32::MAX).unwrap().len() as u64
}

/// Replay `root`'s latest run into a new folder and check it reproduced the
/// original: the same events per actor, the same board, the project untouched.
pub(crate) fn assert_replays(root: &Path, extra_env: &[(String, String)]) -> serde_json::Value {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("replay");
    let (status, events) = (git_status(root), event_count(root));
    let out = troupe()
        .arg("-C")
        .arg(root)
        .args(["--json", "replay", "last", "--dir"])
        .arg(&dir)
        .envs(extra_env.iter().cloned())
        .timeout(std::time::Duration::from_secs(240))
        .output()
        .unwrap();
    let report = json(&out);
    assert!(out.status.success(), "{report}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["event_differences"], serde_json::json!([]), "{report}");
    assert_eq!(report["board_differences"], serde_json::json!([]), "{report}");
    assert_eq!(report["outcome"], "completed", "{report}");
    assert_eq!(report["events"].as_array().unwrap().len() as u64, report["original_events"].as_u64().unwrap());
    assert_eq!(git_status(root), status, "the project's files are untouched");
    assert_eq!(event_count(root), events, "the project's store is untouched");
    // Every teammate of the replay ran on the scripted engine.
    let log = std::fs::read_to_string(dir.join(".troupe/state/replay.log")).unwrap_or_default();
    let agents = json(&troupe().arg("-C").arg(&dir).args(["--json", "agent", "list"]).output().unwrap());
    let engines: Vec<&str> = agents.as_array().unwrap().iter().filter_map(|a| a["engine"].as_str()).collect();
    assert!(!engines.is_empty() && engines.iter().all(|e| *e == "scripted"), "{agents} {log}");
    // The replayed teammates wrote the same files (a Builder's in its worktree,
    // merged): the committed code outside troupe's own folder is identical.
    assert_eq!(code_tree(&dir), code_tree(root), "{log}");
    report
}

/// The committed files at HEAD outside `.troupe/`, with their blob ids.
fn code_tree(root: &Path) -> Vec<String> {
    let tree = crate::lead_claude::git(root, &["ls-tree", "-r", "HEAD"]);
    tree.lines()
        .filter(|l| !l.split('\t').nth(1).is_some_and(|p| p.starts_with(".troupe/")))
        .map(str::to_string)
        .collect()
}

fn git_status(root: &Path) -> String {
    crate::lead_claude::git(root, &["status", "--porcelain", "--ignored=no"])
}

#[test]
fn the_demo_replays_with_the_same_events_and_board_and_stops_at_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("demo");
    let out = troupe().args(["--json", "demo", "--dir"]).arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(root.join(".troupe/state/runs").read_dir().unwrap().count() == 1, "the run was recorded");
    let report = assert_replays(&root, &[]);
    let total = report["events"].as_array().unwrap().len() as u64;
    assert!(total > 40, "{report}");

    // --until: the scratch store holds exactly the first N events, and the board is as it was then.
    // N is the plan's import: every event before it belongs to the design and its review, whatever
    // the order parallel Inspectors finished in.
    let events = report["events"].as_array().unwrap();
    let n = 1 + events.iter().position(|e| e["kind"] == "plan_imported").unwrap() as u64;
    let at = dir.path().join("at");
    let out = troupe()
        .arg("-C")
        .arg(&root)
        .args(["--json", "replay", "last", "--until", &n.to_string(), "--dir"])
        .arg(&at)
        .output()
        .unwrap();
    let stopped = json(&out);
    assert!(out.status.success(), "{stopped}");
    assert_eq!(stopped["outcome"], "stopped", "{stopped}");
    assert_eq!(event_count(&at), n, "nothing past event {n} entered the scratch store");
    // The same first N events as the full replay, up to how parallel teammates interleave.
    let sorted = |v: &[serde_json::Value]| {
        let mut v: Vec<String> = v.iter().map(|e| e.to_string()).collect();
        v.sort();
        v
    };
    let first = &report["events"].as_array().unwrap()[..n as usize];
    assert_eq!(sorted(stopped["events"].as_array().unwrap()), sorted(first), "{stopped}");
    let board = json(&troupe().arg("-C").arg(&at).args(["--json", "board", "list"]).output().unwrap());
    let statuses: Vec<&str> = board.as_array().unwrap().iter().filter_map(|t| t["status"].as_str()).collect();
    assert_eq!(statuses, ["pending"; 3], "stopped right after the plan's import: {board}");

    // A run no record names is a clear error.
    let out = troupe().arg("-C").arg(&root).args(["replay", "nosuchfeature"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no recorded run matches 'nosuchfeature'") && err.contains("hint:"), "{err}");
}
