use proptest::prelude::*;
use serde::Deserialize;

use super::{parse, read};
use crate::plan::TaskPlan;

/// What the YAML parser makes of `text`.
fn yaml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, yaml_serde::Error> {
    yaml_serde::from_str(text)
}

/// Read by the subset, and the same as the YAML parser reads it.
fn same(text: &str) -> TaskPlan {
    let fast = read(text).unwrap_or_else(|| panic!("left to the YAML parser:\n{text}"));
    assert_eq!(fast, yaml::<TaskPlan>(text).unwrap(), "{text}");
    fast
}

#[test]
fn the_common_styles_are_read_as_the_yaml_parser_reads_them() {
    let plan = same(
        "# a plan\ntasks:\n  - id: \"1\"\n    summary: Session model   # why\n    status: pending\n    depends: []\n    \
         subtasks:\n      - id: '1.1'\n        p: true\n        summary: \"say \\\"hi\\\"\\n\"\n        details: [write the test, \
         'make it pass', \"x\"]\n\n      - id: 1.2\n        details:\n        - 'one: two'\n        - 007\n        \
         depends: [\"1.1\"]\n        status: done\n  - id: 2\n    summary: it's http://x and a#b\nexecution:\n- wave: 1\n  \
         groups:\n    - id: G1\n      tasks: [\"1.1\", 1.2, 2]\n      files: [src/a.rs, docs/]\n",
    );
    let sub = &plan.tasks[0].subtasks;
    assert_eq!(sub[0].summary, "say \"hi\"\n");
    assert_eq!(sub[0].details, "write the test\nmake it pass\nx");
    assert_eq!(plan.tasks[0].summary, "Session model");
    assert_eq!((sub[1].id.as_str(), sub[1].status.as_str()), ("1.2", "done"));
    assert_eq!(plan.tasks[1].summary, "it's http://x and a#b");
    assert_eq!(plan.execution.unwrap().waves[0].groups[0].tasks, ["1.1", "1.2", "2"]);
    // Numbers are read as the YAML parser types them: `1.10` is the float 1.1.
    assert_eq!(same("tasks:\n- id: 1.10\n- id: 007\n- id: 0\n").tasks[0].id, "1.1");
    // Empty values: an empty list, an empty text, the default status.
    let empty = same("tasks:\n  - id: a\n    subtasks:\n    summary:\n    status: ~\n");
    assert_eq!((empty.tasks[0].subtasks.len(), empty.tasks[0].status.as_str()), (0, ""));
}

#[test]
fn what_is_outside_the_subset_is_left_to_the_yaml_parser() {
    for text in [
        "tasks:\n  - id: &a x\n",
        "tasks:\n  - id: a\n    details: |\n      text\n",
        "tasks:\n  - id: a\n    summary: one\n      two\n",
        "tasks:\n  - {id: a}\n",
        "tasks:\n\t- id: a\n",
        "---\ntasks: []\n",
        "tasks:\n  - id: a\n    depends: [b,]\n",
        "tasks:\n  - id: 1e3\n",
        "tasks:\n  - id: a\n    id: b\n",
        "tasks:\n  - id: a\n    summary: a: b\n",
        "tasks:\n  - id: a\n    depends: [b #c]\n",
        "tasks:\r\n  - id: a\r\n",
        "tasks:\n  - id: \"a\\u0041\"\n",
        "tasks:\n  - id: a\n    subtasks:\n      - id: b\n        p: yes\n",
    ] {
        assert_eq!(read(text), None, "{text:?}");
    }
}

/// Scalars as written, many of them tricky for a YAML reader.
const SCALARS: &[&str] = &[
    "abc",
    "part 7",
    "1",
    "1.1",
    "1.10",
    "007",
    "0",
    "00.5",
    "true",
    "False",
    "no",
    "null",
    "~",
    "",
    "http://x",
    "a:b",
    "a: b",
    "b:",
    "x #c",
    "x#c",
    "-1",
    "+1",
    ".5",
    "1e3",
    "0x1f",
    "a, b",
    "[a]",
    "it's",
    "&a",
    "*a",
    "!t x",
    "|",
    ">",
    "é",
    "123456789012345678901234",
    "@x",
    "a]",
    "a{b}",
    "- x",
    "-",
    "? x",
    ": x",
    "inf",
    ".inf",
    "nan",
    "\"a b\"",
    "\"x\\ny\"",
    "\"\\u0041\"",
    "\"\\q\"",
    "'it''s'",
    "''",
    "\"\"",
    "\"a\" b",
    "'open",
    "\"a\" # c",
    "[]",
    "[ ]",
    "[a, b]",
    "[\"1.1\", '2']",
    "[a, [b]]",
    "[a,]",
    "[a b, c:d]",
    "[ a ,b ]",
    "[a #c]",
    "[1, 1.5, 007]",
    "{a: b}",
    "[a",
    "[true, ~, null]",
    "[,a]",
    "# only",
    "a  b",
];

/// Keys: the plan's own and some no plan has.
const KEYS: &[&str] = &[
    "id",
    "summary",
    "details",
    "depends",
    "status",
    "p",
    "subtasks",
    "tasks",
    "execution",
    "wave",
    "waves",
    "groups",
    "files",
    "x-y",
    "null",
    "true",
    "a b",
    "\"q\"",
    "1",
    "_k",
];

/// A small random YAML document built from `choices`, in block style with
/// varied indentation, so that most lines are in the subset and some not.
fn document(choices: &[u16]) -> String {
    let mut next = choices.iter().copied().cycle();
    let mut pick = move |n: usize| usize::from(next.next().unwrap_or(0)) % n;
    let mut out = String::new();
    block(&mut pick, &mut out, 0, 0);
    out
}

fn block(pick: &mut impl FnMut(usize) -> usize, out: &mut String, indent: usize, depth: usize) {
    let pad = " ".repeat(indent);
    let seq = pick(3) == 0;
    for _ in 0..1 + pick(3) {
        let (lead, inner) =
            if seq { (format!("{pad}-{}", " ".repeat(1 + pick(2))), indent + 2) } else { (pad.clone(), indent) };
        if seq && pick(2) == 0 {
            out.push_str(&format!("{lead}{}\n", SCALARS[pick(SCALARS.len())]));
            continue;
        }
        // A mapping (in a sequence item, its first key on the dash's line).
        let column = if seq { lead.len() } else { inner };
        for k in 0..1 + pick(3) {
            let at = if k == 0 { lead.clone() } else { " ".repeat(column) };
            let key = KEYS[pick(KEYS.len())];
            if depth < 3 && pick(3) == 0 {
                out.push_str(&format!("{at}{key}:{}\n", ["", " # c", " "][pick(3)]));
                let child = column + [2, 0, 4, 1][pick(4)];
                block(pick, out, child, depth + 1);
            } else {
                out.push_str(&format!("{at}{key}: {}\n", SCALARS[pick(SCALARS.len())]));
            }
            if pick(8) == 0 {
                out.push_str(["\n", "  # note\n", "   \n"][pick(3)]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Whatever the subset reads, the YAML parser reads the same: as a YAML
    /// value (every node, every scalar's type) and as a plan.
    #[test]
    fn the_subset_reads_what_the_yaml_parser_reads(choices in prop::collection::vec(any::<u16>(), 1..64)) {
        let text = document(&choices);
        if let Some(Ok(value)) = parse(&text).map(yaml_serde::Value::deserialize) {
            prop_assert_eq!(Some(value), yaml::<yaml_serde::Value>(&text).ok(), "{}", text);
        }
        if let Some(plan) = read(&text) {
            prop_assert_eq!(Some(plan), yaml::<TaskPlan>(&text).ok(), "{}", text);
        }
    }
}

/// The property above is not empty: a good share of the documents it draws
/// are in the subset, and a good share are not.
#[test]
fn the_drawn_documents_are_often_in_the_subset_and_often_not() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut read_some = 0;
    for _ in 0..500 {
        let choices: Vec<u16> = (0..48)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u16
            })
            .collect();
        read_some += usize::from(parse(&document(&choices)).is_some());
    }
    assert!((50..450).contains(&read_some), "{read_some} of 500 in the subset");
}
