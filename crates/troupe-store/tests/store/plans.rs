use troupe_core::plan::TaskPlan;
use troupe_store::plan::plan_tasks;
use troupe_store::{Board, EventLog, ImportOutcome, ListFilter, StoreError, TaskFilter, TaskStatus};

use crate::{assert_sound, store};

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
    let schedule = plan.validate().unwrap();
    plan_tasks("login", &plan, &schedule, "lead")
}

#[test]
fn import_then_reimport_is_a_no_op() {
    let (_d, s) = store();
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

#[test]
fn a_changed_plan_is_reported_and_not_merged() {
    let (_d, s) = store();
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

#[test]
fn tasks_already_on_the_board_are_adopted_only_if_identical() {
    let (_d, s) = store();
    let mut plan = tasks(PLAN);
    plan.done.clear();
    s.create_tasks(plan.tasks.clone()).unwrap();
    assert_eq!(s.import_plan(tasks(PLAN)).unwrap(), ImportOutcome::Unchanged);

    let (_d2, s2) = store();
    let mut other = tasks(PLAN).tasks;
    other[0].subject = "something else".into();
    s2.create_tasks(other).unwrap();
    let err = s2.import_plan(tasks(PLAN)).unwrap_err();
    assert!(err.to_string().contains("login/1.1 changed its summary"), "{err}");
}
