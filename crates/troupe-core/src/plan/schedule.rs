//! Waves and groups: the order in which Builders run.
//!
//! When `tasks.yaml` has no `execution:` section, waves are computed from
//! `depends` by this rule, which is deterministic:
//!
//! 1. A work item's wave is one more than the highest wave of what it depends
//!    on; work items that depend on nothing are in wave 1.
//! 2. Within a wave, work items of the same task form one group (one Builder
//!    does them in plan order), named `W{wave}-{task id}`; a subtask with
//!    `p: true` gets a group of its own, named `W{wave}-{subtask id}`.
//! 3. Groups are ordered by their first work item's place in the plan.
//!
//! Computed groups own no files: file ownership is declared by the
//! TaskGenerator, never guessed.

use serde::Serialize;

use crate::hash::{FastMap as HashMap, map_with_capacity};

use super::{DONE, Item, TaskPlan};

/// The plan's waves, ready for the Lead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    /// Whether the waves were written in `execution:` or computed.
    pub source: ScheduleSource,
    /// The waves, first to run first.
    pub waves: Vec<Wave>,
}

/// Where a [`Schedule`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleSource {
    /// The `execution:` section of tasks.yaml.
    Declared,
    /// Computed from `depends` (see the module docs).
    Computed,
}

/// Groups that run in parallel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wave {
    /// 1-based.
    pub number: usize,
    /// The groups, each one Builder.
    pub groups: Vec<Group>,
}

/// The work of one Builder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The group's id.
    pub id: String,
    /// Work item ids (subtasks, or tasks without subtasks), task ids expanded, in order.
    pub tasks: Vec<String>,
    /// Files the group owns; empty for computed groups.
    pub files: Vec<String>,
}

impl Schedule {
    /// The groups a Builder could start now: not every work item is done, and
    /// everything their work items depend on outside the group is done. This is
    /// how the Lead spawns the next wave's Builders as soon as they are unblocked
    /// (seed 000, Spec 8).
    ///
    /// `plan` must be the plan this schedule was validated from (statuses may
    /// have changed since).
    pub fn ready_groups<'s>(&'s self, plan: &TaskPlan) -> Vec<&'s Group> {
        let items = plan.items();
        let done: HashMap<&str, bool> = items.iter().map(|i| (i.id, i.status == DONE)).collect();
        let is_done = |id: &str| done.get(id).copied().unwrap_or(false);
        let deps = super::validate::dependencies(&items, &plan.expansion(), &mut Vec::new());
        self.waves
            .iter()
            .flat_map(|w| &w.groups)
            .filter(|g| !g.tasks.iter().all(|t| is_done(t)))
            .filter(|g| {
                g.tasks.iter().all(|t| {
                    let ds = deps.get(t.as_str()).map(Vec::as_slice).unwrap_or_default();
                    ds.iter().all(|d| is_done(d) || g.tasks.iter().any(|x| x == d))
                })
            })
            .collect()
    }

    /// The group that holds this work item, with its wave number. One lookup
    /// walks the schedule; to place many work items, build [`Schedule::placements`] once.
    pub fn group_of(&self, task: &str) -> Option<(usize, &Group)> {
        self.waves
            .iter()
            .find_map(|w| w.groups.iter().find(|g| g.tasks.iter().any(|t| t == task)).map(|g| (w.number, g)))
    }

    /// Every work item's group with its wave number (the first placement of
    /// an item placed twice, as [`Schedule::group_of`] answers).
    pub fn placements(&self) -> HashMap<&str, (usize, &Group)> {
        let mut out = HashMap::default();
        for w in &self.waves {
            for g in &w.groups {
                for t in &g.tasks {
                    out.entry(t.as_str()).or_insert((w.number, g));
                }
            }
        }
        out
    }
}

/// Waves by the rule in the module docs. `deps` must be acyclic. Linear in the
/// number of work items and dependencies: levels are computed without
/// recursion (a chain of 100,000 work items is fine), groups found by id.
pub(crate) fn compute(items: &[Item<'_>], deps: &HashMap<&str, Vec<&str>>) -> Vec<Wave> {
    let mut level: HashMap<&str, usize> = map_with_capacity(items.len());
    for item in items {
        // Depth-first with an explicit stack: a node's level is known once all its dependencies' are.
        let mut stack: Vec<&str> = vec![item.id];
        while let Some(&id) = stack.last() {
            if level.contains_key(id) {
                stack.pop();
                continue;
            }
            let ds = deps.get(id).map(Vec::as_slice).unwrap_or_default();
            match ds.iter().find(|d| !level.contains_key(**d)) {
                Some(&d) => stack.push(d),
                None => {
                    let l = 1 + ds.iter().map(|d| level[d]).max().unwrap_or(0);
                    level.insert(id, l);
                    stack.pop();
                }
            }
        }
    }
    let mut waves: Vec<Wave> = Vec::new();
    let mut index: Vec<HashMap<String, usize>> = Vec::new();
    for item in items {
        let n = level[item.id];
        while waves.len() < n {
            waves.push(Wave { number: waves.len() + 1, groups: Vec::new() });
            index.push(HashMap::default());
        }
        let id = format!("W{n}-{}", if item.parallel { item.id } else { item.task });
        let groups = &mut waves[n - 1].groups;
        match index[n - 1].get(&id) {
            Some(&g) => groups[g].tasks.push(item.id.to_string()),
            None => {
                index[n - 1].insert(id.clone(), groups.len());
                groups.push(Group { id, tasks: vec![item.id.to_string()], files: Vec::new() });
            }
        }
    }
    waves
}
