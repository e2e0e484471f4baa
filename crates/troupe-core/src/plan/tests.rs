use super::*;

/// Render a validation outcome compactly: `1: G1[1.1 1.2](a.rs) | 2: ...` or the errors, one per line.
fn render(text: &str) -> String {
    let plan = match TaskPlan::from_yaml(text) {
        Ok(p) => p,
        Err(e) => return format!("parse: {e}"),
    };
    match plan.validate() {
        Ok(s) => s
            .waves
            .iter()
            .map(|w| {
                let groups: Vec<String> = w
                    .groups
                    .iter()
                    .map(|g| {
                        let files = if g.files.is_empty() { String::new() } else { format!("({})", g.files.join(" ")) };
                        format!("{}[{}]{files}", g.id, g.tasks.join(" "))
                    })
                    .collect();
                format!("{}: {}", w.number, groups.join(" "))
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Err(e) => e.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"),
    }
}

#[track_caller]
fn check(text: &str, expected: &str) {
    let got = render(text);
    assert_eq!(got, expected.trim(), "\n--- input ---\n{text}");
}

/// A plan from a compact notation: `task: sub[deps] sub*[deps]; task2: ...`
/// (`*` = p: true), plus an optional execution section in YAML.
fn plan(spec: &str, execution: &str) -> String {
    let mut out = String::from("tasks:\n");
    for task in spec.split(';').map(str::trim).filter(|t| !t.is_empty()) {
        let (id, subs) = task.split_once(':').unwrap_or((task, ""));
        out += &format!("  - id: \"{}\"\n    summary: task {0}\n    status: pending\n", id.trim());
        let subs: Vec<&str> = subs.split_whitespace().collect();
        if !subs.is_empty() {
            out += "    subtasks:\n";
        }
        for sub in subs {
            let (name, deps) = sub.split_once('[').unwrap_or((sub, "]"));
            let deps = deps.trim_end_matches(']');
            let (name, p) = name.strip_suffix('*').map_or((name, false), |n| (n, true));
            let deps: Vec<String> = deps.split(',').filter(|d| !d.is_empty()).map(|d| format!("\"{d}\"")).collect();
            out += &format!(
                "      - id: \"{name}\"\n        p: {p}\n        summary: do {name}\n        depends: [{}]\n        status: pending\n",
                deps.join(", ")
            );
        }
    }
    if !execution.is_empty() {
        out += "execution:\n";
        out += execution;
    }
    out
}

#[test]
fn computed_waves() {
    check(&plan("1: 1.1 1.2", ""), "1: W1-1[1.1 1.2]");
    check(&plan("1: 1.1 1.2[1.1]", ""), "1: W1-1[1.1] | 2: W2-1[1.2]");
    check(&plan("1: 1.1* 1.2*", ""), "1: W1-1.1[1.1] W1-1.2[1.2]");
    check(&plan("1: 1.1 1.2* 1.3", ""), "1: W1-1[1.1 1.3] W1-1.2[1.2]");
    check(&plan("1: 1.1; 2: 2.1[1]", ""), "1: W1-1[1.1] | 2: W2-2[2.1]");
    check(&plan("1: 1.1 1.2; 2: 2.1[1.2] 2.2", ""), "1: W1-1[1.1 1.2] W1-2[2.2] | 2: W2-2[2.1]");
    check(&plan("1; 2: 2.1[1]", ""), "1: W1-1[1] | 2: W2-2[2.1]");
    check(&plan("1: a b[a] c[b] d[a]", ""), "1: W1-1[a] | 2: W2-1[b d] | 3: W3-1[c]");
}

#[test]
fn dependency_errors() {
    check(&plan("1: 1.1 1.2[9.9]", ""), "1.2 depends on 9.9, which is no task or subtask id");
    check(&plan("1: 1.1[1.2] 1.2[1.1]", ""), "dependency cycle: 1.1 -> 1.2 -> 1.1 (each depends on the next)");
    check(&plan("1: 1.1[1.1]", ""), "dependency cycle: 1.1 -> 1.1 (each depends on the next)");
    check(&plan("1: a[c] b[a] c[b]", ""), "dependency cycle: a -> c -> b -> a (each depends on the next)");
    check(
        &plan("1: a[b] b[a]; 2: c[d] d[c]", ""),
        "dependency cycle: a -> b -> a (each depends on the next)\ndependency cycle: c -> d -> c (each depends on the next)",
    );
    check(&plan("1: 1.1[2]; 2: 2.1[1]", ""), "dependency cycle: 1.1 -> 2.1 -> 1.1 (each depends on the next)");
    check(
        &plan("1: 1.1[x] 1.2[y]", ""),
        "1.1 depends on x, which is no task or subtask id\n1.2 depends on y, which is no task or subtask id",
    );
    check(&plan("1: 1.1 1.1", ""), "id 1.1 is used by 2 tasks or subtasks; ids must be unique");
    check(&plan("1: 1", ""), "id 1 is used by 2 tasks or subtasks; ids must be unique");
    check("tasks: []\n", "the plan has no tasks");
    check("", "the plan has no tasks");
}

const TWO_WAVES: &str = "  - wave: 1\n    groups:\n      - id: G1\n        tasks: [\"1.1\"]\n        files: [src/a.rs]\n      - id: G2\n        tasks: [\"2.1\"]\n        files: [src/b.rs]\n  - wave: 2\n    groups:\n      - id: G3\n        tasks: [\"1.2\"]\n        files: [src/a.rs]\n";

#[test]
fn declared_waves() {
    check(&plan("1: 1.1 1.2[1.1]; 2: 2.1", TWO_WAVES), "1: G1[1.1](src/a.rs) G2[2.1](src/b.rs) | 2: G3[1.2](src/a.rs)");
    // A task id in a group stands for all its subtasks; `waves:` mapping form.
    check(
        &plan("1: 1.1 1.2[1.1]", "  waves:\n    - groups:\n        - id: G\n          tasks: [1]\n"),
        "1: G[1.1 1.2]",
    );
    // Unquoted numeric ids are read as text.
    check(
        "tasks:\n- id: 1\n  subtasks:\n  - id: 1.1\n  - id: 1.2\n    depends: 1.1\nexecution:\n- groups:\n  - {id: A, tasks: [1.1]}\n- groups:\n  - {id: B, tasks: [1.2]}\n",
        "1: A[1.1] | 2: B[1.2]",
    );
}

#[test]
fn declared_wave_errors() {
    let exec = |s: &str| s.replace('\'', "\"");
    check(
        &plan(
            "1: 1.1 1.2",
            &exec("  - groups:\n      - {id: G1, tasks: ['1.1', '1.2']}\n      - {id: G2, tasks: ['1.2']}\n"),
        ),
        "1.2 is in two groups: G1 (wave 1) and G2 (wave 1)",
    );
    check(
        &plan(
            "1: 1.1 1.2",
            &exec("  - groups:\n      - {id: G1, tasks: ['1']}\n  - groups:\n      - {id: G2, tasks: ['1.2']}\n"),
        ),
        "1.2 is in two groups: G1 (wave 1) and G2 (wave 2)",
    );
    check(
        &plan(
            "1: 1.1 1.2",
            &exec(
                "  - groups:\n      - {id: G1, tasks: ['1.1'], files: [src/a.rs]}\n      - {id: G2, tasks: ['1.2'], files: [./src/a.rs]}\n",
            ),
        ),
        "wave 1: groups G1 (1.1) and G2 (1.2) both own src/a.rs",
    );
    check(
        &plan(
            "1: 1.1 1.2",
            &exec(
                "  - groups:\n      - {id: G1, tasks: ['1.1'], files: [src/]}\n      - {id: G2, tasks: ['1.2'], files: [src/x/y.rs]}\n",
            ),
        ),
        "wave 1: groups G1 (1.1) and G2 (1.2) both own src/x/y.rs",
    );
    // Same file in different waves is fine; a prefix that is not a directory is not a collision.
    check(
        &plan(
            "1: 1.1 1.2",
            &exec(
                "  - groups:\n      - {id: G1, tasks: ['1.1'], files: [src/a]}\n      - {id: G2, tasks: ['1.2'], files: [src/ab.rs]}\n",
            ),
        ),
        "1: G1[1.1](src/a) G2[1.2](src/ab.rs)",
    );
    check(
        &plan(
            "1: 1.1 1.2[1.1]",
            &exec("  - groups:\n      - {id: G1, tasks: ['1.1']}\n      - {id: G2, tasks: ['1.2']}\n"),
        ),
        "1.2 (wave 1) depends on 1.1 (wave 1); 1.1 must run in an earlier wave",
    );
    check(
        &plan(
            "1: 1.1 1.2[1.1]",
            &exec("  - groups:\n      - {id: G1, tasks: ['1.2']}\n  - groups:\n      - {id: G2, tasks: ['1.1']}\n"),
        ),
        "1.2 (wave 1) depends on 1.1 (wave 2); 1.1 must run in an earlier wave",
    );
    // Inside one group the Builder does the work in order.
    check(&plan("1: 1.1 1.2[1.1]", &exec("  - groups:\n      - {id: G1, tasks: ['1']}\n")), "1: G1[1.1 1.2]");
    check(
        &plan("1: 1.1 1.2", &exec("  - groups:\n      - {id: G1, tasks: ['1.1', '9']}\n")),
        "group G1 lists 9, which is no task or subtask id\n1.2 is in no group of execution; add it to a group",
    );
    check(
        &plan("1: 1.1 1.2", &exec("  - groups:\n      - {id: G, tasks: ['1.1']}\n      - {id: G, tasks: ['1.2']}\n")),
        "group id G is used more than once",
    );
    check(
        &plan("1: 1.1 1.2", &exec("  - wave: 2\n    groups:\n      - {id: G, tasks: ['1']}\n")),
        "execution wave 1 is numbered 2; number waves 1, 2, 3, ... in the order they run",
    );
}

#[test]
fn every_error_is_reported() {
    let text = plan(
        "1: 1.1[1.2] 1.2[1.1] 1.3[zz]",
        "  - groups:\n      - {id: G1, tasks: [\"1.1\", \"1.3\"], files: [a]}\n      - {id: G2, tasks: [\"1.2\", \"1.3\"], files: [a]}\n",
    );
    check(
        &text,
        "
1.3 depends on zz, which is no task or subtask id
dependency cycle: 1.1 -> 1.2 -> 1.1 (each depends on the next)
1.3 is in two groups: G1 (wave 1) and G2 (wave 1)
wave 1: groups G1 (1.1, 1.3) and G2 (1.2, 1.3) both own a
1.1 (wave 1) depends on 1.2 (wave 1); 1.2 must run in an earlier wave
1.2 (wave 1) depends on 1.1 (wave 1); 1.1 must run in an earlier wave",
    );
}

#[test]
fn parse_errors_have_line_and_column() {
    check("tasks:\n  - id: a\n    subtasks: [\n", "parse: did not find expected node content at line 4, column 1");
    check("tasks:\n  - summary: no id\n", "parse: tasks[0]: missing field `id` at line 2, column 5");
    check(
        "tasks:\n  - id: a\n    subtasks: 3\n",
        "parse: tasks[0].subtasks: invalid type: integer `3`, expected a sequence at line 3, column 15",
    );
    check(
        "tasks:\n  - id: a\n    subtasks:\n      - id: b\n        p: maybe\n",
        "parse: tasks[0].subtasks[0].p: invalid type: string \"maybe\", expected a boolean at line 5, column 12",
    );
    check("tasks: {a: 1}\n", "parse: tasks: invalid type: map, expected a sequence at line 1, column 8");
}

#[test]
fn unknown_fields_are_accepted() {
    check(
        "owner: me\ntasks:\n  - id: a\n    estimate: 3h\n    subtasks:\n      - id: b\n        files: [x]\n",
        "1: W1-a[b]",
    );
}

#[test]
fn ready_groups_follow_done() {
    let text = plan("1: 1.1 1.2[1.1]; 2: 2.1", TWO_WAVES);
    let ready = |text: &str| {
        let plan = TaskPlan::from_yaml(text).unwrap();
        let s = plan.validate().unwrap();
        s.ready_groups(&plan).iter().map(|g| g.id.clone()).collect::<Vec<_>>().join(" ")
    };
    assert_eq!(ready(&text), "G1 G2");
    let text = mark_done(&text, &["1.1"]).unwrap().yaml;
    assert_eq!(ready(&text), "G2 G3");
    let text = mark_done(&text, &["1.2", "2"]).unwrap().yaml;
    assert_eq!(ready(&text), "");
    let plan = TaskPlan::from_yaml(&text).unwrap();
    assert_eq!(plan.done_items(), ["1.1", "1.2", "2.1"]);
    assert_eq!(plan.validate().unwrap().group_of("1.2").map(|(w, g)| (w, g.id.as_str())), Some((2, "G3")));
}

#[test]
fn a_long_chain_is_scheduled_and_placed_in_one_pass() {
    // 20,000 tasks, each depending on the one before, each in a wave of its
    // own: the linear group lookups this replaced made a plan of this size
    // take a minute; placements answer as group_of does.
    let n = 20_000;
    let mut text = String::from("tasks:\n");
    for i in 0..n {
        text.push_str(&format!("  - id: t{i}\n    summary: part {i}\n"));
        if i > 0 {
            text.push_str(&format!("    depends: [t{}]\n", i - 1));
        }
    }
    let plan = TaskPlan::from_yaml(&text).unwrap();
    let schedule = plan.validate().unwrap();
    assert_eq!(schedule.waves.len(), n);
    assert_eq!(schedule.waves[n - 1].groups[0].id, format!("W{n}-t{}", n - 1));
    let placements = schedule.placements();
    assert_eq!(placements.len(), n);
    for id in ["t0", "t1", "t19999"] {
        let (wave, group) = placements[id];
        assert_eq!(Some((wave, group)), schedule.group_of(id), "{id}");
    }
    assert_eq!(plan.work_items()[n - 1].summary, format!("part {}", n - 1));
}

#[test]
fn a_chain_far_deeper_than_the_stack_validates() {
    // The cycle search was a recursive Tarjan: one stack frame per item of a
    // dependency chain. On a 64 KiB stack, 20,000 items would overflow it.
    let n = 20_000;
    let mut text = String::from("tasks:\n");
    for i in 0..n {
        text.push_str(&format!("  - id: t{i}\n    summary: part {i}\n"));
        if i > 0 {
            text.push_str(&format!("    depends: [t{}]\n", i - 1));
        }
    }
    // The last task depends on the first too: one cycle through the whole chain.
    let cyclic = text.replacen(
        "  - id: t0\n    summary: part 0\n",
        &format!("  - id: t0\n    summary: part 0\n    depends: [t{}]\n", n - 1),
        1,
    );
    let plan = TaskPlan::from_yaml(&text).unwrap();
    let cyclic = TaskPlan::from_yaml(&cyclic).unwrap();
    let (ok, err) = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || (plan.validate().is_ok(), cyclic.validate().unwrap_err().to_string()))
        .unwrap()
        .join()
        .unwrap();
    assert!(ok);
    assert!(err.contains("cycle"), "{}", &err[..err.len().min(300)]);
}

#[test]
fn work_items_resolve_dependencies() {
    let text = "tasks:\n  - id: a\n    depends: [c]\n    subtasks:\n      - id: a1\n        summary: first\n        details: [x, y]\n      - id: a2\n        p: true\n        depends: [a1, a1, zz]\n  - id: c\n    summary: alone\n    status: done\n";
    let plan = TaskPlan::from_yaml(text).unwrap();
    let got: Vec<String> = plan
        .work_items()
        .iter()
        .map(|w| {
            format!(
                "{}<{}> {:?} {:?} p={} [{}] done={}",
                w.id,
                w.task,
                w.summary,
                w.details,
                w.parallel,
                w.depends.join(" "),
                w.done
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "a1<a> \"first\" \"x\\ny\" p=false [c] done=false",
            "a2<a> \"\" \"\" p=true [a1 c] done=false",
            "c<c> \"alone\" \"\" p=false [] done=true",
        ]
    );
}

/// A checked plan gives the waves `validate` gives and the work items
/// `work_item_refs` gives, from the one analysis the validation made; a
/// repeated id reads as its first work item in both.
#[test]
fn a_checked_plan_gives_the_same_waves_and_work_items() {
    let text = plan("1: 1.1 1.2[1.1] 1.3*[1.1]; 2: 2.1[1]; 3: 3.1[2,1.3]", "");
    let plan = TaskPlan::from_yaml(&text).unwrap();
    let checked = plan.check().unwrap();
    assert_eq!(checked.schedule, plan.validate().unwrap());
    assert_eq!(checked.work_items().collect::<Vec<_>>(), plan.work_item_refs());
    assert_eq!(checked.work_items().len(), 5);
    let repeated = TaskPlan::from_yaml(
        "tasks:\n  - id: a\n    summary: first\n  - id: a\n    summary: second\n    depends: [b]\n  - id: b\n",
    )
    .unwrap();
    assert!(repeated.check().is_err());
    let items: Vec<(&str, &str, Vec<&str>)> =
        repeated.work_item_refs().into_iter().map(|w| (w.id, w.summary, w.depends)).collect();
    assert_eq!(items, [("a", "first", vec!["b"]), ("a", "first", vec!["b"]), ("b", "", vec![])]);
}

mod marking;

mod properties {
    use proptest::prelude::*;

    use crate::plan::{PlanError, TaskPlan};

    /// `n` subtasks of one task each in a chain of tasks; edges `(a, b)`: a depends on b.
    fn graph() -> impl Strategy<Value = (usize, Vec<(usize, usize)>, Vec<bool>)> {
        (1usize..9).prop_flat_map(|n| {
            (Just(n), prop::collection::vec((0..n, 0..n), 0..12), prop::collection::vec(prop::bool::ANY, n))
        })
    }

    fn yaml(n: usize, edges: &[(usize, usize)], parallel: &[bool]) -> String {
        let mut out = String::from("tasks:\n");
        for t in 0..n.div_ceil(2) {
            out += &format!("  - id: t{t}\n    subtasks:\n");
            for (i, p) in parallel.iter().enumerate().take((2 * t + 2).min(n)).skip(2 * t) {
                let deps: Vec<String> = edges.iter().filter(|e| e.0 == i).map(|e| format!("s{}", e.1)).collect();
                out += &format!("      - id: s{i}\n        p: {p}\n        depends: [{}]\n", deps.join(", "));
            }
        }
        out
    }

    fn reachable(from: usize, to: usize, edges: &[(usize, usize)], n: usize) -> bool {
        let mut seen = vec![false; n];
        let mut stack = vec![from];
        while let Some(v) = stack.pop() {
            for e in edges.iter().filter(|e| e.0 == v) {
                if e.1 == to {
                    return true;
                }
                if !seen[e.1] {
                    seen[e.1] = true;
                    stack.push(e.1);
                }
            }
        }
        false
    }

    proptest! {
        #[test]
        fn computed_waves_respect_dependencies_or_cycles_are_real((n, edges, parallel) in graph()) {
            let text = yaml(n, &edges, &parallel);
            let plan = TaskPlan::from_yaml(&text).unwrap();
            let cyclic = (0..n).any(|i| reachable(i, i, &edges, n));
            match plan.validate() {
                Ok(s) => {
                    prop_assert!(!cyclic, "a cycle went unreported:\n{}", text);
                    let mut wave_of = vec![0; n];
                    for w in &s.waves {
                        for g in &w.groups {
                            for t in &g.tasks {
                                let i: usize = t[1..].parse().unwrap();
                                prop_assert_eq!(wave_of[i], 0, "{} scheduled twice", t);
                                wave_of[i] = w.number;
                            }
                        }
                    }
                    prop_assert!(wave_of.iter().all(|w| *w > 0));
                    for (a, b) in &edges {
                        prop_assert!(wave_of[*b] < wave_of[*a], "s{} runs no later than s{}:\n{}", a, b, text);
                    }
                }
                Err(e) => {
                    prop_assert!(cyclic, "unexpected errors {:?}:\n{}", e.errors, text);
                    for err in &e.errors {
                        let PlanError::Cycle { cycle } = err else {
                            return Err(TestCaseError::fail(format!("not a cycle error: {err}")));
                        };
                        prop_assert_eq!(cycle.first(), cycle.last());
                        for pair in cycle.windows(2) {
                            let a: usize = pair[0][1..].parse().unwrap();
                            let b: usize = pair[1][1..].parse().unwrap();
                            prop_assert!(edges.contains(&(a, b)), "{:?} is not an edge of {:?}", pair, edges);
                        }
                    }
                }
            }
        }
    }
}
