//! What only the PostgreSQL backend has: its schema version table, openers
//! racing to migrate, LISTEN/NOTIFY wake-ups, the configuration that picks
//! it, and URLs whose password is never shown.

use std::time::{Duration, Instant};

use troupe_core::config::StoreConfig;
use troupe_core::layout::Layout;
use troupe_store::{Board, EventLog, NewEvent, NewTask, PgStore, StoreError};

fn event(kind: &str) -> NewEvent {
    NewEvent { kind: kind.into(), actor: None, subject: None, data: serde_json::json!({}) }
}

fn admin(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

#[test]
fn openers_racing_on_a_fresh_database_migrate_it_once() {
    let url = troupe_testkit::postgres::database();
    let stores: Vec<PgStore> = std::thread::scope(|scope| {
        let openers: Vec<_> = (0..8).map(|_| scope.spawn(|| PgStore::open(&url).unwrap())).collect();
        openers.into_iter().map(|o| o.join().unwrap()).collect()
    });
    for (i, s) in stores.iter().enumerate() {
        s.create_task(NewTask::new(format!("from opener {i}"), "lead")).unwrap();
    }
    let rows = admin(&url).query("SELECT app, version FROM troupe_schema", &[]).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(1), troupe_store::postgres::schema::LATEST);
    assert_eq!(PgStore::open(&url).unwrap().events_since(0, 100).unwrap().len(), 8);
}

#[test]
fn a_newer_schema_and_a_foreign_database_are_refused() {
    let url = troupe_testkit::postgres::database();
    drop(PgStore::open(&url).unwrap());
    admin(&url).execute("UPDATE troupe_schema SET version = 99", &[]).unwrap();
    let err = PgStore::open(&url).unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("has schema version 99"), "{err}");

    let other = troupe_testkit::postgres::database();
    admin(&other).batch_execute("CREATE TABLE invoices (id int)").unwrap();
    let err = PgStore::open(&other).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("1 tables of its own"), "{err}");
}

#[test]
fn the_password_never_appears_in_errors() {
    // Nothing listens on port 1 of loopback: refused at once.
    let url = "postgres://ann:hunter2@127.0.0.1:1/troupe";
    let err = PgStore::open(url).unwrap_err().to_string();
    assert!(!err.contains("hunter2"), "{err}");
    assert!(err.contains("postgres://ann:***@127.0.0.1:1/troupe") && err.contains("is the server running"), "{err}");
    let err = PgStore::open("postgres://ann:hunter2@127.0.0.1:1/troupe?sslmode=require").unwrap_err().to_string();
    assert!(!err.contains("hunter2") && err.contains("sslmode=require"), "{err}");
}

#[test]
fn the_configuration_picks_the_backend_and_shows_no_password() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let url = troupe_testkit::postgres::database();
    let config = StoreConfig { backend: "postgres".into(), url: Some(url.clone()), ..StoreConfig::default() };
    let store = troupe_store::open_checked(&layout, &config).unwrap();
    store.create_task(NewTask::new("on postgres", "lead")).unwrap();
    assert_eq!(PgStore::open(&url).unwrap().task("t1").unwrap().subject, "on postgres");
    assert!(!layout.database_file().exists(), "no SQLite file is made");

    let secret = StoreConfig {
        backend: "postgres".into(),
        url: Some("postgres://u:pw@db/troupe".into()),
        ..StoreConfig::default()
    };
    assert_eq!(troupe_store::location(&layout, &secret).unwrap(), ("postgres", "postgres://u:***@db/troupe".into()));
    let missing = StoreConfig { backend: "postgres".into(), url: None, ..StoreConfig::default() };
    let err = troupe_store::open(&layout, &missing).err().unwrap().to_string();
    assert!(err.contains("needs `url = \"postgres://…\"` or TROUPE_DATABASE_URL"), "{err}");
}

#[test]
fn a_waiter_is_woken_by_the_next_event_not_by_polling() {
    let url = troupe_testkit::postgres::database();
    let store = PgStore::open(&url).unwrap();
    let last = store.append_event(event("before")).unwrap().id;
    assert!(store.wait_for_event(last - 1, Duration::from_secs(5)).unwrap(), "an event already there");
    assert!(!store.wait_for_event(last, Duration::from_millis(50)).unwrap(), "nothing new");
    let woken = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let started = Instant::now();
            (store.wait_for_event(last, Duration::from_secs(30)).unwrap(), started.elapsed())
        });
        // The waiter may not listen yet: the check after LISTEN covers that.
        PgStore::open(&url).unwrap().append_event(event("wake")).unwrap();
        waiter.join().unwrap()
    });
    assert!(woken.0);
    assert!(woken.1 < Duration::from_secs(30), "woken by the notification, not the timeout");
}

/// Every write that appends events wakes listeners once, with its newest
/// event id, from inside its own transaction (so it is delivered as that
/// transaction commits): a write in a transaction, an event appended on
/// its own, and each of the claim path's one-statement calls. A call that
/// writes nothing (nothing to claim, a refused claim or completion) sends none.
#[test]
fn every_write_with_events_notifies_its_newest_id_and_no_other_call_does() {
    use postgres::fallible_iterator::FallibleIterator;
    use troupe_store::TaskFilter;
    let url = troupe_testkit::postgres::database();
    let store = PgStore::open(&url).unwrap();
    let mut listener = admin(&url);
    listener.batch_execute("LISTEN troupe_events").unwrap();
    let mut heard = |wait: Duration| -> Option<i64> {
        let note = listener.notifications().timeout_iter(wait).next().unwrap()?;
        Some(note.payload().parse().unwrap())
    };
    let newest = || store.events_since(0, u32::MAX).unwrap().last().unwrap().id;
    let wrote = |what: &str, heard: Option<i64>| {
        assert_eq!(heard, Some(newest()), "{what}: its newest event id, once");
    };
    store.create_tasks(vec![NewTask::new("a", "lead").with_id("a"), NewTask::new("b", "lead").with_id("b")]).unwrap();
    wrote("create tasks", heard(Duration::from_secs(5)));
    store.append_event(event("on its own")).unwrap();
    wrote("append an event", heard(Duration::from_secs(5)));
    store.claim("a", "alice").unwrap();
    wrote("claim", heard(Duration::from_secs(5)));
    store.claim_next("bob", &TaskFilter::default()).unwrap().unwrap();
    wrote("claim the next task", heard(Duration::from_secs(5)));
    store.complete("a", "alice").unwrap();
    wrote("complete", heard(Duration::from_secs(5)));
    assert!(store.claim_next("carol", &TaskFilter::default()).unwrap().is_none());
    assert!(store.claim("b", "carol").is_err(), "held by bob");
    assert!(store.complete("b", "carol").is_err(), "not carol's");
    assert_eq!(heard(Duration::from_millis(300)), None, "calls that wrote nothing notify nothing");
}

/// An event written as troupe's writers write one (`EVENT_WRITERS` shared,
/// then the insert), its transaction left open; returns the event's id.
fn event_in_flight(tx: &mut postgres::Transaction<'_>, kind: &str) -> i64 {
    tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&troupe_store::postgres::EVENT_WRITERS]).unwrap();
    tx.query_one("INSERT INTO events (at, kind) VALUES (0, $1) RETURNING id", &[&kind]).unwrap().get(0)
}

fn ids(events: Vec<troupe_store::Event>) -> Vec<i64> {
    events.into_iter().map(|e| e.id).collect()
}

/// Event ids commit out of order (no lock orders the writers): a claim does
/// not wait for an earlier event's transaction, and a reader that already
/// sees the claim's later id gets the earlier one first, once it commits.
#[test]
fn an_event_committed_late_with_a_lower_id_is_still_delivered() {
    use troupe_store::TaskFilter;
    let url = troupe_testkit::postgres::database();
    let store = PgStore::open(&url).unwrap();
    let created = store.create_task(NewTask::new("a", "lead")).unwrap();
    let first = store.last_event_id().unwrap();
    let mut early = admin(&url);
    let mut open = early.transaction().unwrap();
    let late = event_in_flight(&mut open, "late");
    // Would hang here if claims still queued behind earlier events.
    assert_eq!(store.claim_next("alice", &TaskFilter::default()).unwrap().unwrap().id, created.id);
    let raw: Vec<i64> = admin(&url).query("SELECT id FROM events", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(raw, [first, late + 1], "the claim's later id is committed, `late` is not");
    assert_eq!(ids(store.events_since(0, 100).unwrap()), [first], "the reader stops before the id in flight");
    std::thread::scope(|scope| {
        let horizon = scope.spawn(|| store.last_event_id().unwrap());
        let waiter = scope.spawn(|| store.wait_for_event(first, Duration::from_secs(30)).unwrap());
        open.commit().unwrap();
        assert_eq!(horizon.join().unwrap(), late + 1, "the newest id once nothing before it is in flight");
        assert!(waiter.join().unwrap());
    });
    let kinds: Vec<String> = store.events_since(first, 10).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["late", "task_claimed"], "id order, the late one first");
}

/// A transaction that drew an id and rolled back holds readers only until
/// the event writers in flight when the gap was seen have ended.
#[test]
fn a_rolled_back_id_does_not_hold_readers() {
    let url = troupe_testkit::postgres::database();
    let store = PgStore::open(&url).unwrap();
    let first = store.append_event(event("first")).unwrap().id;
    let mut early = admin(&url);
    let mut open = early.transaction().unwrap();
    let lost = event_in_flight(&mut open, "never");
    let after = PgStore::open(&url).unwrap().append_event(event("after")).unwrap().id;
    assert_eq!(ids(store.events_since(first, 10).unwrap()), Vec::<i64>::new(), "held by the id in flight");
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| store.wait_for_event(first, Duration::from_secs(30)).unwrap());
        open.rollback().unwrap();
        // No notification comes from a rollback: the waiter's own look finds the gap gone.
        assert!(waiter.join().unwrap());
    });
    assert_eq!(ids(store.events_since(first, 10).unwrap()), [after], "{lost} is passed over");
    assert_eq!(store.last_event_id().unwrap(), after);
    // A second reader (another process) that never saw the gap open passes it at once.
    assert_eq!(ids(PgStore::open(&url).unwrap().events_since(0, 10).unwrap()), [first, after]);
}

/// Event writers in flight in another database of the same server (another
/// project's troupe) do not hold this database's readers at a gap: the
/// advisory lock they hold is that database's.
#[test]
fn writers_in_another_database_do_not_hold_readers() {
    let url = troupe_testkit::postgres::database();
    let other = troupe_testkit::postgres::database();
    drop(PgStore::open(&other).unwrap());
    let mut elsewhere = admin(&other);
    let mut busy = elsewhere.transaction().unwrap();
    event_in_flight(&mut busy, "another project's");
    let store = PgStore::open(&url).unwrap();
    let first = store.append_event(event("first")).unwrap().id;
    let mut early = admin(&url);
    let mut open = early.transaction().unwrap();
    event_in_flight(&mut open, "never");
    open.rollback().unwrap();
    let after = store.append_event(event("after")).unwrap().id;
    assert_eq!(ids(store.events_since(0, 10).unwrap()), [first, after], "the rolled-back id is passed at once");
    busy.rollback().unwrap();
}

/// A process's threads share its store's pool: the URL's `pool_max_conns`
/// bounds the backends it opens however many threads call at once (here 4
/// claims held up together behind an open transaction's lock on the board).
#[test]
fn a_stores_threads_share_a_pool_of_the_urls_size() {
    use troupe_store::TaskFilter;
    let url = troupe_testkit::postgres::database();
    let store = PgStore::open(&format!("{url}?pool_max_conns=2")).unwrap();
    assert_eq!(store.pool_size(), 2);
    store.create_tasks((0..4).map(|i| NewTask::new(format!("t{i}"), "lead")).collect()).unwrap();
    let troupe_backends = |watch: &mut postgres::Client, waiting: bool| -> i64 {
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                   AND application_name = 'troupe' AND (NOT $1 OR wait_event_type = 'Lock')";
        watch.query_one(sql, &[&waiting]).unwrap().get(0)
    };
    let mut early = admin(&url);
    let mut open = early.transaction().unwrap();
    open.batch_execute("LOCK TABLE tasks IN EXCLUSIVE MODE").unwrap();
    let mut watch = admin(&url);
    std::thread::scope(|scope| {
        let claimers: Vec<_> = (0..4)
            .map(|i| {
                scope.spawn({
                    let store = &store;
                    move || store.claim_next(&format!("c{i}"), &TaskFilter::default())
                })
            })
            .collect();
        while troupe_backends(&mut watch, true) < 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        open.commit().unwrap();
        for claimer in claimers {
            assert!(claimer.join().unwrap().unwrap().is_some());
        }
    });
    // The pool keeps its connections open (idle): every one it ever made.
    assert!(troupe_backends(&mut watch, false) <= 2, "4 threads at once, on 2 connections");
    assert_eq!(PgStore::open(&url).unwrap().pool_size(), troupe_store::postgres::url::DEFAULT_POOL_SIZE);
    let err = PgStore::open(&format!("{url}?pool_max_conns=none")).unwrap_err().to_string();
    assert!(err.contains("pool_max_conns `none`"), "{err}");
}

/// TLS as the URL asks, against a cluster of its own with `ssl=on` and a
/// throwaway CA (its certificate names `127.0.0.1` only).
#[test]
fn tls_is_spoken_as_the_url_asks_and_a_wrong_host_is_refused() {
    let (cluster, ca) = troupe_testkit::postgres::Cluster::start_tls();
    let plain = cluster.create_database();
    let ca = ca.display();
    let port = cluster.port();
    let db = plain.rsplit('/').next().unwrap().to_string();
    let at = |host: &str, query: &str| format!("postgres://troupe:s3cret@{host}:{port}/{db}?{query}");

    assert!(!PgStore::open(&format!("{plain}?sslmode=disable")).unwrap().encrypted().unwrap(), "disable: plain");
    for (url, why) in [
        (plain.clone(), "prefer (the default) takes the TLS the server offers"),
        (at("127.0.0.1", "sslmode=require"), "require: any certificate"),
        (at("localhost", &format!("sslmode=verify-ca&sslrootcert={ca}")), "verify-ca: the chain, not the name"),
        (at("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={ca}")), "verify-full: chain and name"),
    ] {
        let store = PgStore::open(&url).unwrap_or_else(|e| panic!("{why}: {e}"));
        assert!(store.encrypted().unwrap(), "{why}");
        store.create_task(NewTask::new("over TLS", "lead")).unwrap();
    }

    for (url, want) in [
        (at("localhost", &format!("sslmode=verify-full&sslrootcert={ca}")), "not valid for name"),
        (at("127.0.0.1", "sslmode=verify-full"), "UnknownIssuer"),
        (at("127.0.0.1", "sslmode=require&sslrootcert=/nonexistent/ca.crt"), "cannot read sslrootcert"),
    ] {
        let err = PgStore::open(&url).unwrap_err().to_string();
        assert!(err.contains(want), "{url}: {err}");
        assert!(!err.contains("s3cret") && err.contains("troupe:***@"), "the password is never shown: {err}");
    }
}

/// A version 16 database (dependencies as text ids) with a board is migrated
/// to integer dependencies and keeps it; `troupe_complete` finds the
/// dependents by number.
#[test]
fn a_version_16_board_is_migrated_to_integer_dependencies_and_kept() {
    let url = troupe_testkit::postgres::database();
    let mut c = admin(&url);
    c.batch_execute(troupe_store::postgres::schema::VERSION_TABLE).unwrap();
    c.batch_execute("INSERT INTO troupe_schema (app, version) VALUES ('troupe', 16)").unwrap();
    for sql in &troupe_store::postgres::schema::MIGRATIONS[..16] {
        c.batch_execute(sql).unwrap();
    }
    c.batch_execute(crate::plans::V16_BOARD).unwrap();
    let s = PgStore::open(&url).unwrap();
    crate::plans::migrated_board_is_kept(&s, s.verify().unwrap());
}

/// A version 17 database, whose claims queued for the events lock and whose
/// inserts each notified, is migrated: the claim functions take only the
/// shared `EVENT_WRITERS`, no trigger notifies, and events keep their order.
#[test]
fn a_version_17_database_is_migrated_to_events_without_global_order() {
    use troupe_store::TaskFilter;
    use troupe_store::postgres::{EVENT_WRITERS, schema};
    assert!(schema::MIGRATIONS[17].contains(&EVENT_WRITERS.to_string()), "the functions name the lock by its number");
    let url = troupe_testkit::postgres::database();
    let mut c = admin(&url);
    c.batch_execute(schema::VERSION_TABLE).unwrap();
    c.batch_execute("INSERT INTO troupe_schema (app, version) VALUES ('troupe', 17)").unwrap();
    for sql in &schema::MIGRATIONS[..17] {
        c.batch_execute(sql).unwrap();
    }
    c.batch_execute("INSERT INTO events (at, kind) VALUES (0, 'before')").unwrap();
    let s = PgStore::open(&url).unwrap();
    let count = |sql: &str| -> i64 { admin(&url).query_one(sql, &[]).unwrap().get(0) };
    assert_eq!(count("SELECT count(*) FROM pg_trigger WHERE tgname = 'events_notify'"), 0);
    assert_eq!(
        count("SELECT count(*) FROM pg_proc WHERE proname IN ('troupe_claim', 'troupe_claim_next', 'troupe_complete')"),
        3
    );
    let t = s.create_task(NewTask::new("a", "lead")).unwrap();
    assert_eq!(s.claim_next("alice", &TaskFilter::default()).unwrap().unwrap().id, t.id);
    s.complete(&t.id, "alice").unwrap();
    let kinds: Vec<String> = s.events_since(0, 10).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["before", "task_created", "task_claimed", "task_completed"]);
}
