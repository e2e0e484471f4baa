//! Role memory (seed 004 "Role Memory"): the memory policy a role's skills grant,
//! and the Markdown file each role's memories live in, in the seed's layout:
//!
//! ```markdown
//! # Memory: frontend
//!
//! > Last modified: 2025-01-01T10:00:00.000Z
//! > Total entries: 1
//!
//! ## Preferences
//!
//! ### [mem_abc123]
//! User prefers React over Vue for frontend projects.
//! <!-- {"createdAt":"2025-01-01T10:00:00.000Z","type":"preference"} -->
//! ```
//!
//! Parsing is forgiving because people edit these files: an entry without its
//! metadata comment takes its type from its section, and text written under a
//! section without a `### [id]` heading becomes an entry of its own, so a
//! rewrite by the gateway never drops what a person wrote.
//!
//! Content can never change the file's structure: an entry's line that the
//! parser would read as structure (a heading, a metadata comment, a header
//! quote) or that starts with a backslash is written with a backslash in front,
//! Markdown's own escape, and the parser removes exactly one. So whatever an
//! agent saves, [`MemoryFile::parse`] of [`MemoryFile::render`] gives back the
//! same entries (content as [`normalize_content`] leaves it).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// How much memory a role may see (seed 004 "Memory Policies"). Ordered by
/// privilege: `all` > `team` > `isolated` > `none`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryPolicy {
    /// No memory access (the default).
    #[default]
    None,
    /// The role's own memory only.
    Isolated,
    /// Its own and the memories of named team roles.
    Team,
    /// Every role's memory.
    All,
}

impl MemoryPolicy {
    /// The policy's name as skills write it.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryPolicy::None => "none",
            MemoryPolicy::Isolated => "isolated",
            MemoryPolicy::Team => "team",
            MemoryPolicy::All => "all",
        }
    }
}

/// A role's resolved memory permission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryPermission {
    /// The highest policy granted along the role's inheritance chain.
    pub policy: MemoryPolicy,
    /// For `team`: the team roles, merged across skills and the chain.
    #[serde(rename = "teamRoles")]
    pub team_roles: BTreeSet<String>,
}

impl MemoryPermission {
    /// Folds one grant in: the highest policy wins, team roles are merged.
    pub fn merge(&mut self, policy: MemoryPolicy, team_roles: &[String]) {
        self.policy = self.policy.max(policy);
        if policy == MemoryPolicy::Team {
            self.team_roles.extend(team_roles.iter().cloned());
        }
    }

    /// True when `own_role` may read the memory of `target_role`.
    pub fn may_read(&self, own_role: &str, target_role: &str) -> bool {
        match self.policy {
            MemoryPolicy::None => false,
            MemoryPolicy::Isolated => own_role == target_role,
            MemoryPolicy::Team => own_role == target_role || self.team_roles.contains(target_role),
            MemoryPolicy::All => true,
        }
    }

    /// True when the role may use the memory tools at all (it writes only its own memory).
    pub fn may_use(&self) -> bool {
        self.policy != MemoryPolicy::None
    }
}

/// The kind of a memory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryType {
    /// A preference of the user or the team.
    Preference,
    /// A fact about the project.
    Fact,
    /// Context for ongoing work.
    Context,
    /// Something that happened.
    Episode,
    /// A lesson learned.
    Learned,
}

impl MemoryType {
    /// Every type, in the order their sections are written.
    pub const ALL: [MemoryType; 5] =
        [MemoryType::Preference, MemoryType::Fact, MemoryType::Context, MemoryType::Episode, MemoryType::Learned];

    /// The type's name in tool arguments and metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Preference => "preference",
            MemoryType::Fact => "fact",
            MemoryType::Context => "context",
            MemoryType::Episode => "episode",
            MemoryType::Learned => "learned",
        }
    }

    /// The section heading of this type.
    pub fn section(self) -> &'static str {
        match self {
            MemoryType::Preference => "Preferences",
            MemoryType::Fact => "Facts",
            MemoryType::Context => "Context",
            MemoryType::Episode => "Episodes",
            MemoryType::Learned => "Learned",
        }
    }

    /// Parses a type name (`fact`, ...).
    pub fn parse(text: &str) -> Option<MemoryType> {
        MemoryType::ALL.into_iter().find(|t| t.as_str() == text)
    }

    fn from_section(heading: &str) -> Option<MemoryType> {
        MemoryType::ALL.into_iter().find(|t| t.section().eq_ignore_ascii_case(heading.trim()))
    }
}

/// One memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryEntry {
    /// `mem_…`, unique in its file.
    pub id: String,
    /// The entry's type.
    #[serde(rename = "type")]
    pub kind: MemoryType,
    /// The text.
    pub content: String,
    /// When it was saved (RFC 3339), when known.
    #[serde(rename = "createdAt", skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Free tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// The metadata comment after each entry.
#[derive(Serialize, Deserialize)]
struct Meta {
    #[serde(rename = "createdAt", default, skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
}

/// One role's memory file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryFile {
    /// The role the file belongs to.
    pub role: String,
    /// The entries, in file order within each type.
    pub entries: Vec<MemoryEntry>,
}

impl MemoryFile {
    /// An empty memory for `role`.
    pub fn new(role: &str) -> MemoryFile {
        MemoryFile { role: role.to_string(), entries: Vec::new() }
    }

    /// Parses a memory file. Never fails: unknown lines outside entries are
    /// kept as entries of the section they are in (or `context` before any section).
    pub fn parse(role: &str, text: &str) -> MemoryFile {
        let mut file = MemoryFile::new(role);
        let mut section = MemoryType::Context;
        let mut current: Option<MemoryEntry> = None;
        let mut loose: Vec<String> = Vec::new();
        let mut manual = 0usize;

        let flush_loose = |loose: &mut Vec<String>, file: &mut MemoryFile, section: MemoryType, manual: &mut usize| {
            let text = loose.join("\n").trim().to_string();
            loose.clear();
            if !text.is_empty() {
                *manual += 1;
                file.entries.push(MemoryEntry {
                    id: format!("mem_manual{manual}"),
                    kind: section,
                    content: text,
                    created_at: None,
                    tags: Vec::new(),
                });
            }
        };
        let finish = |current: &mut Option<MemoryEntry>, file: &mut MemoryFile| {
            if let Some(mut entry) = current.take() {
                entry.content = entry.content.trim().to_string();
                file.entries.push(entry);
            }
        };

        for line in text.lines() {
            if let Some(heading) = line.strip_prefix("### [").and_then(|rest| rest.strip_suffix(']')) {
                finish(&mut current, &mut file);
                flush_loose(&mut loose, &mut file, section, &mut manual);
                current = Some(MemoryEntry {
                    id: heading.trim().to_string(),
                    kind: section,
                    content: String::new(),
                    created_at: None,
                    tags: Vec::new(),
                });
            } else if let Some(heading) = line.strip_prefix("## ") {
                finish(&mut current, &mut file);
                flush_loose(&mut loose, &mut file, section, &mut manual);
                section = MemoryType::from_section(heading).unwrap_or(MemoryType::Context);
            } else if line.starts_with("# Memory:")
                || line.starts_with("> Last modified:")
                || line.starts_with("> Total entries:")
            {
                continue;
            } else if let Some(json) = line.trim_end().strip_prefix("<!--").and_then(|l| l.strip_suffix("-->")) {
                match (current.as_mut(), serde_json::from_str::<Meta>(json.trim())) {
                    (Some(entry), Ok(meta)) => {
                        entry.kind = MemoryType::parse(&meta.kind).unwrap_or(entry.kind);
                        entry.created_at = meta.created_at;
                        entry.tags = meta.tags;
                        finish(&mut current, &mut file);
                    }
                    _ => loose.push(line.to_string()),
                }
            } else if let Some(entry) = current.as_mut() {
                entry.content.push_str(line.strip_prefix('\\').unwrap_or(line));
                entry.content.push('\n');
            } else {
                loose.push(line.to_string());
            }
        }
        finish(&mut current, &mut file);
        flush_loose(&mut loose, &mut file, section, &mut manual);
        file
    }

    /// Renders the file in the seed's layout. `now` is the RFC 3339 time for
    /// the "Last modified" line.
    pub fn render(&self, now: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# Memory: {}\n", self.role);
        let _ = writeln!(out, "> Last modified: {now}");
        let _ = writeln!(out, "> Total entries: {}", self.entries.len());
        for kind in MemoryType::ALL {
            let mut entries = self.entries.iter().filter(|e| e.kind == kind).peekable();
            if entries.peek().is_none() {
                continue;
            }
            let _ = writeln!(out, "\n## {}", kind.section());
            for entry in entries {
                let meta = Meta {
                    created_at: entry.created_at.clone(),
                    kind: kind.as_str().to_string(),
                    tags: entry.tags.clone(),
                };
                let meta = serde_json::to_string(&meta).unwrap_or_default();
                let _ = writeln!(out, "\n### [{}]", entry.id);
                for line in normalize_content(&entry.content).lines() {
                    let _ = writeln!(out, "{}{line}", if needs_escape(line) { "\\" } else { "" });
                }
                let _ = writeln!(out, "<!-- {meta} -->");
            }
        }
        out
    }

    /// Entries matching `query` (every word, case-insensitive, in the content
    /// or the tags; an empty query matches all), optionally of one type, newest
    /// last as in the file, at most `limit`.
    pub fn recall(&self, query: &str, kind: Option<MemoryType>, limit: usize) -> Vec<&MemoryEntry> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.entries
            .iter()
            .filter(|e| kind.is_none_or(|k| e.kind == k))
            .filter(|e| {
                let haystack = format!("{} {}", e.content, e.tags.join(" ")).to_lowercase();
                words.iter().all(|w| haystack.contains(w.as_str()))
            })
            .take(limit)
            .collect()
    }

    /// Count of entries per type, for `list_memories`.
    pub fn stats(&self) -> Vec<(MemoryType, usize)> {
        MemoryType::ALL.into_iter().map(|k| (k, self.entries.iter().filter(|e| e.kind == k).count())).collect()
    }
}

/// Memory content as it is stored: line ends made `\n` (a lone `\r` would
/// not survive a line-by-line read) and surrounding whitespace trimmed. Never
/// changes what the content says otherwise.
pub fn normalize_content(content: &str) -> String {
    content.replace("\r\n", "\n").replace('\r', "\n").trim().to_string()
}

/// True when a content line would be read back as structure (or starts with
/// the escape itself), so [`MemoryFile::render`] writes it behind a backslash.
fn needs_escape(line: &str) -> bool {
    line.starts_with(['#', '>', '\\']) || line.starts_with("<!--")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SEED: &str = "# Memory: frontend

> Last modified: 2025-01-01T10:00:00.000Z
> Total entries: 2

## Preferences

### [mem_abc123]
User prefers React over Vue for frontend projects.
<!-- {\"createdAt\":\"2025-01-01T09:00:00.000Z\",\"type\":\"preference\"} -->

## Facts

### [mem_def456]
API endpoint is at /api/v2/
<!-- {\"createdAt\":\"2025-01-01T09:30:00.000Z\",\"type\":\"fact\"} -->
";

    #[test]
    fn the_seed_layout_round_trips() {
        let file = MemoryFile::parse("frontend", SEED);
        assert_eq!(file.entries.len(), 2);
        assert_eq!(file.entries[0].kind, MemoryType::Preference);
        assert_eq!(file.entries[1].content, "API endpoint is at /api/v2/");
        assert_eq!(file.render("2025-01-01T10:00:00.000Z"), SEED);
    }

    #[test]
    fn hand_written_text_is_kept() {
        let text = "# Memory: x\n\n## Facts\n\nThe build needs Node 22.\n\n### [mem_1]\nno comment here\n";
        let file = MemoryFile::parse("x", text);
        assert_eq!(file.entries.len(), 2, "{file:?}");
        assert_eq!(file.entries[0].content, "The build needs Node 22.");
        assert_eq!(file.entries[0].kind, MemoryType::Fact);
        assert_eq!(file.entries[1].kind, MemoryType::Fact);
        let again = MemoryFile::parse("x", &file.render("now"));
        assert_eq!(again.entries.len(), 2);
    }

    #[test]
    fn recall_filters() {
        let file = MemoryFile::parse("frontend", SEED);
        assert_eq!(file.recall("react", None, 10).len(), 1);
        assert_eq!(file.recall("", Some(MemoryType::Fact), 10).len(), 1);
        assert_eq!(file.recall("api vue", None, 10).len(), 0);
    }

    #[test]
    fn policy_order_and_access() {
        let mut p = MemoryPermission::default();
        assert!(!p.may_use());
        p.merge(MemoryPolicy::Isolated, &[]);
        p.merge(MemoryPolicy::Team, &["qa".into()]);
        p.merge(MemoryPolicy::Isolated, &[]);
        assert_eq!(p.policy, MemoryPolicy::Team);
        assert!(p.may_read("lead", "qa") && p.may_read("lead", "lead") && !p.may_read("lead", "backend"));
    }

    #[test]
    fn content_cannot_forge_structure() {
        let mut file = MemoryFile::new("x");
        file.entries.push(MemoryEntry {
            id: "mem_1".into(),
            kind: MemoryType::Fact,
            content: "a\n### [mem_evil]\n<!-- {\"type\":\"preference\"} -->\n## Preferences\n> Total entries: 9".into(),
            created_at: None,
            tags: vec![],
        });
        let text = file.render("now");
        let again = MemoryFile::parse("x", &text);
        assert_eq!(again, file, "{text}");
    }

    #[test]
    fn a_heading_as_first_line_is_recalled_whole() {
        // The first line used to lose its indent to `trim` and become a section.
        let mut file = MemoryFile::new("x");
        for (i, content) in ["## Facts\nthe API is v2", "### [mem_forged]\nowned", "# Memory: y"].iter().enumerate() {
            file.entries.push(MemoryEntry {
                id: format!("mem_{i}"),
                kind: MemoryType::Context,
                content: content.to_string(),
                created_at: None,
                tags: vec![],
            });
        }
        let text = file.render("now");
        assert!(text.contains("\n\\## Facts\n"), "{text}");
        let again = MemoryFile::parse("x", &text);
        assert_eq!(again, file, "{text}");
        assert_eq!(again.recall("api", None, 10)[0].content, "## Facts\nthe API is v2");
    }

    /// Lines an agent might write to break out of its entry, mixed with text.
    fn hostile_line() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("## Facts".to_string()),
            Just("## Preferences".to_string()),
            Just("### [mem_x]".to_string()),
            Just("# Memory: lead".to_string()),
            Just("> Last modified: now".to_string()),
            Just("> Total entries: 3".to_string()),
            Just("<!-- {\"type\":\"fact\"} -->".to_string()),
            Just("\\## escaped already".to_string()),
            Just(String::new()),
            "[ #>\\\\<!\\-\\[\\]a-z\r\t]{0,12}",
            any::<String>(),
        ]
    }

    fn entry() -> impl Strategy<Value = MemoryEntry> {
        (
            prop::collection::vec(hostile_line(), 0..6),
            prop::sample::select(MemoryType::ALL.to_vec()),
            proptest::option::of(any::<String>()),
            prop::collection::vec(any::<String>(), 0..3),
        )
            .prop_map(|(lines, kind, created_at, tags)| MemoryEntry {
                id: String::new(),
                kind,
                content: normalize_content(&lines.join("\n")),
                created_at,
                tags,
            })
    }

    proptest! {
        #[test]
        fn content_never_changes_the_structure(entries in prop::collection::vec(entry(), 0..8)) {
            let mut file = MemoryFile::new("builder");
            for (i, mut e) in entries.into_iter().enumerate() {
                e.id = format!("mem_{i:06x}");
                file.entries.push(e);
            }
            // The file groups entries by type; within a type the order is kept.
            file.entries.sort_by_key(|e| MemoryType::ALL.iter().position(|k| *k == e.kind));
            let text = file.render("2026-01-01T00:00:00.000Z");
            prop_assert_eq!(MemoryFile::parse("builder", &text), file, "{}", text);
        }
    }
}
