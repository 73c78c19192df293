//! The worker's stdout side: its bytes read into lines (a long one
//! skimmed), and what each line says: an answer, an op id, a stray print,
//! or a break of the protocol; whether an answer or op id is in step.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStdout;

use super::super::output::{MAX_STDOUT_SAID, is_line_end};
use super::super::skim::{Skim, Skimmed};
use crate::runner::classify;
use crate::util::json_text::JsonText;
use crate::util::sanitize;

/// Most of an answer line kept, as of process mode's stdout: past it the
/// line is skimmed to its end (`skim`) and its result cut.
const MAX_LINE: usize = super::super::output::MAX_STDOUT;
/// The rule every answer and op-id line must follow (quoted in errors).
pub const KEY_RULE: &str = "persistent answers must carry the request's \"key\"";
/// The names an answer or op-id line is read by: each given once.
const PROTOCOL: [&str; 4] = ["key", "result", "error", "op_id"];
/// How much of a worker's line an error or event quotes.
const QUOTE_CELLS: usize = 80;

/// One stdout line from the worker.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// An operation id for the unanswered request named.
    OpId { key: String, op_id: String },
    /// An answer, for the request named.
    Answer {
        key: String,
        obj: serde_json::Map<String, Value>,
        /// Its `result` as written (see `classify::answer`).
        written: Option<JsonText>,
    },
    /// Not part of the protocol (ignored): the line's start, inert.
    Stray(String),
}

/// Reads one stdout line. `Ok(None)`: nothing to act on (a blank line, an
/// op id that cannot be stored). `Err`: the line breaks the protocol.
pub fn parse_line(text: &str) -> Result<Option<Line>, String> {
    let trimmed = classify::without_bom(text.trim_start()).trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    if !trimmed.starts_with('{') {
        return Ok(Some(Line::Stray(quote(trimmed))));
    }
    // Read once, noting a protocol name given twice (see below).
    let read = crate::util::json::object_naming_once(trimmed, &PROTOCOL).map(|(obj, twice)| {
        // A cost or count given twice is refused, not taken as its last.
        let mut v = Value::Object(obj);
        crate::util::json::mark_reported_twice(trimmed, &mut v);
        (v, twice)
    });
    let (obj, twice) = match read {
        Ok((Value::Object(obj), twice)) => (obj, twice),
        Ok(_) => return Ok(Some(Line::Stray(quote(trimmed)))),
        Err(e) => {
            let hint = if trimmed.contains("NaN") || trimmed.contains("Infinity") {
                "; NaN and Infinity are not JSON: Python's json.dumps writes them unless allow_nan=False"
            } else {
                ""
            };
            return Err(format!(
                "a stdout line starting with \"{{\" is not valid JSON ({}{hint}): {}",
                crate::util::json::error_at(trimmed, &e),
                quote(trimmed)
            ));
        }
    };
    let is_answer = obj.contains_key("result") || obj.contains_key("error");
    if !is_answer && !obj.contains_key("op_id") {
        return Ok(Some(Line::Stray(quote(trimmed))));
    }
    // serde_json keeps a name's last value: which request a line answers,
    // or with what, would be a guess (an answer on the wrong item).
    if let Some(name) = twice {
        return Err(format!(
            "{KEY_RULE}, and give each of \"key\", \"result\", \"error\" and \"op_id\" once: \
             a line giving {name:?} twice is not read as either: {}",
            quote(trimmed)
        ));
    }
    let key = match obj.get("key") {
        Some(Value::String(k)) => k.clone(),
        None => {
            return Err(format!(
                "{KEY_RULE}: a line without it cannot be matched to its request: {}",
                quote(trimmed)
            ));
        }
        Some(other) => {
            return Err(format!(
                "{KEY_RULE} as a string, not {}: {}",
                quote(&other.to_string()),
                quote(trimmed)
            ));
        }
    };
    if is_answer {
        return Ok(Some(Line::Answer {
            key,
            written: written_result(trimmed),
            obj,
        }));
    }
    // Ignored as in process mode: it could not be handed back.
    Ok(match obj.get("op_id").and_then(Value::as_str) {
        Some(op) if super::super::output::valid_op_id(op) => Some(Line::OpId {
            key,
            op_id: op.to_string(),
        }),
        _ => None,
    })
}

/// Whether an answer naming `key` is in step: it must name the oldest of
/// the `outstanding` requests (in order). `last`: the key of the request
/// answered last, to name a second answer as such. `Err` says why not.
pub fn match_answer<'a>(
    key: &str,
    outstanding: impl IntoIterator<Item = &'a str>,
    last: Option<&str>,
) -> Result<(), String> {
    let mut outstanding = outstanding.into_iter();
    let head = outstanding.next();
    if head == Some(key) {
        return Ok(());
    }
    Err(if last == Some(key) {
        format!("a second answer for {key:?}: each request gets one answer, in request order")
    } else if let Some(head) = head
        && outstanding.any(|k| k == key)
    {
        format!(
            "an answer for {key:?} while {head:?} was not answered: answers come in request order"
        )
    } else {
        format!("an answer for {key:?}, which is not a request waiting for its answer")
    })
}

/// Whether an op id naming `key` is in step: it must name one of the
/// `outstanding` requests (a worker may work on several at once). The
/// request's position, or why not.
pub fn match_op_id<'a>(
    key: &str,
    outstanding: impl IntoIterator<Item = &'a str>,
    last: Option<&str>,
) -> Result<usize, String> {
    outstanding
        .into_iter()
        .position(|k| k == key)
        .ok_or_else(|| {
            let answered = if last == Some(key) {
                " (it was answered already)"
            } else {
                ""
            };
            format!("an op id for {key:?}, which is not a request waiting for its answer{answered}")
        })
}

/// An answer line's `result` as the worker wrote it, if it has one.
fn written_result(line: &str) -> Option<JsonText> {
    #[derive(serde::Deserialize)]
    struct Written<'a> {
        #[serde(borrow)]
        result: Option<&'a serde_json::value::RawValue>,
    }
    let w: Written<'_> = serde_json::from_str(line).ok()?;
    JsonText::parse(w.result?.get())
}

/// The start of a worker's line, inert, for an error or an event.
pub fn quote(text: &str) -> String {
    crate::util::text::cut(&sanitize::line(text.trim()), QUOTE_CELLS).into_owned()
}

/// Reads into `line` up to the next newline or bare CR (not kept; an
/// answer after a progress bar's `\r` is a line of its own, CRLF an extra
/// empty one): `Ok(true)` with a whole line, `Ok(false)` at end of stream.
/// The end of the stream ends a last unterminated line that is a whole
/// JSON value (an answer written with no line end); any other is dropped
/// (the worker died writing it).
/// `line` keeps at most `MAX_LINE`; a longer line is read to its end
/// through `cut`, which skims it, unless it is no JSON object (`Err` then,
/// at once).
pub(super) async fn fill_line(
    r: &mut BufReader<ChildStdout>,
    line: &mut Vec<u8>,
    cut: &mut Option<Skim>,
) -> Result<bool, String> {
    loop {
        let buf = r
            .fill_buf()
            .await
            .map_err(|e| format!("reading the worker's answer: {e}"))?;
        if buf.is_empty() {
            // See above: a fragment's worker says what it did as it ends.
            let whole = cut.is_none()
                && !line.iter().all(u8::is_ascii_whitespace)
                && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok();
            if !whole {
                line.clear();
                *cut = None;
            }
            return Ok(whole);
        }
        let (take, complete) = match buf.iter().position(|b| is_line_end(*b)) {
            Some(pos) => (pos + 1, true),
            None => (buf.len(), false),
        };
        let part = &buf[..take - usize::from(complete)];
        let room = MAX_LINE.saturating_sub(line.len());
        Skim::follow(cut, line, part, room);
        line.extend_from_slice(&part[..part.len().min(room)]);
        r.consume(take);
        if cut.as_ref().is_some_and(Skim::no_object) {
            *cut = None;
            return Err(format!(
                "the worker wrote a stdout line longer than {MAX_STDOUT_SAID} that is no answer (not a JSON object)"
            ));
        }
        if complete {
            return Ok(true);
        }
    }
}

/// An answer line longer than `MAX_LINE`, from what the skim read of it:
/// its result cut as in process mode (`head`: the line's start), its
/// error with the fields read, its cost and usage counted. `Err` when it
/// is no answer (no `key`, neither `result` nor `error`).
pub(super) fn cut_answer(head: &str, skimmed: Skimmed) -> Result<Line, String> {
    let head = classify::without_bom(head.trim());
    let mut fields = skimmed.fields;
    let key = match fields.get("key") {
        Some(Value::String(k)) if skimmed.object => k.clone(),
        _ if !skimmed.object => {
            return Err(format!(
                "the worker wrote a stdout line longer than {MAX_STDOUT_SAID} that is not valid JSON: {}",
                quote(head)
            ));
        }
        _ => {
            return Err(format!(
                "{KEY_RULE}: a line longer than {MAX_STDOUT_SAID} without it cannot be matched to its request: {}",
                quote(head)
            ));
        }
    };
    let mut obj = serde_json::Map::new();
    obj.insert("key".into(), Value::String(key.clone()));
    if let Some(Value::Object(mut error)) = fields.remove("error") {
        error.entry("message").or_insert_with(|| {
            Value::String(format!(
                "(an error answer longer than {MAX_STDOUT_SAID}: its message was not kept)"
            ))
        });
        obj.insert("error".into(), Value::Object(error));
    } else if let Some(Value::Object(result)) = fields.remove("result") {
        obj.insert("result".into(), classify::cut_result(head));
        // The answer's own cost and usage, else its result's.
        for f in ["cost", "usage"] {
            if let Some(v) = result.get(f) {
                fields.entry(f).or_insert_with(|| v.clone());
            }
        }
    } else {
        return Err(format!(
            "the worker wrote a stdout line longer than {MAX_STDOUT_SAID} with neither \"result\" nor \"error\": {}",
            quote(head)
        ));
    }
    for f in ["cost", "usage"] {
        if let Some(v) = fields.remove(f) {
            obj.insert(f.into(), v);
        }
    }
    Ok(Line::Answer {
        key,
        obj,
        written: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn lines_are_answers_op_ids_strays_or_protocol_errors() {
        let answer = r#"{"key":"a","result":1}"#;
        assert_eq!(
            parse_line(answer),
            Ok(Some(Line::Answer {
                key: "a".into(),
                obj: obj(answer),
                written: JsonText::parse("1"),
            }))
        );
        assert_eq!(
            parse_line(r#" {"key":"a","op_id":"op-1"} "#),
            Ok(Some(Line::OpId {
                key: "a".into(),
                op_id: "op-1".into()
            }))
        );
        // A byte-order mark before the first answer (`utf-8-sig`) is not
        // part of it.
        assert_eq!(
            parse_line(&format!("\u{feff}{answer}")),
            Ok(Some(Line::Answer {
                key: "a".into(),
                obj: obj(answer),
                written: JsonText::parse("1"),
            }))
        );
        // The result as written: numbers past a float's digits, key order.
        let big = r#"{"key":"a","result":{"z":123456789012345678901234567890,"a":"\u65e5"}}"#;
        match parse_line(big) {
            Ok(Some(Line::Answer { written, .. })) => assert_eq!(
                written.unwrap().as_str(),
                r#"{"z":123456789012345678901234567890,"a":"日"}"#
            ),
            other => panic!("{other:?}"),
        }
        // Ignored: blank lines, op ids that could not be handed back.
        assert_eq!(parse_line("  \r"), Ok(None));
        assert_eq!(parse_line(r#"{"key":"a","op_id":"x\u001b[2J"}"#), Ok(None));
        // Strays: objects with none of result/error/op_id, other text.
        for stray in [
            r#"{"log":"connected"}"#,
            r#"{"key":"a","progress":0.5}"#,
            "[1,2]",
            "42",
            "loading...",
        ] {
            assert_eq!(
                parse_line(stray),
                Ok(Some(Line::Stray(stray.into()))),
                "{stray}"
            );
        }
        assert_eq!(
            parse_line("\x1b[2Jboom"),
            Ok(Some(Line::Stray("\\x1b[2Jboom".into())))
        );
        // Out of step: no key, a key that is not a string, not JSON.
        let no_key = parse_line(r#"{"result":{"echo":"k1"}}"#).unwrap_err();
        assert!(
            no_key.starts_with(KEY_RULE) && no_key.ends_with(r#"{"result":{"echo":"k1"}}"#),
            "{no_key}"
        );
        assert!(
            parse_line(r#"{"op_id":"op-1"}"#)
                .unwrap_err()
                .starts_with(KEY_RULE)
        );
        let number = parse_line(r#"{"key":5,"error":"x"}"#).unwrap_err();
        assert!(number.contains("as a string, not 5"), "{number}");
        let nan = parse_line(r#"{"key":"a","result":NaN}"#).unwrap_err();
        assert!(
            nan.contains(
                "not valid JSON (expected value at column 21; NaN and Infinity are not JSON"
            ),
            "{nan}"
        );
        let long = format!("{{\"key\":\"\x1b[2J{}", "x".repeat(200));
        let cut = parse_line(&long).unwrap_err();
        assert!(
            cut.contains(r#": {"key":"\x1b[2Jxxx"#) && cut.ends_with("x…") && cut.len() < 300,
            "{cut}"
        );
    }

    #[test]
    fn only_the_head_may_be_answered_and_only_outstanding_items_get_op_ids() {
        let sent = ["k2", "k3"];
        assert_eq!(match_answer("k2", sent, Some("k1")), Ok(()));
        let dup = match_answer("k1", sent, Some("k1")).unwrap_err();
        assert!(dup.starts_with(r#"a second answer for "k1""#), "{dup}");
        let ahead = match_answer("k3", sent, Some("k1")).unwrap_err();
        assert!(
            ahead.starts_with(r#"an answer for "k3" while "k2" was not answered"#),
            "{ahead}"
        );
        let other = match_answer("zz", sent, None).unwrap_err();
        assert!(other.contains("not a request waiting"), "{other}");
        assert!(
            match_answer("k1", [], Some("k1"))
                .unwrap_err()
                .contains("second answer")
        );
        assert_eq!(match_op_id("k3", sent, None), Ok(1));
        let late = match_op_id("k1", sent, Some("k1")).unwrap_err();
        assert!(late.contains("answered already"), "{late}");
    }
}
