//! The deterministic phase classifier (seed 001 施策3, offline fallback): which
//! kind of work a user's message asks for, so the hook can suggest the matching
//! command and skill. Guidance only: the answer is never a block.
//!
//! Keywords alone cannot tell "undo/redoの実装を調べて" (research about an
//! implementation) from "undo/redoを実装して". What can is which word *governs*
//! the sentence: in Japanese the verb comes last, in English an imperative comes
//! first. So each keyword is a verb or a noun; the governing verb decides, nouns
//! only when there is no verb.

/// A kind of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// A new feature that needs a spec first.
    FeatureSpec,
    /// Write code.
    Implement,
    /// Design the architecture.
    Design,
    /// Find and fix a failure.
    Debug,
    /// Investigate, compare, explain.
    Research,
    /// Plan and break down work.
    Plan,
    /// Review existing work.
    Review,
    /// Conversation that needs no phase.
    None,
}

impl Phase {
    /// The phase's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::FeatureSpec => "feature-spec",
            Phase::Implement => "implement",
            Phase::Design => "design",
            Phase::Debug => "debug",
            Phase::Research => "research",
            Phase::Plan => "plan",
            Phase::Review => "review",
            Phase::None => "none",
        }
    }

    /// What the hook tells the agent for this phase; `None` for [`Phase::None`].
    pub fn guidance(self, code_skill: &str, verification_skill: &str) -> Option<String> {
        let text = match self {
            Phase::None => return None,
            Phase::FeatureSpec => "This asks for a new feature. Start from a spec: `troupe spec new <feature>`, then \
                 let troupe run the design and tasks phases (`troupe run <feature>`) before any code is written."
                .to_string(),
            Phase::Implement => format!(
                "This asks for implementation. Invoke the `{code_skill}` skill before editing code (the gate requires \
                 it); if the work belongs to a spec, implement through `troupe run <feature>`. Before finishing, invoke \
                 `{verification_skill}` and run the tests."
            ),
            Phase::Design => "This asks for design. Write or revise the feature's design.md through troupe \
                 (`troupe run <feature>` runs the Architect); do not write code yet."
                .to_string(),
            Phase::Debug => format!(
                "This asks to debug a failure. Reproduce it first (a failing test), find the root cause, then fix it \
                 with the `{code_skill}` skill invoked; finish with `{verification_skill}`."
            ),
            Phase::Research => "This asks for research. Read, search and explain; do not edit code. Record findings \
                 in the feature's research.md if they matter for a spec."
                .to_string(),
            Phase::Plan => "This asks for a plan. Break the work into tasks with dependencies (`troupe run <feature>` \
                 produces tasks.yaml through the TaskGenerator); do not write code yet."
                .to_string(),
            Phase::Review => "This asks for a review. Read the change against its spec and steering, report findings \
                 by severity; do not rewrite the code under review."
                .to_string(),
        };
        Some(format!("troupe phase detection: {}. {text}", self.as_str()))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Verb,
    Noun,
}

use Kind::{Noun, Verb};

/// Keywords, lower case. Longer forms first where one contains another.
const KEYWORDS: &[(&str, Phase, Kind)] = &[
    // research
    ("調べて", Phase::Research, Verb),
    ("調べる", Phase::Research, Verb),
    ("調査して", Phase::Research, Verb),
    ("調査", Phase::Research, Noun),
    ("教えて", Phase::Research, Verb),
    ("知りたい", Phase::Research, Verb),
    ("説明して", Phase::Research, Verb),
    ("比較して", Phase::Research, Verb),
    ("理解したい", Phase::Research, Verb),
    ("探して", Phase::Research, Verb),
    ("research", Phase::Research, Verb),
    ("investigate", Phase::Research, Verb),
    ("look into", Phase::Research, Verb),
    ("find out", Phase::Research, Verb),
    ("explain", Phase::Research, Verb),
    ("compare", Phase::Research, Verb),
    ("explore", Phase::Research, Verb),
    ("how does", Phase::Research, Verb),
    ("what is", Phase::Research, Verb),
    ("where is", Phase::Research, Verb),
    ("survey", Phase::Research, Verb),
    // implement
    ("実装して", Phase::Implement, Verb),
    ("実装する", Phase::Implement, Verb),
    ("作って", Phase::Implement, Verb),
    ("追加して", Phase::Implement, Verb),
    ("書いて", Phase::Implement, Verb),
    ("対応して", Phase::Implement, Verb),
    ("リファクタ", Phase::Implement, Verb),
    ("実装", Phase::Implement, Noun),
    ("implement", Phase::Implement, Verb),
    ("add ", Phase::Implement, Verb),
    ("write ", Phase::Implement, Verb),
    ("create ", Phase::Implement, Verb),
    ("refactor", Phase::Implement, Verb),
    ("code ", Phase::Implement, Noun),
    // feature spec
    ("仕様を書いて", Phase::FeatureSpec, Verb),
    ("write a spec", Phase::FeatureSpec, Verb),
    ("write the spec", Phase::FeatureSpec, Verb),
    ("仕様", Phase::FeatureSpec, Noun),
    ("要件", Phase::FeatureSpec, Noun),
    ("新機能", Phase::FeatureSpec, Noun),
    ("spec", Phase::FeatureSpec, Noun),
    ("requirements", Phase::FeatureSpec, Noun),
    ("new feature", Phase::FeatureSpec, Noun),
    // design
    ("設計して", Phase::Design, Verb),
    ("設計", Phase::Design, Noun),
    ("アーキテクチャ", Phase::Design, Noun),
    ("design", Phase::Design, Verb),
    ("architect", Phase::Design, Verb),
    // debug
    ("デバッグ", Phase::Debug, Verb),
    ("直して", Phase::Debug, Verb),
    ("修正して", Phase::Debug, Verb),
    ("バグ", Phase::Debug, Noun),
    ("エラー", Phase::Debug, Noun),
    ("不具合", Phase::Debug, Noun),
    ("落ちる", Phase::Debug, Noun),
    ("動かない", Phase::Debug, Noun),
    ("失敗", Phase::Debug, Noun),
    ("debug", Phase::Debug, Verb),
    ("fix", Phase::Debug, Verb),
    ("bug", Phase::Debug, Noun),
    ("error", Phase::Debug, Noun),
    ("fails", Phase::Debug, Noun),
    ("failing", Phase::Debug, Noun),
    ("broken", Phase::Debug, Noun),
    ("crash", Phase::Debug, Noun),
    ("exception", Phase::Debug, Noun),
    ("not working", Phase::Debug, Noun),
    ("doesn't work", Phase::Debug, Noun),
    ("regression", Phase::Debug, Noun),
    // plan
    ("計画して", Phase::Plan, Verb),
    ("計画", Phase::Plan, Noun),
    ("ロードマップ", Phase::Plan, Noun),
    ("タスク分割", Phase::Plan, Verb),
    ("plan", Phase::Plan, Verb),
    ("roadmap", Phase::Plan, Noun),
    ("break down", Phase::Plan, Verb),
    ("breakdown", Phase::Plan, Noun),
    ("milestone", Phase::Plan, Noun),
    // review
    ("レビューして", Phase::Review, Verb),
    ("レビュー", Phase::Review, Noun),
    ("見直して", Phase::Review, Verb),
    ("review", Phase::Review, Verb),
    ("audit", Phase::Review, Verb),
];

/// Classify a user's message.
pub fn classify(message: &str) -> Phase {
    let text = format!(" {} ", message.to_lowercase());
    let japanese =
        message.chars().any(|c| ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{4e00}'..='\u{9fff}').contains(&c));
    // (phase, kind, start, end) of every keyword occurrence.
    let mut hits: Vec<(Phase, Kind, usize, usize)> = Vec::new();
    for (word, phase, kind) in KEYWORDS {
        for (start, _) in text.match_indices(word) {
            if !word.is_ascii() || at_word_start(&text, start) {
                hits.push((*phase, *kind, start, start + word.len()));
            }
        }
    }
    if hits.is_empty() {
        return Phase::None;
    }
    // In Japanese the governing verb is the last one; in English the first.
    let pick = |kind: Kind| {
        let of_kind = hits.iter().filter(|h| h.1 == kind);
        if japanese {
            of_kind.max_by_key(|h| (h.3, h.3 - h.2))
        } else {
            of_kind.min_by_key(|h| (h.2, usize::MAX - h.3))
        }
    };
    let chosen = pick(Verb).or_else(|| pick(Noun)).map(|h| h.0).unwrap_or(Phase::None);
    // "Find out why the build fails" is debugging, not research.
    if chosen == Phase::Research && hits.iter().any(|h| h.0 == Phase::Debug) {
        return Phase::Debug;
    }
    chosen
}

fn at_word_start(text: &str, start: usize) -> bool {
    text[..start].chars().next_back().is_none_or(|c| !c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let table: &[(&str, Phase)] = &[
            ("undo/redoの実装を調べて", Phase::Research),
            ("undo/redoを実装して", Phase::Implement),
            ("ログイン機能の設計をして", Phase::Design),
            ("テストが落ちる原因を調べて", Phase::Debug),
            ("このバグを直して", Phase::Debug),
            ("新機能の仕様を書いて", Phase::FeatureSpec),
            ("PRをレビューして", Phase::Review),
            ("来月のロードマップを計画して", Phase::Plan),
            ("ありがとう", Phase::None),
            ("Implement undo/redo in the editor", Phase::Implement),
            ("Investigate how undo/redo is implemented", Phase::Research),
            ("How does the session store work?", Phase::Research),
            ("Fix the login crash on Safari", Phase::Debug),
            ("The build is broken since yesterday", Phase::Debug),
            ("Find out why the tests are failing", Phase::Debug),
            ("Write a spec for password reset", Phase::FeatureSpec),
            ("We need requirements for a new feature: password reset", Phase::FeatureSpec),
            ("Design the plugin architecture", Phase::Design),
            ("Plan the migration to Postgres", Phase::Plan),
            ("Review my change to auth.rs", Phase::Review),
            ("Add a --json flag to troupe spec show", Phase::Implement),
            ("thanks, that's all", Phase::None),
            ("Add a prefix to the label", Phase::Implement),
        ];
        for (message, phase) in table {
            assert_eq!(classify(message), *phase, "{message}");
        }
    }

    #[test]
    fn guidance_names_the_skills() {
        let g = Phase::Implement.guidance("code-quality-rules", "verification-before-completion").unwrap();
        assert!(g.contains("code-quality-rules") && g.contains("verification-before-completion"), "{g}");
        assert!(Phase::None.guidance("a", "b").is_none());
    }
}
