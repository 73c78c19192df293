//! Untrusted text (payloads, results, worker errors, labels) made inert
//! before it reaches a terminal: an error message must never move the cursor,
//! set the window title, write the clipboard or reorder text.

use std::borrow::Cow;

fn is_dangerous(c: char) -> bool {
    c.is_control() // C0, DEL, C1 (incl. ESC, CSI, OSC starters)
        || matches!(c,
            '\u{200E}' | '\u{200F}' | '\u{061C}'   // directional marks
            | '\u{202A}'..='\u{202E}'               // embeddings and overrides
            | '\u{2066}'..='\u{2069}'               // isolates
            | '\u{FEFF}'                            // BOM / zero-width no-break
            | '\u{2028}' | '\u{2029}'               // line and paragraph separators
            // Zero-width space and word joiner: shown as nothing, a key
            // `zw\u{200b}` read `zw`, which named no item.
            | '\u{200B}' | '\u{2060}'
        )
}

fn escape_into(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// One display line: every control or bidi character becomes a visible
/// escape such as `\x1b` or `\u{202e}` (newlines too).
pub fn line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_dangerous) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_dangerous(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as one shell word, inert, for a command a view suggests to copy
/// (`nightshift unpause 'my batch'`): as it is when nothing in it is
/// special to a shell, else in single quotes.
pub fn shell_word(s: &str) -> Cow<'_, str> {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || "-_.:/@%+=,".contains(c));
    if plain {
        line(s)
    } else {
        Cow::Owned(format!("'{}'", line(&s.replace('\'', r"'\''"))))
    }
}

/// Multi-line text: newlines are kept, tabs become spaces, everything else
/// dangerous is escaped as in [`line()`].
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_dangerous(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("    "),
            c if is_dangerous(c) => escape_into(&mut out, c),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `s` holds a control or bidi character (what [`line()`] escapes).
pub fn has_dangerous(s: &str) -> bool {
    s.chars().any(is_dangerous)
}

/// JSON text made inert without changing what it means: serde_json already
/// escapes C0 controls inside strings, but prints DEL, C1 controls and bidi
/// characters raw, which a terminal may act on. Those can only occur inside
/// string literals, where a `\uXXXX` escape decodes to the same value.
/// Newlines between lines of pretty JSON stay.
pub fn json(s: String) -> String {
    if !s.chars().any(|c| c != '\n' && is_dangerous(c)) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c != '\n' && is_dangerous(c) {
            // Every dangerous character is in the Basic Multilingual Plane.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_inert() {
        let evil = "boom\x1b[2J\x1b[H\x1b]0;title\x07\x1b]52;c;aGk=\x07\u{202e}abc\0\u{9b}";
        let safe = line(evil);
        assert!(!safe.chars().any(is_dangerous), "{safe}");
        assert_eq!(
            safe,
            "boom\\x1b[2J\\x1b[H\\x1b]0;title\\x07\\x1b]52;c;aGk=\\x07\\u{202e}abc\\x00\\x9b"
        );
        assert!(matches!(line("plain text"), Cow::Borrowed(_)));
        assert_eq!(text("a\n\tb\x1b"), "a\n    b\\x1b");
        // A line separator must not start a new line in a one-line field.
        assert_eq!(line("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c");
        // Nor may a character shown as nothing hide in a key or a label.
        assert_eq!(line("zw\u{200b}x\u{2060}"), "zw\\u{200b}x\\u{2060}");
    }

    #[test]
    fn json_keeps_its_meaning_and_loses_its_teeth() {
        let value = serde_json::json!({"m": "a\u{9b}2J\u{202e}\u{7f}\x1b\n\u{2028}", "k": [1]});
        for text in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            let inert = json(text);
            assert!(
                !inert.chars().any(|c| c != '\n' && is_dangerous(c)),
                "{inert}"
            );
            let back: serde_json::Value = serde_json::from_str(&inert).unwrap();
            assert_eq!(back, value);
        }
    }

    #[test]
    fn a_shell_word_is_quoted_only_when_a_shell_would_split_or_expand_it() {
        assert_eq!(shell_word("記事-1"), "記事-1");
        assert_eq!(shell_word("my batch"), "'my batch'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("~$HOME"), "'~$HOME'");
        assert_eq!(shell_word(""), "''");
    }
}
