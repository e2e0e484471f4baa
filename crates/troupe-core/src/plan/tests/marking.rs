use crate::plan::mark_done;

/// `expected` is the new text, or `error: ...`; `changed` lists the ids that changed.
#[track_caller]
fn check(input: &str, ids: &[&str], expected: &str, changed: &str) {
    match mark_done(input, ids) {
        Ok(m) => {
            assert!(!m.rerendered, "fell back to re-rendering:\n{}", m.yaml);
            assert_eq!(m.yaml, expected, "\n--- input ---\n{input}");
            assert_eq!(m.changed.join(" "), changed);
        }
        Err(e) => assert_eq!(format!("error: {e}"), expected),
    }
}

const PLAN: &str = "\
# The login plan.
version: 2          # a key troupe does not know
tasks:
  - id: \"1\"
    summary: Sessions
    status: pending
    subtasks:
      - id: \"1.1\"
        p: true
        summary: Session store
        details: |
          status: not a key, part of the text
        depends: []
        status: pending   # set by the Lead
      - id: '1.2'
        summary: Login
        depends: [\"1.1\"]
        status: in_progress
  - id: 2
    summary: Logout
    subtasks:
      - status: pending
        id: 2.1
execution:
  - wave: 1
    groups:
      - id: \"1.1\"
        tasks: [\"1.1\"]
";

#[test]
fn marks_only_status_values() {
    let expected = PLAN.replace("status: pending   # set", "status: done   # set");
    check(PLAN, &["1.1"], &expected, "1.1");

    let expected = expected
        .replace("status: in_progress", "status: done")
        .replace("    status: pending\n    subtasks", "    status: done\n    subtasks");
    check(PLAN, &["1.1", "1.2"], &expected, "1.1 1.2 1");
    check(PLAN, &["1"], &expected, "1.1 1.2 1");
}

#[test]
fn inserts_missing_task_status() {
    let expected =
        PLAN.replace("      - status: pending\n        id: 2.1\n", "      - status: done\n        id: 2.1\n");
    // The task's status line is missing: it is added at the end of its mapping.
    let expected = expected.replace("        id: 2.1\n", "        id: 2.1\n    status: done\n");
    check(PLAN, &["2.1"], &expected, "2.1 2");
}

#[test]
fn nothing_to_do_returns_the_input() {
    let once = mark_done(PLAN, &["1.1"]).unwrap().yaml;
    check(&once, &["1.1"], &once, "");
    check(PLAN, &[], PLAN, "");
}

#[test]
fn refusals() {
    check(PLAN, &["9", "1.1", "x"], "error: no task or subtask has the id 9, x", "");
    check("tasks:\n  - id: a\n  - id: a\n", &["a"], "error: the id a belongs to more than one task or subtask", "");
    check(
        "tasks: [\n",
        &["a"],
        "error: tasks.yaml cannot be read: did not find expected node content at line 2, column 1",
        "",
    );
}

#[test]
fn small_layouts() {
    check("tasks:\n- id: a\n  status: pending\n", &["a"], "tasks:\n- id: a\n  status: done\n", "a");
    check("tasks:\n- id: a\n", &["a"], "tasks:\n- id: a\n  status: done\n", "a");
    check("tasks:\n- id: a", &["a"], "tasks:\n- id: a\n  status: done\n", "a");
    check("tasks:\r\n  - id: a\r\n    status: todo\r\n", &["a"], "tasks:\r\n  - id: a\r\n    status: done\r\n", "a");
    check("tasks:\n  - id: a\n    status:\n", &["a"], "tasks:\n  - id: a\n    status: done\n", "a");
}

#[test]
fn flow_style_falls_back_to_rerendering() {
    let m = mark_done("tasks: [{id: a, status: pending, extra: 1}]  # c\n", &["a"]).unwrap();
    assert!(m.rerendered);
    assert_eq!(m.yaml, "tasks:\n- id: a\n  status: done\n  extra: 1\n");
}
