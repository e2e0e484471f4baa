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

    /// Rewrite `feature`'s sections of session.md and buffer.md. Each file
    /// holds one section per feature (`## Feature: {feature}`), so the features
    /// of a roadmap wave, running side by side, never overwrite each other's.
    pub fn session(
        &self,
        at: Timestamp,
        feature: &str,
        phase: &str,
        lines: &[String],
        next: &str,
        buffer: &[String],
    ) -> io::Result<()> {
        let mut s =
            format!("Updated: {}\nPhase: {phase}\n\n### What ran\n\n", at.round(jiff::Unit::Second).unwrap_or(at));
        for l in lines {
            s.push_str(&format!("- {l}\n"));
        }
        s.push_str(&format!("\n### Next action\n\n{next}\n"));
        let mut b = String::new();
        if buffer.is_empty() {
            b.push_str("(none)\n");
        }
        for item in buffer {
            b.push_str(&format!("- {item}\n"));
        }
        let _one_at_a_time = shared();
        for (file, title, body) in [("session.md", "# Session\n", s), ("buffer.md", "# Buffer\n\nOpen items.\n", b)] {
            let path = self.dir.join(file);
            let old = fs::read_to_string(&path).unwrap_or_default();
            write_atomic(&path, with_section(&old, title, feature, &body).as_bytes())?;
        }
        Ok(())
    }
}

fn section_header(feature: &str) -> String {
    format!("## Feature: {feature}\n")
}

/// The sections of a handover file: (feature, body) in order. Text before the
/// first section (the title, or a file from an older troupe) is not kept.
fn sections(doc: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in doc.split("\n## Feature: ").skip(1) {
        let (feature, body) = part.split_once('\n').unwrap_or((part, ""));
        out.push((feature.trim().to_string(), body.trim_matches('\n').to_string()));
    }
    out
}

/// `doc` with `feature`'s section replaced by `body` (or added at the end).
fn with_section(doc: &str, title: &str, feature: &str, body: &str) -> String {
    let mut all = sections(doc);
    match all.iter_mut().find(|(f, _)| f == feature) {
        Some(s) => s.1 = body.trim_matches('\n').to_string(),
        None => all.push((feature.to_string(), body.trim_matches('\n').to_string())),
    }
    let mut text = title.to_string();
    for (f, b) in all {
        text.push('\n');
        text.push_str(&section_header(&f));
        text.push('\n');
        text.push_str(&b);
        text.push('\n');
    }
    text
}

/// The next action session.md records for `feature`, if any.
pub fn next_action(session: &str, feature: &str) -> Option<String> {
    let (_, body) = sections(session).into_iter().find(|(f, _)| f == feature)?;
    let next = body.split("### Next action").nth(1)?.trim();
    (!next.is_empty()).then(|| next.to_string())
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
    fn session_and_buffer_keep_one_section_per_feature() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let at: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        let h = Handover::open(&layout).unwrap();
        h.session(at, "pay", "design-generated", &["Architect a-1: done".into()], "run impl", &[]).unwrap();
        h.session(at, "cart", "initialized", &[], "run design", &["blocked by pay".into()]).unwrap();
        h.session(at, "pay", "implementation-complete", &["Builder b-1: done".into()], "review it", &[]).unwrap();
        let session = fs::read_to_string(layout.handover_dir().join("session.md")).unwrap();
        assert!(session.starts_with("# Session\n\n## Feature: pay\n"), "{session}");
        assert_eq!(session.matches("## Feature: ").count(), 2, "{session}");
        assert!(session.contains("Phase: implementation-complete") && !session.contains("Architect a-1"), "{session}");
        assert_eq!(next_action(&session, "pay").as_deref(), Some("review it"));
        assert_eq!(next_action(&session, "cart").as_deref(), Some("run design"));
        assert_eq!(next_action(&session, "ship"), None);
        let buffer = fs::read_to_string(layout.handover_dir().join("buffer.md")).unwrap();
        assert!(buffer.contains("## Feature: cart\n\n- blocked by pay\n"), "{buffer}");
        assert!(buffer.contains("## Feature: pay\n\n(none)\n"), "{buffer}");
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
