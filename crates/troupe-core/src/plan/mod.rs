//! `tasks.yaml`: the TaskGenerator's plan of a feature (seed 000), its
//! validation, its waves, and the Lead's one right over it (marking work `done`).
//!
//! # The format
//!
//! ```yaml
//! tasks:
//!   - id: "1"
//!     summary: Session model
//!     status: pending
//!     subtasks:
//!       - id: "1.1"
//!         p: true              # may run in parallel with its siblings
//!         summary: Session struct and store
//!         details: Keyed by token; expires after 24h.
//!         depends: []
//!         status: pending
//!       - id: "1.2"
//!         summary: Login handler
//!         depends: ["1.1"]
//!         status: pending
//! execution:                   # optional; computed from `depends` when absent
//!   - wave: 1
//!     groups:
//!       - id: G1               # one group = one Builder and the files it owns
//!         tasks: ["1.1"]
//!         files: [src/session.rs]
//!   - wave: 2
//!     groups:
//!       - id: G2
//!         tasks: ["1.2"]
//!         files: [src/login.rs]
//! ```
//!
//! **Work items.** The unit of work is a subtask; a task without subtasks is its
//! own work item. Ids are strings (`1.1` written without quotes is read as the
//! text `1.1`) and are unique across tasks and subtasks together.
//!
//! **`depends` and group `tasks` take subtask ids or task ids.** A task id stands
//! for all of that task's work items. A task may carry its own `depends`, which
//! applies to each of its subtasks.
//!
//! **Waves run in order**; the groups of one wave run in parallel, each as one
//! Builder that owns its `files`. See [`schedule`] for how waves are computed
//! when `execution` is absent, and [`validate`] for what is checked.
//!
//! # Usage
//!
//! ```
//! use troupe_core::plan::{TaskPlan, mark_done};
//!
//! let text = "tasks:\n  - id: '1'\n    summary: A\n    status: pending\n    subtasks:\n      - id: '1.1'\n        summary: a\n        status: pending\n      - id: '1.2'\n        summary: b\n        depends: ['1.1']\n        status: pending\n";
//! let plan = TaskPlan::from_yaml(text).unwrap();
//! let schedule = plan.validate().unwrap();
//! assert_eq!(schedule.waves.len(), 2);
//! assert_eq!(schedule.waves[1].groups[0].tasks, ["1.2"]);
//!
//! // The Lead marks work done; everything else in the file stays as it was.
//! let marked = mark_done(text, &["1.1", "1.2"]).unwrap();
//! assert_eq!(marked.changed, ["1.1", "1.2", "1"]);
//! assert!(TaskPlan::from_yaml(&marked.yaml).unwrap().tasks[0].is_done());
//! ```

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

mod analysis;
mod mark;
pub mod schedule;
mod subset;
pub mod validate;

use analysis::Analysis;
pub use mark::{MarkDoneError, MarkedDone, mark_done};
pub use schedule::{Group, Schedule, ScheduleSource, Wave};
pub use validate::{PlanError, ValidationErrors};

/// The board id of work item `item` of `feature` (`login/1.2`): the id the
/// board, the gateway's tools and the role prompts all use.
pub fn board_id(feature: &str, item: &str) -> String {
    // Built by hand: a plan of 100,000 work items makes half a million of them.
    let mut id = String::with_capacity(feature.len() + 1 + item.len());
    id.push_str(feature);
    id.push('/');
    id.push_str(item);
    id
}

/// The status that marks work finished. Other values (`pending`,
/// `in_progress`, ...) are kept as written.
pub const DONE: &str = "done";

/// The contents of one `tasks.yaml`, read-only. Keys troupe does not know are
/// ignored here and kept by [`mark_done`], which edits the text itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskPlan {
    /// The tasks, in the order they were written.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The TaskGenerator's waves, when it wrote them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Execution>,
}

/// One task: a summary and the subtasks that implement it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique among tasks and subtasks.
    #[serde(deserialize_with = "de_id")]
    pub id: String,
    /// One line on what the task achieves.
    #[serde(default, deserialize_with = "de_text")]
    pub summary: String,
    /// `pending`, `done`, ...; absent means `pending`.
    #[serde(default = "pending", deserialize_with = "de_text")]
    pub status: String,
    /// Dependencies of every subtask of this task (an extension of the seed's format).
    #[serde(default, deserialize_with = "de_ids", skip_serializing_if = "Vec::is_empty")]
    pub depends: Vec<String>,
    /// The work items; a task without subtasks is a work item itself.
    #[serde(default)]
    pub subtasks: Vec<Subtask>,
}

/// One subtask: the unit a Builder implements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subtask {
    /// Unique among tasks and subtasks.
    #[serde(deserialize_with = "de_id")]
    pub id: String,
    /// Parallel flag: may run in a Builder of its own, beside its siblings.
    #[serde(default)]
    pub p: bool,
    /// One line on what to build.
    #[serde(default, deserialize_with = "de_text")]
    pub summary: String,
    /// What the Builder needs to know; a list in the file is joined with newlines.
    #[serde(default, deserialize_with = "de_text")]
    pub details: String,
    /// Ids (subtask or task) that must be done first.
    #[serde(default, deserialize_with = "de_ids")]
    pub depends: Vec<String>,
    /// `pending`, `done`, ...; absent means `pending`.
    #[serde(default = "pending", deserialize_with = "de_text")]
    pub status: String,
}

/// The `execution:` section: waves in the order they run. Written either as a
/// list of waves or as a mapping with a `waves:` list.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Execution {
    /// The waves, first to run first.
    pub waves: Vec<ExecutionWave>,
}

/// One declared wave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionWave {
    /// The wave's number as written; must be its position (1, 2, ...) when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u32>,
    /// The groups that run in parallel in this wave.
    #[serde(default)]
    pub groups: Vec<ExecutionGroup>,
}

/// One declared group: the work one Builder does and the files it owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionGroup {
    /// Unique among groups.
    #[serde(deserialize_with = "de_id")]
    pub id: String,
    /// Subtask or task ids.
    #[serde(default, deserialize_with = "de_ids")]
    pub tasks: Vec<String>,
    /// Paths relative to the project root; an entry ending in `/` owns everything below it.
    #[serde(default, deserialize_with = "de_ids")]
    pub files: Vec<String>,
}

/// `tasks.yaml` text that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}{}", location.map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default())]
pub struct PlanParseError {
    /// What the YAML parser said.
    pub message: String,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
}

/// A work item as the Lead schedules it: a subtask, or a task without
/// subtasks, with its dependencies resolved to work item ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkItem {
    /// The subtask's id (or the task's, for a task without subtasks).
    pub id: String,
    /// The id of the task it belongs to (itself for a task without subtasks).
    pub task: String,
    /// One line on what to build.
    pub summary: String,
    /// What the Builder needs to know.
    pub details: String,
    /// The `p` flag.
    pub parallel: bool,
    /// Work item ids it depends on: task ids expanded, the task's own
    /// `depends` included, duplicates and unknown ids dropped.
    pub depends: Vec<String>,
    /// Whether its status is `done`.
    pub done: bool,
}

/// A [`WorkItem`] borrowed from its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItemRef<'a> {
    /// The subtask's id (or the task's, for a task without subtasks).
    pub id: &'a str,
    /// The id of the task it belongs to.
    pub task: &'a str,
    /// One line on what to build.
    pub summary: &'a str,
    /// What the Builder needs to know.
    pub details: &'a str,
    /// The `p` flag.
    pub parallel: bool,
    /// Work item ids it depends on, as in [`WorkItem::depends`].
    pub depends: Vec<&'a str>,
    /// Whether its status is `done`.
    pub done: bool,
}

impl WorkItemRef<'_> {
    /// The owned [`WorkItem`].
    pub fn into_owned(self) -> WorkItem {
        WorkItem {
            id: self.id.to_string(),
            task: self.task.to_string(),
            summary: self.summary.to_string(),
            details: self.details.to_string(),
            parallel: self.parallel,
            depends: self.depends.iter().map(|d| d.to_string()).collect(),
            done: self.done,
        }
    }
}

/// A work item as the rest of the module sees it: a subtask, or a task
/// without subtasks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item<'a> {
    pub id: &'a str,
    /// The task it belongs to (itself for a task without subtasks).
    pub task: &'a str,
    pub parallel: bool,
    pub status: &'a str,
    pub summary: &'a str,
    /// Empty for a task without subtasks.
    pub details: &'a str,
    /// Its own `depends` followed by its task's.
    pub depends: (&'a [String], &'a [String]),
}

impl TaskPlan {
    /// Parse `tasks.yaml` text. Errors carry the line and column.
    pub fn from_yaml(text: &str) -> Result<TaskPlan, PlanParseError> {
        // An empty file is `null` to YAML, not an empty mapping.
        if text.trim().is_empty() {
            return Ok(TaskPlan::default());
        }
        // The common block style without a YAML event per scalar; anything
        // else, and every error, from the YAML parser.
        if let Some(plan) = subset::read(text) {
            return Ok(plan);
        }
        yaml_serde::from_str(text).map_err(|e| PlanParseError {
            message: e.to_string().split(" at line ").next().unwrap_or_default().to_string(),
            location: e.location().map(|l| (l.line(), l.column())),
        })
    }

    /// Check the plan and return its waves: the declared ones, or ones computed
    /// from `depends`. Every problem is reported, not just the first.
    pub fn validate(&self) -> Result<Schedule, ValidationErrors> {
        self.check().map(|c| c.schedule)
    }

    /// [`TaskPlan::validate`], keeping what the validation worked out about
    /// the work items: a caller that needs both the waves and the work items
    /// (the board import) does not compute the work items a second time.
    pub fn check(&self) -> Result<Checked<'_>, ValidationErrors> {
        validate::check(self)
    }

    /// The task or subtask with this id, if any.
    pub fn status_of(&self, id: &str) -> Option<&str> {
        self.tasks.iter().find_map(|t| {
            if t.id == id {
                return Some(t.status.as_str());
            }
            t.subtasks.iter().find(|s| s.id == id).map(|s| s.status.as_str())
        })
    }

    /// The ids of work items (subtasks, or tasks without subtasks) whose
    /// status is `done`, in plan order.
    pub fn done_items(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for t in &self.tasks {
            if t.subtasks.is_empty() && t.is_done() {
                out.push(t.id.as_str());
            }
            out.extend(t.subtasks.iter().filter(|s| s.is_done()).map(|s| s.id.as_str()));
        }
        out
    }

    /// Every work item in plan order, with dependencies resolved. Meant for a
    /// plan that [`TaskPlan::validate`] accepted.
    pub fn work_items(&self) -> Vec<WorkItem> {
        self.work_item_refs().into_iter().map(WorkItemRef::into_owned).collect()
    }

    /// [`TaskPlan::work_items`] borrowed from the plan, without copying its
    /// texts. [`Checked::work_items`] gives the same without resolving the
    /// dependencies again.
    pub fn work_item_refs(&self) -> Vec<WorkItemRef<'_>> {
        Analysis::of(self, &mut Vec::new()).work_item_refs().collect()
    }
}

/// A plan [`TaskPlan::check`] accepted: its waves, and its work items as the
/// validation resolved them.
pub struct Checked<'a> {
    /// The waves, as [`TaskPlan::validate`] returns them.
    pub schedule: Schedule,
    analysis: Analysis<'a>,
}

impl<'a> Checked<'a> {
    /// Every work item in plan order, as [`TaskPlan::work_item_refs`] lists them.
    pub fn work_items(&self) -> impl ExactSizeIterator<Item = WorkItemRef<'a>> + '_ {
        self.analysis.work_item_refs()
    }
}

impl fmt::Debug for Checked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checked")
            .field("schedule", &self.schedule)
            .field("work_items", &self.analysis.items.len())
            .finish()
    }
}

impl Task {
    /// Whether the task's status is `done`.
    pub fn is_done(&self) -> bool {
        self.status == DONE
    }
}

impl Subtask {
    /// Whether the subtask's status is `done`.
    pub fn is_done(&self) -> bool {
        self.status == DONE
    }
}

fn pending() -> String {
    "pending".to_string()
}

impl<'de> Deserialize<'de> for Execution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Execution;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of waves, or a mapping with a `waves` list")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Execution, E> {
                Ok(Execution::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Execution, A::Error> {
                let mut waves = Vec::new();
                while let Some(w) = seq.next_element()? {
                    waves.push(w);
                }
                Ok(Execution { waves })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Execution, A::Error> {
                let mut waves = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "waves" {
                        waves = map.next_value()?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Execution { waves })
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar read as text: `1.1`, `2` and `"G1"` are all ids.
struct ScalarText;

impl<'de> Visitor<'de> for ScalarText {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or a number")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(format!("{v:?}"))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }
}

fn de_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let id = d.deserialize_any(ScalarText)?;
    if id.trim().is_empty() {
        return Err(de::Error::custom("an id is empty"));
    }
    Ok(id)
}

/// Text fields: a scalar, null (empty), or a list of lines.
fn de_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("text or a list of lines")
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            ScalarText.visit_str(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            ScalarText.visit_i64(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            ScalarText.visit_u64(v)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            ScalarText.visit_f64(v)
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            ScalarText.visit_bool(v)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
            let mut lines = Vec::new();
            while let Some(line) = seq.next_element::<Text>()? {
                lines.push(line.0);
            }
            Ok(lines.join("\n"))
        }
    }
    d.deserialize_any(V)
}

/// One element of a list of lines.
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarText).map(Text)
    }
}

/// A list of ids; a single id and null are accepted too.
fn de_ids<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of ids")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<String>, E> {
            Ok(vec![format!("{v:?}")])
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut ids = Vec::new();
            while let Some(id) = seq.next_element::<Text>()? {
                ids.push(id.0);
            }
            Ok(ids)
        }
    }
    d.deserialize_any(V)
}

#[cfg(test)]
mod tests;
