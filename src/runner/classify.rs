//! From what a worker did (exit status, stdout, stderr) to a verdict: done,
//! empty, transient failure or permanent failure.
//!
//! Rules (the worker contract): exit 0 is success, its stdout the result and
//! empty stdout the outcome `empty`; exit 75 (EX_TEMPFAIL), a timeout or
//! death by signal are transient; other exit codes are permanent. A last
//! stderr line that is a JSON object `{"error_class", "transient",
//! "message", "retry_after_s", "cost"}` overrides the exit-code rule, and
//! classes the config names as transient are transient. Costs follow one
//! rule (`cost`).

use std::time::Duration;

use serde_json::Value;

use super::child::Exit;
use super::child::output::Output;
use super::cost::Cost;
use crate::util::sanitize;

/// Longest error message kept (the seeds keep 500 characters).
pub const MAX_MESSAGE: usize = 500;

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Done {
        empty: bool,
        /// The result as stored: JSON text (a non-JSON stdout is stored as
        /// a JSON string).
        result: Option<String>,
        cost: Option<f64>,
    },
    Failed {
        transient: bool,
        class: String,
        message: String,
        retry_after: Option<Duration>,
        cost: Option<f64>,
    },
}

/// What the config adds to the rules.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub transient_exit_codes: Vec<i32>,
    pub transient_error_classes: Vec<String>,
}

/// The structured error line a worker may print last on stderr.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorLine {
    pub error_class: Option<String>,
    pub transient: Option<bool>,
    pub message: Option<String>,
    pub retry_after: Option<Duration>,
    pub cost: Cost,
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
    let line = error_line_of(&obj);
    (line != ErrorLine::default()).then_some(line)
}

/// The longest `retry_after_s` read as asked (a year: far past any
/// `max_hold`, which clamps it, and safe to add to any time).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(365 * 86_400);

/// The fields of an error object: the stderr error line in process mode,
/// the `"error"` of a persistent answer.
pub fn error_line_of(obj: &serde_json::Map<String, Value>) -> ErrorLine {
    let text = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let retry_after = obj
        .get("retry_after_s")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())));
    ErrorLine {
        error_class: text("error_class").filter(|c| !c.is_empty()),
        transient: obj.get("transient").and_then(Value::as_bool),
        message: text("message"),
        retry_after,
        cost: Cost::from_json(obj.get("cost")),
    }
}

/// Makes a stored message: inert, one line, bounded.
pub fn bound_message(text: &str) -> String {
    let one_line = sanitize::line(text.trim());
    sanitize::truncate(&one_line, MAX_MESSAGE).into_owned()
}

pub fn classify(out: &Output, rules: &Rules) -> Verdict {
    match &out.exit {
        Exit::Code(0) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let trimmed = text.trim();
            if trimmed.is_empty() && !out.stdout_truncated {
                let empty = Verdict::Done {
                    empty: true,
                    result: None,
                    cost: None,
                };
                return out.reported_cost.clone().apply(empty);
            }
            let mut parsed: Value = serde_json::from_str(trimmed)
                .unwrap_or_else(|_| Value::String(trimmed.to_string()));
            if out.stdout_truncated {
                parsed = serde_json::json!({
                    "truncated": true,
                    "limit_bytes": super::child::output::MAX_STDOUT,
                    "head": trimmed,
                });
            }
            let cost = Cost::from_json(parsed.get("cost")).or(out.reported_cost.clone());
            cost.apply(Verdict::Done {
                empty: false,
                result: Some(parsed.to_string()),
                cost: None,
            })
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
                Exit::SpawnFailed(err) => (
                    "SpawnError".to_string(),
                    true,
                    format!("could not start the worker: {err}"),
                ),
            };
            let class = line.error_class.clone().unwrap_or(default_class);
            let transient = line.transient.unwrap_or_else(|| {
                rules.transient_error_classes.iter().any(|c| c == &class) || default_transient
            });
            let message = line
                .message
                .clone()
                .or_else(|| {
                    out.stderr_last_line
                        .clone()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| format!("{default_message}: {l}"))
                })
                .unwrap_or(default_message);
            line.cost
                .or(out.reported_cost.clone())
                .apply(Verdict::Failed {
                    transient,
                    class: bound_message(&class),
                    message: bound_message(&message),
                    retry_after: line.retry_after,
                    cost: None,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(exit: Exit, stdout: &str, stderr_last: Option<&str>) -> Output {
        Output {
            exit,
            stdout: stdout.as_bytes().to_vec(),
            stdout_truncated: false,
            stderr_last_line: stderr_last.map(str::to_string),
            error_line: stderr_last.and_then(parse_error_line),
            reported_cost: Cost::Absent,
            op_ids: Vec::new(),
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
            Verdict::Done {
                empty: true,
                result: None,
                cost: None
            }
        );
        assert_eq!(
            classify(
                &output(Exit::Code(0), "{\"ok\":1,\"cost\":0.5}\n", None),
                &rules()
            ),
            Verdict::Done {
                empty: false,
                result: Some("{\"cost\":0.5,\"ok\":1}".into()),
                cost: Some(0.5)
            }
        );
        assert_eq!(
            classify(&output(Exit::Code(0), "plain text", None), &rules()),
            Verdict::Done {
                empty: false,
                result: Some("\"plain text\"".into()),
                cost: None
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
            matches!(&v, Verdict::Failed { transient: true, class, message, .. }
            if class == "TempFail" && message == "exited with status 75: 503 from upstream")
        );
        let v = classify(&output(Exit::Code(2), "", None), &rules());
        assert!(matches!(&v, Verdict::Failed { transient: false, class, .. } if class == "Exit2"));
        let v = classify(&output(Exit::Signal(9), "", None), &rules());
        assert!(matches!(&v, Verdict::Failed { transient: true, class, .. } if class == "Signal"));
    }

    #[test]
    fn error_line_overrides_and_config_classes() {
        let line =
            r#"{"error_class":"BadRequest","transient":false,"message":"400: title missing"}"#;
        let v = classify(&output(Exit::Code(75), "", Some(line)), &rules());
        assert!(
            matches!(&v, Verdict::Failed { transient: false, class, message, .. }
            if class == "BadRequest" && message == "400: title missing")
        );
        let line = r#"{"error_class":"RateLimitError","retry_after_s":30}"#;
        let v = classify(&output(Exit::Code(1), "", Some(line)), &rules());
        assert!(
            matches!(&v, Verdict::Failed { transient: true, retry_after: Some(d), .. } if *d == Duration::from_secs(30))
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

    #[test]
    fn messages_are_bounded_and_inert() {
        let long = "x".repeat(5000);
        let m = bound_message(&format!("\x1b[2J{long}"));
        assert!(m.starts_with("\\x1b[2J"));
        assert_eq!(m.chars().count(), MAX_MESSAGE + 1);
    }
}
