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
//!
//! Layout: [`ErrorLine`] reads an error object (`error_line`); process
//! mode's verdict is `process`, what stdout holds as a result `stdout`;
//! persistent mode's answers and breaks are `persistent`.

mod error_line;
mod persistent;
mod process;
mod stdout;

use std::time::Duration;

use super::usage::Tokens;
use crate::util::sanitize;

pub use error_line::{ErrorLine, MAX_RETRY_AFTER, parse_error_line};
pub use persistent::answer;
pub use process::{classify, cut_short};
pub use stdout::{cut_result, whole_chars, without_bom};

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

/// Makes a stored message: inert, one line, bounded.
pub fn bound_message(text: &str) -> String {
    let one_line = sanitize::line(text.trim());
    crate::util::text::cut_chars(&one_line, MAX_MESSAGE).into_owned()
}

impl Answer {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::child::Exit;
    use crate::runner::child::output::Output;
    use crate::runner::cost::Cost;
    use crate::runner::usage::Usage;
    use serde_json::Value;

    pub(super) fn output(exit: Exit, stdout: &str, stderr_last: Option<&str>) -> Output {
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

    pub(super) fn rules() -> Rules {
        Rules {
            transient_exit_codes: vec![75],
            transient_error_classes: vec!["RateLimitError".into()],
        }
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

    pub(super) fn obj(text: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }
}
