//! A worker's error object, read once for both modes: the last stderr
//! line in process mode, a persistent answer's `"error"`; its wait
//! (`retry_after_s`, `reset_at`) read and clamped here.

use std::time::Duration;

use serde_json::Value;

use crate::runner::cost::Cost;
use crate::runner::usage::Usage;
use crate::util::sanitize;

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
    pub(super) fn noted(&self, message: String) -> String {
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
    let mut value = serde_json::from_str::<Value>(trimmed).ok()?;
    crate::util::json::mark_reported_twice(trimmed, &mut value);
    let Value::Object(obj) = value else {
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
    pub(super) fn from_answer(err: &Value) -> ErrorLine {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
