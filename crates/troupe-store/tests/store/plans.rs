use troupe_core::plan::TaskPlan;
use troupe_store::plan::plan_tasks;
use troupe_store::{ImportOutcome, ListFilter, StoreError, TaskFilter, TaskStatus};

use crate::{assert_sound, conformance};

const PLAN: &str = "tasks:
  - id: '1'
    summary: Model
    status: pending
    subtasks:
      - id: '1.1'
        summary: Session struct
        status: done
      - id: '1.2'
        summary: Login handler
        depends: ['1.1']
        status: pending
  - id: '2'
    summary: Docs
    depends: ['1']
    status: pending
";

fn tasks(yaml: &str) -> troupe_store::PlanTasks {
    let plan = TaskPlan::from_yaml(yaml).unwrap();
    plan_tasks("login", &plan.check().unwrap(), "lead")
}

conformance! {
    fn import_then_reimport_is_a_no_op(s) {
        assert_eq!(s.import_plan(tasks(PLAN)).unwrap(), ImportOutcome::Imported { created: 3, completed: 1 });
        let board = s.list(&ListFilter::default()).unwrap();
        let states: Vec<(&str, TaskStatus, bool)> = board.iter().map(|t| (t.id.as_str(), t.status, t.blocked)).collect();
        assert_eq!(
            states,
            [
                ("login/1.1", TaskStatus::Completed, false),
                ("login/1.2", TaskStatus::Pending, false),
                ("login/2", TaskStatus::Pending, true)
            ]
        );
        let events = s.events_since(0, 1000).unwrap().len();
        assert_eq!(s.import_plan(tasks(PLAN)).unwrap(), ImportOutcome::Unchanged);
        // Marking work done in tasks.yaml is not a change of plan.
        assert_eq!(
            s.import_plan(tasks(&PLAN.replace("status: pending", "status: done"))).unwrap(),
            ImportOutcome::Unchanged
        );
        assert_eq!(s.events_since(0, 1000).unwrap().len(), events, "a no-op import records nothing");
        let next = s.claim_next("b", &TaskFilter { feature: Some("login".into()), ..Default::default() }).unwrap();
        assert_eq!(next.unwrap().id, "login/1.2");
        assert_sound(&s);
    }
}

conformance! {
    fn a_changed_plan_is_reported_and_not_merged(s) {
        s.import_plan(tasks(PLAN)).unwrap();
        let before = s.list(&ListFilter::default()).unwrap();
        let changed = PLAN.replace("summary: Login handler", "summary: Login and logout").replace(
            "  - id: '2'\n    summary: Docs\n    depends: ['1']\n    status: pending\n",
            "  - id: '3'\n    summary: Metrics\n    status: pending\n",
        );
        let err = s.import_plan(tasks(&changed)).unwrap_err();
        match &err {
            StoreError::PlanChanged { feature, changes } => {
                assert_eq!(feature, "login");
                assert_eq!(changes, &["login/1.2 changed its summary", "login/3 is new", "login/2 was removed"]);
            }
            other => panic!("{other}"),
        }
        assert_eq!(s.list(&ListFilter::default()).unwrap(), before);
    }
}

conformance! {
    fn tasks_already_on_the_board_are_adopted_only_if_identical(s) {
        let mut plan = tasks(PLAN);
        plan.done.clear();
        s.create_tasks(plan.tasks.clone()).unwrap();
        assert_eq!(s.import_plan(tasks(PLAN)).unwrap(), ImportOutcome::Unchanged);

        let s2 = s.fresh();
        let mut other = tasks(PLAN).tasks;
        other[0].subject = "something else".into();
        s2.create_tasks(other).unwrap();
        let err = s2.import_plan(tasks(PLAN)).unwrap_err();
        assert!(err.to_string().contains("login/1.1 changed its summary"), "{err}");
    }
}

conformance! {
    fn replacing_a_plan_swaps_its_tasks_in_one_step(s) {
        s.import_plan(tasks(PLAN)).unwrap();
        // The same plan again keeps its progress.
        assert_eq!(s.replace_plan(tasks(PLAN)).unwrap(), ImportOutcome::Unchanged);
        assert_eq!(s.task("login/1.1").unwrap().status, TaskStatus::Completed);
        // A revision: 1.2 changes, 3 is new, 2 is gone; everything starts over
        // except what the new tasks.yaml marks done.
        let revised = PLAN.replace("Login handler", "Login handler with 2FA").replace(
            "  - id: '2'\n    summary: Docs\n    depends: ['1']\n",
            "  - id: '3'\n    summary: Audit log\n    depends: ['1']\n",
        );
        assert!(matches!(s.import_plan(tasks(&revised)), Err(StoreError::PlanChanged { .. })));
        assert_eq!(s.replace_plan(tasks(&revised)).unwrap(), ImportOutcome::Imported { created: 3, completed: 1 });
        let ids: Vec<String> = s.list(&ListFilter::default()).unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(ids, ["login/1.1", "login/1.2", "login/3"]);
        assert_eq!(s.task("login/1.2").unwrap().subject, "Login handler with 2FA");
        assert!(s.task("login/3").unwrap().blocked);
        assert_eq!(s.import_plan(tasks(&revised)).unwrap(), ImportOutcome::Unchanged, "the new plan is the imported one");
        let kinds: Vec<String> = s.events_since(0, 1000).unwrap().into_iter().map(|e| e.kind).collect();
        assert!(kinds.iter().any(|k| k == "plan_replaced"), "{kinds:?}");
        assert_sound(&s);
    }
}

conformance! {
    fn a_plan_in_progress_or_depended_on_is_not_replaced(s) {
        s.import_plan(tasks(PLAN)).unwrap();
        s.claim("login/1.2", "builder-1").unwrap();
        let revised = PLAN.replace("Docs", "Documentation");
        match s.replace_plan(tasks(&revised)) {
            Err(e @ StoreError::PlanInProgress { .. }) => {
                assert_eq!(e.to_string(), "the plan of `login` cannot be replaced while login/1.2 is in progress")
            }
            other => panic!("{other:?}"),
        }
        s.release("login/1.2", None, "lead").unwrap();
        let mut outside = troupe_store::NewTask::new("deploy", "ops");
        outside.blocked_by = vec!["login/2".into()];
        s.create_task(outside).unwrap();
        assert!(
            matches!(s.replace_plan(tasks(&revised)), Err(StoreError::PlanDependedOn { dependents, .. }) if dependents.len() == 1)
        );
        // Refused means untouched.
        assert_eq!(s.task("login/2").unwrap().subject, "Docs");
        assert_sound(&s);
    }
}

conformance! {
    fn renewing_a_plan_starts_the_same_plan_over(s) {
        s.import_plan(tasks(PLAN)).unwrap();
        s.claim("login/1.2", "builder-1").unwrap();
        s.complete("login/1.2", "builder-1").unwrap();
        // A revision whose TaskGenerator wrote the very same plan: its work is new,
        // so the board's progress does not carry over (issue 12, defect 6).
        assert_eq!(s.renew_plan(tasks(PLAN)).unwrap(), ImportOutcome::Imported { created: 3, completed: 1 });
        assert_eq!(s.task("login/1.2").unwrap().status, TaskStatus::Pending);
        assert_eq!(s.task("login/1.1").unwrap().status, TaskStatus::Completed, "done in the new tasks.yaml");
        assert_eq!(s.import_plan(tasks(PLAN)).unwrap(), ImportOutcome::Unchanged);
    }
}

// A plan larger than one multi-row `INSERT`: every task and dependency is on
// the board, blockers counted right across chunks, and the import is one
// `plan_imported` event, not one `task_created` per task.
conformance! {
fn a_large_plan_is_imported_whole_as_one_event(s) {
    use std::fmt::Write as _;
    let mut yaml = String::from("tasks:\n");
    for t in 0..450 {
        let _ = writeln!(
            yaml,
            "  - id: '{t}'\n    summary: part {t}\n    status: {}",
            if t < 5 { "done" } else { "pending" }
        );
        if t > 0 {
            let _ = writeln!(yaml, "    depends: ['{}']", t - 1);
        }
    }
    let before = s.events_since(0, u32::MAX).unwrap().len();
    assert_eq!(s.import_plan(tasks(&yaml)).unwrap(), ImportOutcome::Imported { created: 450, completed: 5 });
    let events = s.events_since(0, u32::MAX).unwrap();
    let kinds: Vec<&str> = events[before..].iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["plan_imported"]);
    let board = s.list(&ListFilter::default()).unwrap();
    assert_eq!(board.len(), 450);
    let ready: Vec<&str> =
        board.iter().filter(|t| t.status == TaskStatus::Pending && !t.blocked).map(|t| t.id.as_str()).collect();
    assert_eq!(ready, ["login/5"], "only the task after the done ones is ready");
    let last = board.iter().find(|t| t.id == "login/449").unwrap();
    assert_eq!(last.blocked_by, ["login/448"]);
    assert_sound(&s);
}
}

/// A board as a version 16 store held it (dependencies as pairs of text ids):
/// `a` done, `b` waiting for it (so free), `c` waiting for `b`. The same SQL
/// on both backends; `migrated_board_is_kept` checks it after the migration
/// to integer dependencies.
pub const V16_BOARD: &str = "
INSERT INTO tasks (id, subject, status, assignee, created_by, blocked_by, open_blockers, created_at, updated_at,
                   completed_at)
VALUES ('a', 'A', 'completed', 'lead', 'lead', '[]', 0, 1, 1, 1),
       ('b', 'B', 'pending', NULL, 'lead', '[\"a\"]', 0, 1, 1, NULL),
       ('c', 'C', 'pending', NULL, 'lead', '[\"b\"]', 1, 1, 1, NULL);
INSERT INTO task_deps (task_id, blocker_id) VALUES ('b', 'a'), ('c', 'b');
";

/// The board of [`V16_BOARD`] after migrating: its dependencies read,
/// refuse, unblock and verify as before.
pub fn migrated_board_is_kept(s: &dyn troupe_store::Store, verify: Vec<String>) {
    assert!(verify.is_empty(), "{verify:?}");
    assert_eq!(s.task("c").unwrap().blocked_by, ["b"]);
    let err = s.claim("c", "builder-1").unwrap_err();
    assert!(err.to_string().contains('b'), "{err}");
    s.claim("b", "builder-1").unwrap();
    assert_eq!(s.complete("b", "builder-1").unwrap().unblocked, ["c"]);
    assert_eq!(s.claim_next("builder-1", &TaskFilter::default()).unwrap().unwrap().id, "c");
}
