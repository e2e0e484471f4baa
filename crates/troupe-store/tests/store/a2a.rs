//! A2A tasks: each change is saved with its event in one transaction, lists
//! come newest change first with an exact cursor, push targets belong to a
//! task and deleting one twice is not an error.

use serde_json::json;
use troupe_store::a2a::A2A_TASK_EVENT;
use troupe_store::{A2aPushConfig, A2aTaskFilter, A2aTaskUpdate, StoreError};

use crate::conformance;

fn update(id: &str, ctx: &str, state: &str) -> A2aTaskUpdate {
    A2aTaskUpdate {
        id: id.into(),
        context_id: ctx.into(),
        state: state.into(),
        body: json!({"id": id, "state": state}),
        event: json!({"statusUpdate": {"state": state}}),
    }
}

conformance! {
    fn every_change_appends_its_event_and_the_snapshot_names_it(store) {
        let first = store.save_a2a_task(update("t1", "c1", "TASK_STATE_SUBMITTED")).unwrap();
        let second = store.save_a2a_task(update("t1", "c1", "TASK_STATE_WORKING")).unwrap();
        assert_eq!(second.seq, first.seq, "an update keeps the task's place");
        assert!(second.last_event > first.last_event);
        assert_eq!(second.created_at, first.created_at);
        assert_eq!(second.body["state"], "TASK_STATE_WORKING");

        let events: Vec<_> = store.events_since(0, 100).unwrap().into_iter().filter(|e| e.kind == A2A_TASK_EVENT).collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].id, second.last_event);
        assert_eq!(events[1].subject.as_deref(), Some("t1"));
        assert_eq!(events[1].data["update"]["statusUpdate"]["state"], "TASK_STATE_WORKING");
        assert_eq!(store.a2a_task("t1").unwrap().unwrap(), second);
        assert!(store.a2a_task("nope").unwrap().is_none());
    }
}

conformance! {
    fn lists_newest_change_first_with_an_exact_cursor_and_filters(store) {
        for i in 0..5 {
            let ctx = if i % 2 == 0 { "even" } else { "odd" };
            store.save_a2a_task(update(&format!("t{i}"), ctx, "TASK_STATE_WORKING")).unwrap();
        }
        // t1 changes last, so it comes first.
        store.save_a2a_task(update("t1", "odd", "TASK_STATE_COMPLETED")).unwrap();

        let page = store.a2a_tasks(&A2aTaskFilter { limit: 2, ..Default::default() }).unwrap();
        assert_eq!(page.total, 5);
        let ids: Vec<_> = page.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["t1", "t4"]);
        let last = page.tasks.last().unwrap();
        let next = store
            .a2a_tasks(&A2aTaskFilter { limit: 10, before: Some((last.updated_at, last.seq)), ..Default::default() })
            .unwrap();
        let ids: Vec<_> = next.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["t3", "t2", "t0"]);

        let odd = store.a2a_tasks(&A2aTaskFilter { context_id: Some("odd".into()), limit: 10, ..Default::default() });
        assert_eq!(odd.unwrap().total, 2);
        let done = store
            .a2a_tasks(&A2aTaskFilter { state: Some("TASK_STATE_COMPLETED".into()), limit: 10, ..Default::default() })
            .unwrap();
        assert_eq!(done.tasks.len(), 1);
        let later = store
            .a2a_tasks(&A2aTaskFilter { updated_after: Some(last.updated_at), limit: 10, ..Default::default() })
            .unwrap();
        assert!(later.tasks.iter().all(|t| t.updated_at > last.updated_at));
        assert!(later.tasks.iter().any(|t| t.id == "t1"));
    }
}

conformance! {
    fn push_targets_belong_to_an_existing_task_and_delete_is_idempotent(store) {
        let orphan = A2aPushConfig { task_id: "none".into(), id: "p1".into(), body: json!({"url": "http://127.0.0.1:1/"}) };
        assert!(matches!(store.save_a2a_push(orphan), Err(StoreError::A2aTaskNotFound(id)) if id == "none"));

        store.save_a2a_task(update("t1", "c1", "TASK_STATE_WORKING")).unwrap();
        for id in ["p1", "p2"] {
            let config = A2aPushConfig { task_id: "t1".into(), id: id.into(), body: json!({"url": id}) };
            store.save_a2a_push(config).unwrap();
        }
        let replaced = A2aPushConfig { task_id: "t1".into(), id: "p1".into(), body: json!({"url": "again"}) };
        store.save_a2a_push(replaced).unwrap();
        let all = store.a2a_pushes("t1").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].body["url"], "again");

        assert!(store.delete_a2a_push("t1", "p1").unwrap());
        assert!(!store.delete_a2a_push("t1", "p1").unwrap());
        assert_eq!(store.a2a_pushes("t1").unwrap().len(), 1);
        assert!(matches!(store.a2a_pushes("none"), Err(StoreError::A2aTaskNotFound(_))));
    }
}
