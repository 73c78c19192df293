//! The one rule for the costs workers report, wherever they come from (a
//! result object, the structured error line, a persistent answer or its
//! error, `@nightshift cost=` stderr lines; both worker modes): a cost is a
//! finite number from 0 to [`MAX_COST`]. Anything else (`1e308`, a
//! negative number, `NaN`, a string) is refused: the item fails as a
//! permanent `InvalidCost` worker error and nothing is counted, because a
//! budget summed from nonsense would stop a run too early or never.

use serde_json::Value;

use super::classify::{Answer, bound_message};
use crate::util::{sanitize, text};

/// The most one item may cost, in the worker's unit. Far above any real
/// call, far below what the run's sums (in millionths, `i64`) can hold.
pub const MAX_COST: f64 = 1e9;

/// What a worker reported as an item's cost.
pub type Cost = super::report::Report<f64>;

impl Cost {
    /// A `cost` field of a JSON object (`null` counts as absent).
    pub fn from_json(value: Option<&Value>) -> Cost {
        match value {
            None | Some(Value::Null) => Cost::Absent,
            Some(v @ Value::Number(n)) => match n.as_f64() {
                Some(c) => checked(c, || v.to_string()),
                None => refused(&v.to_string()),
            },
            Some(v) => refused(&v.to_string()),
        }
    }

    /// The text after `@nightshift cost=`.
    pub fn from_text(text: &str) -> Cost {
        let text = text.trim();
        match text.parse::<f64>() {
            Ok(c) => checked(c, || text.to_string()),
            Err(_) => refused(text),
        }
    }

    /// Two reports of one attempt added up (`@nightshift cost=` lines); the
    /// total is bounded like each report.
    #[must_use]
    pub fn plus(self, other: Cost) -> Cost {
        self.plus_with(other, |a, b| {
            checked(a + b, || format!("{} in total", a + b))
        })
    }

    /// `answer` with this cost. A refused cost turns it into a permanent
    /// `InvalidCost` failure that names the value (and keeps what the
    /// worker said, for a failure).
    pub fn apply(self, answer: Answer) -> Answer {
        match (self, answer) {
            (Cost::Refused(shown), answer) => {
                let (what, retry_after) = match answer {
                    Answer::Done { .. } => ("a success, not recorded".to_string(), None),
                    Answer::Failed {
                        class,
                        message,
                        retry_after,
                        ..
                    } => (format!("{class}: {message}"), retry_after),
                };
                Answer::Failed {
                    transient: false,
                    class: "InvalidCost".into(),
                    message: bound_message(&format!(
                        "the worker reported a cost of {shown}; a cost must be a finite \
                         number from 0 to 1e9 (its answer: {what})"
                    )),
                    retry_after,
                    cost: None,
                    usage: None,
                }
            }
            (
                cost,
                Answer::Done {
                    empty,
                    result,
                    usage,
                    ..
                },
            ) => Answer::Done {
                empty,
                result,
                cost: cost.valid(),
                usage,
            },
            (
                cost,
                Answer::Failed {
                    transient,
                    class,
                    message,
                    retry_after,
                    usage,
                    ..
                },
            ) => Answer::Failed {
                transient,
                class,
                message,
                retry_after,
                cost: cost.valid(),
                usage,
            },
        }
    }
}

fn checked(c: f64, shown: impl FnOnce() -> String) -> Cost {
    if (0.0..=MAX_COST).contains(&c) {
        // `-0.0` is stored as `0`.
        Cost::Valid(c + 0.0)
    } else {
        refused(&shown())
    }
}

fn refused(shown: &str) -> Cost {
    Cost::Refused(bound_message(&text::cut(&sanitize::line(shown), 40)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Cost {
        Cost::from_json(Some(&serde_json::from_str(text).unwrap()))
    }

    #[test]
    fn finite_numbers_from_zero_to_the_bound_are_costs() {
        assert_eq!(json("0.25"), Cost::Valid(0.25));
        assert_eq!(json("3"), Cost::Valid(3.0));
        assert_eq!(json("-0.0"), Cost::Valid(0.0));
        assert_eq!(json("1e9"), Cost::Valid(1e9));
        assert_eq!(json("null"), Cost::Absent);
        assert_eq!(Cost::from_json(None), Cost::Absent);
        assert_eq!(Cost::from_text(" 0.5 "), Cost::Valid(0.5));
    }

    #[test]
    fn everything_else_is_refused_with_the_value_shown() {
        assert_eq!(json("1e308"), Cost::Refused("1e+308".into()));
        assert_eq!(json("1000000001"), Cost::Refused("1000000001".into()));
        assert_eq!(json("-1"), Cost::Refused("-1".into()));
        assert_eq!(
            json("18446744073709551615"),
            Cost::Refused("18446744073709551615".into())
        );
        assert_eq!(json("\"0.5\""), Cost::Refused("\"0.5\"".into()));
        assert_eq!(json("[1]"), Cost::Refused("[1]".into()));
        for text in ["NaN", "inf", "-infinity", "1e400", "", "abc"] {
            assert_eq!(Cost::from_text(text), Cost::Refused(text.into()), "{text}");
        }
        let long = Cost::from_text(&format!("\x1b[2J{}", "9".repeat(100)));
        assert!(
            matches!(&long, Cost::Refused(s) if s.starts_with("\\x1b[2J") && s.ends_with('…')),
            "{long:?}"
        );
    }

    #[test]
    fn reports_combine_without_hiding_a_refusal() {
        let (ok, bad) = (Cost::Valid(1.0), Cost::Refused("NaN".into()));
        assert_eq!(Cost::Absent.or(ok.clone()), ok);
        assert_eq!(Cost::Valid(2.0).or(ok.clone()), Cost::Valid(2.0));
        assert_eq!(ok.clone().or(bad.clone()), bad);
        assert_eq!(ok.clone().plus(Cost::Valid(0.5)), Cost::Valid(1.5));
        assert_eq!(Cost::Absent.plus(bad.clone()), bad);
        assert_eq!(
            Cost::Valid(6e8).plus(Cost::Valid(6e8)),
            Cost::Refused("1200000000 in total".into())
        );
    }

    #[test]
    fn a_refused_cost_is_a_permanent_worker_error() {
        let done = Answer::Done {
            empty: false,
            result: Some("1".into()),
            cost: None,
            usage: None,
        };
        assert_eq!(
            Cost::Valid(0.5).apply(done.clone()),
            Answer::Done {
                empty: false,
                result: Some("1".into()),
                cost: Some(0.5),
                usage: None,
            }
        );
        let Answer::Failed {
            transient,
            class,
            message,
            ..
        } = Cost::Refused("1e+308".into()).apply(done)
        else {
            panic!("a refused cost must fail the item");
        };
        assert!(!transient);
        assert_eq!(class, "InvalidCost");
        assert!(
            message.contains("a cost of 1e+308") && message.contains("from 0 to 1e9"),
            "{message}"
        );
        let failed = Answer::Failed {
            transient: true,
            class: "Busy".into(),
            message: "503".into(),
            retry_after: None,
            cost: None,
            usage: None,
        };
        let v = Cost::Refused("-1".into()).apply(failed);
        assert!(
            matches!(&v, Answer::Failed { transient: false, message, .. } if message.contains("(its answer: Busy: 503)")),
            "{v:?}"
        );
    }
}
