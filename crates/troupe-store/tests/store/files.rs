use std::os::unix::fs::PermissionsExt;

use troupe_core::layout::Layout;
use troupe_store::{
    AgentStatus, AuditFilter, AuditLog, Board, Decision, NewAuditRecord, NewTask, Registry, SqliteStore, StoreError,
};

#[test]
fn a_new_project_database_is_private_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    std::fs::create_dir(layout.troupe_dir()).unwrap();
    let s = SqliteStore::open_project(&layout).unwrap();
    s.create_task(NewTask::new("a", "lead")).unwrap();
    drop(s);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&layout.state_dir()), 0o700);
    assert_eq!(mode(&layout.database_file()), 0o600);
    let s = SqliteStore::open_project(&layout).unwrap();
    assert_eq!(s.task("t1").unwrap().subject, "a");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('pragma journal_mode').fetchone()[0], c.execute('pragma user_version').fetchone()[0])")
        .arg(layout.database_file())
        .output()
        .expect("python3 reads the database");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("wal {}", troupe_store::sqlite::schema::LATEST));
}

#[test]
fn a_file_that_is_not_a_database_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    std::fs::write(&path, "this is a text file, not a database, and it is long enough to matter\n".repeat(80)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().ends_with("troupe.db is not a usable troupe database (damaged or not SQLite)"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file is left as it was");
}

#[test]
fn a_damaged_database_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        for i in 0..200 {
            s.create_task(NewTask::new(format!("task {i} with a subject long enough to fill pages"), "lead")).unwrap();
        }
        s.checkpoint().unwrap();
    }
    // The file alone holds the database now; trash the header's magic string.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0..16].copy_from_slice(b"garbage garbage!");
    std::fs::write(&path, &bytes).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

/// A database emptied to 0 bytes (a crash, a truncation) was silently
/// recreated empty: the board, mailboxes and registry gone without a word
/// (issue 12, defect 12). Moved aside, it is recreated.
#[test]
fn an_emptied_database_is_refused_not_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    SqliteStore::open(&path).unwrap().create_task(NewTask::new("a", "lead")).unwrap();
    std::fs::write(&path, b"").unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "nothing written");
    std::fs::remove_file(&path).unwrap();
    let s = SqliteStore::open(&path).unwrap();
    assert!(matches!(s.task("t1"), Err(StoreError::TaskNotFound(_))), "a new, empty database");
}

#[test]
fn a_foreign_sqlite_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let status = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3; c = sqlite3.connect({:?}); c.execute('create table notes (x)'); c.commit()",
            path.display().to_string()
        ))
        .status();
    match status {
        Ok(st) if st.success() => {}
        other => panic!("python3 with sqlite3 is needed to make a foreign database: {other:?}"),
    }
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err:?}");
    assert!(err.to_string().contains("is an SQLite database, but not troupe's"), "{err}");
}

#[test]
fn a_database_from_a_newer_troupe_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    drop(SqliteStore::open(&path).unwrap());
    let status = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3; c = sqlite3.connect({:?}); c.execute('pragma user_version = 99'); c.commit()",
            path.display().to_string()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        err.to_string().ends_with(&format!(
            "has schema version 99; this troupe understands up to {}",
            troupe_store::sqlite::schema::LATEST
        )),
        "{err}"
    );
}

#[test]
fn the_audit_log_is_append_only_and_queryable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let s = SqliteStore::open(&path).unwrap();
    let rec = |agent: &str, tool: &str, decision| NewAuditRecord {
        agent: agent.into(),
        role: "builder".into(),
        tool: tool.into(),
        decision,
        reason: (decision != Decision::Allowed).then(|| "policy".to_string()),
        duration_ms: Some(12),
        argument_shape: serde_json::json!({ "path": "string" }),
        thinking_signature: None,
    };
    s.create_task(NewTask::new("so the event log has a row", "lead")).unwrap();
    let first = s.append_audit(rec("a", "write_file", Decision::Allowed)).unwrap();
    assert_eq!(first.duration_ms, Some(12));
    s.append_audit(rec("a", "bash", Decision::Denied)).unwrap();
    let mut signed = rec("b", "bash", Decision::RateLimited);
    signed.thinking_signature = Some(serde_json::json!({ "signature": "abc", "turn": 3 }));
    s.append_audit(signed).unwrap();
    let all = s.audit(&AuditFilter::default()).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].thinking_signature.as_ref().unwrap()["turn"], 3, "newest first");
    let denied = s.audit(&AuditFilter { decision: Some(Decision::Denied), ..Default::default() }).unwrap();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0].tool, "bash");
    let a = s.audit(&AuditFilter { agent: Some("a".into()), limit: Some(1), ..Default::default() }).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].decision, Decision::Denied);
    drop(s);
    for sql in
        ["update audit set agent = 'x'", "delete from audit", "update events set kind = 'x'", "delete from events"]
    {
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import sqlite3, sys\nc = sqlite3.connect({:?})\ntry:\n    c.execute({sql:?}); c.commit(); sys.exit(1)\nexcept sqlite3.DatabaseError as e:\n    print(e)",
                path.display().to_string()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{sql} was allowed");
        assert!(String::from_utf8_lossy(&out.stdout).contains("append-only"), "{sql}");
    }
}

#[test]
fn openers_racing_on_a_fresh_database_all_get_the_same_store() {
    // The features of a roadmap wave open the project's store at the same
    // moment; on a fresh project one of them creates the schema and the others
    // must neither see a half-made file nor fail to switch it to WAL.
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("troupe.db");
        let barrier = std::sync::Barrier::new(12);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..12)
                .map(|i| {
                    let (path, barrier) = (&path, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let store =
                            SqliteStore::open(path).unwrap_or_else(|e| panic!("round {round}, opener {i}: {e}"));
                        store.create_task(NewTask::new(format!("task {i}"), "t")).unwrap();
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        });
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.list(&Default::default()).unwrap().len(), 12);
        assert!(store.verify().unwrap().is_empty());
    }
}

#[test]
fn a_version_1_database_is_migrated_with_its_agents_and_knows_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(troupe_store::sqlite::schema::MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.pragma_update(None, "application_id", troupe_store::sqlite::schema::APPLICATION_ID).unwrap();
        c.execute(
            "INSERT INTO agents (id, name, role, engine, status, started_at, last_event_at) \
             VALUES ('builder-1', 'builder-1', 'builder', 'claude', 'PROCESSING', 1, 1)",
            [],
        )
        .unwrap();
    }
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(s.agent("builder-1").unwrap().status, AgentStatus::Processing);
    let a = s.set_status("builder-1", AgentStatus::Interrupted).unwrap();
    assert_eq!(a.status, AgentStatus::Interrupted);
    assert!(a.status.is_terminal());
}

/// A hook opens the store on every tool call and closes it at once: its
/// connection leaves the WAL for the next opener (no checkpoint, no fsync,
/// no unlink on close), yet the WAL stays bounded, with a long-lived process
/// (the Lead) holding the database open and writing or without one; the
/// long-lived process, closing last, checkpoints it into the file.
#[test]
fn brief_openers_keep_the_wal_and_it_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    std::fs::create_dir(layout.troupe_dir()).unwrap();
    let config = troupe_core::config::StoreConfig::default();
    drop(SqliteStore::open_project(&layout).unwrap());
    let wal = layout.database_file().with_extension("db-wal");
    assert!(!wal.exists(), "a plain opener closing last checkpoints and deletes the WAL");
    let denial = |agent: &str| NewAuditRecord {
        agent: agent.into(),
        role: "builder".into(),
        tool: "Write".into(),
        decision: Decision::Denied,
        reason: Some("policy".into()),
        duration_ms: None,
        argument_shape: serde_json::json!({ "file_path": "string" }),
        thinking_signature: None,
    };
    // A call adds a few frames (a 4 KiB page and a 24-byte header each)
    // past the limit before its close checkpoints.
    let bound = troupe_store::sqlite::BRIEF_WAL_LIMIT + 16 * (4096 + 24);
    let mut largest = 0;
    let mut hook = |i: usize| {
        let store = troupe_store::open_brief(&layout, &config).unwrap();
        store.append_audit(denial(&format!("builder-{i}"))).unwrap();
        drop(store);
        assert!(wal.exists(), "a brief opener left the WAL as it was (call {i})");
        largest = largest.max(std::fs::metadata(&wal).unwrap().len());
    };
    for i in 0..120 {
        hook(i);
    }
    let lead = SqliteStore::open_project(&layout).unwrap();
    for i in 120..240 {
        hook(i);
        lead.append_audit(denial("lead")).unwrap();
    }
    assert!(largest <= bound, "the WAL grew to {largest} bytes (bound {bound})");
    assert_eq!(lead.audit(&AuditFilter { limit: Some(10_000), ..Default::default() }).unwrap().len(), 360);
    drop(lead);
    assert!(!wal.exists(), "the long-lived process, closing last, checkpointed and deleted the WAL");
    let s = SqliteStore::open_project(&layout).unwrap();
    assert_eq!(s.audit(&AuditFilter { limit: Some(10_000), ..Default::default() }).unwrap().len(), 360);
    assert!(s.verify().unwrap().is_empty());
}

/// A version 16 store (dependencies as text ids) with a board is migrated to
/// integer dependencies and keeps it.
#[test]
fn a_version_16_board_is_migrated_to_integer_dependencies_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        for sql in &troupe_store::sqlite::schema::MIGRATIONS[..16] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 16).unwrap();
        c.pragma_update(None, "application_id", troupe_store::sqlite::schema::APPLICATION_ID).unwrap();
        c.execute_batch(crate::plans::V16_BOARD).unwrap();
    }
    let s = SqliteStore::open(&path).unwrap();
    crate::plans::migrated_board_is_kept(&s, s.verify().unwrap());
}
