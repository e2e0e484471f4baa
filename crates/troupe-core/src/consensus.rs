//! Consensus mode (seed 000, Spec 9.5): `--consensus N` runs N review
//! pipelines and aggregates their verdicts.
//!
//! Verdicts are ordered by how much work they send back:
//! `GO < CONDITIONAL < NO-GO < SPEC-UPDATE-NEEDED`. The consensus verdict is the
//! most severe verdict that at least K pipelines agree on, where a pipeline
//! agrees with every verdict up to its own: with N=3, K=2 and
//! `[NO-GO, CONDITIONAL, GO]`, two pipelines say "at least CONDITIONAL", only one
//! says "at least NO-GO", so the result is CONDITIONAL. GO always has N
//! supporters, so there is always a result. With K=1 the most severe verdict
//! wins; with K=N the mildest.
//!
//! Findings are merged across pipelines by location and category, like the
//! Auditor merges Inspectors' findings; a finding verified by more pipelines
//! ranks higher, then by severity.
//!
//! ```
//! use troupe_core::consensus::{aggregate, majority};
//! use troupe_core::cpf::{AuditVerdict, Verdict};
//!
//! let v = |s: &str| s.parse::<AuditVerdict>().unwrap();
//! let runs = [v("VERDICT:NO-GO\nSCOPE:login\n"), v("VERDICT:NO-GO\nSCOPE:login\n"), v("VERDICT:GO\nSCOPE:login\n")];
//! let c = aggregate(&runs, majority(3)).unwrap();
//! assert_eq!(c.verdict, Verdict::NoGo);
//! assert_eq!(c.record(), "runs:3 | threshold:2/3");
//! ```

use crate::cpf::{AuditVerdict, Finding, Verdict};

/// The default threshold: a strict majority of `n` (2 of 3, 3 of 4, 1 of 1).
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// How much work a verdict sends back, for the ordering above.
pub fn severity_rank(v: Verdict) -> u8 {
    match v {
        Verdict::Go => 0,
        Verdict::Conditional => 1,
        Verdict::NoGo => 2,
        Verdict::SpecUpdateNeeded => 3,
    }
}

/// Consensus over inputs that cannot be aggregated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsensusError {
    /// No pipeline produced a verdict.
    #[error("no pipeline verdicts to aggregate")]
    NoRuns,
    /// K must be between 1 and N.
    #[error("threshold {threshold} is not between 1 and the number of runs ({runs})")]
    BadThreshold {
        /// K.
        threshold: usize,
        /// N.
        runs: usize,
    },
}

/// A finding with the number of pipelines that verified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedFinding {
    /// The merged finding (agents of every pipeline, highest severity).
    pub finding: Finding,
    /// How many pipelines verified it.
    pub pipelines: usize,
}

/// The aggregate of N pipelines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consensus {
    /// The verdict at least `threshold` pipelines agree on.
    pub verdict: Verdict,
    /// N.
    pub runs: usize,
    /// K.
    pub threshold: usize,
    /// How many pipelines returned each verdict, mildest first; verdicts nobody returned are left out.
    pub votes: Vec<(Verdict, usize)>,
    /// Findings, most-agreed first, then most severe.
    pub findings: Vec<RankedFinding>,
    /// The aggregated `verdict.cpf`: the consensus verdict, the ranked findings
    /// as VERIFIED, the union of the other sections, and a `CONSENSUS|...` note.
    pub audit: AuditVerdict,
}

impl Consensus {
    /// `runs:{N} | threshold:{K}/{N}`, as recorded in verdicts.md.
    pub fn record(&self) -> String {
        record(self.runs, self.threshold)
    }
}

/// `runs:{N} | threshold:{K}/{N}`.
pub fn record(runs: usize, threshold: usize) -> String {
    format!("runs:{runs} | threshold:{threshold}/{runs}")
}

/// Aggregate the verdicts of N pipelines with threshold K (see the module docs).
pub fn aggregate(verdicts: &[AuditVerdict], threshold: usize) -> Result<Consensus, ConsensusError> {
    let runs = verdicts.len();
    if runs == 0 {
        return Err(ConsensusError::NoRuns);
    }
    if threshold == 0 || threshold > runs {
        return Err(ConsensusError::BadThreshold { threshold, runs });
    }
    let all = [Verdict::Go, Verdict::Conditional, Verdict::NoGo, Verdict::SpecUpdateNeeded];
    let verdict = all
        .into_iter()
        .rev()
        .find(|v| verdicts.iter().filter(|p| severity_rank(p.verdict) >= severity_rank(*v)).count() >= threshold)
        .unwrap_or(Verdict::Go);
    let votes = all
        .into_iter()
        .map(|v| (v, verdicts.iter().filter(|p| p.verdict == v).count()))
        .filter(|(_, n)| *n > 0)
        .collect::<Vec<_>>();
    let findings = rank_findings(verdicts);

    let mut notes = vec![format!(
        "CONSENSUS|{}|{}",
        record(runs, threshold),
        votes.iter().map(|(v, n)| format!("{v}={n}")).collect::<Vec<_>>().join(" ")
    )];
    for f in &findings {
        notes.push(format!("AGREEMENT|{}/{runs}|{}|{}", f.pipelines, f.finding.location, f.finding.category));
    }
    for v in verdicts {
        for n in &v.notes {
            push_unique(&mut notes, n.clone());
        }
    }
    let mut audit = AuditVerdict {
        verdict,
        qualifier: String::new(),
        scope: verdicts[0].scope.clone(),
        verified: findings.iter().map(|f| f.finding.clone()).collect(),
        removed: Vec::new(),
        resolved: Vec::new(),
        spec_feedback: Vec::new(),
        steering: Vec::new(),
        notes,
    };
    for v in verdicts {
        v.removed.iter().for_each(|r| push_unique(&mut audit.removed, r.clone()));
        v.resolved.iter().for_each(|r| push_unique(&mut audit.resolved, r.clone()));
        v.spec_feedback.iter().for_each(|r| push_unique(&mut audit.spec_feedback, r.clone()));
        v.steering.iter().for_each(|r| push_unique(&mut audit.steering, r.clone()));
    }
    Ok(Consensus { verdict, runs, threshold, votes, findings, audit })
}

fn push_unique<T: PartialEq>(into: &mut Vec<T>, item: T) {
    if !into.contains(&item) {
        into.push(item);
    }
}

fn same_place(a: &Finding, b: &Finding) -> bool {
    a.location.trim() == b.location.trim() && a.category.trim().eq_ignore_ascii_case(b.category.trim())
}

/// Merge the VERIFIED rows of every pipeline, counting pipelines per finding.
fn rank_findings(verdicts: &[AuditVerdict]) -> Vec<RankedFinding> {
    let mut out: Vec<RankedFinding> = Vec::new();
    for v in verdicts {
        let mut counted: Vec<usize> = Vec::new();
        for f in &v.verified {
            match out.iter().position(|r| same_place(&r.finding, f)) {
                Some(i) => {
                    let r = &mut out[i];
                    for a in &f.agents {
                        push_unique(&mut r.finding.agents, a.clone());
                    }
                    if f.severity > r.finding.severity {
                        r.finding.severity = f.severity;
                        r.finding.description = f.description.clone();
                    }
                    if !counted.contains(&i) {
                        counted.push(i);
                        r.pipelines += 1;
                    }
                }
                None => {
                    counted.push(out.len());
                    out.push(RankedFinding { finding: f.clone(), pipelines: 1 });
                }
            }
        }
    }
    // Stable: ties keep the order in which findings were first reported.
    out.sort_by(|a, b| b.pipelines.cmp(&a.pipelines).then(b.finding.severity.cmp(&a.finding.severity)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpf::Severity;

    fn v(text: &str) -> AuditVerdict {
        text.parse().unwrap()
    }

    fn only(verdict: &str) -> AuditVerdict {
        v(&format!("VERDICT:{verdict}\nSCOPE:f\n"))
    }

    #[test]
    fn verdict_table() {
        use Verdict::*;
        let cases: &[(&[&str], usize, Verdict)] = &[
            (&["GO"], 1, Go),
            (&["NO-GO"], 1, NoGo),
            (&["NO-GO", "NO-GO", "GO"], 2, NoGo),
            (&["NO-GO", "GO", "GO"], 2, Go),
            (&["NO-GO", "CONDITIONAL", "GO"], 2, Conditional),
            (&["NO-GO", "CONDITIONAL", "GO"], 1, NoGo),
            (&["NO-GO", "CONDITIONAL", "GO"], 3, Go),
            (&["SPEC-UPDATE-NEEDED", "NO-GO", "GO"], 2, NoGo),
            (&["SPEC-UPDATE-NEEDED", "SPEC-UPDATE-NEEDED", "GO"], 2, SpecUpdateNeeded),
            (&["CONDITIONAL", "CONDITIONAL", "NO-GO", "GO"], 3, Conditional),
        ];
        for (runs, k, want) in cases {
            let verdicts: Vec<AuditVerdict> = runs.iter().map(|r| only(r)).collect();
            assert_eq!(aggregate(&verdicts, *k).unwrap().verdict, *want, "{runs:?} K={k}");
        }
    }

    #[test]
    fn majority_and_record() {
        assert_eq!([1, 2, 3, 4, 5].map(majority), [1, 2, 2, 3, 3]);
        let c = aggregate(&[only("GO"), only("GO"), only("NO-GO")], 2).unwrap();
        assert_eq!(c.record(), "runs:3 | threshold:2/3");
        assert_eq!(c.votes, vec![(Verdict::Go, 2), (Verdict::NoGo, 1)]);
        assert!(c.audit.notes[0].starts_with("CONSENSUS|runs:3 | threshold:2/3|GO=2 NO-GO=1"), "{:?}", c.audit.notes);
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert_eq!(aggregate(&[], 1), Err(ConsensusError::NoRuns));
        assert_eq!(aggregate(&[only("GO")], 0), Err(ConsensusError::BadThreshold { threshold: 0, runs: 1 }));
        assert_eq!(
            aggregate(&[only("GO")], 2).unwrap_err().to_string(),
            "threshold 2 is not between 1 and the number of runs (1)"
        );
    }

    #[test]
    fn findings_verified_by_more_pipelines_rank_higher() {
        let p1 = v(
            "VERDICT:NO-GO\nSCOPE:f\nVERIFIED:\ni1|C|security|src/a.rs:3|password logged\ni2|L|naming|src/b.rs|tok\n",
        );
        let p2 = v("VERDICT:CONDITIONAL\nSCOPE:f\nVERIFIED:\ni7|M|naming|src/b.rs|bad name\n");
        let p3 = v("VERDICT:GO\nSCOPE:f\nVERIFIED:\ni9|L|Naming|src/b.rs|meh\n");
        let c = aggregate(&[p1, p2, p3], 2).unwrap();
        assert_eq!(c.verdict, Verdict::Conditional);
        assert_eq!(c.findings.len(), 2);
        assert_eq!(c.findings[0].pipelines, 3);
        assert_eq!(c.findings[0].finding.location, "src/b.rs");
        assert_eq!(c.findings[0].finding.severity, Severity::Medium, "highest severity kept");
        assert_eq!(c.findings[0].finding.agents, vec!["i2", "i7", "i9"]);
        assert_eq!(c.findings[1].pipelines, 1);
        assert_eq!(c.audit.verified[0].location, "src/b.rs");
        assert!(c.audit.notes.contains(&"AGREEMENT|3/3|src/b.rs|naming".to_string()), "{:?}", c.audit.notes);
        let text = c.audit.to_string();
        assert_eq!(text.parse::<AuditVerdict>().unwrap(), c.audit, "the aggregate is valid CPF");
    }

    #[test]
    fn a_finding_listed_twice_by_one_pipeline_counts_once() {
        let p1 = v("VERDICT:GO\nSCOPE:f\nVERIFIED:\ni1|L|x|a|one\ni2|M|x|a|two\n");
        let c = aggregate(&[p1, only("GO")], 1).unwrap();
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].pipelines, 1);
    }

    #[test]
    fn other_sections_are_united_without_duplicates() {
        let p = "VERDICT:SPEC-UPDATE-NEEDED\nSCOPE:f\nSPEC_FEEDBACK:\ndesign|f|the limit is undefined\nNOTES:\nPARTIAL_VERIFICATION\n";
        let c = aggregate(&[v(p), v(p), only("GO")], 2).unwrap();
        assert_eq!(c.verdict, Verdict::SpecUpdateNeeded);
        assert_eq!(c.audit.spec_feedback.len(), 1);
        assert_eq!(c.audit.notes.iter().filter(|n| *n == "PARTIAL_VERIFICATION").count(), 1);
    }
}
