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

mod layouts {
    use proptest::prelude::*;

    use crate::plan::{TaskPlan, mark_done};

    /// One mapping's lines (without indentation): `id` somewhere, maybe a
    /// status, maybe a comment line.
    fn entry(id: String) -> impl Strategy<Value = Vec<String>> {
        let quote = prop_oneof![Just(""), Just("\""), Just("'")];
        let status = prop_oneof![
            Just(None),
            Just(Some("status: pending".to_string())),
            Just(Some("status: in_progress   # note".to_string())),
            Just(Some("status: done".to_string())),
            Just(Some("status:".to_string())),
        ];
        (quote, status, prop::bool::ANY, 0usize..4).prop_map(move |(q, status, comment, at)| {
            let mut lines = vec![format!("summary: do {id}"), format!("depends: []")];
            if let Some(s) = status {
                lines.push(s);
            }
            if comment {
                lines.push("# a comment".to_string());
            }
            lines.insert(at.min(lines.len()), format!("id: {q}{id}{q}"));
            lines
        })
    }

    /// A plan of 1-3 tasks with 0-3 subtasks each, at sequence indent 0 or 2.
    fn plan() -> impl Strategy<Value = (String, Vec<String>)> {
        let shape = prop::collection::vec(0usize..4, 1..4);
        (shape, prop::bool::ANY).prop_flat_map(|(shape, indented)| {
            let mut ids = Vec::new();
            let mut entries = Vec::new();
            for (t, n) in shape.iter().enumerate() {
                let tid = format!("{}", t + 1);
                ids.push(tid.clone());
                entries.push(entry(tid.clone()).boxed());
                for s in 0..*n {
                    let sid = format!("{tid}.{}", s + 1);
                    ids.push(sid.clone());
                    entries.push(entry(sid).boxed());
                }
            }
            let shape = shape.clone();
            (entries, Just(ids), Just(indented)).prop_map(move |(entries, ids, indented)| {
                let base = if indented { 2 } else { 0 };
                let mut out = String::from("# plan\ntasks:\n");
                let mut k = 0;
                let item = |out: &mut String, lines: &[String], col: usize| {
                    for (i, l) in lines.iter().enumerate() {
                        let prefix = if i == 0 { format!("{}- ", " ".repeat(col - 2)) } else { " ".repeat(col) };
                        out.push_str(&format!("{prefix}{l}\n"));
                    }
                };
                for n in &shape {
                    let mut task = entries[k].clone();
                    k += 1;
                    // A comment must not come first (it would not start the item).
                    if task[0].starts_with('#') {
                        task.swap(0, 1);
                    }
                    item(&mut out, &task, base + 2);
                    if *n > 0 {
                        out.push_str(&format!("{}subtasks:\n", " ".repeat(base + 2)));
                    }
                    for _ in 0..*n {
                        let mut sub = entries[k].clone();
                        k += 1;
                        if sub[0].starts_with('#') {
                            sub.swap(0, 1);
                        }
                        item(&mut out, &sub, base + 4);
                    }
                }
                out.push_str("execution:\n  - groups:\n      - id: \"1\"\n        tasks: [\"1\"]\n");
                (out, ids)
            })
        })
    }

    proptest! {
        #[test]
        fn only_status_lines_change((text, ids) in plan(), pick in prop::collection::vec(prop::bool::ANY, 12)) {
            let chosen: Vec<&str> = ids.iter().zip(pick.iter().cycle()).filter(|(_, p)| **p).map(|(i, _)| i.as_str()).collect();
            let m = mark_done(&text, &chosen).unwrap();
            prop_assert!(!m.rerendered, "re-rendered:\n{}", text);
            let without_status = |t: &str| t.lines().filter(|l| !l.trim_start_matches([' ', '-']).starts_with("status:")).map(str::to_string).collect::<Vec<_>>();
            prop_assert_eq!(without_status(&m.yaml), without_status(&text));
            let plan = TaskPlan::from_yaml(&m.yaml).unwrap();
            for id in &chosen {
                prop_assert_eq!(plan.status_of(id), Some("done"), "{}\n{}", id, m.yaml);
            }
        }
    }
}
