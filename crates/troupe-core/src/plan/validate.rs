//! What makes a plan runnable. [`TaskPlan::validate`](super::TaskPlan::validate)
//! reports every problem at once:
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

use crate::hash::{FastMap as HashMap, FastSet as HashSet, map_with_capacity};
use std::fmt;

use super::analysis::Analysis;
use super::schedule::{self, Group, Schedule, ScheduleSource, Wave};
use super::{Checked, Execution, TaskPlan};

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
pub(crate) fn check(plan: &TaskPlan) -> Result<Checked<'_>, ValidationErrors> {
    let mut errors = Vec::new();
    if plan.tasks.is_empty() {
        errors.push(PlanError::NoTasks);
    }
    let analysis = Analysis::of(plan, &mut errors);
    let cycles = analysis.cycles();
    let acyclic = cycles.is_empty();
    errors.extend(cycles.into_iter().map(|cycle| PlanError::Cycle { cycle }));

    let schedule = match &plan.execution {
        Some(execution) => {
            let waves = declared_waves(execution, &analysis, &mut errors);
            for (i, w) in execution.waves.iter().enumerate() {
                if let Some(number) = w.wave.filter(|n| *n as usize != i + 1) {
                    errors.push(PlanError::WaveNumber { position: i + 1, number });
                }
            }
            check_files(&waves, &mut errors);
            check_order(&waves, &analysis, &mut errors);
            Schedule { source: ScheduleSource::Declared, waves }
        }
        None => Schedule {
            source: ScheduleSource::Computed,
            waves: if acyclic { schedule::compute(&analysis) } else { Vec::new() },
        },
    };
    if errors.is_empty() { Ok(Checked { schedule, analysis }) } else { Err(ValidationErrors { errors }) }
}

fn declared_waves(execution: &Execution, analysis: &Analysis<'_>, errors: &mut Vec<PlanError>) -> Vec<Wave> {
    let mut seen_groups = HashSet::default();
    let mut placed: HashMap<&str, (&str, usize)> = map_with_capacity(analysis.items.len());
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
                let Some(targets) = analysis.targets(id) else {
                    errors.push(PlanError::UnknownGroupTask { group: g.id.clone(), task: id.clone() });
                    continue;
                };
                for &t in targets {
                    let t = analysis.nodes[t as usize];
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
    for item in &analysis.items {
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

fn check_order(waves: &[Wave], analysis: &Analysis<'_>, errors: &mut Vec<PlanError>) {
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
                for d in analysis.deps_of(t).iter().map(|&d| analysis.nodes[d as usize]) {
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
