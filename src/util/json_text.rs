//! JSON text as it was written: its numbers and the order of its keys
//! kept. serde_json's `Value` reads a number beyond 64 bits or 17 digits
//! through a float (`123456789012345678901234567890` came back as
//! `1.2345678901234568e29`) and sorts keys, so a worker's result was not
//! the one it gave. Strings are made readable (`\u65e5` as `日`, as
//! Python's default `ensure_ascii` writes them) and whitespace between
//! tokens dropped (compact) or laid out (pretty).

use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One JSON value's text, compact, as written.
#[derive(Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// `text` as one JSON value, compacted; `None` if it is not one.
    #[must_use]
    pub fn parse(text: &str) -> Option<JsonText> {
        let raw: &RawValue = serde_json::from_str(text).ok()?;
        Some(JsonText(compact(raw.get())))
    }

    /// `text` as a JSON string.
    #[must_use]
    pub fn string(text: &str) -> JsonText {
        JsonText(Value::String(text.to_string()).to_string())
    }

    /// A stored text: the JSON value it is, or else itself as a string
    /// (as every reader of payloads and results takes it).
    #[must_use]
    pub fn stored(text: &str) -> JsonText {
        JsonText::parse(text).unwrap_or_else(|| JsonText::string(text))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value, for reading a field (its numbers through floats).
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// Laid out as `serde_json::to_string_pretty` lays out a value (two
    /// spaces an indent), with the text's own numbers and key order.
    #[must_use]
    pub fn pretty(&self) -> String {
        pretty(&self.0)
    }
}

impl std::fmt::Debug for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Written as it is by serde_json's serializers (`to_string`; `to_value`
/// and `json!` read it back into a `Value`, numbers through floats).
impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match RawValue::from_string(self.0.clone()) {
            Ok(raw) => raw.serialize(s),
            Err(_) => Value::Null.serialize(s),
        }
    }
}

/// The end (exclusive) of the string token starting at `start` (its `"`).
fn string_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// A string token with its escapes made readable where they need not be
/// escapes (`\u65e5` → `日`); kept as written if it cannot be read (a
/// lone surrogate).
fn readable(token: &str) -> String {
    serde_json::from_str::<String>(token)
        .map(|s| Value::String(s).to_string())
        .unwrap_or_else(|_| token.to_string())
}

/// Valid JSON `text` without whitespace between tokens, its strings
/// readable.
fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        match c {
            '"' => {
                let end = string_end(text, i);
                out.push_str(&readable(&text[i..end]));
                i = end;
                continue;
            }
            ' ' | '\t' | '\n' | '\r' => {}
            c => out.push(c),
        }
        i += c.len_utf8();
    }
    out
}

/// Compact valid JSON `text` laid out two spaces an indent.
fn pretty(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        match c {
            '"' => {
                let end = string_end(text, i);
                out.push_str(&text[i..end]);
                i = end;
                continue;
            }
            '{' | '[' => {
                let close = if c == '{' { '}' } else { ']' };
                if text[i + 1..].starts_with(close) {
                    out.push(c);
                    out.push(close);
                    i += 2;
                    continue;
                }
                out.push(c);
                depth += 1;
                newline(&mut out, depth);
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(',');
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c => out.push(c),
        }
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers beyond a float's digits, key order and escapes inside
    /// strings survive; escapes that need not be are made readable.
    #[test]
    fn a_text_keeps_its_numbers_and_key_order() {
        let written = "{ \"id\": 123456789012345678901234567890, \"f\": 0.1000000000000000055511151231257827,\n  \"a\": [1, 2.50, -0e0], \"題\": \"\\u65e5\\u672c \\\"引用\\\" \\\\ \\n\", \"e\": {}, \"l\": [] }";
        let kept = JsonText::parse(written).unwrap();
        assert_eq!(
            kept.as_str(),
            "{\"id\":123456789012345678901234567890,\"f\":0.1000000000000000055511151231257827,\
             \"a\":[1,2.50,-0e0],\"題\":\"日本 \\\"引用\\\" \\\\ \\n\",\"e\":{},\"l\":[]}"
        );
        assert_eq!(
            serde_json::to_string(&kept).unwrap(),
            kept.as_str(),
            "serialized as it is"
        );
        assert_eq!(kept.value()["題"], "日本 \"引用\" \\ \n");
        assert_eq!(JsonText::parse("not json"), None);
        assert_eq!(JsonText::parse("{} {}"), None);
        assert_eq!(JsonText::stored("plain text").as_str(), "\"plain text\"");
    }

    /// Laid out as serde_json lays out the same value, but for its own
    /// numbers and order.
    #[test]
    fn pretty_is_laid_out_as_serde_json_lays_it_out() {
        for text in [
            "{\"a\":1,\"b\":[1,{\"c\":null}],\"d\":{},\"e\":[],\"f\":\"x, y: {z}\"}",
            "[]",
            "\"日本語\"",
            "[[],[1],{\"k\":[true,false]}]",
            "42",
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                JsonText::parse(text).unwrap().pretty(),
                serde_json::to_string_pretty(&value).unwrap(),
                "{text}"
            );
        }
        assert_eq!(
            JsonText::parse("{\"z\":123456789012345678901234567890,\"a\":1}")
                .unwrap()
                .pretty(),
            "{\n  \"z\": 123456789012345678901234567890,\n  \"a\": 1\n}"
        );
    }
}
