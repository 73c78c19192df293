//! Batch names: one rule for the command line, the config and the
//! dashboard, so a name one of them accepts is never refused by another.
//!
//! Any Unicode text is a name (`記事`, `my batch`), except what would be
//! misread or misleading: empty, longer than [`MAX_LEN`] characters, a
//! leading `-` (a command line reads it as an option, and nightshift runs
//! itself with the name as an argument), a space at either end (invisible in
//! every view), or a control or bidi character (it could drive the terminal
//! or reorder what is shown around it). In the config a name that is not a
//! TOML bare key is written quoted: `[batch."記事"]`; [`toml_key`] writes it
//! so.

use std::borrow::Cow;

use crate::util::{sanitize, text};

/// Longest batch name, in characters (it travels in `NIGHTSHIFT_BATCH`).
pub const MAX_LEN: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchNameError {
    #[error("a batch name must not be empty")]
    Empty,
    #[error("a batch name must be at most {MAX_LEN} characters")]
    TooLong,
    #[error("a batch name must not start with '-' (it would be read as an option)")]
    LeadingDash,
    #[error("a batch name must not start or end with a space")]
    EdgeSpace,
    #[error("a batch name must not hold control or bidi characters")]
    Dangerous,
}

/// Checks `name` against the rule above.
pub fn check(name: &str) -> Result<(), BatchNameError> {
    if name.is_empty() {
        Err(BatchNameError::Empty)
    } else if name.chars().count() > MAX_LEN {
        Err(BatchNameError::TooLong)
    } else if name.starts_with('-') {
        Err(BatchNameError::LeadingDash)
    } else if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
        Err(BatchNameError::EdgeSpace)
    } else if sanitize::has_dangerous(name) {
        Err(BatchNameError::Dangerous)
    } else {
        Ok(())
    }
}

/// The rule as a clap value parser, for every `BATCH` argument. Clap's
/// message names the value, but its rendering drops escape sequences: a
/// name refused for them is shown again, escaped.
pub fn parse_arg(name: &str) -> Result<String, String> {
    match check(name) {
        Ok(()) => Ok(name.to_string()),
        Err(e @ BatchNameError::Dangerous) => Err(format!("{e}: {}", shown(name))),
        Err(e) => Err(e.to_string()),
    }
}

/// `name` quoted for an error message: control characters escaped, long
/// names cut (with `…`).
pub fn shown(name: &str) -> String {
    format!(
        "\"{}\"",
        text::cut(&sanitize::line(name).replace('"', "\\\""), 80)
    )
}

/// `name` as a key in TOML: bare when TOML allows it (`articles`), else a
/// basic string (`"記事"`, `"a.b"`). A valid name holds no control
/// character, so only `\` and `"` need escaping; anything else would be
/// escaped too, so the result is valid TOML for every input.
pub fn toml_key(name: &str) -> Cow<'_, str> {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if bare {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// The `[batch.NAME]` table header for `name`, valid TOML.
pub fn toml_table(name: &str) -> String {
    format!("[batch.{}]", toml_key(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        for ok in ["articles", "記事", "a.b", "my batch", "x-1", "_", "🌙"] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        assert_eq!(check(""), Err(BatchNameError::Empty));
        assert_eq!(check(&"あ".repeat(MAX_LEN)), Ok(()));
        assert_eq!(
            check(&"あ".repeat(MAX_LEN + 1)),
            Err(BatchNameError::TooLong)
        );
        for dash in ["-x", "--config=FILE", "-"] {
            assert_eq!(check(dash), Err(BatchNameError::LeadingDash), "{dash}");
        }
        for edge in [" a", "a ", "\u{3000}記事"] {
            assert_eq!(check(edge), Err(BatchNameError::EdgeSpace), "{edge:?}");
        }
        for bad in ["a\u{1b}[31m", "a\nb", "a\u{202e}b", "a\u{7f}"] {
            assert_eq!(check(bad), Err(BatchNameError::Dangerous), "{bad:?}");
        }
    }

    /// Every key `toml_key` writes parses back, as TOML, to the same name.
    #[test]
    fn toml_keys_are_valid_toml() {
        for name in [
            "articles",
            "記事",
            "a.b",
            "my batch",
            "q\"uote",
            "back\\slash",
            "x-1_y",
            "1",
            "a\u{1b}b",
        ] {
            let text = format!("{}\nworker = [\"w\"]\n", toml_table(name));
            let parsed: toml::Table =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let batches = parsed["batch"].as_table().unwrap();
            assert_eq!(batches.keys().collect::<Vec<_>>(), [name], "{text}");
        }
        assert_eq!(toml_key("articles"), "articles");
        assert_eq!(toml_key("記事"), "\"記事\"");
    }
}
