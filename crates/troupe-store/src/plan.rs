//! Loading a feature's validated task plan (tasks.yaml) onto the board.
//!
//! Work items (subtasks, or tasks without subtasks) become board tasks with id
//! `<feature>/<item>`; `depends` becomes `blocked_by`; a work item's execution
//! group gives it a wave, a group and the group's files. The board remembers
//! what it imported, so importing the same plan again changes nothing and a
//! changed plan is refused with what changed, never merged silently.

use std::hash::Hasher as _;

use serde::Serialize;
use troupe_core::hash::Fnv;
use troupe_core::plan::Checked;

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

/// Convert a plan [`troupe_core::plan::TaskPlan::check`] accepted into board tasks created by `by`.
pub fn plan_tasks(feature: &str, checked: &Checked<'_>, by: &str) -> PlanTasks {
    let mut done = Vec::new();
    let placements = checked.schedule.placements();
    let items = checked.work_items();
    let mut tasks = Vec::with_capacity(items.len());
    for item in items {
        let id = board_id(feature, item.id);
        let group = placements.get(item.id).copied();
        if item.done {
            done.push(id.clone());
        }
        tasks.push(NewTask {
            id: Some(id),
            subject: if item.summary.trim().is_empty() { item.id } else { item.summary }.to_string(),
            description: item.details.to_string(),
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

/// The part of a task the plan defines, as the `plans` table remembered it
/// before schema version 15 (JSON text of these); read to compare only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct Snapshot {
    pub id: String,
    pub subject: String,
    pub description: String,
    pub blocked_by: Vec<String>,
    pub wave: Option<u32>,
    pub group: Option<String>,
    pub files: Vec<String>,
}

/// The part of a task the plan defines, borrowed from a new task, a board
/// task or an old snapshot: what plans are compared by.
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

    pub(crate) fn of_task(t: &'a crate::task::Task) -> SnapshotRef<'a> {
        SnapshotRef {
            id: &t.id,
            subject: &t.subject,
            description: &t.description,
            blocked_by: &t.blocked_by,
            wave: t.wave,
            group: t.group.as_deref(),
            files: &t.files,
        }
    }

    pub(crate) fn of_old(s: &'a Snapshot) -> SnapshotRef<'a> {
        SnapshotRef {
            id: &s.id,
            subject: &s.subject,
            description: &s.description,
            blocked_by: &s.blocked_by,
            wave: s.wave,
            group: s.group.as_deref(),
            files: &s.files,
        }
    }

    /// A digest of each field a plan change is named by (summary, details,
    /// depends, wave or group, files), each over a length-prefixed encoding so
    /// that no two different values read the same.
    fn fields(&self) -> [u64; FIELDS] {
        let text = |h: &mut Fnv, s: &str| {
            h.write(&(s.len() as u64).to_le_bytes());
            h.write(s.as_bytes());
        };
        let list = |h: &mut Fnv, l: &[String]| {
            h.write(&(l.len() as u64).to_le_bytes());
            l.iter().for_each(|s| text(h, s));
        };
        let digest = |f: &dyn Fn(&mut Fnv)| {
            let mut h = Fnv::default();
            f(&mut h);
            h.finish()
        };
        [
            digest(&|h| text(h, self.subject)),
            digest(&|h| text(h, self.description)),
            digest(&|h| list(h, self.blocked_by)),
            digest(&|h| {
                h.write(&self.wave.map_or([0; 5], |w| {
                    let [a, b, c, d] = w.to_le_bytes();
                    [1, a, b, c, d]
                }));
                h.write(&[u8::from(self.group.is_some())]);
                text(h, self.group.unwrap_or_default());
            }),
            digest(&|h| list(h, self.files)),
        ]
    }
}

/// How many fields of a task [`SnapshotRef::fields`] digests.
const FIELDS: usize = 5;
/// Their names, as a change lists them.
const FIELD_NAMES: [&str; FIELDS] = ["summary", "details", "depends", "wave or group", "files"];

/// A plan as the `plans` table remembers it (column `items`, since schema
/// version 15): per task, its id and a digest of each field. A few dozen
/// bytes a task instead of the plan's whole text, and still enough to tell
/// an unchanged plan (same bytes) from a changed one and name what changed.
/// Encoding: per task, the id's length (u32, little-endian), the id, and the
/// five digests (u64, little-endian).
pub(crate) fn items<'a>(tasks: impl IntoIterator<Item = SnapshotRef<'a>>) -> Vec<u8> {
    let mut out = Vec::new();
    for t in tasks {
        out.extend_from_slice(&(t.id.len() as u32).to_le_bytes());
        out.extend_from_slice(t.id.as_bytes());
        for d in t.fields() {
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
    out
}

/// One task of [`items`], read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub id: String,
    fields: [u64; FIELDS],
}

/// Read [`items`] back; `None` if the bytes are not such a list.
pub(crate) fn read_items(mut bytes: &[u8]) -> Option<Vec<Item>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let id = String::from_utf8(rest.get(..len)?.to_vec()).ok()?;
        let mut digests = rest.get(len..len + 8 * FIELDS)?.chunks_exact(8);
        let fields = std::array::from_fn(|_| {
            u64::from_le_bytes(digests.next().unwrap_or_default().try_into().unwrap_or_default())
        });
        out.push(Item { id, fields });
        bytes = &rest[len + 8 * FIELDS..];
    }
    Some(out)
}

/// What differs between two versions of a plan, one line per task.
pub(crate) fn diff(old: &[Item], new: &[Item]) -> Vec<String> {
    let mut changes = Vec::new();
    let old_by_id: std::collections::HashMap<&str, &Item> = old.iter().map(|o| (o.id.as_str(), o)).rev().collect();
    let new_ids: std::collections::HashSet<&str> = new.iter().map(|n| n.id.as_str()).collect();
    for n in new {
        match old_by_id.get(n.id.as_str()).copied() {
            None => changes.push(format!("{} is new", n.id)),
            Some(o) if o != n => {
                let what: Vec<&str> =
                    (0..FIELDS).filter(|i| o.fields[*i] != n.fields[*i]).map(|i| FIELD_NAMES[i]).collect();
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

/// A short, stable fingerprint of a plan's [`items`] (FNV-1a, 64 bits), to
/// show which version of a plan the board holds.
pub(crate) fn digest(bytes: &[u8]) -> String {
    let mut hash = Fnv::default();
    hash.write(bytes);
    format!("{:016x}", hash.finish())
}

#[cfg(test)]
mod tests {
    use troupe_core::plan::TaskPlan;

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
        let p = plan_tasks("login", &plan.check().unwrap(), "lead");
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

    fn snap(id: &str, subject: &str, deps: &[&str]) -> Snapshot {
        Snapshot {
            id: id.into(),
            subject: subject.into(),
            description: String::new(),
            blocked_by: deps.iter().map(|d| d.to_string()).collect(),
            wave: None,
            group: None,
            files: vec![],
        }
    }

    fn read(snaps: &[Snapshot]) -> Vec<Item> {
        read_items(&items(snaps.iter().map(SnapshotRef::of_old))).unwrap()
    }

    /// A plan remembered as JSON snapshots (before schema version 15) reads
    /// as the same items as the plan's new tasks.
    #[test]
    fn old_snapshots_and_new_tasks_give_the_same_items() {
        let plan = TaskPlan::from_yaml(PLAN).unwrap();
        let p = plan_tasks("login", &plan.check().unwrap(), "lead");
        let new = items(p.tasks.iter().map(SnapshotRef::of_new));
        let old: Vec<Snapshot> = p
            .tasks
            .iter()
            .map(|t| Snapshot {
                id: t.id.clone().unwrap(),
                subject: t.subject.trim().to_string(),
                description: t.description.clone(),
                blocked_by: t.blocked_by.clone(),
                wave: t.wave,
                group: t.group.clone(),
                files: t.files.clone(),
            })
            .collect();
        assert_eq!(items(old.iter().map(SnapshotRef::of_old)), new);
        let ids: Vec<String> = read_items(&new).unwrap().into_iter().map(|i| i.id).collect();
        assert_eq!(ids, ["login/1.1", "login/1.2", "login/2"]);
        assert_eq!(read_items(&new[..new.len() - 1]), None, "a cut list is not read");
    }

    #[test]
    fn diff_names_each_change() {
        let old = [snap("a", "A", &[]), snap("b", "B", &["a"]), snap("c", "C", &[])];
        let new = [snap("a", "A", &[]), snap("b", "B2", &[]), snap("d", "D", &[])];
        assert_eq!(diff(&read(&old), &read(&new)), ["b changed its summary, depends", "d is new", "c was removed"]);
        assert!(diff(&read(&old), &read(&old)).is_empty());
        let mut other = snap("a", "A", &[]);
        (other.description, other.wave, other.files) = ("d".into(), Some(2), vec!["f".into()]);
        assert_eq!(diff(&read(&old[..1]), &read(&[other])), ["a changed its details, wave or group, files"]);
        assert_ne!(digest(b"x"), digest(b"y"));
    }

    /// Values that would read the same if joined without lengths do not.
    #[test]
    fn fields_are_digested_unambiguously() {
        let mut split = snap("a", "A", &["b", "c"]);
        let mut joined = snap("a", "A", &["bc"]);
        assert_ne!(read(&[split.clone()]), read(&[joined.clone()]));
        (split.blocked_by, joined.blocked_by) = (vec![], vec![]);
        (split.group, joined.group) = (None, Some(String::new()));
        assert_ne!(read(&[split]), read(&[joined]));
    }
}
