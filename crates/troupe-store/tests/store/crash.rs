//! A process killed with SIGKILL in the middle of claiming and completing leaves
//! the database consistent. The worker is this test binary itself, re-run as a
//! child with `--ignored --exact crash::child_worker`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use troupe_store::{ListFilter, NewMessage, NewTask, TaskFilter, TaskStatus};

use crate::{Place, conformance};

const DB_ENV: &str = "TROUPE_STORE_CRASH_DB";

#[test]
#[ignore = "helper: the child process of kill_mid_claim_leaves_the_database_consistent"]
fn child_worker() {
    let place = std::env::var(DB_ENV).expect("run by kill_mid_claim_leaves_the_database_consistent");
    let store = Place::parse(&place).open();
    let me = format!("worker-{}", std::process::id());
    let mut announced = false;
    for round in 0u64.. {
        match store.claim_next(&me, &TaskFilter::default()).unwrap() {
            Some(task) if round % 5 == 4 => {
                store.release(&task.id, Some(&me), &me).unwrap();
            }
            Some(task) => {
                store.complete(&task.id, &me).unwrap();
                let follow_up = NewTask::new(format!("follow-up of {}", task.id), &me).blocked_by([task.id.clone()]);
                store.create_task(follow_up).unwrap();
            }
            None => {
                store.create_task(NewTask::new("refill", &me)).unwrap();
            }
        }
        store.send(NewMessage::text(&me, "lead", format!("round {round}"))).unwrap();
        if !announced {
            println!("ready");
            announced = true;
        }
    }
}

conformance! {
fn kill_mid_claim_leaves_the_database_consistent(store) {
    let place = store.place().clone();
    {
        let s = place.open();
        let mut batch = Vec::new();
        for i in 0..300 {
            let mut t = NewTask::new(format!("task {i}"), "lead").with_id(format!("c/{i}"));
            if i % 3 != 0 {
                t.blocked_by = vec![format!("c/{}", i - 1)];
            }
            batch.push(t);
        }
        s.create_tasks(batch).unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    for kill_after_ms in [1u64, 3, 7, 12, 20, 35, 50, 80] {
        let mut child = Command::new(&exe)
            .args(["--ignored", "--exact", "crash::child_worker", "--nocapture", "--test-threads=1"])
            .env(DB_ENV, place.text())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines.by_ref().map_while(Result::ok).any(|l| l.trim_end().ends_with("ready"));
        assert!(ready, "the worker never got going");
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        child.kill().unwrap(); // SIGKILL on Unix: no destructor, no rollback, no cleanup.
        child.wait().unwrap();

        let s = place.open();
        let problems = place.verify();
        assert!(problems.is_empty(), "after a kill at {kill_after_ms} ms: {problems:#?}");
        let tasks = s.list(&ListFilter::default()).unwrap();
        let events = s.events_since(0, u32::MAX).unwrap();
        for t in &tasks {
            let completions = events.iter().filter(|e| e.kind == "task_completed" && e.subject.as_ref() == Some(&t.id));
            let expected = usize::from(t.status == TaskStatus::Completed);
            assert_eq!(completions.count(), expected, "task {} is {} ", t.id, t.status);
            let created = events.iter().filter(|e| e.kind == "task_created" && e.subject.as_ref() == Some(&t.id));
            assert_eq!(created.count(), 1, "task {}", t.id);
        }
        // Nobody is stuck behind a lock the dead process held.
        let t = s.create_task(NewTask::new("after the kill", "lead")).unwrap();
        s.claim(&t.id, "lead").unwrap();
        s.complete(&t.id, "lead").unwrap();
    }
}
}
