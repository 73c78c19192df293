//! From what a worker answered to an [`Answer`]: done, empty, transient
//! failure or permanent failure; in process mode from its exit status,
//! stdout and stderr ([`classify`]), in persistent mode from its answer
//! line ([`answer`]) or from how it broke (the constructors of `Answer`).
//! One error-object parser ([`ErrorLine::from_object`], one `retry_after`
//! clamp) and one transient rule ([`Rules::transient`]) serve both.
//!
//! Rules (the worker contract): exit 0 is success, its stdout the result and
//! empty stdout the outcome `empty`; exit 75 (EX_TEMPFAIL), a timeout or
//! death by signal are transient; other exit codes are permanent. A last
//! stderr line that is a JSON object `{"error_class", "transient",
//! "message", "retry_after_s" (or "reset_at"), "cost"}` overrides the
//! exit-code rule, and
//! classes the config names as transient are transient. Costs follow one
//! rule (`cost`).

use std::time::Duration;

use serde_json::Value;

use super::child::Exit;
use super::child::output::Output;
use super::cost::Cost;
use super::usage::{Tokens, Usage};
use crate::util::json_text::JsonText;
use crate::util::sanitize;

/// Longest error message kept (the seeds keep 500 characters).
pub const MAX_MESSAGE: usize = 500;

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Done {
        empty: bool,
        /// The result as stored: JSON text (a non-JSON stdout is stored as
        /// a JSON string).
        result: Option<String>,
        cost: Option<f64>,
        usage: Option<Tokens>,
    },
    Failed {
        transient: bool,
        class: String,
        message: String,
        retry_after: Option<Duration>,
        cost: Option<f64>,
        usage: Option<Tokens>,
    },
}

/// What the config adds to the rules.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub transient_exit_codes: Vec<i32>,
    pub transient_error_classes: Vec<String>,
}

impl Rules {
    /// The one transient rule: what the worker said, else a class the
    /// config names as transient, else what the way it failed implies.
    pub fn transient(&self, said: Option<bool>, class: &str, by_default: bool) -> bool {
        said.unwrap_or_else(|| {
            self.transient_error_classes.iter().any(|c| c == class) || by_default
        })
    }
}

/// The structured error line a worker may print last on stderr.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorLine {
    pub error_class: Option<String>,
    pub transient: Option<bool>,
    pub message: Option<String>,
    pub retry_after: Option<Duration>,
    /// A `retry_after_s` or `reset_at` given that asks no wait (negative,
    /// or text that is no number or date), as given: said in the message,
    /// not dropped in silence.
    pub unread_wait: Option<String>,
    pub cost: Cost,
    pub usage: Usage,
}

impl ErrorLine {
    /// `message` with a note on a wait given that asks none.
    fn noted(&self, message: String) -> String {
        match &self.unread_wait {
            Some(given) => format!(
                "{message} (no wait taken from {given}: seconds ≥ 0, an HTTP date or a reset time are read)"
            ),
            None => message,
        }
    }
}

/// Parses a stderr line as an error line; `None` unless it is a JSON
/// object carrying at least one of the known fields.
pub fn parse_error_line(line: &str) -> Option<ErrorLine> {
    let trimmed = line.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    let Value::Object(obj) = serde_json::from_str::<Value>(trimmed).ok()? else {
        return None;
    };
    let line = ErrorLine::from_object(&obj);
    (line != ErrorLine::default()).then_some(line)
}

/// The longest `retry_after_s` read as asked (a year: far past any
/// `max_hold`, which clamps it, and safe to add to any time).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(365 * 86_400);

/// A wait in seconds as asked, clamped to [`MAX_RETRY_AFTER`]; a negative
/// or non-finite one is no wait asked.
fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0)
        .then(|| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
}

/// How long until a `reset_at` the provider named: RFC 3339 text or epoch
/// seconds (a number or its text). A reset already past is no wait; text
/// that is neither is ignored, as an unknown field would be.
fn reset_in(at: &Value, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let epoch = match at {
        Value::Number(n) => n.as_f64()?,
        Value::String(t) => match chrono::DateTime::parse_from_rfc3339(t.trim()) {
            Ok(when) => when.timestamp_millis() as f64 / 1000.0,
            Err(_) => t.trim().parse::<f64>().ok()?,
        },
        _ => return None,
    };
    if !epoch.is_finite() {
        return None;
    }
    seconds((epoch - now.timestamp_millis() as f64 / 1000.0).max(0.0))
}

/// A `retry_after_s` as a number, or as the text an HTTP `Retry-After`
/// header holds, passed on as it came (`"30"`, or an HTTP date, `"Wed, 21
/// Oct 2026 07:28:00 GMT"`): a header's text read as no wait would send
/// the next calls straight into the limit.
fn retry_after_of(v: &Value, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    match v {
        Value::Number(n) => n.as_f64().and_then(seconds),
        Value::String(t) => {
            let t = t.trim();
            if let Ok(s) = t.parse::<f64>() {
                return seconds(s);
            }
            let when = chrono::DateTime::parse_from_rfc2822(t).ok()?;
            seconds(((when.timestamp_millis() - now.timestamp_millis()) as f64 / 1000.0).max(0.0))
        }
        _ => None,
    }
}

impl ErrorLine {
    /// The fields of an error object: the stderr error line in process mode,
    /// the `"error"` of a persistent answer.
    pub fn from_object(obj: &serde_json::Map<String, Value>) -> ErrorLine {
        let text = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
        let now = crate::util::time::now();
        // `null` is absent, as for `cost`: a wrapper passing on a missing
        // `Retry-After` header still has its `reset_at` read.
        let (field, given, retry_after) = match obj.get("retry_after_s").filter(|v| !v.is_null()) {
            Some(s) => ("retry_after_s", Some(s), retry_after_of(s, now)),
            None => {
                let at = obj.get("reset_at");
                ("reset_at", at, at.and_then(|at| reset_in(at, now)))
            }
        };
        let unread_wait = given
            .filter(|v| retry_after.is_none() && !v.is_null())
            .map(|v| {
                format!(
                    "{field} {}",
                    crate::util::text::cut(&sanitize::line(&v.to_string()), 60)
                )
            });
        ErrorLine {
            // Blank space is no class (it made a dead-letter row with no
            // name): the default one is taken, as for `""`.
            error_class: text("error_class")
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty()),
            transient: obj.get("transient").and_then(Value::as_bool),
            message: text("message"),
            retry_after,
            unread_wait,
            cost: Cost::from_json(obj.get("cost")),
            usage: Usage::from_json(obj.get("usage")),
        }
    }

    /// A persistent answer's `"error"`: an object, or just its message.
    fn from_answer(err: &Value) -> ErrorLine {
        match err {
            Value::Object(e) => ErrorLine::from_object(e),
            Value::String(m) => ErrorLine {
                message: Some(m.clone()),
                ..ErrorLine::default()
            },
            _ => ErrorLine::default(),
        }
    }
}

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

/// Makes a stored message: inert, one line, bounded.
pub fn bound_message(text: &str) -> String {
    let one_line = sanitize::line(text.trim());
    crate::util::text::cut_chars(&one_line, MAX_MESSAGE).into_owned()
}

/// What a worker the runner stopped before its answer (a cancel, a stop,
/// its lease lost) had reported of its call: its cost and its tokens,
/// paid for all the same. A refused report counts nothing.
pub fn cut_short(out: &Output) -> (Option<f64>, Option<Tokens>) {
    let (cost, usage) = reported(out, &out.error_line.clone().unwrap_or_default());
    (cost.valid(), usage.valid())
}

/// What an attempt that gave no answer on stdout reported of its call:
/// the error line's cost and usage, else its `@nightshift` stderr lines'.
fn reported(out: &Output, line: &ErrorLine) -> (Cost, Usage) {
    (
        line.cost.clone().or(out.reported_cost.clone()),
        line.usage.clone().or(out.reported_usage.clone()),
    )
}

/// What is kept of a result over the limit: its head and why it was cut
/// (the same in both modes). Its cost is read from the whole (`skim`).
pub fn cut_result(head: &str) -> Value {
    serde_json::json!({
        "truncated": true,
        "limit_bytes": super::child::output::MAX_STDOUT,
        "head": head,
    })
}

pub fn classify(out: &Output, rules: &Rules) -> Answer {
    match &out.exit {
        Exit::Code(0) => {
            let cut = out.stdout_cut.as_ref();
            let text = String::from_utf8_lossy(whole_chars(&out.stdout, cut.is_some()));
            let text = without_bom(&text);
            let trimmed = text.trim();
            if trimmed.is_empty() && cut.is_none() {
                let empty = Answer::Done {
                    empty: true,
                    result: None,
                    cost: None,
                    usage: None,
                };
                let usage = out.reported_usage.clone();
                return usage.apply(out.reported_cost.clone().apply(empty));
            }
            let strict = serde_json::from_str::<Value>(trimmed);
            let is_json = strict.is_ok() && cut.is_none();
            // Stdout meant as JSON that no parser reads would be kept as
            // text, its cost and usage uncounted in silence, past
            // `max_cost` and budgets: refused, saying why.
            if strict.is_err()
                && cut.is_none()
                && let Some(why) = not_quite_json(trimmed)
            {
                return Answer::Failed {
                    transient: false,
                    class: "InvalidJSON".into(),
                    message: why,
                    retry_after: None,
                    cost: None,
                    usage: None,
                };
            }
            // Text is kept as written (a YAML list, an indented code block),
            // but for the line end that closes it.
            let parsed: Value = match cut {
                Some(_) => cut_result(trimmed),
                None => strict.unwrap_or_else(|_| {
                    Value::String(text.trim_end_matches(['\n', '\r']).to_string())
                }),
            };
            // A cut result's cost and usage are what its whole said.
            let said = |field: &str| match cut {
                Some(skim) => skim.fields.get(field),
                None => parsed.get(field),
            };
            let cost = Cost::from_json(said("cost")).or(out.reported_cost.clone());
            let usage = Usage::from_json(said("usage")).or(out.reported_usage.clone());
            // JSON is kept as the worker wrote it: its numbers, its keys' order.
            let result = match is_json.then(|| JsonText::parse(trimmed)).flatten() {
                Some(text) => text.as_str().to_string(),
                None => parsed.to_string(),
            };
            let answer = cost.apply(Answer::Done {
                empty: false,
                result: Some(result),
                cost: None,
                usage: None,
            });
            usage.apply(answer)
        }
        exit => {
            let line = out.error_line.clone().unwrap_or_default();
            let (default_class, default_transient, default_message) = match exit {
                Exit::Code(code) => {
                    let transient = rules.transient_exit_codes.contains(code);
                    let class = if *code == 75 {
                        "TempFail".to_string()
                    } else {
                        format!("Exit{code}")
                    };
                    (class, transient, format!("exited with status {code}"))
                }
                Exit::Signal(sig) => (
                    "Signal".to_string(),
                    true,
                    format!("killed by signal {sig}"),
                ),
                Exit::Timeout(limit) => (
                    "Timeout".to_string(),
                    true,
                    format!(
                        "no answer within {}; its process group was killed",
                        crate::duration::format_duration(*limit)
                    ),
                ),
                Exit::SpawnFailed(err) | Exit::CannotStart(err) => (
                    "SpawnError".to_string(),
                    true,
                    format!("could not start the worker: {err}"),
                ),
            };
            let class = line.error_class.clone().unwrap_or(default_class);
            let transient = rules.transient(line.transient, &class, default_transient);
            let message = line
                .message
                .clone()
                .or_else(|| {
                    out.stderr_last_line
                        .as_deref()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| match nan_in_object(l.trim()) {
                            true => format!("{default_message}: its error line {NAN_HINT}"),
                            false => format!("{default_message}: {}", stderr_said(l)),
                        })
                })
                .or_else(|| stdout_said(&out.stdout).map(|s| format!("{default_message}; {s}")))
                .unwrap_or(default_message);
            let message = line.noted(message);
            let (cost, usage) = reported(out, &line);
            let answer = cost.apply(Answer::Failed {
                transient,
                class: bound_message(&class),
                message: bound_message(&message),
                retry_after: line.retry_after,
                cost: None,
                usage: None,
            });
            usage.apply(answer)
        }
    }
}

/// What a worker's `NaN` or `Infinity` costs it.
const NAN_HINT: &str = "holds NaN or Infinity, which JSON does not have (Python: json.dumps(..., \
     allow_nan=False)): its cost, usage and retry_after_s could not be read";

/// Why stdout that did not parse was meant as JSON: an object as Python's
/// default `json.dumps` writes it (`NaN`), or an answer printed after a
/// log line (`print("Loading model...")`).
fn not_quite_json(stdout: &str) -> Option<String> {
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
fn nan_in_object(text: &str) -> bool {
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

/// A failed worker's last stderr line, with a hint when it is a JSON
/// object the contract reads nothing from (`{"error": "…", "class": "…"}`:
/// the class and the text are `error_class` and `message`), so the class
/// it meant is not silently replaced by `Exit1`.
fn stderr_said(last: &str) -> String {
    let object = serde_json::from_str::<serde_json::Map<String, Value>>(last.trim()).ok();
    match object {
        Some(o) if !o.contains_key("error_class") && !o.contains_key("message") => format!(
            "{last} (an error line names its class in \"error_class\" and its text in \"message\")"
        ),
        _ => last.to_string(),
    }
}

/// What a failed worker's stdout said, when its stderr said nothing: its
/// last line, with a hint when that is an error object (the contract reads
/// one from stderr's last line; a worker printing it on stdout is a first
/// worker's usual slip).
fn stdout_said(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    // The last thing a terminal would show: a bare `\r` ends a line too.
    let last = text
        .rsplit(['\n', '\r'])
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    let object = serde_json::from_str::<serde_json::Map<String, Value>>(last).ok();
    let hint = if object.is_some_and(|o| o.contains_key("error_class") || o.contains_key("error")) {
        " (an error object is read from stderr's last line, not stdout)"
    } else {
        ""
    };
    Some(format!("stdout: {last}{hint}"))
}

/// The answer a persistent worker's answer object carries; `written`:
/// its `result` as the worker wrote it (kept rather than the value's
/// float-read numbers and sorted keys).
pub fn answer(
    obj: &serde_json::Map<String, Value>,
    written: Option<&JsonText>,
    rules: &Rules,
) -> Answer {
    let cost = Cost::from_json(obj.get("cost"));
    let usage = Usage::from_json(obj.get("usage"));
    if let Some(err) = obj.get("error") {
        let line = ErrorLine::from_answer(err);
        let message = line.noted(
            line.message
                .clone()
                .unwrap_or_else(|| "the worker reported an error".into()),
        );
        let class = line.error_class.unwrap_or_else(|| "WorkerError".into());
        let transient = rules.transient(line.transient, &class, false);
        let usage = usage.or(line.usage);
        return usage.apply(cost.or(line.cost).apply(Answer::Failed {
            transient,
            class: bound_message(&class),
            message: bound_message(&message),
            retry_after: line.retry_after,
            cost: None,
            usage: None,
        }));
    }
    let Some(result) = obj.get("result") else {
        return Answer::protocol_error("an answer line with neither \"result\" nor \"error\"");
    };
    let cost = cost.or(Cost::from_json(result.get("cost")));
    let usage = usage.or(Usage::from_json(result.get("usage")));
    let empty = result.is_null() || result.as_str() == Some("");
    usage.apply(
        cost.apply(Answer::Done {
            empty,
            result: (!empty)
                .then(|| written.map_or_else(|| result.to_string(), |w| w.as_str().to_string())),
            cost: None,
            usage: None,
        }),
    )
}

/// How a persistent worker broke, as the answer of the request it broke
/// on: always transient (the item is retried; a fresh worker is started).
impl Answer {
    fn broke(class: &str, message: &str) -> Answer {
        Answer::Failed {
            transient: true,
            class: class.into(),
            message: bound_message(message),
            retry_after: None,
            cost: None,
            usage: None,
        }
    }

    /// The same answer with the attempt's token usage.
    #[must_use]
    pub fn with_usage(self, tokens: Option<Tokens>) -> Answer {
        match self {
            Answer::Done {
                empty,
                result,
                cost,
                ..
            } => Answer::Done {
                empty,
                result,
                cost,
                usage: tokens,
            },
            Answer::Failed {
                transient,
                class,
                message,
                retry_after,
                cost,
                ..
            } => Answer::Failed {
                transient,
                class,
                message,
                retry_after,
                cost,
                usage: tokens,
            },
        }
    }

    /// The attempt's token usage, if reported.
    pub fn usage(&self) -> Option<Tokens> {
        match self {
            Answer::Done { usage, .. } | Answer::Failed { usage, .. } => *usage,
        }
    }

    /// The worker broke the protocol.
    pub fn protocol_error(message: &str) -> Answer {
        Answer::broke("ProtocolError", message)
    }

    /// The worker was out of step (and restarted): `why`.
    pub fn out_of_step(why: &str) -> Answer {
        Answer::protocol_error(&format!("{why}; the worker was restarted"))
    }

    /// No answer within `timeout`; `unended`: the start of what the worker
    /// wrote with no line end (an answer a newline short), quoted.
    pub fn timed_out(timeout: Duration, unended: Option<&str>) -> Answer {
        let mut message = format!(
            "no answer within {}; the worker was restarted",
            crate::duration::format_duration(timeout)
        );
        if let Some(text) = unended {
            message.push_str(&format!(
                "; its stdout held a line with no line end: {text} (end each answer with a newline, and flush)"
            ));
        }
        Answer::broke("Timeout", &message)
    }

    /// The worker `program` could not be started.
    pub fn spawn_failed(program: &str, err: &std::io::Error) -> Answer {
        Answer::broke(
            "SpawnError",
            &format!("could not start the worker {program}: {err}"),
        )
    }

    /// The worker exited (or closed its pipes) mid-item.
    pub fn worker_exited(message: &str) -> Answer {
        Answer::broke("WorkerExited", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A JSON result is kept as the worker wrote it: a number past a
    /// float's digits, the order of its keys; `\u` escapes readable.
    #[test]
    fn a_json_result_is_kept_as_written() {
        let out = output(
            Exit::Code(0),
            "{\"z\": 123456789012345678901234567890, \"cost\": 0.25,\n \"題\": \"\\u65e5\"}\n",
            None,
        );
        match classify(&out, &Rules::default()) {
            Answer::Done {
                result: Some(r),
                cost: Some(c),
                ..
            } => {
                assert_eq!(
                    r,
                    "{\"z\":123456789012345678901234567890,\"cost\":0.25,\"題\":\"日\"}"
                );
                assert_eq!(c, 0.25);
            }
            other => panic!("{other:?}"),
        }
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

    fn output(exit: Exit, stdout: &str, stderr_last: Option<&str>) -> Output {
        Output {
            exit,
            stdout: stdout.as_bytes().to_vec(),
            stdout_cut: None,
            stderr_last_line: stderr_last.map(str::to_string),
            stderr_tail: None,
            error_line: stderr_last.and_then(parse_error_line),
            reported_cost: Cost::Absent,
            reported_usage: Usage::Absent,
            op_ids: Vec::new(),
            unread: Default::default(),
        }
    }

    fn rules() -> Rules {
        Rules {
            transient_exit_codes: vec![75],
            transient_error_classes: vec!["RateLimitError".into()],
        }
    }

    #[test]
    fn success_empty_and_result() {
        assert_eq!(
            classify(&output(Exit::Code(0), "  \n", None), &rules()),
            Answer::Done {
                empty: true,
                result: None,
                cost: None,
                usage: None,
            }
        );
        assert_eq!(
            classify(
                &output(Exit::Code(0), "{\"ok\":1,\"cost\":0.5}\n", None),
                &rules()
            ),
            Answer::Done {
                empty: false,
                result: Some("{\"ok\":1,\"cost\":0.5}".into()),
                cost: Some(0.5),
                usage: None,
            }
        );
        assert_eq!(
            classify(&output(Exit::Code(0), "plain text", None), &rules()),
            Answer::Done {
                empty: false,
                result: Some("\"plain text\"".into()),
                cost: None,
                usage: None,
            }
        );
    }

    #[test]
    fn exit_codes_and_signals() {
        let v = classify(
            &output(Exit::Code(75), "", Some("503 from upstream")),
            &rules(),
        );
        assert!(
            matches!(&v, Answer::Failed { transient: true, class, message, .. }
            if class == "TempFail" && message == "exited with status 75: 503 from upstream")
        );
        let v = classify(&output(Exit::Code(2), "", None), &rules());
        assert!(matches!(&v, Answer::Failed { transient: false, class, .. } if class == "Exit2"));
        // Nothing on stderr: stdout's last line is the message, with a hint
        // when it is an error object meant for stderr.
        let v = classify(
            &output(
                Exit::Code(1),
                "{\"error_class\":\"投稿エラー\",\"message\":\"失敗\"}\n",
                None,
            ),
            &rules(),
        );
        assert!(
            matches!(&v, Answer::Failed { class, message, .. } if class == "Exit1"
                && message == "exited with status 1; stdout: {\"error_class\":\"投稿エラー\",\"message\":\"失敗\"} \
                               (an error object is read from stderr's last line, not stdout)"),
            "{v:?}"
        );
        let v = classify(
            &output(Exit::Code(1), "partial\nno such page\n\n", None),
            &rules(),
        );
        assert!(
            matches!(&v, Answer::Failed { message, .. } if message == "exited with status 1; stdout: no such page"),
            "{v:?}"
        );
        // A JSON error line in a shape of its own: quoted, with the keys
        // the contract reads, rather than its class silently lost.
        let line = r#"{"error":"上流が応答しません","class":"上流タイムアウト"}"#;
        let v = classify(&output(Exit::Code(2), "", Some(line)), &rules());
        assert!(
            matches!(&v, Answer::Failed { class, message, .. } if class == "Exit2"
                && *message == format!("exited with status 2: {line} (an error line names its class \
                                        in \"error_class\" and its text in \"message\")")),
            "{v:?}"
        );
        let v = classify(&output(Exit::Signal(9), "", None), &rules());
        assert!(matches!(&v, Answer::Failed { transient: true, class, .. } if class == "Signal"));
    }

    #[test]
    fn error_line_overrides_and_config_classes() {
        let line =
            r#"{"error_class":"BadRequest","transient":false,"message":"400: title missing"}"#;
        let v = classify(&output(Exit::Code(75), "", Some(line)), &rules());
        assert!(
            matches!(&v, Answer::Failed { transient: false, class, message, .. }
            if class == "BadRequest" && message == "400: title missing")
        );
        let line = r#"{"error_class":"RateLimitError","retry_after_s":30}"#;
        let v = classify(&output(Exit::Code(1), "", Some(line)), &rules());
        assert!(
            matches!(&v, Answer::Failed { transient: true, retry_after: Some(d), .. } if *d == Duration::from_secs(30))
        );
        assert_eq!(parse_error_line("{\"unrelated\": 1}"), None);
        assert_eq!(parse_error_line("[1,2]"), None);
        assert_eq!(
            parse_error_line("{\"retry_after_s\": -5, \"message\": \"m\"}")
                .unwrap()
                .retry_after,
            None
        );
    }

    /// `retry_after_s` passed on from an HTTP `Retry-After` header as text:
    /// its seconds, or its date, are the wait asked.
    #[test]
    fn a_retry_after_given_as_header_text_is_read() {
        let wait = |v: &str| {
            parse_error_line(&format!("{{\"message\": \"m\", \"retry_after_s\": {v}}}"))
                .unwrap()
                .retry_after
        };
        assert_eq!(wait("\"30\""), Some(Duration::from_secs(30)));
        assert_eq!(wait("\" 1.5 \""), Some(Duration::from_millis(1500)));
        let at = crate::util::time::now() + chrono::Duration::seconds(120);
        let header = at.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        let asked = wait(&format!("\"{header}\"")).unwrap();
        assert!(
            asked > Duration::from_secs(100) && asked <= Duration::from_secs(120),
            "{asked:?}"
        );
        // Past, negative or unreadable: no wait asked.
        assert_eq!(
            wait("\"Wed, 21 Oct 2015 07:28:00 GMT\""),
            Some(Duration::ZERO)
        );
        assert_eq!(wait("\"-5\""), None);
        assert_eq!(wait("\"soon\""), None);
    }

    /// A wait given that asks none (negative, unreadable) is said in the
    /// failure's message, process mode and persistent alike; none given,
    /// or `null`, says nothing.
    #[test]
    fn a_wait_given_that_asks_none_is_said() {
        let failed = |stderr: &str| match classify(
            &output(Exit::Code(75), "", Some(stderr)),
            &Rules::default(),
        ) {
            Answer::Failed {
                message,
                retry_after,
                ..
            } => (message, retry_after),
            other => panic!("{other:?}"),
        };
        let (message, wait) = failed(r#"{"message": "429 混雑", "retry_after_s": -5}"#);
        assert_eq!(wait, None);
        assert_eq!(
            message,
            "429 混雑 (no wait taken from retry_after_s -5: seconds ≥ 0, an HTTP date or a reset time are read)"
        );
        let (message, _) = failed(r#"{"message": "429", "reset_at": "soon"}"#);
        assert!(message.ends_with("(no wait taken from reset_at \"soon\": seconds ≥ 0, an HTTP date or a reset time are read)"), "{message}");
        assert_eq!(
            failed(r#"{"message": "429", "retry_after_s": null}"#).0,
            "429"
        );
        assert_eq!(failed(r#"{"message": "429", "retry_after_s": 3}"#).0, "429");
        let persistent = answer(
            &obj(r#"{"key":"a","error":{"message":"429","retry_after_s":"later"}}"#),
            None,
            &Rules::default(),
        );
        assert!(
            matches!(&persistent, Answer::Failed { message, .. } if message.contains("no wait taken from retry_after_s \"later\"")),
            "{persistent:?}"
        );
    }

    #[test]
    fn a_reset_time_is_read_as_rfc_3339_or_epoch_seconds() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-01T02:00:00Z")
            .unwrap()
            .to_utc();
        let epoch = now.timestamp() as f64;
        let at = |v: Value| reset_in(&v, now);
        assert_eq!(
            at(Value::from("2026-12-01T02:00:30Z")),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            at(Value::from("2026-12-01T11:01:00+09:00")),
            Some(Duration::from_secs(60))
        );
        assert_eq!(at(Value::from(epoch + 12.0)), Some(Duration::from_secs(12)));
        assert_eq!(
            at(Value::from(format!("{}", epoch as i64 + 5))),
            Some(Duration::from_secs(5))
        );
        assert_eq!(at(Value::from(epoch - 100.0)), Some(Duration::ZERO));
        assert_eq!(at(Value::from("soon")), None);
        assert_eq!(at(Value::Bool(true)), None);
        // retry_after_s wins when both are given.
        let line = parse_error_line(r#"{"retry_after_s": 3, "reset_at": "2999-01-01T00:00:00Z"}"#)
            .unwrap();
        assert_eq!(line.retry_after, Some(Duration::from_secs(3)));
        let line = parse_error_line(
            r#"{"error_class": "RateLimitError", "reset_at": "2999-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(line.retry_after, Some(MAX_RETRY_AFTER));
        // A class of blank space is none: the default is taken.
        let line = parse_error_line(r#"{"error_class": "  \n\t ", "message": "m"}"#).unwrap();
        assert_eq!(line.error_class, None);
        // A null retry_after_s is absent: the reset_at beside it is read.
        let line =
            parse_error_line(r#"{"retry_after_s": null, "reset_at": "2999-01-01T00:00:00Z"}"#)
                .unwrap();
        assert_eq!(line.retry_after, Some(MAX_RETRY_AFTER));
        assert_eq!(line.unread_wait, None);
    }

    #[test]
    fn messages_are_bounded_and_inert() {
        let long = "x".repeat(5000);
        let m = bound_message(&format!("\x1b[2J{long}"));
        assert!(m.starts_with("\\x1b[2J"));
        assert_eq!(m.chars().count(), MAX_MESSAGE);
        assert!(m.ends_with('…'));
        // Cut between graphemes: no bare joiner before the `…`.
        let family = format!("{}👨‍👩‍👧", "x".repeat(MAX_MESSAGE - 3));
        assert_eq!(
            bound_message(&family),
            format!("{}…", "x".repeat(MAX_MESSAGE - 3))
        );
    }

    fn obj(text: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn answers_carry_their_costs_by_one_rule() {
        let rules = Rules::default();
        let v = answer(
            &obj(r#"{"key":"a","result":{"n":1,"cost":0.5}}"#),
            None,
            &rules,
        );
        assert!(
            matches!(v, Answer::Done { cost: Some(c), .. } if c == 0.5),
            "{v:?}"
        );
        let v = answer(
            &obj(r#"{"key":"a","error":{"message":"m","cost":0.25}}"#),
            None,
            &rules,
        );
        assert!(
            matches!(v, Answer::Failed { cost: Some(c), .. } if c == 0.25),
            "{v:?}"
        );
        for bad in [
            r#"{"key":"a","result":1,"cost":1e308}"#,
            r#"{"key":"a","result":{"cost":-1}}"#,
            r#"{"key":"a","error":{"cost":"NaN"}}"#,
            r#"{"key":"a","result":null,"cost":0.5,"x":{"cost":1},"error":{"cost":2e9}}"#,
        ] {
            let v = answer(&obj(bad), None, &rules);
            assert!(
                matches!(&v, Answer::Failed { transient: false, class, .. } if class == "InvalidCost"),
                "{bad}: {v:?}"
            );
        }
    }
}
