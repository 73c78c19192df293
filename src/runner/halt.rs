//! The circuit breaker (`halt = "5 in a row"`, `halt = "30% of the last
//! 50"`; GNU parallel's `--halt`, pueue's `pause_on_failure`): the rule,
//! read from the config, and the one decision over a window of the run's
//! most recent worker answers: trip or not. Pure; the runner (`cycle`)
//! keeps the window and, on a trip, stops claiming and pauses the batch
//! with the reason.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::util::{sanitize, text};

/// When a run trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltRule {
    /// The last N answers all failed.
    InARow(u32),
    /// Of the last `of` answers (once there are that many), at least
    /// `percent`% failed.
    Share { percent: u32, of: u32 },
}

/// A `halt` that is neither form.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "invalid halt rule {0:?}: expected \"N in a row\" (e.g. \"5 in a row\") or \"P% of the last N\" \
     (e.g. \"30% of the last 50\"), with N from 1 to 10000 and P from 1 to 100"
)]
pub struct HaltRuleError(pub String);

/// The longest window a rule may keep.
const MAX_WINDOW: u32 = 10_000;

fn number(s: &str, max: u32) -> Option<u32> {
    // `u32::from_str` takes a leading `+`; the rule is plain digits.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| (1..=max).contains(n))
}

impl FromStr for HaltRule {
    type Err = HaltRuleError;

    fn from_str(s: &str) -> Result<HaltRule, HaltRuleError> {
        let err = || HaltRuleError(s.to_string());
        let words: Vec<&str> = s.split_whitespace().collect();
        match words.as_slice() {
            [n, "in", "a", "row"] => Ok(HaltRule::InARow(number(n, MAX_WINDOW).ok_or_else(err)?)),
            [p, "of", "the", "last", n] => {
                let percent = number(p.strip_suffix('%').ok_or_else(err)?, 100).ok_or_else(err)?;
                let of = number(n, MAX_WINDOW).ok_or_else(err)?;
                Ok(HaltRule::Share { percent, of })
            }
            _ => Err(err()),
        }
    }
}

impl fmt::Display for HaltRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HaltRule::InARow(n) => write!(f, "{n} in a row"),
            HaltRule::Share { percent, of } => write!(f, "{percent}% of the last {of}"),
        }
    }
}

impl HaltRule {
    /// How many answers the rule looks at.
    #[must_use]
    pub fn window(self) -> usize {
        match self {
            HaltRule::InARow(n) | HaltRule::Share { of: n, .. } => n as usize,
        }
    }
}

/// Cells an error class takes in a reason: the class is the worker's
/// text, of any length, and the reason is a pause reason every view shows.
const CLASS_CELLS: usize = 40;

/// Classes a reason names; the rest are counted.
const CLASSES_NAMED: usize = 3;

/// A worker's error class as a reason names it: inert, and cut with `…`.
fn class_shown(class: &str) -> String {
    text::cut(&sanitize::line(class), CLASS_CELLS).into_owned()
}

/// Failures by error class, most first (then by name): `3 ServiceUnavailable,
/// 2 Timeout`; past [`CLASSES_NAMED`], `and 5 other classes`.
fn classes<'a>(failures: impl Iterator<Item = &'a str>) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for class in failures {
        *counts.entry(class).or_default() += 1;
    }
    let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> = counts
        .iter()
        .take(CLASSES_NAMED)
        .map(|(c, n)| format!("{n} {}", class_shown(c)))
        .collect();
    let others = counts.len().saturating_sub(CLASSES_NAMED);
    if others > 0 {
        let classes = if others == 1 { "class" } else { "classes" };
        parts.push(format!("and {others} other {classes}"));
    }
    parts.join(", ")
}

/// The run's most recent answers, oldest first: `None` a success, `Some`
/// the error class of a failure. Keep at most `rule.window()`.
pub fn trips(rule: HaltRule, recent: &VecDeque<Option<String>>) -> Option<String> {
    let window = rule.window();
    if recent.len() < window {
        return None;
    }
    let last = recent.iter().skip(recent.len() - window);
    let failed: Vec<&str> = last.filter_map(|o| o.as_deref()).collect();
    match rule {
        HaltRule::InARow(n) => {
            if failed.len() < window {
                return None;
            }
            let first = failed[0];
            Some(if failed.iter().all(|c| *c == first) {
                format!("halted: {n} consecutive {}", class_shown(first))
            } else {
                format!(
                    "halted: {n} consecutive failures ({})",
                    classes(failed.into_iter())
                )
            })
        }
        HaltRule::Share { percent, of } => {
            // Integer arithmetic: 15 of 50 is exactly 30%.
            if failed.len() * 100 < percent as usize * window {
                return None;
            }
            Some(format!(
                "halted: {} of the last {of} answers failed (the limit is {percent}%): {}",
                failed.len(),
                classes(failed.into_iter())
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(answers: &str) -> VecDeque<Option<String>> {
        // `.` a success, a letter a failure of that class.
        answers
            .chars()
            .map(|c| (c != '.').then(|| format!("E{c}")))
            .collect()
    }

    #[test]
    fn rules_parse_display_and_refuse_garbage() {
        assert_eq!("5 in a row".parse(), Ok(HaltRule::InARow(5)));
        assert_eq!(
            " 30%  of the last 50 ".parse(),
            Ok(HaltRule::Share {
                percent: 30,
                of: 50
            })
        );
        for rule in ["5 in a row", "30% of the last 50", "100% of the last 1"] {
            assert_eq!(rule.parse::<HaltRule>().unwrap().to_string(), rule);
        }
        for bad in [
            "",
            "5",
            "0 in a row",
            "+5 in a row",
            "5 in a line",
            "30 of the last 50",
            "0% of the last 50",
            "101% of the last 50",
            "30% of the last 0",
            "30% of the last 10001",
            "five in a row",
        ] {
            let err = bad.parse::<HaltRule>().unwrap_err().to_string();
            assert!(err.contains("\"N in a row\""), "{bad}: {err}");
        }
    }

    #[test]
    fn in_a_row_trips_on_the_nth_consecutive_failure_only() {
        let rule = HaltRule::InARow(3);
        assert_eq!(trips(rule, &window("")), None);
        assert_eq!(trips(rule, &window("aa")), None, "too few answers");
        assert_eq!(
            trips(rule, &window("aa.aa")),
            None,
            "a success breaks the row"
        );
        assert_eq!(
            trips(rule, &window(".aaa")).as_deref(),
            Some("halted: 3 consecutive Ea")
        );
        assert_eq!(
            trips(rule, &window("abab")).as_deref(),
            Some("halted: 3 consecutive failures (2 Eb, 1 Ea)")
        );
        assert_eq!(
            trips(rule, &window("aaa.")),
            None,
            "the last answer succeeded"
        );
    }

    /// A worker's class is its own text, of any length: the reason (a
    /// pause reason every view shows) names a few, inert and cut with `…`.
    #[test]
    fn a_reason_names_a_few_classes_inert_and_cut() {
        let long = format!("接続エラー\u{1b}[31m{}", "あ".repeat(300));
        let row: VecDeque<Option<String>> = (0..3).map(|_| Some(long.clone())).collect();
        let reason = trips(HaltRule::InARow(3), &row).unwrap();
        assert!(!reason.contains('\u{1b}'), "{reason}");
        assert!(
            reason.starts_with("halted: 3 consecutive 接続エラー\\x1b[31mあ"),
            "{reason}"
        );
        assert!(reason.ends_with('…'), "{reason}");
        assert!(text::width(&reason) <= 22 + CLASS_CELLS, "{reason}");

        let rule = HaltRule::Share { percent: 50, of: 8 };
        let many: VecDeque<Option<String>> = (0..8).map(|i| Some(format!("{long}{i}"))).collect();
        let reason = trips(rule, &many).unwrap();
        assert!(reason.ends_with(", and 5 other classes"), "{reason}");
        assert_eq!(reason.matches('…').count(), CLASSES_NAMED, "{reason}");
        assert_eq!(
            trips(rule, &window("abcd....")).as_deref(),
            Some(
                "halted: 4 of the last 8 answers failed (the limit is 50%): 1 Ea, 1 Eb, 1 Ec, and 1 other class"
            )
        );
    }

    #[test]
    fn a_share_trips_once_the_window_is_full_and_at_the_limit() {
        let rule = HaltRule::Share {
            percent: 30,
            of: 10,
        };
        assert_eq!(trips(rule, &window("aaa")), None, "a window not yet full");
        assert_eq!(trips(rule, &window("aa........")), None, "20%");
        assert_eq!(
            trips(rule, &window("ab.......a")).as_deref(),
            Some("halted: 3 of the last 10 answers failed (the limit is 30%): 2 Ea, 1 Eb")
        );
        // Only the last 10 count.
        assert_eq!(trips(rule, &window("aaaaa..........")), None);
    }
}
