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

use std::collections::hash_map::Entry;

use crate::hash::{FastMap as HashMap, map_with_capacity};

use super::analysis::Analysis;
use super::{DONE, TaskPlan};

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
        let a = Analysis::of(plan, &mut Vec::new());
        // A repeated id is done when its last work item is.
        let mut done = vec![false; a.nodes.len()];
        for (item, &node) in a.items.iter().zip(&a.item_node) {
            done[node as usize] = item.status == DONE;
        }
        let is_done = |id: &str| a.node_of(id).is_some_and(|n| done[n as usize]);
        self.waves
            .iter()
            .flat_map(|w| &w.groups)
            .filter(|g| !g.tasks.iter().all(|t| is_done(t)))
            .filter(|g| {
                g.tasks.iter().all(|t| {
                    a.deps_of(t).iter().all(|&d| {
                        let d = a.nodes[d as usize];
                        is_done(d) || g.tasks.iter().any(|x| x == d)
                    })
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

/// Waves by the rule in the module docs. The graph must be acyclic. Linear
/// in the number of work items and dependencies: levels are computed without
/// recursion (a chain of 100,000 work items is fine), groups found by their
/// wave and task, each group's id written once.
pub(crate) fn compute(a: &Analysis<'_>) -> Vec<Wave> {
    // 0: not known yet.
    let mut level = vec![0u32; a.nodes.len()];
    let mut stack: Vec<u32> = Vec::new();
    for start in 0..a.nodes.len() as u32 {
        // Depth-first with an explicit stack: a node's level is known once all its dependencies' are.
        stack.push(start);
        while let Some(&v) = stack.last() {
            if level[v as usize] != 0 {
                stack.pop();
                continue;
            }
            let ds = &a.edges[v as usize];
            match ds.iter().find(|d| level[**d as usize] == 0) {
                Some(&d) => stack.push(d),
                None => {
                    level[v as usize] = 1 + ds.iter().map(|d| level[*d as usize]).max().unwrap_or(0);
                    stack.pop();
                }
            }
        }
    }
    let mut waves: Vec<Wave> = Vec::new();
    // (wave, the task or parallel subtask) → the group's place in its wave.
    let mut index: HashMap<(u32, &str), usize> = map_with_capacity(a.items.len());
    for (item, &node) in a.items.iter().zip(&a.item_node) {
        let n = level[node as usize];
        while waves.len() < n as usize {
            waves.push(Wave { number: waves.len() + 1, groups: Vec::new() });
        }
        let key = if item.parallel { item.id } else { item.task };
        let groups = &mut waves[n as usize - 1].groups;
        match index.entry((n, key)) {
            Entry::Occupied(g) => groups[*g.get()].tasks.push(item.id.to_string()),
            Entry::Vacant(slot) => {
                slot.insert(groups.len());
                groups.push(Group { id: format!("W{n}-{key}"), tasks: vec![item.id.to_string()], files: Vec::new() });
            }
        }
    }
    waves
}
