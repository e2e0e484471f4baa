//! Stream parsers: one per engine wire format, each turning the CLI's output
//! lines into normalised [`AgentEvent`]s.
//!
//! Rules shared by every parser: an empty line yields nothing; a line that is
//! not JSON, or JSON of an unknown shape or type, becomes [`AgentEvent::Raw`]
//! and never an error; unknown fields are ignored.

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::Value;
use troupe_core::event::{AgentEvent, ParsedOutput, ResultType, RunSummary};

mod claude;
mod codex;
mod effect;
mod gemini;
mod lines;
mod opencode;

pub use effect::{Change, Effect, FileChange};
pub use lines::{LineSplitter, MAX_LINE};

/// The stream formats troupe understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamFormat {
    /// Claude Code `--output-format stream-json --verbose`.
    Claude,
    /// Gemini CLI `--output-format stream-json`.
    Gemini,
    /// Codex `exec --json`.
    Codex,
    /// OpenCode `run --format json`.
    OpenCode,
    /// Plain text: every line is assistant text (custom engines).
    Text,
    /// troupe's own normalised events, one JSON object per line (the scripted
    /// engine, and custom engines that speak troupe's event format).
    Troupe,
}

impl StreamFormat {
    /// Parses a format name as written in config (`claude`, `gemini`, `codex`, `opencode`, `text`).
    pub fn from_name(name: &str) -> Option<StreamFormat> {
        Some(match name {
            "claude" => StreamFormat::Claude,
            "gemini" => StreamFormat::Gemini,
            "codex" => StreamFormat::Codex,
            "opencode" => StreamFormat::OpenCode,
            "text" => StreamFormat::Text,
            "troupe" => StreamFormat::Troupe,
            _ => return None,
        })
    }

    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::Claude => "claude",
            StreamFormat::Gemini => "gemini",
            StreamFormat::Codex => "codex",
            StreamFormat::OpenCode => "opencode",
            StreamFormat::Text => "text",
            StreamFormat::Troupe => "troupe",
        }
    }

    /// A fresh parser for this format.
    pub fn parser(self) -> Box<dyn StreamParser> {
        match self {
            StreamFormat::Claude => Box::new(claude::ClaudeParser::default()),
            StreamFormat::Gemini => Box::new(gemini::GeminiParser::default()),
            StreamFormat::Codex => Box::new(codex::CodexParser::default()),
            StreamFormat::OpenCode => Box::new(opencode::OpenCodeParser::default()),
            StreamFormat::Text => Box::new(TextParser),
            StreamFormat::Troupe => Box::new(TroupeParser),
        }
    }
}

/// Turns one engine's output lines into normalised events. Parsers keep the
/// state a format needs (turn counts, pending results) between lines.
pub trait StreamParser: Send {
    /// Parses one complete line (without its newline), appending events.
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>);

    /// The stream ended: formats without a result line (OpenCode) emit it here.
    fn finish(&mut self, _out: &mut Vec<AgentEvent>) {}
}

/// Every line of a plain-text engine is assistant text.
struct TextParser;

impl StreamParser for TextParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        if !line.is_empty() {
            out.push(AgentEvent::Text { text: format!("{}\n", String::from_utf8_lossy(line)) });
        }
    }
}

/// Every line is one [`AgentEvent`] as troupe writes it; a line that is not
/// one is kept as [`AgentEvent::Raw`], never dropped.
struct TroupeParser;

impl StreamParser for TroupeParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        out.push(serde_json::from_slice(line).unwrap_or_else(|_| AgentEvent::Raw {
            data: serde_json::Value::String(String::from_utf8_lossy(line).into_owned()),
        }));
    }
}

/// A byte stream to events: line splitting plus a format's parser, with a
/// running [`RunSummary`].
pub struct Normaliser {
    format: StreamFormat,
    lines: LineSplitter,
    parser: Box<dyn StreamParser>,
    summary: RunSummary,
    scratch: Vec<AgentEvent>,
}

impl Normaliser {
    /// A normaliser for `format`.
    pub fn new(format: StreamFormat) -> Self {
        Normaliser {
            format,
            lines: LineSplitter::new(),
            parser: format.parser(),
            summary: RunSummary::new(),
            scratch: Vec::new(),
        }
    }

    /// Feeds bytes as they were read; `f` gets every event completed by them.
    pub fn push(&mut self, bytes: &[u8], mut f: impl FnMut(&AgentEvent)) {
        let parser = &mut self.parser;
        let scratch = &mut self.scratch;
        self.lines.push(bytes, |line| parser.parse_line(line, scratch));
        self.drain(&mut f);
    }

    /// Ends the stream (flushes a last line without newline, lets the parser
    /// emit a pending result).
    pub fn finish(&mut self, mut f: impl FnMut(&AgentEvent)) {
        let parser = &mut self.parser;
        let scratch = &mut self.scratch;
        self.lines.finish(|line| parser.parse_line(line, scratch));
        self.parser.finish(&mut self.scratch);
        self.drain(&mut f);
    }

    fn drain(&mut self, f: &mut impl FnMut(&AgentEvent)) {
        for e in self.scratch.drain(..) {
            self.summary.observe(&e);
            f(&e);
        }
    }

    /// What has been seen so far.
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// The run's outcome once its process ended with `exit_code` (`None`:
    /// killed by a signal), `cancelled` when troupe stopped it. A plain-text
    /// engine has no result event: exit 0 is its success and its final text
    /// (after the last tool call, if any) is the report.
    pub fn outcome(&self, exit_code: Option<i32>, cancelled: bool, elapsed_ms: u64) -> ParsedOutput {
        let mut out = self.summary.finish(exit_code, cancelled, elapsed_ms);
        if self.format == StreamFormat::Text
            && exit_code == Some(0)
            && !cancelled
            && out.kind == ResultType::Interrupted
        {
            out.kind = ResultType::Success;
            out.error_message = None;
            out.result = self.summary.final_text().map(|t| t.trim_end().to_string());
        }
        out
    }
}

/// Parses a whole captured stream into its events.
pub fn parse_events(format: StreamFormat, data: &[u8]) -> Vec<AgentEvent> {
    let mut n = Normaliser::new(format);
    let mut events = Vec::new();
    n.push(data, |e| events.push(e.clone()));
    n.finish(|e| events.push(e.clone()));
    events
}

/// The seed's `parseOutput(data)`: the outcome of a whole captured stream of a
/// process that exited with `exit_code` (`None`: killed by a signal).
pub fn parse_output(format: StreamFormat, data: &[u8], exit_code: Option<i32>) -> ParsedOutput {
    let mut n = Normaliser::new(format);
    n.push(data, |_| {});
    n.finish(|_| {});
    n.outcome(exit_code, false, 0)
}

/// A line that could not be understood, kept as it was.
pub(crate) fn raw(line: &[u8]) -> AgentEvent {
    match serde_json::from_slice::<Value>(line) {
        Ok(data) => AgentEvent::Raw { data },
        Err(_) => AgentEvent::Raw { data: Value::String(String::from_utf8_lossy(line).into_owned()) },
    }
}

/// Trims ASCII whitespace; `None` for an empty line.
pub(crate) fn trimmed(line: &[u8]) -> Option<&[u8]> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace())? + 1;
    Some(&line[start..end])
}

/// Text that may be a JSON string or an array of `{"type":"text","text":..}`
/// blocks (tool results of several engines), joined into one string.
#[derive(Debug, Default)]
pub(crate) struct FlatText(pub String);

impl<'de> Deserialize<'de> for FlatText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FlatText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or an array of text blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FlatText, E> {
                Ok(FlatText(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<FlatText, E> {
                Ok(FlatText(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<FlatText, E> {
                Ok(FlatText::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FlatText, A::Error> {
                #[derive(Deserialize)]
                struct Block {
                    #[serde(default)]
                    text: Option<String>,
                }
                let mut out = String::new();
                while let Some(b) = seq.next_element::<Block>()? {
                    if let Some(t) = b.text {
                        if !out.is_empty() {
                            out.push('\n');
                        }
                        out.push_str(&t);
                    }
                }
                Ok(FlatText(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn troupe_format_reads_its_own_events_and_keeps_anything_else() {
        let text = AgentEvent::Text { text: "hi".into() };
        let mut stream = serde_json::to_vec(&text).unwrap();
        stream.extend_from_slice(b"\n\nnot an event\n");
        let mut n = Normaliser::new(StreamFormat::from_name("troupe").unwrap());
        let mut got = Vec::new();
        n.push(&stream, |e| got.push(e.clone()));
        n.finish(|e| got.push(e.clone()));
        assert_eq!(got[0], text);
        assert_eq!(got[1], AgentEvent::Raw { data: serde_json::Value::String("not an event".into()) });
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn a_text_engine_that_exits_zero_succeeds_with_its_text_as_the_report() {
        let out = parse_output(StreamFormat::Text, b"Done.\nChanged 2 files\n", Some(0));
        assert_eq!(out.kind, ResultType::Success, "{out:?}");
        assert_eq!(out.result.as_deref(), Some("Done.\nChanged 2 files"));
        let failed = parse_output(StreamFormat::Text, b"boom\n", Some(1));
        assert_eq!(failed.kind, ResultType::Error);
        let killed = parse_output(StreamFormat::Text, b"half\n", None);
        assert_eq!(killed.kind, ResultType::Interrupted);
        // Stream formats keep their rule: exit 0 without a result event is not a success.
        assert_eq!(parse_output(StreamFormat::Claude, b"", Some(0)).kind, ResultType::Interrupted);
    }
}
