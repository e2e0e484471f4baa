//! What makes a plan runnable. [`validate`] reports every problem at once:
//!
//! - an id used twice (tasks and subtasks share one namespace);
//! - a `depends` entry that is no task or subtask id;
//! - a dependency cycle, with its path;
//! - with `execution`: a wave numbered out of place, a group id used twice, a
//!   group listing an unknown id, a work item in two groups or in none, two
//!   groups of one wave owning the same file, and a wave that runs a work item
//!   before or together with one it depends on.
//!
//! Each error names the task ids involved.

use std::collections::VecDeque;

use crate::hash::{FastMap as HashMap, FastSet as HashSet, map_with_capacity};
use std::fmt;

use super::schedule::{self, Group, Schedule, ScheduleSource, Wave};
use super::{Item, TaskPlan};

/// One problem in a plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanError {
    /// The plan has no tasks.
    #[error("the plan has no tasks")]
    NoTasks,
    /// Two tasks or subtasks share an id.
    #[error("id {id} is used by {count} tasks or subtasks; ids must be unique")]
    DuplicateId {
        /// The id.
        id: String,
        /// How many times it appears.
        count: usize,
    },
    /// A `depends` entry names nothing.
    #[error("{task} depends on {depends_on}, which is no task or subtask id")]
    UnknownDependency {
        /// The work item whose `depends` is wrong.
        task: String,
        /// The unknown id.
        depends_on: String,
    },
    /// Work items that depend on each other in a circle.
    #[error("dependency cycle: {} (each depends on the next)", cycle.join(" -> "))]
    Cycle {
        /// The cycle, starting and ending with the same id.
        cycle: Vec<String>,
    },
    /// A declared wave whose `wave:` number is not its position.
    #[error("execution wave {position} is numbered {number}; number waves 1, 2, 3, ... in the order they run")]
    WaveNumber {
        /// Its 1-based position in `execution`.
        position: usize,
        /// The number written.
        number: u32,
    },
    /// Two groups share an id.
    #[error("group id {group} is used more than once")]
    DuplicateGroup {
        /// The group id.
        group: String,
    },
    /// A group lists an id that is no task or subtask.
    #[error("group {group} lists {task}, which is no task or subtask id")]
    UnknownGroupTask {
        /// The group.
        group: String,
        /// The unknown id.
        task: String,
    },
    /// A work item is in two groups.
    #[error("{task} is in two groups: {first} (wave {first_wave}) and {second} (wave {second_wave})")]
    TaskInTwoGroups {
        /// The work item.
        task: String,
        /// The first group it is in.
        first: String,
        /// That group's wave.
        first_wave: usize,
        /// The second group it is in.
        second: String,
        /// That group's wave.
        second_wave: usize,
    },
    /// A work item is in no group, so no Builder would ever do it.
    #[error("{task} is in no group of execution; add it to a group")]
    Unscheduled {
        /// The work item.
        task: String,
    },
    /// Two groups of one wave own the same file.
    #[error(
        "wave {wave}: groups {first} ({}) and {second} ({}) both own {file}",
        first_tasks.join(", "),
        second_tasks.join(", ")
    )]
    FileCollision {
        /// The wave.
        wave: usize,
        /// The file (or the more specific of two overlapping entries).
        file: String,
        /// The first group.
        first: String,
        /// Its work items.
        first_tasks: Vec<String>,
        /// The second group.
        second: String,
        /// Its work items.
        second_tasks: Vec<String>,
    },
    /// A work item runs in the same wave as, or an earlier wave than, one it depends on.
    #[error(
        "{task} (wave {task_wave}) depends on {depends_on} (wave {dep_wave}); {depends_on} must run in an earlier wave"
    )]
    WaveOrder {
        /// The dependent work item.
        task: String,
        /// Its wave.
        task_wave: usize,
        /// What it depends on.
        depends_on: String,
        /// That item's wave.
        dep_wave: usize,
    },
}

/// Every problem found in a plan, in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
pub struct ValidationErrors {
    /// The problems; never empty.
    pub errors: Vec<PlanError>,
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(f, "{n} problem{} in the task plan", if n == 1 { "" } else { "s" })?;
        for e in &self.errors {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

/// Check `plan`; see the module docs for what is checked.
pub fn validate(plan: &TaskPlan) -> Result<Schedule, ValidationErrors> {
    let mut errors = Vec::new();
    let items = plan.items();
    if items.is_empty() {
        errors.push(PlanError::NoTasks);
    }
    let expansion = plan.expansion();
    check_unique_ids(plan, &mut errors);
    let deps = dependencies(&items, &expansion, &mut errors);
    let cycles = cycles(&items, &deps);
    let acyclic = cycles.is_empty();
    errors.extend(cycles.into_iter().map(|cycle| PlanError::Cycle { cycle }));

    let schedule = match &plan.execution {
        Some(execution) => {
            let waves = declared_waves(plan, &items, &expansion, &mut errors);
            for (i, w) in execution.waves.iter().enumerate() {
                if let Some(number) = w.wave.filter(|n| *n as usize != i + 1) {
                    errors.push(PlanError::WaveNumber { position: i + 1, number });
                }
            }
            check_files(&waves, &mut errors);
            check_order(&waves, &deps, &mut errors);
            Schedule { source: ScheduleSource::Declared, waves }
        }
        None => Schedule {
            source: ScheduleSource::Computed,
            waves: if acyclic { schedule::compute(&items, &deps) } else { Vec::new() },
        },
    };
    if errors.is_empty() { Ok(schedule) } else { Err(ValidationErrors { errors }) }
}

fn check_unique_ids(plan: &TaskPlan, errors: &mut Vec<PlanError>) {
    let mut counts: HashMap<&str, usize> = map_with_capacity(plan.tasks.len() * 4);
    let mut order = Vec::new();
    for id in plan.tasks.iter().flat_map(|t| std::iter::once(&t.id).chain(t.subtasks.iter().map(|s| &s.id))) {
        let n = counts.entry(id).or_default();
        if *n == 0 {
            order.push(id.as_str());
        }
        *n += 1;
    }
    for id in order {
        if counts[id] > 1 {
            errors.push(PlanError::DuplicateId { id: id.to_string(), count: counts[id] });
        }
    }
}

/// Work item → the work items it depends on (task ids expanded), in plan order.
pub(crate) fn dependencies<'a>(
    items: &[Item<'a>],
    expansion: &HashMap<&'a str, Vec<&'a str>>,
    errors: &mut Vec<PlanError>,
) -> HashMap<&'a str, Vec<&'a str>> {
    let mut deps: HashMap<&str, Vec<&str>> = map_with_capacity(items.len());
    // Each unknown dependency reported once, without a scan of the errors per entry.
    let mut unknown: HashSet<(&str, &str)> = HashSet::default();
    for item in items {
        let entry = deps.entry(item.id).or_default();
        for d in item.depends.0.iter().chain(item.depends.1) {
            match expansion.get(d.as_str()) {
                Some(targets) => {
                    for t in targets {
                        if !entry.contains(t) {
                            entry.push(t);
                        }
                    }
                }
                None => {
                    if unknown.insert((item.id, d.as_str())) {
                        errors.push(PlanError::UnknownDependency { task: item.id.to_string(), depends_on: d.clone() });
                    }
                }
            }
        }
    }
    deps
}

/// One cycle per strongly connected component that has one, each starting at
/// the component's first item in plan order, shortest path back to it.
/// Work items are numbered once, so the walks below index vectors instead of
/// looking ids up in maps (a plan of 100,000 items is checked in milliseconds).
fn cycles(items: &[Item<'_>], deps: &HashMap<&str, Vec<&str>>) -> Vec<Vec<String>> {
    let graph = Graph::of(items, deps);
    let component = graph.strongly_connected();
    let mut found = Vec::new();
    let mut reported = HashSet::default();
    for start in 0..graph.nodes.len() {
        if !reported.insert(component[start]) {
            continue;
        }
        if let Some(path) = graph.shortest_cycle(start, &component) {
            found.push(path);
        }
    }
    found
}

/// The dependency graph over numbered work items (a repeated id is one node).
struct Graph<'a> {
    /// Ids in plan order, each once.
    nodes: Vec<&'a str>,
    /// Each node's dependencies, in plan order.
    edges: Vec<Vec<u32>>,
}

/// Not yet visited by Tarjan's walk.
const UNSEEN: u32 = u32::MAX;

impl<'a> Graph<'a> {
    fn of(items: &[Item<'a>], deps: &HashMap<&'a str, Vec<&'a str>>) -> Self {
        let mut number: HashMap<&str, u32> = map_with_capacity(items.len());
        let mut nodes = Vec::with_capacity(items.len());
        for item in items {
            number.entry(item.id).or_insert_with(|| {
                nodes.push(item.id);
                (nodes.len() - 1) as u32
            });
        }
        let edges = nodes
            .iter()
            .map(|n| {
                let ds = deps.get(n).map(Vec::as_slice).unwrap_or_default();
                ds.iter().filter_map(|d| number.get(d).copied()).collect()
            })
            .collect();
        Graph { nodes, edges }
    }

    /// Tarjan's algorithm; each node's component number. Iterative, with an
    /// explicit stack of (node, next dependency to look at): a chain of
    /// 100,000 dependent items must not overflow the thread's stack.
    fn strongly_connected(&self) -> Vec<u32> {
        /// The walk's state, by node number.
        struct Walk {
            index: Vec<u32>,
            low: Vec<u32>,
            on_stack: Vec<bool>,
            stack: Vec<u32>,
            calls: Vec<(u32, usize)>,
            next_index: u32,
        }
        impl Walk {
            fn enter(&mut self, v: u32) {
                let vi = v as usize;
                (self.index[vi], self.low[vi]) = (self.next_index, self.next_index);
                self.next_index += 1;
                self.stack.push(v);
                self.on_stack[vi] = true;
                self.calls.push((v, 0));
            }
        }
        let n = self.nodes.len();
        let mut s = Walk {
            index: vec![UNSEEN; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            calls: Vec::new(),
            next_index: 0,
        };
        let mut component = vec![UNSEEN; n];
        let mut next_component = 0u32;
        for root in 0..n as u32 {
            if s.index[root as usize] != UNSEEN {
                continue;
            }
            s.enter(root);
            while let Some(&(v, next)) = s.calls.last() {
                let vi = v as usize;
                if let Some(&w) = self.edges[vi].get(next) {
                    s.calls.last_mut().expect("not empty").1 += 1;
                    if s.index[w as usize] == UNSEEN {
                        s.enter(w);
                    } else if s.on_stack[w as usize] {
                        s.low[vi] = s.low[vi].min(s.index[w as usize]);
                    }
                    continue;
                }
                s.calls.pop();
                if s.low[vi] == s.index[vi] {
                    while let Some(w) = s.stack.pop() {
                        s.on_stack[w as usize] = false;
                        component[w as usize] = next_component;
                        if w == v {
                            break;
                        }
                    }
                    next_component += 1;
                }
                if let Some(&(u, _)) = s.calls.last() {
                    s.low[u as usize] = s.low[u as usize].min(s.low[vi]);
                }
            }
        }
        component
    }

    /// Breadth-first search from `start` back to itself inside its component.
    fn shortest_cycle(&self, start: usize, component: &[u32]) -> Option<Vec<String>> {
        let start = start as u32;
        let same = |n: u32| component[n as usize] == component[start as usize];
        let mut parent: HashMap<u32, u32> = HashMap::default();
        let mut queue = VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for &w in &self.edges[v as usize] {
                if w == start {
                    let mut back = vec![v];
                    let mut cur = v;
                    while cur != start {
                        cur = parent[&cur];
                        back.push(cur);
                    }
                    back.pop();
                    let mut path = vec![self.nodes[start as usize].to_string()];
                    path.extend(back.into_iter().rev().map(|n| self.nodes[n as usize].to_string()));
                    path.push(self.nodes[start as usize].to_string());
                    return Some(path);
                }
                if same(w) && !parent.contains_key(&w) {
                    parent.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        None
    }
}

fn declared_waves(
    plan: &TaskPlan,
    items: &[Item<'_>],
    expansion: &HashMap<&str, Vec<&str>>,
    errors: &mut Vec<PlanError>,
) -> Vec<Wave> {
    let execution = plan.execution.as_ref().expect("called with execution");
    let mut seen_groups = HashSet::default();
    let mut placed: HashMap<&str, (&str, usize)> = map_with_capacity(items.len());
    let mut waves = Vec::new();
    for (w, wave) in execution.waves.iter().enumerate() {
        let number = w + 1;
        let mut groups = Vec::new();
        for g in &wave.groups {
            if !seen_groups.insert(g.id.as_str()) {
                errors.push(PlanError::DuplicateGroup { group: g.id.clone() });
            }
            let mut tasks = Vec::new();
            let mut in_group: HashSet<&str> = HashSet::default();
            for id in &g.tasks {
                let Some(targets) = expansion.get(id.as_str()) else {
                    errors.push(PlanError::UnknownGroupTask { group: g.id.clone(), task: id.clone() });
                    continue;
                };
                for &t in targets {
                    if !in_group.insert(t) {
                        continue;
                    }
                    match placed.get(t) {
                        Some(&(first, first_wave)) => errors.push(PlanError::TaskInTwoGroups {
                            task: t.to_string(),
                            first: first.to_string(),
                            first_wave,
                            second: g.id.clone(),
                            second_wave: number,
                        }),
                        None => {
                            placed.insert(t, (&g.id, number));
                        }
                    }
                    tasks.push(t.to_string());
                }
            }
            groups.push(Group { id: g.id.clone(), tasks, files: g.files.clone() });
        }
        waves.push(Wave { number, groups });
    }
    for item in items {
        if !placed.contains_key(item.id) {
            errors.push(PlanError::Unscheduled { task: item.id.to_string() });
        }
    }
    waves
}

/// Paths compare after dropping a leading `./`; an entry ending in `/` owns
/// everything below it.
fn overlap<'a>(a: &'a str, b: &'a str) -> Option<&'a str> {
    let a = a.strip_prefix("./").unwrap_or(a);
    let b = b.strip_prefix("./").unwrap_or(b);
    let (ta, tb) = (a.trim_end_matches('/'), b.trim_end_matches('/'));
    if ta == tb {
        return Some(a);
    }
    let under = |dir: &str, path: &'a str, raw_dir: &str| {
        (raw_dir.ends_with('/') && path.starts_with(dir) && path[dir.len()..].starts_with('/')).then_some(path)
    };
    under(ta, b, a).or_else(|| under(tb, a, b))
}

fn check_files(waves: &[Wave], errors: &mut Vec<PlanError>) {
    for wave in waves {
        for (i, g1) in wave.groups.iter().enumerate() {
            for g2 in &wave.groups[i + 1..] {
                let mut reported = HashSet::default();
                for f1 in &g1.files {
                    for f2 in &g2.files {
                        if let Some(file) = overlap(f1, f2)
                            && reported.insert(file.to_string())
                        {
                            errors.push(PlanError::FileCollision {
                                wave: wave.number,
                                file: file.to_string(),
                                first: g1.id.clone(),
                                first_tasks: g1.tasks.clone(),
                                second: g2.id.clone(),
                                second_tasks: g2.tasks.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
}

fn check_order(waves: &[Wave], deps: &HashMap<&str, Vec<&str>>, errors: &mut Vec<PlanError>) {
    let mut wave_of: HashMap<&str, usize> = HashMap::default();
    for w in waves {
        for g in &w.groups {
            for t in &g.tasks {
                wave_of.entry(t.as_str()).or_insert(w.number);
            }
        }
    }
    for w in waves {
        for g in &w.groups {
            let in_group: HashSet<&str> = g.tasks.iter().map(String::as_str).collect();
            for t in &g.tasks {
                if wave_of.get(t.as_str()) != Some(&w.number) {
                    continue; // its second placement; reported as TaskInTwoGroups
                }
                for &d in deps.get(t.as_str()).map(Vec::as_slice).unwrap_or_default() {
                    // Within one group the Builder does the work in order.
                    if d == t || in_group.contains(d) {
                        continue;
                    }
                    if let Some(&dw) = wave_of.get(d)
                        && dw >= w.number
                    {
                        errors.push(PlanError::WaveOrder {
                            task: t.clone(),
                            task_wave: w.number,
                            depends_on: d.to_string(),
                            dep_wave: dw,
                        });
                    }
                }
            }
        }
    }
}
