//! `.troupe/handover/`: session.md (auto-drafted), decisions.md
//! (`[ISO-8601] D{seq}: {TYPE} | {summary}`), buffer.md (open items) and
//! knowledge.md (tagged lines from reports, deduplicated). Seed 000 Spec 6.7.

use std::fs;
use std::io;
use std::path::PathBuf;

use jiff::Timestamp;
use troupe_core::layout::Layout;
use troupe_project::write_atomic;

use crate::machine::{DecisionKind, KnowledgeTag};

/// The handover folders of this process and the next decision number of each.
/// Runs of a roadmap wave share the folder: numbering and knowledge.md's
/// read-modify-write go through this lock, so that no number is given twice
/// and no line is lost.
fn shared() -> std::sync::MutexGuard<'static, std::collections::HashMap<PathBuf, u64>> {
    static SHARED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, u64>>> =
        std::sync::OnceLock::new();
    SHARED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes the handover files of one project.
#[derive(Debug)]
pub struct Handover {
    dir: PathBuf,
    next_seq: u64,
}

impl Handover {
    /// The handover folder of `layout`; decision numbers continue from decisions.md.
    pub fn open(layout: &Layout) -> io::Result<Handover> {
        let dir = layout.handover_dir();
        fs::create_dir_all(&dir)?;
        let existing = fs::read_to_string(dir.join("decisions.md")).unwrap_or_default();
        let last = existing
            .lines()
            .filter_map(|l| l.split_once("] D").and_then(|(_, rest)| rest.split(':').next()?.parse::<u64>().ok()))
            .max()
            .unwrap_or(0);
        Ok(Handover { dir, next_seq: last + 1 })
    }

    /// Append one decision line. decisions.md is a log: lines are appended
    /// (one `write` each, O_APPEND), never rewritten, so a crash loses at most
    /// the line being written and a long run costs no rewrite per decision.
    pub fn decision(&mut self, at: Timestamp, kind: DecisionKind, summary: &str) -> io::Result<()> {
        use std::io::Write;
        let path = self.dir.join("decisions.md");
        let mut file = fs::OpenOptions::new().create(true).append(true).open(&path)?;
        let mut text = String::new();
        if file.metadata()?.len() == 0 {
            text.push_str("# Decisions\n\n");
        }
        let one_line = summary.replace('\n', " ");
        let at = at.round(jiff::Unit::Second).unwrap_or(at);
        let mut numbers = shared();
        let next = numbers.entry(self.dir.clone()).or_insert(0);
        let seq = self.next_seq.max(*next);
        text.push_str(&format!("[{at}] D{seq}: {} | {one_line}\n", kind.as_str()));
        (self.next_seq, *next) = (seq + 1, seq + 1);
        file.write_all(text.as_bytes())
    }

    /// Add knowledge lines that are not there yet (same tag and text count once).
    pub fn knowledge(&self, feature: &str, from: &str, entries: &[(KnowledgeTag, String)]) -> io::Result<usize> {
        let path = self.dir.join("knowledge.md");
        let _one_at_a_time = shared();
        let mut text = fs::read_to_string(&path)
            .unwrap_or_else(|_| "# Knowledge\n\nTagged lines from completion reports, deduplicated.\n\n".to_string());
        let mut added = 0;
        for (tag, line) in entries {
            let key = format!("- {} {}", tag.as_str(), line.trim());
            if text.lines().any(|l| l == key || l.starts_with(&format!("{key} ("))) {
                continue;
            }
            text.push_str(&format!("{key} ({feature}, {from})\n"));
            added += 1;
        }
        if added > 0 {
            write_atomic(&path, text.as_bytes())?;
        }
        Ok(added)
    }

    /// Rewrite session.md and buffer.md.
    pub fn session(
        &self,
        at: Timestamp,
        feature: &str,
        phase: &str,
        lines: &[String],
        next: &str,
        buffer: &[String],
    ) -> io::Result<()> {
        let mut s = format!(
            "# Session\n\nUpdated: {}\nFeature: {feature}\nPhase: {phase}\n\n## What ran\n\n",
            at.round(jiff::Unit::Second).unwrap_or(at)
        );
        for l in lines {
            s.push_str(&format!("- {l}\n"));
        }
        s.push_str(&format!("\n## Next action\n\n{next}\n"));
        write_atomic(&self.dir.join("session.md"), s.as_bytes())?;
        let mut b = String::from("# Buffer\n\nOpen items.\n\n");
        if buffer.is_empty() {
            b.push_str("(none)\n");
        }
        for item in buffer {
            b.push_str(&format!("- {item}\n"));
        }
        write_atomic(&self.dir.join("buffer.md"), b.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_numbered_across_runs_and_knowledge_is_deduplicated() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let at: Timestamp = "2026-01-01T10:00:00.123Z".parse().unwrap();
        let mut h = Handover::open(&layout).unwrap();
        h.decision(at, DecisionKind::Gate, "design allowed").unwrap();
        h.decision(at, DecisionKind::Spawn, "Architect architect-1").unwrap();
        let mut h = Handover::open(&layout).unwrap();
        h.decision(at, DecisionKind::Commit, "abc").unwrap();
        let text = fs::read_to_string(layout.handover_dir().join("decisions.md")).unwrap();
        assert!(text.contains("[2026-01-01T10:00:00Z] D1: GATE | design allowed\n"), "{text}");
        assert!(text.contains("D3: COMMIT | abc"));
        let e = vec![(KnowledgeTag::Pattern, "pure parsers".to_string())];
        assert_eq!(h.knowledge("login", "b1", &e).unwrap(), 1);
        assert_eq!(h.knowledge("login", "b2", &e).unwrap(), 0);
        let k = fs::read_to_string(layout.handover_dir().join("knowledge.md")).unwrap();
        assert_eq!(k.matches("[PATTERN] pure parsers").count(), 1);
    }

    #[test]
    fn runs_side_by_side_never_share_a_decision_number() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let at: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        // Two features of a wave open the folder before either writes.
        let (a, b) = (Handover::open(&layout).unwrap(), Handover::open(&layout).unwrap());
        let threads: Vec<_> = [(a, "pay"), (b, "cart")]
            .into_iter()
            .map(|(mut h, f)| {
                std::thread::spawn(move || {
                    for i in 0..50 {
                        h.decision(at, DecisionKind::Spawn, &format!("{f} {i}")).unwrap();
                        h.knowledge(f, "b", &[(KnowledgeTag::Pattern, format!("{f} {i}"))]).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = fs::read_to_string(layout.handover_dir().join("decisions.md")).unwrap();
        let mut seqs: Vec<u64> = text
            .lines()
            .filter_map(|l| l.split_once("] D").and_then(|(_, r)| r.split(':').next()?.parse().ok()))
            .collect();
        seqs.sort();
        assert_eq!(seqs, (1..=100).collect::<Vec<u64>>(), "{text}");
        let k = fs::read_to_string(layout.handover_dir().join("knowledge.md")).unwrap();
        assert_eq!(k.matches("[PATTERN] ").count(), 100, "no line lost: {k}");
    }
}
