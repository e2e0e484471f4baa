//! `troupe store migrate` through the real binary: a project's SQLite store
//! copied into PostgreSQL (a private cluster) and back, then used from there.

use troupe_core::layout::Layout;
use troupe_store::{Board, Mailbox, NewMessage, NewTask, SqliteStore};

use crate::support::{TestProject, json};

#[test]
fn a_store_moves_to_postgres_and_back_verified_and_never_onto_data() {
    let p = TestProject::new();
    {
        let s = SqliteStore::open_project(&Layout::new(p.root())).unwrap();
        let a = s.create_task(NewTask::new("design", "lead")).unwrap();
        s.create_task(NewTask::new("build", "lead").blocked_by([a.id.clone()])).unwrap();
        s.claim(&a.id, "builder-1").unwrap();
        s.complete(&a.id, "builder-1").unwrap();
        let q = s.send(NewMessage::text("lead", "builder-1", "hello")).unwrap().remove(0);
        let mut reply = NewMessage::text("builder-1", "lead", "hi");
        reply.in_reply_to = Some(q.id);
        s.send(reply).unwrap();
    }
    // trust authentication ignores the password: it is there to be masked.
    let url = troupe_testkit::postgres::database().replacen("troupe@", "troupe:sekret@", 1);
    let done = p.troupe().args(["store", "migrate", "--to", &url, "--json"]).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let report = json(&done);
    assert!(!report.to_string().contains("sekret"), "{report}");
    let rows = |r: &serde_json::Value, table: &str| {
        r["tables"].as_array().unwrap().iter().find(|t| t["table"] == table).map(|t| t["rows"].as_u64().unwrap())
    };
    assert_eq!(
        (rows(&report, "tasks"), rows(&report, "task_deps"), rows(&report, "messages")),
        (Some(2), Some(1), Some(2))
    );

    // Never onto data: the same target again is refused, naming a table.
    let again = p.troupe().args(["store", "migrate", "--to", &url]).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // The project now works on PostgreSQL, and says so without the password.
    let on_pg = |args: &[&str]| p.troupe().args(args).env("TROUPE_DATABASE_URL", &url).output().unwrap();
    let listed = json(&on_pg(&["board", "list", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let t3 = on_pg(&["board", "create", "ship it"]);
    assert!(t3.status.success(), "{}", String::from_utf8_lossy(&t3.stderr));
    let doctor = String::from_utf8_lossy(&on_pg(&["doctor", "--json"]).stdout).to_string();
    assert!(doctor.contains("troupe:***@127.0.0.1") && !doctor.contains("sekret"), "{doctor}");

    // And back into a new SQLite file, with the task made on PostgreSQL.
    let back = p.path("back.db");
    let returned = on_pg(&["store", "migrate", "--to", back.to_str().unwrap(), "--json"]);
    assert!(returned.status.success(), "{}", String::from_utf8_lossy(&returned.stderr));
    assert_eq!(rows(&json(&returned), "tasks"), Some(3));
    let s = SqliteStore::open(&back).unwrap();
    assert_eq!(s.task("t3").unwrap().subject, "ship it");
    assert!(s.verify().unwrap().is_empty());
    assert_eq!(s.thread(1).unwrap().len(), 2);
}
