//! Writing CPF in its canonical form: `KEY:VALUE` without a space, one row
//! per line, empty sections and an empty SCOPE omitted.
//!
//! Text is made safe to read back: line breaks become spaces, and in every
//! field but the last of a row `|` becomes `/` (and `+` in agent names
//! becomes `-`), since those split fields. Two note lines cannot be written
//! so that they read back: one that looks like a key line (`SCOPE: x`) and one
//! that starts with a code fence; inspectors and auditors do not write them.

use std::fmt::{self, Display, Formatter, Write};

use super::{AuditVerdict, Finding, InspectorReport, Issue, Removed, Resolved, SpecFeedback, Steering};

/// A field that is not the last of its row.
struct Field<'a>(&'a str);

/// The last field of a row, or a note line.
struct Last<'a>(&'a str);

/// A `+`-joined agent list.
struct Agents<'a>(&'a [String]);

fn one_line(s: &str, f: &mut Formatter<'_>, map: impl Fn(char) -> char) -> fmt::Result {
    for c in s.trim().chars() {
        f.write_char(match c {
            '\n' | '\r' => ' ',
            c => map(c),
        })?;
    }
    Ok(())
}

impl Display for Field<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        one_line(self.0, f, |c| if c == '|' { '/' } else { c })
    }
}

impl Display for Last<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        one_line(self.0, f, |c| c)
    }
}

impl Display for Agents<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_char('+')?;
            }
            one_line(a, f, |c| if c == '|' || c == '+' { '-' } else { c })?;
        }
        Ok(())
    }
}

impl Display for Issue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}|{}|{}", self.severity, Field(&self.category), Field(&self.location), Last(&self.description))
    }
}

impl Display for Finding {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}|{}|{}|{}|{}",
            Agents(&self.agents),
            self.severity,
            Field(&self.category),
            Field(&self.location),
            Last(&self.description)
        )
    }
}

impl Display for Removed {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}|{}", Field(&self.agent), Field(&self.reason), Last(&self.original))
    }
}

impl Display for Resolved {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}|{}", Agents(&self.agents), Field(&self.resolution), Last(&self.conflicting))
    }
}

impl Display for SpecFeedback {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}|{}", Field(&self.phase), Field(&self.spec), Last(&self.description))
    }
}

impl Display for Steering {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}|{}", self.action.as_str(), Field(&self.file), Last(&self.text))
    }
}

fn header(f: &mut Formatter<'_>, verdict: super::Verdict, qualifier: &str, scope: &str) -> fmt::Result {
    write!(f, "VERDICT:{verdict}")?;
    if !qualifier.trim().is_empty() {
        write!(f, " {}", Last(qualifier))?;
    }
    f.write_char('\n')?;
    if !scope.trim().is_empty() {
        writeln!(f, "SCOPE:{}", Last(scope))?;
    }
    Ok(())
}

fn section<T: Display>(f: &mut Formatter<'_>, key: &str, rows: &[T]) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(f, "{key}:")?;
    for r in rows {
        writeln!(f, "{r}")?;
    }
    Ok(())
}

fn notes(f: &mut Formatter<'_>, notes: &[String]) -> fmt::Result {
    let lines: Vec<Last<'_>> = notes.iter().filter(|n| !n.trim().is_empty()).map(|n| Last(n)).collect();
    section(f, "NOTES", &lines)
}

impl Display for InspectorReport {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        header(f, self.verdict, &self.qualifier, &self.scope)?;
        section(f, "ISSUES", &self.issues)?;
        notes(f, &self.notes)
    }
}

impl Display for AuditVerdict {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        header(f, self.verdict, &self.qualifier, &self.scope)?;
        section(f, "VERIFIED", &self.verified)?;
        section(f, "REMOVED", &self.removed)?;
        section(f, "RESOLVED", &self.resolved)?;
        section(f, "SPEC_FEEDBACK", &self.spec_feedback)?;
        section(f, "STEERING", &self.steering)?;
        notes(f, &self.notes)
    }
}
