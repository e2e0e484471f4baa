//! The Lead's view of a task plan: which groups exist, which tasks each group
//! holds, which files it owns, and what each task depends on. The driver builds
//! it from a validated tasks.yaml; the machine schedules Builders from it and
//! never sees YAML.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// A task id as written in tasks.yaml (`1.2`).
pub type TaskId = String;

/// One schedulable unit of tasks.yaml: a subtask (or a task without subtasks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanTask {
    /// Its id.
    pub id: TaskId,
    /// One line of what it is.
    pub summary: String,
    /// Ids of the tasks that must be done first.
    pub depends: Vec<TaskId>,
    /// Already `done` in tasks.yaml (or completed on the board).
    pub done: bool,
}

/// One Builder's work: the tasks of a group and the files it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanGroup {
    /// The group id from tasks.yaml (`G1`).
    pub id: String,
    /// The wave it belongs to, 1-based.
    pub wave: u32,
    /// Its task ids, in plan order.
    pub tasks: Vec<TaskId>,
    /// The files (or globs) only this group's Builder may write.
    pub files: Vec<String>,
    /// The files its Builder reported in an earlier run, once the group had
    /// passed its gate (the store keeps them, so a resumed run still knows
    /// every file the implementation created).
    #[serde(default)]
    pub reported_files: Vec<String>,
}

/// A validated plan, as the Lead schedules it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildPlan {
    /// Every task, in plan order.
    pub tasks: Vec<PlanTask>,
    /// Every group, in wave order.
    pub groups: Vec<PlanGroup>,
}

impl BuildPlan {
    /// The task with this id.
    pub fn task(&self, id: &str) -> Option<&PlanTask> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// How many waves the plan has.
    pub fn wave_count(&self) -> u32 {
        self.groups.iter().map(|g| g.wave).max().unwrap_or(0)
    }

    /// The ids of tasks already done.
    pub fn done_ids(&self) -> BTreeSet<TaskId> {
        self.tasks.iter().filter(|t| t.done).map(|t| t.id.clone()).collect()
    }
}
