//! Reading a shell command the way the gates need: every file it may write,
//! and whether it is `troupe skill use <name>`.
//!
//! Commands are parsed with a real shell grammar (brush-parser's bash parser),
//! and the syntax tree is walked for every write the text shows: redirections
//! of every form (`>`, `>>`, `>|`, `&>`, `>&file`, `1<>file`), the commands
//! that write their arguments (`tee`, `cp`/`mv`/`install`/`ln` with `-t`,
//! `rm`, `chmod`, `sed -i`, `perl -pi`, `git rm`, …), wrappers whose argument
//! is a command (`nice`, `timeout`, `env`, `xargs`, `find -exec`, `sh -c`,
//! `eval`), `cd` moving later relative paths, subshells, pipelines and lists.
//! A part only known at run time (`$F`, `*.rs`, `$(cmd)`) becomes a wildcard
//! ([`pattern::WILD`]), so checks ask whether a write *could* reach a file.
//!
//! What it cannot read fully (a parse error, nesting too deep, a command whose
//! name is only known at run time, a work budget spent) is treated as a
//! possible write of every path-like word the command mentions. Work is
//! counted and bounded by a constant times the input size, so the hook stays
//! linear. What no reading can see (a script writing files) is the sandbox's
//! and the post-run check's business.

mod argv;
mod lex;
mod opts;
pub mod pattern;
mod walk;

pub use lex::{simple_commands, skill_uses};

/// Work allowed per byte of input before the reading gives up (and falls back).
const WORK_PER_BYTE: usize = 32;
/// Work allowed for any input, however short.
const WORK_BASE: usize = 4096;

/// What a command may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The paths it may write, relative to the hook's cwd unless absolute,
    /// `.`/`..` resolved, with [`pattern::WILD`] for parts known only at run time.
    pub writes: Vec<String>,
    /// False when some of it could not be read and every path-like word counts as written.
    pub complete: bool,
    /// Units of work the reading took (bounded by a constant times the input size).
    pub work: usize,
}

/// Read `command`.
pub fn read(command: &str) -> Reading {
    let budget = WORK_BASE + WORK_PER_BYTE * command.len();
    let mut walker = walk::Walker::new(budget);
    let mut scope = walk::Scope::default();
    walker.program(command, &mut scope);
    if walker.work > budget {
        // The walk was cut short: start over with the linear fallback alone.
        walker = walk::Walker::new(usize::MAX);
        walker.give_up(&walk::Scope::default(), command);
    }
    let mut writes = walker.out;
    let mut seen = std::collections::HashSet::new();
    writes.retain(|w| seen.insert(w.clone()));
    Reading { writes, complete: walker.complete, work: walker.work }
}

/// The files `command` may write (see [`read`]).
pub fn written_paths(command: &str) -> Vec<String> {
    read(command).writes
}

#[cfg(test)]
mod tests;
