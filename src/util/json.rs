//! Where a JSON text broke, said as people count: serde_json counts its
//! columns in bytes, which in a line with Japanese text (three bytes a
//! character) points well past the place.

/// `e`, an error parsing `text`, with the place it names in characters:
/// `at column C` in a text of one line, else `at line L, column C`.
pub fn error_at(text: &str, e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let Some(pos) = msg.rfind(" at line ") else {
        return msg;
    };
    let line = text
        .split('\n')
        .nth(e.line().saturating_sub(1))
        .unwrap_or("");
    // The column is one-based, or the bytes read on the line at its end:
    // either way, the characters starting before it.
    let column = line
        .char_indices()
        .take_while(|(i, _)| *i < e.column())
        .count();
    if text.contains('\n') {
        format!("{} at line {}, column {column}", &msg[..pos], e.line())
    } else {
        format!("{} at column {column}", &msg[..pos])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> String {
        error_at(
            text,
            &serde_json::from_str::<serde_json::Value>(text).unwrap_err(),
        )
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        assert_eq!(at(r#"{"k": x}"#), "expected value at column 7");
        // x is the 8th character, its 12th byte.
        assert_eq!(at(r#"{"キー": x}"#), "expected value at column 8");
        // Cut off in a string: the place is its last character.
        assert_eq!(
            at(r#"{"key":"x2", "title": "壊れた"#),
            "EOF while parsing a string at column 26"
        );
        assert_eq!(
            at("{\"a\": 1,\n \"タイトル\": ]}"),
            "expected value at line 2, column 10"
        );
        assert_eq!(at(""), "EOF while parsing a value at column 0");
    }
}
