//! `budget = "20.0/day"`: a spend limit per window, for a batch
//! (`[batch.NAME]`) or a limit pool (`[limit.NAME]`). The runner's side is
//! `runner::budget`, the ledger `store::ops::budgets`.
//!
//! Windows are fixed and aligned in UTC to multiples of the period since
//! 1970-01-01T00:00Z: a day is the UTC day (it resets at 00:00Z), an hour
//! the clock hour, `3s` every third second. So every runner on every host
//! agrees on a window without asking, and its end is exact.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;

use crate::model::Millis;
use crate::runner::cost::MAX_COST;
use crate::util::money::to_micros;

/// `amount` (in the workers' cost unit) per window of `period`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub amount: f64,
    pub period: Duration,
}

/// A budget that is not `AMOUNT/PERIOD`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "invalid budget {0:?}: expected AMOUNT/PERIOD with a positive amount and a period of s, min, h or day (optionally a whole number of them), e.g. 20.0/day, 5/h, 0.30/3s"
)]
pub struct BudgetError(pub String);

/// The longest window: a year of days keeps every sum inside `i64`.
const MAX_PERIOD_SECS: u64 = 366 * 86_400;

/// A window of a budget: `[start, end)` in UTC millis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: Millis,
    pub end: Millis,
}

impl Budget {
    /// The period in millis (never zero).
    #[must_use]
    pub fn period_ms(&self) -> Millis {
        i64::try_from(self.period.as_millis())
            .unwrap_or(i64::MAX)
            .max(1)
    }

    /// The window `now` falls in.
    #[must_use]
    pub fn window(&self, now: Millis) -> Window {
        let p = self.period_ms();
        let start = now - now.rem_euclid(p);
        Window {
            start,
            end: start.saturating_add(p),
        }
    }

    /// The amount in millionths, as the ledger sums it (`util::money`).
    #[must_use]
    pub fn micros(&self) -> i64 {
        to_micros(self.amount)
    }
}

impl FromStr for Budget {
    type Err = BudgetError;

    fn from_str(s: &str) -> Result<Budget, BudgetError> {
        let err = || BudgetError(s.to_string());
        let (amount, period) = s.split_once('/').ok_or_else(err)?;
        let amount = amount.trim();
        // Plain decimal digits only: no sign, exponent, `inf` or `NaN`.
        if amount.is_empty()
            || !amount.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            || amount.bytes().filter(|b| *b == b'.').count() > 1
        {
            return Err(err());
        }
        let amount: f64 = amount.parse().map_err(|_| err())?;
        // At least a millionth: the ledger sums millionths.
        if !(1e-6..=MAX_COST).contains(&amount) {
            return Err(err());
        }
        let period = period.trim();
        let digits = period.bytes().take_while(u8::is_ascii_digit).count();
        let (n, unit) = period.split_at(digits);
        let n: u64 = match n {
            "" => 1,
            n => n.parse().map_err(|_| err())?,
        };
        let unit_secs = match unit {
            "s" | "sec" => 1,
            "min" | "m" => 60,
            "h" | "hour" => 3600,
            "day" | "d" => 86_400,
            _ => return Err(err()),
        };
        let secs = n.checked_mul(unit_secs).ok_or_else(err)?;
        if n == 0 || secs > MAX_PERIOD_SECS {
            return Err(err());
        }
        Ok(Budget {
            amount,
            period: Duration::from_secs(secs),
        })
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `20.0/day` as written; Rust prints a float without an exponent.
        let a = self.amount;
        if a.fract() == 0.0 {
            write!(f, "{a:.1}/{}", period_word(self.period))
        } else {
            write!(f, "{a}/{}", period_word(self.period))
        }
    }
}

/// `day`, `h`, `3s`: the period as a budget writes it.
#[must_use]
pub fn period_word(period: Duration) -> String {
    let secs = period.as_secs();
    let (n, unit) = [(86_400, "day"), (3600, "h"), (60, "min"), (1, "s")]
        .into_iter()
        .find(|(u, _)| secs.is_multiple_of(*u))
        .map_or((secs, "s"), |(u, w)| (secs / u, w));
    if n == 1 {
        unit.to_string()
    } else {
        format!("{n}{unit}")
    }
}

/// The words a view says a window in: `today` for a UTC day, else `this
/// hour`, `per 3s`.
#[must_use]
pub fn window_word(period: Duration) -> String {
    match period.as_secs() {
        86_400 => "today".into(),
        3600 => "this hour".into(),
        60 => "this minute".into(),
        _ => format!("per {}", period_word(period)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_read_an_amount_per_a_period() {
        let b: Budget = "20.0/day".parse().unwrap();
        assert_eq!((b.amount, b.period.as_secs()), (20.0, 86_400));
        assert_eq!(b.to_string(), "20.0/day");
        let b: Budget = "0.30/3s".parse().unwrap();
        assert_eq!((b.micros(), b.period.as_secs()), (300_000, 3));
        assert_eq!(b.to_string(), "0.3/3s");
        assert_eq!("5/2h".parse::<Budget>().unwrap().to_string(), "5.0/2h");
        assert_eq!("5/min".parse::<Budget>().unwrap().period.as_secs(), 60);
        for bad in [
            "",
            "20",
            "/day",
            "20/",
            "-1/day",
            "0/day",
            "1e3/day",
            "inf/day",
            "NaN/day",
            "1.2.3/day",
            "20/week",
            "20/0s",
            "20/400day",
            "+5/day",
            "2000000000/day",
        ] {
            assert!(bad.parse::<Budget>().is_err(), "{bad}");
        }
    }

    #[test]
    fn windows_are_aligned_in_utc() {
        let day: Budget = "1/day".parse().unwrap();
        // 2026-01-01T06:46:40Z is in the day from 00:00Z to 00:00Z.
        let w = day.window(1_767_250_000_000);
        assert_eq!((w.start, w.end), (1_767_225_600_000, 1_767_312_000_000));
        let three: Budget = "1/3s".parse().unwrap();
        let w = three.window(10_500);
        assert_eq!((w.start, w.end), (9_000, 12_000));
        assert_eq!(window_word(day.period), "today");
        assert_eq!(window_word(three.period), "per 3s");
    }
}
