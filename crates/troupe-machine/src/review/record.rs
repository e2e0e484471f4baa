//! The review record: `verdicts.md` entries and the `B{seq}` numbering.
//!
//! Each round appends one entry whose header is the seed's
//! `## [B{seq}] {type} | {ts} | v{ver} | runs:{N} | threshold:{K}/{N}`, followed
//! by the verdict, the severity counts, what the Lead did, and the notes.

use jiff::Timestamp;
use troupe_core::consensus;
use troupe_core::cpf::{AuditVerdict, Severity};

use crate::review::perspectives::ReviewKind;

/// What one round's entry says.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord<'a> {
    /// The round's number.
    pub seq: u32,
    /// The review type.
    pub kind: ReviewKind,
    /// When it concluded.
    pub at: Timestamp,
    /// The spec version reviewed.
    pub version: &'a str,
    /// N pipelines.
    pub runs: usize,
    /// K of N.
    pub threshold: usize,
    /// The verdict acted on.
    pub verdict: &'a AuditVerdict,
    /// What the Lead does next, in a few words.
    pub action: &'a str,
}

/// `## [B{seq}] {type} | {ts} | v{ver} | runs:{N} | threshold:{K}/{N}`.
pub fn header(r: &RoundRecord) -> String {
    format!("## [B{}] {} | {} | v{} | {}", r.seq, r.kind, r.at, r.version, consensus::record(r.runs, r.threshold))
}

/// The whole entry, ending with a blank line.
pub fn entry(r: &RoundRecord) -> String {
    let count = |s: Severity| r.verdict.verified.iter().filter(|f| f.severity == s).count();
    let mut out = format!(
        "{}\n- verdict: {}\n- verified: C:{} H:{} M:{} L:{} (removed: {})\n- action: {}\n",
        header(r),
        r.verdict.verdict,
        count(Severity::Critical),
        count(Severity::High),
        count(Severity::Medium),
        count(Severity::Low),
        r.verdict.removed.len(),
        r.action,
    );
    for n in &r.verdict.notes {
        out.push_str(&format!("- note: {n}\n"));
    }
    out.push('\n');
    out
}

/// The `seq` of a `B{seq}` folder name, if it is one.
pub fn parse_seq(name: &str) -> Option<u32> {
    name.strip_prefix('B').and_then(|n| n.parse().ok())
}

/// The next round's number: one more than the highest seen in folder names
/// and in `verdicts.md` headers, so numbering survives a deleted archive.
pub fn next_seq<'a>(folders: impl IntoIterator<Item = &'a str>, verdicts_md: &str) -> u32 {
    let from_dirs = folders.into_iter().filter_map(parse_seq);
    let from_md = verdicts_md
        .lines()
        .filter_map(|l| l.strip_prefix("## [B"))
        .filter_map(|l| l.split(']').next())
        .filter_map(|n| n.parse::<u32>().ok());
    from_dirs.chain(from_md).max().unwrap_or(0) + 1
}

/// One round as `verdicts.md` records it, read back (for `troupe status` and
/// `troupe resume`): the reader of the format [`entry`] writes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Round {
    /// `B{seq}`'s number.
    pub seq: u32,
    /// `design` or `impl`.
    pub kind: String,
    /// GO, CONDITIONAL, NO-GO or SPEC-UPDATE-NEEDED.
    pub verdict: String,
    /// Verified findings by severity: critical, high, medium, low.
    pub findings: Severities,
}

/// Findings counted by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Severities {
    /// C
    pub critical: u32,
    /// H
    pub high: u32,
    /// M
    pub medium: u32,
    /// L
    pub low: u32,
}

/// Every round of `verdicts_md`, oldest first; what cannot be read is skipped.
pub fn rounds(verdicts_md: &str) -> Vec<Round> {
    let mut out: Vec<Round> = Vec::new();
    for line in verdicts_md.lines() {
        if let Some(rest) = line.strip_prefix("## [B") {
            let Some((seq, rest)) = rest.split_once("] ") else { continue };
            let Ok(seq) = seq.parse() else { continue };
            let kind = rest.split(" | ").next().unwrap_or_default().trim().to_string();
            out.push(Round { seq, kind, verdict: String::new(), findings: Severities::default() });
        } else if let Some(round) = out.last_mut() {
            if let Some(v) = line.strip_prefix("- verdict: ") {
                round.verdict = v.trim().to_string();
            } else if let Some(counts) = line.strip_prefix("- verified: ") {
                for part in counts.split_whitespace() {
                    let Some((sev, n)) = part.split_once(':') else { continue };
                    let n = n.parse().unwrap_or(0);
                    match sev {
                        "C" => round.findings.critical = n,
                        "H" => round.findings.high = n,
                        "M" => round.findings.medium = n,
                        "L" => round.findings.low = n,
                        _ => {}
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_read_back_what_entry_writes() {
        let v: AuditVerdict =
            "VERDICT:CONDITIONAL\nSCOPE:login\nVERIFIED:\ni1|H|sec|a.rs:1|x\ni2|L|sec|b.rs|y\ni3|L|t|c.rs|z\n"
                .parse()
                .unwrap();
        let r = RoundRecord {
            seq: 2,
            kind: ReviewKind::Design,
            at: "2026-01-01T10:00:00Z".parse().unwrap(),
            version: "1.0",
            runs: 1,
            threshold: 1,
            verdict: &v,
            action: "continue",
        };
        let md = format!(
            "# Verdicts: login\n\n## [B1] impl | t | v1.0 | runs:1 | threshold:1/1\n- verdict: NO-GO\n\n{}",
            entry(&r)
        );
        let all = rounds(&md);
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].seq, all[0].kind.as_str(), all[0].verdict.as_str()), (1, "impl", "NO-GO"));
        let last = &all[1];
        assert_eq!((last.seq, last.kind.as_str(), last.verdict.as_str()), (2, "design", "CONDITIONAL"));
        assert_eq!(last.findings, Severities { critical: 0, high: 1, medium: 0, low: 2 });
        assert!(rounds("## [Bx] broken\n- verdict: GO\n").is_empty());
    }

    #[test]
    fn entry_has_the_seeds_header_and_the_counts() {
        let v: AuditVerdict = "VERDICT:NO-GO\nSCOPE:login\nVERIFIED:\ni1|C|sec|a.rs:1|x\ni2|H|sec|b.rs|y\nNOTES:\nAUDITOR_UNAVAILABLE|lead-derived verdict\n"
            .parse()
            .unwrap();
        let r = RoundRecord {
            seq: 4,
            kind: ReviewKind::Impl,
            at: "2026-01-01T10:00:00Z".parse().unwrap(),
            version: "1.2",
            runs: 3,
            threshold: 2,
            verdict: &v,
            action: "auto-fix round 1/5",
        };
        assert_eq!(header(&r), "## [B4] impl | 2026-01-01T10:00:00Z | v1.2 | runs:3 | threshold:2/3");
        let e = entry(&r);
        assert!(e.contains("- verdict: NO-GO\n"), "{e}");
        assert!(e.contains("- verified: C:1 H:1 M:0 L:0 (removed: 0)\n"), "{e}");
        assert!(e.contains("- note: AUDITOR_UNAVAILABLE|lead-derived verdict\n"), "{e}");
        assert!(e.ends_with("\n\n"));
    }

    #[test]
    fn next_seq_takes_the_highest_of_folders_and_record() {
        assert_eq!(next_seq([], ""), 1);
        assert_eq!(next_seq(["B1", "B3", "active", "Bx"], ""), 4);
        assert_eq!(next_seq(["B1"], "## [B7] impl | t | v1.0 | runs:1 | threshold:1/1\n"), 8);
    }
}
