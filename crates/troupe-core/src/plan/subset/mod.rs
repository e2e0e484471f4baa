//! A fast reader for the block-style YAML that tasks.yaml is written in.
//!
//! The YAML parser builds an event per scalar and per collection before serde
//! sees any of them; at 100,000 work items that is about a fifth of a plan
//! import. This reader takes the common subset in one pass over the lines —
//! block mappings and sequences, plain and quoted one-line scalars, one-line
//! flow lists of scalars, comments — into a small tree that [`de`] hands to
//! the same `Deserialize` impls as the YAML parser. It answers `None` for
//! anything outside the subset, and any error while deserialising the tree is
//! dropped too: the caller then reads the text with the YAML parser, so what a
//! plan means and every error message (with its line) still come from there.
//! Whatever this reader accepts, it must read exactly as the YAML parser does
//! (tested against it in `tests`).

mod de;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use de::resolves;

/// A YAML node of the subset.
#[derive(Debug, PartialEq)]
pub(crate) enum Node<'a> {
    /// A block mapping, keys in order (no key twice).
    Map(Vec<(&'a str, Node<'a>)>),
    /// A block sequence or a flow list.
    Seq(Vec<Node<'a>>),
    /// A scalar; a plain one (unquoted) has its type resolved from its text.
    Scalar { text: Cow<'a, str>, plain: bool },
}

/// Read `text` as a [`super::TaskPlan`], or `None` when it is outside the
/// subset or does not deserialise (the YAML parser then reads it).
pub(crate) fn read(text: &str) -> Option<super::TaskPlan> {
    serde::Deserialize::deserialize(parse(text)?).ok()
}

/// Nesting deeper than this is left to the YAML parser (which has its own limit).
const MAX_DEPTH: usize = 24;

/// The document in `text` as a tree, or `None` when it is outside the subset.
pub(crate) fn parse(text: &str) -> Option<Node<'_>> {
    let lines = lines(text)?;
    let first = lines.first()?.indent;
    let mut parser = Parser { lines, pos: 0, depth: 0 };
    let node = parser.block(first)?;
    (parser.pos == parser.lines.len()).then_some(node)
}

/// A line with content: its indentation and the rest, trailing spaces cut.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    body: &'a str,
}

/// The lines that carry content (blank and comment-only lines dropped), or
/// `None` when the text has anything this reader leaves to the YAML parser
/// anywhere: tabs, carriage returns, control or non-printable characters, a
/// byte order mark, directives and document markers.
fn lines(text: &str) -> Option<Vec<Line<'_>>> {
    let ascii_ok = |b: u8| b == b'\n' || (0x20..0x7f).contains(&b) || b >= 0x80;
    if !text.bytes().all(ascii_ok) {
        return None;
    }
    if !text.is_ascii() && text.chars().any(|c| matches!(c, '\u{80}'..='\u{9f}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'))
    {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 24);
    for line in text.split('\n') {
        let body = line.trim_start_matches(' ');
        let body = body.trim_end_matches(' ');
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        if indent == 0 && (body.starts_with("---") || body.starts_with("...") || body.starts_with('%')) {
            return None;
        }
        out.push(Line { indent, body });
    }
    Some(out)
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// The collection whose first line is the next one, at `indent`.
    fn block(&mut self, indent: usize) -> Option<Node<'a>> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let node = if is_item(self.peek()?.body) { self.seq(indent) } else { self.map(indent) };
        self.depth -= 1;
        node
    }

    fn seq(&mut self, indent: usize) -> Option<Node<'a>> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent || (line.indent == indent && !is_item(line.body)) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            // `- ` then the item: a mapping whose first key is on this line, or a scalar.
            let rest = line.body[1..].strip_prefix(' ')?;
            let content = rest.trim_start_matches(' ');
            let column = indent + 2 + (rest.len() - content.len());
            if content.starts_with('-') || content.starts_with('#') {
                return None;
            }
            if key_of(content).is_some() {
                // The item's mapping starts at the key's column: read the line as if written there.
                self.lines[self.pos] = Line { indent: column, body: content };
                items.push(self.block(column)?);
            } else {
                self.pos += 1;
                items.push(self.inline(content, indent)?);
            }
        }
        Some(Node::Seq(items))
    }

    fn map(&mut self, indent: usize) -> Option<Node<'a>> {
        let mut entries: Vec<(&'a str, Node<'a>)> = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let (key, rest) = key_of(line.body)?;
            if entries.iter().any(|(k, _)| *k == key) {
                return None;
            }
            self.pos += 1;
            let value = if rest.is_empty() || rest.starts_with('#') {
                match self.peek() {
                    Some(next) if next.indent > indent => self.block(next.indent)?,
                    // A sequence may sit at its key's own indentation.
                    Some(next) if next.indent == indent && is_item(next.body) => self.block(indent)?,
                    _ => Node::Scalar { text: Cow::Borrowed(""), plain: true },
                }
            } else {
                self.inline(rest, indent)?
            };
            entries.push((key, value));
        }
        Some(Node::Map(entries))
    }

    /// A value written on its line after `key: ` or `- `, in a collection at
    /// `indent`; a more indented line after it would continue it (not in the subset).
    fn inline(&mut self, text: &'a str, indent: usize) -> Option<Node<'a>> {
        if self.peek().is_some_and(|next| next.indent > indent) {
            return None;
        }
        let (node, rest) = match text.as_bytes()[0] {
            b'"' | b'\'' => quoted(text)?,
            b'[' => flow(text)?,
            _ => return plain(text, false),
        };
        end_of_line(rest).then_some(node)
    }
}

/// Whether a line's body is a sequence item (`- ...` or a lone `-`).
fn is_item(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

/// `key: rest` with a simple key (letters, digits, `_`, `-`), rest trimmed.
fn key_of(body: &str) -> Option<(&str, &str)> {
    let end = body.find(':')?;
    let key = &body[..end];
    let first = *key.as_bytes().first()?;
    if !first.is_ascii_alphabetic() && first != b'_' {
        return None;
    }
    if !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') || resolves(key) {
        return None;
    }
    let rest = &body[end + 1..];
    match rest.strip_prefix(' ') {
        Some(rest) => Some((key, rest.trim_start_matches(' '))),
        None if rest.is_empty() => Some((key, rest)),
        None => None,
    }
}

/// What may follow a value on its line: nothing, or a comment after a space.
fn end_of_line(rest: &str) -> bool {
    rest.is_empty() || (rest.starts_with(' ') && rest.trim_start_matches(' ').starts_with('#'))
}

/// Characters that give a plain scalar's first character a YAML meaning.
const INDICATORS: &[u8] = b"-?:,[]{}#&*!|>'\"%@`";

/// A plain scalar: `text` up to a comment. In a flow list (`in_flow`) it may
/// hold none of `[]{},:#`.
fn plain(text: &str, in_flow: bool) -> Option<Node<'_>> {
    if in_flow && text.bytes().any(|b| b"[]{},:#".contains(&b)) {
        return None;
    }
    let value = match text.find(" #") {
        Some(at) => text[..at].trim_end_matches(' '),
        None => text,
    };
    let first = *value.as_bytes().first()?;
    if INDICATORS.contains(&first) || value.contains(": ") || value.ends_with(':') {
        return None;
    }
    Some(Node::Scalar { text: Cow::Borrowed(value), plain: true })
}

/// A quoted scalar at the start of `text` and what follows it on the line.
fn quoted(text: &str) -> Option<(Node<'_>, &str)> {
    let quote = text.as_bytes()[0];
    let body = &text[1..];
    let mut owned: Option<String> = None;
    let mut start = 0;
    let mut i = 0;
    let bytes = body.as_bytes();
    while i < bytes.len() {
        let b = bytes[i];
        if quote == b'\'' && b == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                owned.get_or_insert_with(String::new).push_str(&body[start..=i]);
                i += 2;
                start = i;
                continue;
            }
            break;
        }
        if quote == b'"' && b == b'"' {
            break;
        }
        if quote == b'"' && b == b'\\' {
            let unescaped = match bytes.get(i + 1)? {
                b'\\' => '\\',
                b'"' => '"',
                b'/' => '/',
                b'n' => '\n',
                b't' => '\t',
                b'r' => '\r',
                _ => return None,
            };
            let s = owned.get_or_insert_with(String::new);
            s.push_str(&body[start..i]);
            s.push(unescaped);
            i += 2;
            start = i;
            continue;
        }
        i += 1;
    }
    if i >= bytes.len() {
        return None; // The closing quote is on another line.
    }
    let text = match owned {
        Some(mut s) => {
            s.push_str(&body[start..i]);
            Cow::Owned(s)
        }
        None => Cow::Borrowed(&body[..i]),
    };
    Some((Node::Scalar { text, plain: false }, &body[i + 1..]))
}

/// A one-line flow list of scalars at the start of `text` and what follows it.
fn flow(text: &str) -> Option<(Node<'_>, &str)> {
    let mut items = Vec::new();
    let mut rest = text[1..].trim_start_matches(' ');
    if let Some(after) = rest.strip_prefix(']') {
        return Some((Node::Seq(items), after));
    }
    loop {
        let (item, after) = match rest.as_bytes().first()? {
            b'"' | b'\'' => quoted(rest)?,
            _ => {
                let end = rest.find([',', ']'])?;
                (plain(rest[..end].trim_end_matches(' '), true)?, &rest[end..])
            }
        };
        items.push(item);
        let after = after.trim_start_matches(' ');
        if let Some(after) = after.strip_prefix(']') {
            return Some((Node::Seq(items), after));
        }
        // A comma then another item (a trailing comma is left to the YAML parser).
        rest = after.strip_prefix(',')?.trim_start_matches(' ');
        if rest.starts_with(']') {
            return None;
        }
    }
}
