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

/// Multi-line text: newlines are kept, tabs become spaces, everything else
/// dangerous is escaped as in [`line`].
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

/// Cuts to at most `max` characters, marking the cut.
pub fn truncate(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((idx, _)) => Cow::Owned(format!("{}…", &s[..idx])),
    }
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
    }

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hi", 5), "hi");
    }
}
