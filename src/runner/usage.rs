//! The one rule for the token usage workers report, wherever it comes from
//! (a `usage` object in the result, the structured error line, a
//! persistent answer or its error; `@nightshift usage input_tokens=N
//! output_tokens=M` stderr lines; both worker modes), as `cost` has its
//! own (`cost`): `input_tokens` and `output_tokens` are whole numbers
//! from 0 to [`MAX_TOKENS`] (`prompt_tokens` and `completion_tokens`, the
//! other common shape, are read as them). Anything else is refused: the
//! item fails as a permanent `InvalidUsage` worker error, because a pool
//! settled with nonsense would stop every batch sharing it, or never.

use serde_json::{Map, Value};

use super::classify::{Answer, bound_message};
use crate::util::{sanitize, text};

/// The most tokens one attempt may report, each of input and output.
pub const MAX_TOKENS: i64 = 1_000_000_000;

/// The tokens an attempt used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: Option<i64>,
    pub output: Option<i64>,
}

/// What a worker reported as an attempt's usage.
pub type Usage = super::report::Report<Tokens>;

/// The names each count is read under, the providers' own first.
const INPUT: [&str; 2] = ["input_tokens", "prompt_tokens"];
const OUTPUT: [&str; 2] = ["output_tokens", "completion_tokens"];

impl Usage {
    /// A `usage` field of a JSON object (`null` counts as absent).
    pub fn from_json(value: Option<&Value>) -> Usage {
        match value {
            None | Some(Value::Null) => Usage::Absent,
            Some(Value::Object(obj)) => from_object(obj),
            Some(v) => refused(&format!("{v} (not an object)")),
        }
    }

    /// The text after `@nightshift usage`: `input_tokens=N output_tokens=M`
    /// (either may be left out).
    pub fn from_text(text: &str) -> Usage {
        let mut tokens = Tokens::default();
        let mut any = false;
        for word in text.split_whitespace() {
            let Some((name, n)) = word.split_once('=') else {
                return refused(text.trim());
            };
            let slot = if INPUT.contains(&name) {
                &mut tokens.input
            } else if OUTPUT.contains(&name) {
                &mut tokens.output
            } else {
                return refused(text.trim());
            };
            let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
            match n.parse::<i64>() {
                Ok(n) if digits && (0..=MAX_TOKENS).contains(&n) => {
                    *slot = Some(n);
                    any = true;
                }
                _ => return refused(text.trim()),
            }
        }
        if any {
            Usage::Valid(tokens)
        } else {
            refused(text.trim())
        }
    }

    /// Two reports of one attempt added up (`@nightshift usage` lines).
    #[must_use]
    pub fn plus(self, other: Usage) -> Usage {
        self.plus_with(other, |a, b| {
            let add = |x: Option<i64>, y: Option<i64>| match (x, y) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
            };
            let sum = Tokens {
                input: add(a.input, b.input),
                output: add(a.output, b.output),
            };
            if [sum.input, sum.output]
                .into_iter()
                .flatten()
                .any(|n| n > MAX_TOKENS)
            {
                return refused("more than 1000000000 tokens in total");
            }
            Usage::Valid(sum)
        })
    }

    /// `answer` with this usage. A refused usage turns it into a permanent
    /// `InvalidUsage` failure that names the value.
    pub fn apply(self, answer: Answer) -> Answer {
        match self {
            Usage::Refused(shown) => {
                let (what, retry_after, cost) = match answer {
                    Answer::Done { cost, .. } => {
                        ("a success, not recorded".to_string(), None, cost)
                    }
                    Answer::Failed {
                        class,
                        message,
                        retry_after,
                        cost,
                        ..
                    } => (format!("{class}: {message}"), retry_after, cost),
                };
                Answer::Failed {
                    transient: false,
                    class: "InvalidUsage".into(),
                    message: bound_message(&format!(
                        "the worker reported a usage of {shown}; usage is \
                         {{\"input_tokens\": N, \"output_tokens\": M}} with whole numbers from 0 \
                         to 1000000000 (its answer: {what})"
                    )),
                    retry_after,
                    cost,
                    usage: None,
                }
            }
            Usage::Absent => answer,
            Usage::Valid(t) => answer.with_usage(Some(t)),
        }
    }
}

fn from_object(obj: &Map<String, Value>) -> Usage {
    let mut tokens = Tokens::default();
    for (names, slot) in [(INPUT, &mut tokens.input), (OUTPUT, &mut tokens.output)] {
        let Some((name, v)) = names
            .iter()
            .find_map(|n| obj.get(*n).map(|v| (*n, v)))
            .filter(|(_, v)| !v.is_null())
        else {
            continue;
        };
        match v.as_i64() {
            Some(n) if (0..=MAX_TOKENS).contains(&n) => *slot = Some(n),
            _ => return refused(&format!("{name}: {v}")),
        }
    }
    if tokens == Tokens::default() {
        return refused(&format!(
            "{} (no input_tokens or output_tokens)",
            Value::Object(obj.clone())
        ));
    }
    Usage::Valid(tokens)
}

fn refused(shown: &str) -> Usage {
    Usage::Refused(bound_message(&text::cut(&sanitize::line(shown), 80)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Usage {
        Usage::from_json(Some(&serde_json::from_str(text).unwrap()))
    }

    fn valid(input: Option<i64>, output: Option<i64>) -> Usage {
        Usage::Valid(Tokens { input, output })
    }

    #[test]
    fn the_providers_shapes_are_usage() {
        assert_eq!(
            json(r#"{"input_tokens": 12, "output_tokens": 30, "cache_read_input_tokens": 4}"#),
            valid(Some(12), Some(30))
        );
        assert_eq!(
            json(r#"{"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}"#),
            valid(Some(5), Some(7))
        );
        assert_eq!(json(r#"{"output_tokens": 0}"#), valid(None, Some(0)));
        assert_eq!(json("null"), Usage::Absent);
        assert_eq!(
            Usage::from_text(" input_tokens=3 output_tokens=4 "),
            valid(Some(3), Some(4))
        );
    }

    #[test]
    fn everything_else_is_refused_with_the_value_shown() {
        for bad in [
            r#"{"input_tokens": -1}"#,
            r#"{"input_tokens": 1.5}"#,
            r#"{"output_tokens": "7"}"#,
            r#"{"input_tokens": 1000000000000}"#,
            r#"{"total_tokens": 12}"#,
            "12",
            "[1]",
        ] {
            assert!(matches!(json(bad), Usage::Refused(_)), "{bad}");
        }
        for bad in ["", "input_tokens=-1", "tokens=3", "input_tokens=1e3", "x"] {
            assert!(matches!(Usage::from_text(bad), Usage::Refused(_)), "{bad}");
        }
        let Usage::Refused(shown) = Usage::from_text("input_tokens=\x1b[2J") else {
            panic!("refused");
        };
        assert!(shown.contains("\\x1b[2J"), "{shown}");
    }

    #[test]
    fn reports_add_up_and_a_refusal_is_never_hidden() {
        let sum = valid(Some(1), None).plus(valid(Some(2), Some(3)));
        assert_eq!(sum, valid(Some(3), Some(3)));
        let bad = Usage::Refused("x".into());
        assert_eq!(valid(Some(1), None).or(bad.clone()), bad);
        assert_eq!(Usage::Absent.or(valid(None, Some(1))), valid(None, Some(1)));
        let big = valid(Some(MAX_TOKENS), None).plus(valid(Some(1), None));
        assert!(matches!(big, Usage::Refused(_)));
    }

    #[test]
    fn a_refused_usage_is_a_permanent_worker_error() {
        let done = Answer::Done {
            empty: false,
            result: Some("1".into()),
            cost: Some(0.5),
            usage: None,
        };
        let Answer::Failed {
            transient,
            class,
            message,
            cost,
            ..
        } = json(r#"{"input_tokens": -5}"#).apply(done.clone())
        else {
            panic!("a refused usage must fail the item");
        };
        assert!(!transient);
        assert_eq!((class.as_str(), cost), ("InvalidUsage", Some(0.5)));
        assert!(message.contains("input_tokens: -5"), "{message}");
        let applied = valid(Some(1), Some(2)).apply(done);
        assert!(matches!(
            applied,
            Answer::Done {
                usage: Some(Tokens {
                    input: Some(1),
                    output: Some(2)
                }),
                ..
            }
        ));
    }
}
