//! The event log read by id cursor while writers race: every committed event
//! is delivered once, in id order. On PostgreSQL ids commit out of order
//! (`V18_EVENTS_WITHOUT_GLOBAL_ORDER`) and a transaction may roll back after
//! drawing an id; the reader waits both out (`postgres.rs` has the cases one
//! at a time).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use troupe_store::{NewEvent, NewTask, TaskFilter};

use crate::{Place, conformance};

const WRITERS: usize = 4;
const EACH: usize = 40;

conformance! {
    fn a_reader_racing_many_writers_gets_every_committed_event_once_in_id_order(s) {
        s.create_tasks((0..WRITERS * EACH / 4).map(|i| NewTask::new(format!("t{i}"), "lead")).collect()).unwrap();
        let start = s.last_event_id().unwrap();
        let done = AtomicBool::new(false);
        let delivered = std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let store = s.place().open();
                let (mut after, mut got) = (start, Vec::new());
                loop {
                    // Stop once the writers are done and a look after that found nothing more.
                    let finished = done.load(Ordering::SeqCst);
                    store.wait_for_event(after, Duration::from_millis(20)).unwrap();
                    let page = store.events_since(after, 7).unwrap();
                    if page.is_empty() && finished {
                        return got;
                    }
                    for e in page {
                        assert!(e.id > after, "ids grow along the cursor: {} after {after}", e.id);
                        after = e.id;
                        got.push(e.id);
                    }
                }
            });
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let place = s.place().clone();
                    scope.spawn(move || {
                        let store = place.open();
                        for i in 0..EACH {
                            // Events alone, and claims and completions (the claim path's functions).
                            if i % 4 == 0 {
                                if let Some(t) = store.claim_next(&format!("w{w}"), &TaskFilter::default()).unwrap() {
                                    store.complete(&t.id, &format!("w{w}")).unwrap();
                                }
                            } else {
                                let data = serde_json::json!({ "writer": w, "n": i });
                                store.append_event(NewEvent { kind: "raced".into(), actor: None, subject: None, data })
                                    .unwrap();
                            }
                        }
                    })
                })
                .collect();
            // On PostgreSQL also transactions that draw ids and roll back, as a failed write does.
            if let Place::Postgres(url) = s.place() {
                let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
                for _ in 0..EACH / 4 {
                    let mut tx = c.transaction().unwrap();
                    tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&troupe_store::postgres::EVENT_WRITERS])
                        .unwrap();
                    tx.execute("INSERT INTO events (at, kind) VALUES (0, 'rolled back')", &[]).unwrap();
                    tx.rollback().unwrap();
                }
            }
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, Ordering::SeqCst);
            reader.join().unwrap()
        });
        let committed: Vec<i64> = s.events_since(start, u32::MAX).unwrap().into_iter().map(|e| e.id).collect();
        assert!(committed.len() >= WRITERS * EACH, "{} events", committed.len());
        assert_eq!(delivered, committed, "each committed event once, in id order");
    }
}
