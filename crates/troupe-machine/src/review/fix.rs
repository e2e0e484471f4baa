//! The auto-fix round after a NO-GO (and the design revision after a
//! SPEC-UPDATE-NEEDED): who is respawned, with what.
//!
//! A design review's findings go to the Architect. An impl (or dead-code)
//! review's findings go to the Builders of the affected files: each finding's
//! location (`src/auth.rs:42`) is matched against the groups of tasks.yaml, and
//! one Builder per affected group gets that group's files and findings; findings
//! in files no group owns go to one more Builder that may write just those files.

use troupe_core::cpf::{AuditVerdict, Finding};
use troupe_core::layout::Layout;
use troupe_core::role::Role;

use crate::machine::{Ctx, SpawnContext, SpawnRequest};
use crate::plan::BuildPlan;
use crate::review::perspectives::ReviewKind;
use crate::review::policy::finding_line;

/// The file path in a finding's location: `src/a.rs:42` → `src/a.rs`; `None`
/// when the location is not a path (`design.md §3` is; `overall` is not).
pub fn location_path(location: &str) -> Option<String> {
    let first = location.split_whitespace().next()?;
    let path = first.split(':').next()?.trim_matches('`');
    let looks_like_path = (path.contains('.') || path.contains('/')) && !path.starts_with('/') && !path.contains("..");
    looks_like_path.then(|| path.to_string())
}

/// Does a group's file pattern (`src/auth.rs`, `src/auth/**`, `src/*.rs`) cover `path`?
pub fn pattern_matches(pattern: &str, path: &str) -> bool {
    if let Some(dir) = pattern.strip_suffix("/**") {
        return path.starts_with(&format!("{dir}/"));
    }
    if !pattern.contains('*') {
        return pattern == path;
    }
    // `*` within one path segment.
    let (p_parts, f_parts): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    p_parts.len() == f_parts.len() && p_parts.iter().zip(&f_parts).all(|(p, f)| wildcard(p, f))
}

fn wildcard(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(after) = text.strip_prefix(head) else { return false };
            (0..=after.len()).filter(|i| after.is_char_boundary(*i)).any(|i| wildcard(rest, &after[i..]))
        }
    }
}

fn findings_text(findings: &[&Finding]) -> String {
    findings.iter().map(|f| format!("- {}", finding_line(f))).collect::<Vec<_>>().join("\n")
}

/// The Architect that revises the design: for a NO-GO with the verified
/// findings, for a SPEC-UPDATE-NEEDED with the spec feedback as well.
pub fn architect(ctx: &mut Ctx, kind: ReviewKind, seq: u32, verdict: &AuditVerdict, spec_update: bool) -> SpawnRequest {
    let l = Layout::new("");
    let f = ctx.feature().to_string();
    let path = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let verified: Vec<&Finding> = verdict.verified.iter().collect();
    let mut instructions = vec![format!(
        "The {kind} review B{seq} of {f} returned {}. Revise design.md and research.md so that every verified finding below is resolved; keep everything else as it is.",
        verdict.verdict
    )];
    if !verified.is_empty() {
        instructions.push(format!("Verified findings:\n{}", findings_text(&verified)));
    }
    if spec_update {
        let rows: Vec<String> =
            verdict.spec_feedback.iter().map(|s| format!("- {}|{}|{}", s.phase, s.spec, s.description)).collect();
        instructions.push(format!(
            "The review found the spec itself needs an update. Spec feedback:\n{}",
            if rows.is_empty() { "- (none given: use the findings)".to_string() } else { rows.join("\n") }
        ));
    }
    instructions.push(format!("The full verdict is archived in {}.", path(l.reviews_dir(&f).join(format!("B{seq}")))));
    instructions.push(
        "End with the ARCHITECT_COMPLETE report of your role prompt (or ARCHITECT_BLOCKED with a Blocker: line)."
            .into(),
    );
    let id = ctx.new_agent_id(Role::Architect, Some("fix"));
    SpawnRequest {
        id,
        role: Role::Architect,
        engine_phase: "design".into(),
        group: None,
        tasks: Vec::new(),
        context: SpawnContext {
            feature: f.clone(),
            read: vec![path(l.spec_file(&f)), path(l.design_file(&f)), path(l.research_file(&f))],
            write: vec![path(l.design_file(&f)), path(l.research_file(&f))],
            scope: format!("Revise the design of {f} after review B{seq}."),
            instructions,
        },
        attempt: 1,
    }
}

/// One Builder per group that owns an affected file, plus one for findings in
/// files no group owns. With no plan, every finding goes to that last Builder.
pub fn builders(ctx: &mut Ctx, seq: u32, verdict: &AuditVerdict, plan: Option<&BuildPlan>) -> Vec<SpawnRequest> {
    let mut per_group: Vec<(String, Vec<String>, Vec<&Finding>)> = Vec::new();
    let mut loose: Vec<&Finding> = Vec::new();
    let mut loose_files: Vec<String> = Vec::new();
    for finding in &verdict.verified {
        let path = location_path(&finding.location);
        let group = path.as_deref().and_then(|p| {
            plan.and_then(|plan| plan.groups.iter().find(|g| g.files.iter().any(|pat| pattern_matches(pat, p))))
        });
        match group {
            Some(g) => match per_group.iter_mut().find(|(id, _, _)| *id == g.id) {
                Some(entry) => entry.2.push(finding),
                None => per_group.push((g.id.clone(), g.files.clone(), vec![finding])),
            },
            None => {
                if let Some(p) = path
                    && !loose_files.contains(&p)
                {
                    loose_files.push(p);
                }
                loose.push(finding);
            }
        }
    }
    if !loose.is_empty() && loose_files.is_empty() {
        // Findings without a file: the files the implementation created are the scope.
        loose_files = ctx.spec().implementation.files_created.clone();
    }
    let mut out = Vec::new();
    for (group, files, findings) in per_group {
        out.push(builder(ctx, seq, Some(group), files, &findings));
    }
    if !loose.is_empty() {
        out.push(builder(ctx, seq, None, loose_files, &loose));
    }
    out
}

fn builder(ctx: &mut Ctx, seq: u32, group: Option<String>, files: Vec<String>, findings: &[&Finding]) -> SpawnRequest {
    let f = ctx.feature().to_string();
    let l = Layout::new("");
    let id = ctx.new_agent_id(Role::Builder, Some(&format!("fix-{}", group.as_deref().unwrap_or("loose"))));
    let mut read = vec![l.design_file(&f).to_string_lossy().into_owned()];
    read.extend(files.iter().cloned());
    SpawnRequest {
        id,
        role: Role::Builder,
        engine_phase: "impl".into(),
        group: group.clone(),
        tasks: Vec::new(),
        context: SpawnContext {
            feature: f.clone(),
            read,
            write: files,
            scope: format!("Fix the verified findings of review B{seq} of {f} in your files."),
            instructions: vec![
                format!("Fix each verified finding below. Work test first: a test that shows the problem, then the fix.\n{}", findings_text(findings)),
                "Run the test and lint commands of .troupe/steering/tech.md before you finish.".into(),
                "End with a BUILDER_COMPLETE report (Feature:, Tasks completed: none, Files:, Tests:, Status:) or BUILDER_BLOCKED with a Blocker: line.".into(),
            ],
        },
        attempt: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_to_paths() {
        let cases = [
            ("src/a.rs:42", Some("src/a.rs")),
            ("src/a.rs", Some("src/a.rs")),
            ("`lib/x.py`:3 (in foo)", Some("lib/x.py")),
            ("design.md", Some("design.md")),
            ("overall", None),
            ("/etc/passwd", None),
            ("../x.rs", None),
            ("", None),
        ];
        for (loc, want) in cases {
            assert_eq!(location_path(loc).as_deref(), want, "{loc}");
        }
    }

    #[test]
    fn patterns() {
        let cases = [
            ("src/a.rs", "src/a.rs", true),
            ("src/a.rs", "src/b.rs", false),
            ("src/auth/**", "src/auth/x/y.rs", true),
            ("src/auth/**", "src/authz.rs", false),
            ("src/*.rs", "src/a.rs", true),
            ("src/*.rs", "src/x/a.rs", false),
            ("tests/test_*.py", "tests/test_login.py", true),
        ];
        for (p, f, want) in cases {
            assert_eq!(pattern_matches(p, f), want, "{p} {f}");
        }
    }
}
