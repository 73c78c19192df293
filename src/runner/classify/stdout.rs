//! What a worker wrote on stdout, made ready to be a result (both
//! modes): whole characters, no byte-order mark, the form a cut result
//! takes; and JSON meant that no parser reads (`NaN`, an answer after a
//! log line), told apart from text.

use serde_json::Value;

/// `bytes` without a character the cut at the stdout limit split (it would
/// be read as U+FFFD, past the limit); whole when not cut.
pub fn whole_chars(bytes: &[u8], cut: bool) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if cut && e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// `text` without the byte-order mark it may start with (Python's
/// `utf-8-sig`, tools on Windows): it says how the text is encoded, not
/// what it says, and JSON after it would otherwise be read as text.
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// What is kept of a result over the limit: its head and why it was cut
/// (the same in both modes). Its cost is read from the whole (`skim`).
pub fn cut_result(head: &str) -> Value {
    serde_json::json!({
        "truncated": true,
        "limit_bytes": crate::runner::child::output::MAX_STDOUT,
        "head": head,
    })
}

/// What a worker's `NaN` or `Infinity` costs it.
pub(super) const NAN_HINT: &str = "holds NaN or Infinity, which JSON does not have (Python: json.dumps(..., \
     allow_nan=False)): its cost, usage and retry_after_s could not be read";

/// Why stdout that did not parse was meant as JSON: an object as Python's
/// default `json.dumps` writes it (`NaN`), or an answer printed after a
/// log line (`print("Loading model...")`).
pub(super) fn not_quite_json(stdout: &str) -> Option<String> {
    if nan_in_object(stdout) {
        return Some(format!("stdout {NAN_HINT}"));
    }
    reported_in_a_line(stdout).map(|line| {
        format!(
            "stdout is not one JSON value, but its line {line} is an object with cost or usage, \
             which would go uncounted: print only the result on stdout (logs to stderr)"
        )
    })
}

/// The number (from 1) of the first line of `text` that is a JSON object
/// reporting `cost` or `usage`: an answer printed after other output,
/// also after a progress bar's bare `\r` on the same line.
fn reported_in_a_line(text: &str) -> Option<usize> {
    text.lines().enumerate().find_map(|(i, line)| {
        line.split('\r')
            .any(|part| {
                let part = part.trim();
                part.starts_with('{')
                    && serde_json::from_str::<serde_json::Map<String, Value>>(part)
                        .is_ok_and(|obj| obj.contains_key("cost") || obj.contains_key("usage"))
            })
            .then_some(i + 1)
    })
}

/// Whether `text`, meant as a JSON object (it starts with `{`), holds
/// `NaN` or `Infinity` outside its strings: JSON as Python writes it by
/// default, which no JSON parser reads.
pub(super) fn nan_in_object(text: &str) -> bool {
    if !text.starts_with('{') {
        return false;
    }
    let (mut in_string, mut escaped) = (false, false);
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if bytes[i..].starts_with(b"NaN") || bytes[i..].starts_with(b"Infinity") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::tests::output;
    use super::super::{Answer, Rules, classify};
    use crate::runner::child::Exit;
    use serde_json::Value;

    /// Python's default `json.dumps` writes `NaN`: a result with it was
    /// done with its cost and usage uncounted, an error line with it lost
    /// its cost and `retry_after_s`. The result fails (`InvalidJSON`,
    /// permanent) and the error says why; a `NaN` in a string is text.
    #[test]
    fn nan_from_python_is_refused_and_said() {
        let rules = Rules::default();
        for stdout in [
            r#"{"ok":1,"cost":NaN}"#,
            r#"{"usage":{"input_tokens":Infinity}}"#,
            r#"{"x":-Infinity}"#,
        ] {
            match classify(&output(Exit::Code(0), stdout, None), &rules) {
                Answer::Failed {
                    transient: false,
                    class,
                    message,
                    ..
                } => {
                    assert_eq!(class, "InvalidJSON");
                    assert!(message.contains("allow_nan=False"), "{message}");
                }
                other => panic!("{stdout}: {other:?}"),
            }
        }
        let text = classify(&output(Exit::Code(0), r#"{"note": "NaN"}"#, None), &rules);
        assert!(matches!(text, Answer::Done { .. }), "{text:?}");
        let line = r#"{"error_class":"RateLimitError","transient":true,"retry_after_s":NaN}"#;
        match classify(&output(Exit::Code(75), "", Some(line)), &rules) {
            Answer::Failed { message, .. } => {
                assert!(
                    message.contains("its error line holds NaN or Infinity"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// A JSON answer after a log line would be kept as text with its cost
    /// uncounted: refused, naming the line.
    #[test]
    fn an_answer_after_a_log_line_is_refused_not_kept_uncounted() {
        let out = output(
            Exit::Code(0),
            "Loading model...\n{\"r\":1,\"cost\":2.5}\n",
            None,
        );
        match classify(&out, &Rules::default()) {
            Answer::Failed {
                transient: false,
                class,
                message,
                ..
            } => {
                assert_eq!(class, "InvalidJSON");
                assert!(
                    message.contains("its line 2 is an object with cost"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        // The same after a progress bar redrawn with bare CRs.
        let out = output(
            Exit::Code(0),
            "読込 50%\r読込 100%\r{\"r\":1,\"cost\":2.5}\r\n",
            None,
        );
        assert!(
            matches!(classify(&out, &Rules::default()), Answer::Failed { ref class, .. } if class == "InvalidJSON"),
            "{:?}",
            classify(&out, &Rules::default())
        );
        // Text with no such line is text.
        let text = classify(
            &output(Exit::Code(0), "done: {ok}\n", None),
            &Rules::default(),
        );
        assert!(matches!(text, Answer::Done { .. }), "{text:?}");
    }

    /// A byte-order mark (`utf-8-sig`) before stdout is not part of it:
    /// the JSON after it is read, its cost counted, and text loses it.
    #[test]
    fn a_byte_order_mark_before_stdout_is_dropped() {
        let rules = Rules::default();
        match classify(
            &output(Exit::Code(0), "\u{feff}{\"r\":\"済\",\"cost\":0.5}\n", None),
            &rules,
        ) {
            Answer::Done {
                result: Some(r),
                cost: Some(c),
                ..
            } => {
                assert_eq!(r, "{\"r\":\"済\",\"cost\":0.5}");
                assert!((c - 0.5).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
        match classify(&output(Exit::Code(0), "\u{feff}完了\n", None), &rules) {
            Answer::Done {
                result: Some(r), ..
            } => assert_eq!(r, "\"完了\""),
            other => panic!("{other:?}"),
        }
    }

    /// A text result keeps its indentation (YAML, a code block) and loses
    /// only the line end closing it; one cut at the limit ends on a whole
    /// character, within the limit.
    #[test]
    fn text_is_kept_as_written_and_cut_on_a_character() {
        let rules = Rules::default();
        let text = |answer: Answer| match answer {
            Answer::Done {
                result: Some(r), ..
            } => r,
            other => panic!("{other:?}"),
        };
        let yaml = text(classify(
            &output(Exit::Code(0), "  - a\n  - b\n", None),
            &rules,
        ));
        assert_eq!(yaml, Value::String("  - a\n  - b".into()).to_string());
        let mut cut = output(Exit::Code(0), "", None);
        let whole = "あ".repeat(3);
        cut.stdout = whole.as_bytes()[..7].to_vec();
        cut.stdout_cut = Some(crate::runner::child::skim::Skimmed::default());
        let head: Value = serde_json::from_str(&text(classify(&cut, &rules))).unwrap();
        assert_eq!(head["head"], "ああ", "{head}");
    }
}
