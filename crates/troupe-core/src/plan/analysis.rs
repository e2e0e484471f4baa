//! A plan's work items numbered once, with every id's meaning and every
//! dependency resolved: what the validation, the computed waves, the ready
//! groups and the work item list all read. Built in one pass over the plan,
//! so a plan of 100,000 work items hashes each id once and the graph walks
//! index vectors instead of looking ids up in maps.

use std::collections::VecDeque;

use crate::hash::{FastMap as HashMap, FastSet as HashSet, map_with_capacity};

use super::validate::PlanError;
use super::{DONE, Item, TaskPlan, WorkItemRef};

/// No node: an id that is no work item, or a node Tarjan's walk has not seen.
const NONE: u32 = u32::MAX;

/// The plan's work items and their dependency graph. A repeated id is one
/// node (its first work item's texts, every owner's dependencies).
pub(crate) struct Analysis<'a> {
    /// Work items in plan order.
    pub items: Vec<Item<'a>>,
    /// Each item's node.
    pub item_node: Vec<u32>,
    /// Work item ids in plan order, each once: the graph's nodes.
    pub nodes: Vec<&'a str>,
    /// Each node's first work item.
    node_item: Vec<u32>,
    /// Each node's dependencies: task ids expanded, the task's own `depends`
    /// included, duplicates and unknown ids dropped, in plan order.
    pub edges: Vec<Vec<u32>>,
    /// Every id, task or subtask.
    ids: HashMap<&'a str, Id>,
}

/// What one id (task or subtask) is.
struct Id {
    /// How many tasks and subtasks use it.
    uses: u32,
    /// Its first use's place among all ids (tasks and subtasks, in plan order).
    first: u32,
    /// Its node, if it is a work item's id.
    node: u32,
    /// The work items it stands for: itself, or a task's subtasks.
    targets: Targets,
}

/// The nodes an id stands for; nearly always one, without a `Vec` for it.
enum Targets {
    None,
    One(u32),
    Many(Vec<u32>),
}

impl Targets {
    fn push(&mut self, node: u32) {
        *self = match std::mem::replace(self, Targets::None) {
            Targets::None => Targets::One(node),
            Targets::One(first) => Targets::Many(vec![first, node]),
            Targets::Many(mut all) => {
                all.push(node);
                Targets::Many(all)
            }
        };
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Targets::None => &[],
            Targets::One(node) => std::slice::from_ref(node),
            Targets::Many(all) => all,
        }
    }
}

impl<'a> Analysis<'a> {
    /// Number `plan`'s work items and resolve their dependencies; ids used
    /// twice and unknown dependencies go to `errors`, in plan order.
    pub fn of(plan: &'a TaskPlan, errors: &mut Vec<PlanError>) -> Self {
        let capacity = plan.tasks.iter().map(|t| t.subtasks.len().max(1)).sum();
        let mut a = Analysis {
            items: Vec::with_capacity(capacity),
            item_node: Vec::with_capacity(capacity),
            nodes: Vec::with_capacity(capacity),
            node_item: Vec::with_capacity(capacity),
            edges: Vec::new(),
            ids: map_with_capacity(capacity + plan.tasks.len()),
        };
        let mut place = 0;
        for t in &plan.tasks {
            a.use_id(&t.id, &mut place);
            if t.subtasks.is_empty() {
                let item = Item {
                    id: &t.id,
                    task: &t.id,
                    parallel: false,
                    status: &t.status,
                    summary: &t.summary,
                    details: "",
                    depends: (&t.depends, &[]),
                };
                let node = a.add_item(item);
                a.target(&t.id, node);
                continue;
            }
            let first = a.items.len();
            for s in &t.subtasks {
                a.use_id(&s.id, &mut place);
                let item = Item {
                    id: &s.id,
                    task: &t.id,
                    parallel: s.p,
                    status: &s.status,
                    summary: &s.summary,
                    details: &s.details,
                    depends: (&s.depends, &t.depends),
                };
                let node = a.add_item(item);
                a.target(&s.id, node);
            }
            for i in first..a.items.len() {
                let node = a.item_node[i];
                a.target(&t.id, node);
            }
        }
        let mut repeated: Vec<(&str, &Id)> = a.ids.iter().filter(|(_, id)| id.uses > 1).map(|(k, v)| (*k, v)).collect();
        repeated.sort_unstable_by_key(|(_, id)| id.first);
        errors.extend(
            repeated.into_iter().map(|(id, i)| PlanError::DuplicateId { id: id.to_string(), count: i.uses as usize }),
        );
        a.resolve(errors);
        a
    }

    fn use_id(&mut self, id: &'a str, place: &mut u32) {
        let first = *place;
        *place += 1;
        self.ids.entry(id).or_insert(Id { uses: 0, first, node: NONE, targets: Targets::None }).uses += 1;
    }

    /// Add a work item (its id already used); its node.
    fn add_item(&mut self, item: Item<'a>) -> u32 {
        let id = self.ids.get_mut(item.id).expect("used before");
        if id.node == NONE {
            id.node = self.nodes.len() as u32;
            self.nodes.push(item.id);
            self.node_item.push(self.items.len() as u32);
        }
        self.item_node.push(id.node);
        self.items.push(item);
        id.node
    }

    fn target(&mut self, id: &str, node: u32) {
        self.ids.get_mut(id).expect("used before").targets.push(node);
    }

    /// Each node's edges from its items' `depends`.
    fn resolve(&mut self, errors: &mut Vec<PlanError>) {
        let mut edges: Vec<Vec<u32>> = vec![Vec::new(); self.nodes.len()];
        // Each unknown dependency reported once, without a scan of the errors per entry.
        let mut unknown: HashSet<(&str, &str)> = HashSet::default();
        for (item, &node) in self.items.iter().zip(&self.item_node) {
            let entry = &mut edges[node as usize];
            for d in item.depends.0.iter().chain(item.depends.1) {
                match self.ids.get(d.as_str()) {
                    Some(id) => {
                        for t in id.targets.as_slice() {
                            if !entry.contains(t) {
                                entry.push(*t);
                            }
                        }
                    }
                    None => {
                        if unknown.insert((item.id, d.as_str())) {
                            errors.push(PlanError::UnknownDependency {
                                task: item.id.to_string(),
                                depends_on: d.clone(),
                            });
                        }
                    }
                }
            }
        }
        self.edges = edges;
    }

    /// The node of a work item's id.
    pub fn node_of(&self, id: &str) -> Option<u32> {
        self.ids.get(id).map(|i| i.node).filter(|n| *n != NONE)
    }

    /// The work items an id (task or subtask) stands for, if it is one.
    pub fn targets(&self, id: &str) -> Option<&[u32]> {
        self.ids.get(id).map(|i| i.targets.as_slice())
    }

    /// The dependencies of the work item with this id (none for an unknown id).
    pub fn deps_of(&self, id: &str) -> &[u32] {
        self.node_of(id).map(|n| self.edges[n as usize].as_slice()).unwrap_or_default()
    }

    /// Each work item as [`WorkItemRef`], in plan order.
    pub fn work_item_refs(&self) -> impl ExactSizeIterator<Item = WorkItemRef<'a>> + '_ {
        self.items.iter().zip(&self.item_node).map(|(i, &node)| {
            // A repeated id reads as its first work item.
            let first = &self.items[self.node_item[node as usize] as usize];
            WorkItemRef {
                id: i.id,
                task: i.task,
                summary: first.summary,
                details: first.details,
                parallel: i.parallel,
                depends: self.edges[node as usize].iter().map(|&d| self.nodes[d as usize]).collect(),
                done: i.status == DONE,
            }
        })
    }

    /// One cycle per strongly connected component that has one, each
    /// starting at the component's first item in plan order, shortest path
    /// back to it.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        let component = self.strongly_connected();
        let mut size = vec![0u32; self.nodes.len()];
        component.iter().for_each(|c| size[*c as usize] += 1);
        let mut found = Vec::new();
        let mut reported = vec![false; self.nodes.len()];
        for start in 0..self.nodes.len() {
            let c = component[start] as usize;
            if std::mem::replace(&mut reported[c], true) {
                continue;
            }
            // A lone node is a cycle only if it waits for itself: no search needed otherwise.
            if size[c] == 1 && !self.edges[start].contains(&(start as u32)) {
                continue;
            }
            if let Some(path) = self.shortest_cycle(start, &component) {
                found.push(path);
            }
        }
        found
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
            index: vec![NONE; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            calls: Vec::new(),
            next_index: 0,
        };
        let mut component = vec![NONE; n];
        let mut next_component = 0u32;
        for root in 0..n as u32 {
            if s.index[root as usize] != NONE {
                continue;
            }
            s.enter(root);
            while let Some(&(v, next)) = s.calls.last() {
                let vi = v as usize;
                if let Some(&w) = self.edges[vi].get(next) {
                    s.calls.last_mut().expect("not empty").1 += 1;
                    if s.index[w as usize] == NONE {
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
