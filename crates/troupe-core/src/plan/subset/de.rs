//! The subset's tree as a serde `Deserializer`, so that the plan's own
//! `Deserialize` impls read it. Plain scalars get the types the YAML parser
//! (yaml_serde) gives them — null, booleans, decimal integers and simple
//! decimals — and any other text that could be a number (`0x1f`, `1e3`, `-1`,
//! `.5`) is an error here, so that the YAML parser reads the plan instead.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::Node;

/// Why the tree did not deserialise; never shown (the YAML parser reads the
/// text again and reports its own error).
#[derive(Debug)]
pub(crate) struct Unread;

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("left to the YAML parser")
    }
}

impl std::error::Error for Unread {}

impl de::Error for Unread {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Unread
    }
}

/// What a plain scalar stands for.
enum Plain<'a> {
    Null,
    Bool(bool),
    Unsigned(u64),
    Float(f64),
    Text(&'a str),
}

/// Whether a plain scalar is null or a boolean (not text) to the YAML parser.
pub(super) fn resolves(text: &str) -> bool {
    matches!(resolve(text), Some(Plain::Null | Plain::Bool(_)))
}

/// A plain scalar's value as yaml_serde resolves it, or `None` for what this
/// reader leaves to it.
fn resolve(text: &str) -> Option<Plain<'_>> {
    Some(match text {
        "" | "~" | "null" | "Null" | "NULL" => Plain::Null,
        "true" | "True" | "TRUE" => Plain::Bool(true),
        "false" | "False" | "FALSE" => Plain::Bool(false),
        _ => match text.as_bytes()[0] {
            b'0'..=b'9' => number(text)?,
            b'+' | b'-' | b'.' => return None,
            _ => Plain::Text(text),
        },
    })
}

/// Digits (`12`; `007` is text, as YAML 1.2 says), or digits, a dot and
/// digits (`1.10`, read as the float 1.1).
fn number(text: &str) -> Option<Plain<'_>> {
    let (whole, fraction) = match text.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (text, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match fraction {
        None if digits(whole) && whole.len() > 1 && whole.starts_with('0') => Some(Plain::Text(text)),
        None if digits(whole) => whole.parse().ok().map(Plain::Unsigned),
        Some(f) if digits(whole) && digits(f) => text.parse().ok().map(Plain::Float),
        _ => None,
    }
}

impl<'de> Node<'de> {
    fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { text, plain: true } if matches!(resolve(text), Some(Plain::Null)))
    }
}

impl<'de> Deserializer<'de> for Node<'de> {
    type Error = Unread;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unread> {
        match self {
            Node::Map(entries) => visitor.visit_map(Entries { entries: entries.into_iter(), value: None }),
            Node::Seq(items) => visitor.visit_seq(Items(items.into_iter())),
            Node::Scalar { text, plain: false } => visitor.visit_str(&text),
            Node::Scalar { text, plain: true } => match resolve(&text).ok_or(Unread)? {
                Plain::Null => visitor.visit_unit(),
                Plain::Bool(b) => visitor.visit_bool(b),
                Plain::Unsigned(n) => visitor.visit_u64(n),
                Plain::Float(x) => visitor.visit_f64(x),
                Plain::Text(s) => visitor.visit_str(s),
            },
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unread> {
        if self.is_null() { visitor.visit_none() } else { visitor.visit_some(self) }
    }

    // An empty value where a list or a mapping is expected is an empty one
    // to yaml_serde; `null` or `~` is not.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unread> {
        match self {
            Node::Scalar { text, plain: true } if text.is_empty() => visitor.visit_seq(Items(Vec::new().into_iter())),
            node @ Node::Seq(_) => node.deserialize_any(visitor),
            _ => Err(Unread),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unread> {
        match self {
            Node::Scalar { text, plain: true } if text.is_empty() => {
                visitor.visit_map(Entries { entries: Vec::new().into_iter(), value: None })
            }
            node @ Node::Map(_) => node.deserialize_any(visitor),
            _ => Err(Unread),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Unread> {
        self.deserialize_map(visitor)
    }

    // Everything else goes by the node's own kind; a mismatch is the
    // visitor's error, and so the YAML parser's turn.
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct tuple tuple_struct enum identifier ignored_any
    }
}

struct Items<'de>(std::vec::IntoIter<Node<'de>>);

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Unread;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Unread> {
        self.0.next().map(|node| seed.deserialize(node)).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'de> {
    entries: std::vec::IntoIter<(&'de str, Node<'de>)>,
    value: Option<Node<'de>>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Unread;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Unread> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(BorrowedStrDeserializer::new(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Unread> {
        seed.deserialize(self.value.take().ok_or(Unread)?)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}
