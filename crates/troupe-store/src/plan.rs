//! Loading a feature's validated task plan (tasks.yaml) onto the board.
//!
//! Work items (subtasks, or tasks without subtasks) become board tasks with id
//! `<feature>/<item>`; `depends` becomes `blocked_by`; a work item's execution
//! group gives it a wave, a group and the group's files. The board remembers
//! what it imported, so importing the same plan again changes nothing and a
//! changed plan is refused with what changed, never merged silently.

use serde::Serialize;
use troupe_core::plan::{Schedule, TaskPlan};

use crate::task::NewTask;

/// A plan converted for the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTasks {
    /// The feature.
    pub feature: String,
    /// One task per work item, in plan order.
    pub tasks: Vec<NewTask>,
    /// Board ids of the work items tasks.yaml already marks `done`; on first
    /// import they are created completed.
    pub done: Vec<String>,
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ImportOutcome {
    /// The plan was new to the board.
    Imported {
        /// Tasks created.
        created: usize,
        /// Of those, created completed (done in tasks.yaml).
        completed: usize,
    },
    /// The board already had exactly this plan.
    Unchanged,
}

pub use troupe_core::plan::board_id;

/// Convert a plan that `schedule` was validated from into board tasks created by `by`.
pub fn plan_tasks(feature: &str, plan: &TaskPlan, schedule: &Schedule, by: &str) -> PlanTasks {
    let mut tasks = Vec::new();
    let mut done = Vec::new();
    let placements = schedule.placements();
    for item in plan.work_items() {
        let id = board_id(feature, &item.id);
        let group = placements.get(item.id.as_str()).copied();
        if item.done {
            done.push(id.clone());
        }
        tasks.push(NewTask {
            id: Some(id),
            subject: if item.summary.trim().is_empty() { item.id.clone() } else { item.summary },
            description: item.details,
            created_by: by.to_string(),
            blocked_by: item.depends.iter().map(|d| board_id(feature, d)).collect(),
            feature: Some(feature.to_string()),
            wave: group.map(|(wave, _)| u32::try_from(wave).unwrap_or(u32::MAX)),
            group: group.map(|(_, g)| g.id.clone()),
            files: group.map(|(_, g)| g.files.clone()).unwrap_or_default(),
        });
    }
    PlanTasks { feature: feature.to_string(), tasks, done }
}

/// The part of a task the plan defines, for comparing plans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct Snapshot {
    pub id: String,
    pub subject: String,
    pub description: String,
    pub blocked_by: Vec<String>,
    pub wave: Option<u32>,
    pub group: Option<String>,
    pub files: Vec<String>,
}

impl Snapshot {
    pub(crate) fn of_new(t: &NewTask) -> Snapshot {
        Snapshot {
            id: t.id.clone().unwrap_or_default(),
            subject: t.subject.trim().to_string(),
            description: t.description.clone(),
            blocked_by: t.blocked_by.clone(),
            wave: t.wave,
            group: t.group.clone(),
            files: t.files.clone(),
        }
    }

    pub(crate) fn of_task(t: &crate::task::Task) -> Snapshot {
        Snapshot {
            id: t.id.clone(),
            subject: t.subject.clone(),
            description: t.description.clone(),
            blocked_by: t.blocked_by.clone(),
            wave: t.wave,
            group: t.group.clone(),
            files: t.files.clone(),
        }
    }
}

/// A [`Snapshot`] of a new task borrowed from it: serialised to the same
/// text, without copying every field of every task first (a plan of 100,000
/// tasks is compared and remembered by this text).
#[derive(Serialize)]
pub(crate) struct SnapshotRef<'a> {
    id: &'a str,
    subject: &'a str,
    description: &'a str,
    blocked_by: &'a [String],
    wave: Option<u32>,
    group: Option<&'a str>,
    files: &'a [String],
}

impl<'a> SnapshotRef<'a> {
    pub(crate) fn of_new(t: &'a NewTask) -> SnapshotRef<'a> {
        SnapshotRef {
            id: t.id.as_deref().unwrap_or_default(),
            subject: t.subject.trim(),
            description: &t.description,
            blocked_by: &t.blocked_by,
            wave: t.wave,
            group: t.group.as_deref(),
            files: &t.files,
        }
    }
}

/// What differs between two versions of a plan, one line per task.
pub(crate) fn diff(old: &[Snapshot], new: &[Snapshot]) -> Vec<String> {
    let mut changes = Vec::new();
    let old_by_id: std::collections::HashMap<&str, &Snapshot> = old.iter().map(|o| (o.id.as_str(), o)).rev().collect();
    let new_ids: std::collections::HashSet<&str> = new.iter().map(|n| n.id.as_str()).collect();
    for n in new {
        match old_by_id.get(n.id.as_str()).copied() {
            None => changes.push(format!("{} is new", n.id)),
            Some(o) if o != n => {
                let mut what = Vec::new();
                if o.subject != n.subject {
                    what.push("summary");
                }
                if o.description != n.description {
                    what.push("details");
                }
                if o.blocked_by != n.blocked_by {
                    what.push("depends");
                }
                if (o.wave, &o.group) != (n.wave, &n.group) {
                    what.push("wave or group");
                }
                if o.files != n.files {
                    what.push("files");
                }
                changes.push(format!("{} changed its {}", n.id, what.join(", ")));
            }
            Some(_) => {}
        }
    }
    for o in old {
        if !new_ids.contains(o.id.as_str()) {
            changes.push(format!("{} was removed", o.id));
        }
    }
    changes
}

/// A short, stable fingerprint of a snapshot text (FNV-1a, 64 bits), to show
/// which version of a plan the board holds.
pub(crate) fn digest(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "tasks:
  - id: '1'
    summary: Model
    status: pending
    subtasks:
      - id: '1.1'
        summary: Session struct
        details: keyed by token
        status: done
      - id: '1.2'
        summary: Login handler
        depends: ['1.1']
        status: pending
  - id: '2'
    summary: Docs
    depends: ['1']
    status: pending
execution:
  - wave: 1
    groups:
      - id: G1
        tasks: ['1.1']
        files: [src/session.rs]
  - wave: 2
    groups:
      - id: G2
        tasks: ['1.2', '2']
        files: [src/login.rs, README.md]
";

    #[test]
    fn work_items_become_tasks() {
        let plan = TaskPlan::from_yaml(PLAN).unwrap();
        let schedule = plan.validate().unwrap();
        let p = plan_tasks("login", &plan, &schedule, "lead");
        let ids: Vec<_> = p.tasks.iter().map(|t| t.id.clone().unwrap()).collect();
        assert_eq!(ids, ["login/1.1", "login/1.2", "login/2"]);
        assert_eq!(p.done, ["login/1.1"]);
        let t = &p.tasks[0];
        assert_eq!((t.subject.as_str(), t.description.as_str()), ("Session struct", "keyed by token"));
        assert_eq!((t.wave, t.group.as_deref()), (Some(1), Some("G1")));
        assert_eq!(t.files, ["src/session.rs"]);
        assert_eq!(p.tasks[1].blocked_by, ["login/1.1"]);
        assert_eq!(p.tasks[2].blocked_by, ["login/1.1", "login/1.2"]);
        assert_eq!(p.tasks[2].files, ["src/login.rs", "README.md"]);
    }

    #[test]
    fn a_borrowed_snapshot_reads_as_the_owned_one() {
        let plan = TaskPlan::from_yaml(PLAN).unwrap();
        let p = plan_tasks("login", &plan, &plan.validate().unwrap(), "lead");
        let owned: Vec<Snapshot> = p.tasks.iter().map(Snapshot::of_new).collect();
        let borrowed: Vec<SnapshotRef> = p.tasks.iter().map(SnapshotRef::of_new).collect();
        assert_eq!(serde_json::to_string(&borrowed).unwrap(), serde_json::to_string(&owned).unwrap());
    }

    #[test]
    fn diff_names_each_change() {
        let snap = |id: &str, subject: &str, deps: &[&str]| Snapshot {
            id: id.into(),
            subject: subject.into(),
            description: String::new(),
            blocked_by: deps.iter().map(|d| d.to_string()).collect(),
            wave: None,
            group: None,
            files: vec![],
        };
        let old = [snap("a", "A", &[]), snap("b", "B", &["a"]), snap("c", "C", &[])];
        let new = [snap("a", "A", &[]), snap("b", "B2", &[]), snap("d", "D", &[])];
        assert_eq!(diff(&old, &new), ["b changed its summary, depends", "d is new", "c was removed"]);
        assert!(diff(&old, &old).is_empty());
        assert_ne!(digest("x"), digest("y"));
    }
}
