//! `[limit.NAME]`: a limit pool that several batches (and every runner of
//! the store) draw from: requests and tokens per period, and calls in
//! flight. The batch side is `limit = "NAME"` with `token_estimate` or
//! `estimate_field` (rows in [`super::fields`]); the runner side is
//! `runner::pool`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;
use toml::Spanned;
use toml::de::DeValue;

use super::convert::{Conv, array, at, bad, describe, int_in, string};

/// Most calls in flight a pool may allow.
pub const MAX_POOL_CONCURRENCY: i64 = 100_000;

/// `count` units per `per`: `3000/min`, `250000/min`, `10000/day`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolRate {
    pub count: u64,
    pub per: Duration,
}

/// A pool rate that is not `COUNT/UNIT`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "invalid rate {0:?}: expected COUNT/UNIT with a positive count and a unit of s, min, h or day, e.g. 3000/min, 10000/day"
)]
pub struct PoolRateError(pub String);

/// Largest count of a pool rate: the bucket arithmetic (microseconds per
/// unit, times a count) stays far inside `i64`.
const MAX_RATE_COUNT: u64 = 1_000_000_000;

impl FromStr for PoolRate {
    type Err = PoolRateError;

    fn from_str(s: &str) -> Result<PoolRate, PoolRateError> {
        let err = || PoolRateError(s.to_string());
        let (count, unit) = s.split_once('/').ok_or_else(err)?;
        let count = count.trim();
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let count: u64 = count.parse().map_err(|_| err())?;
        let per = match unit.trim() {
            "s" | "sec" => Duration::from_secs(1),
            "min" | "m" => Duration::from_mins(1),
            "h" | "hour" => Duration::from_hours(1),
            "day" | "d" => Duration::from_hours(24),
            _ => return Err(err()),
        };
        if count == 0 || count > MAX_RATE_COUNT {
            return Err(err());
        }
        Ok(PoolRate { count, per })
    }
}

impl fmt::Display for PoolRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            3600 => "h",
            _ => "day",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// What a pool's rate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Measure {
    Requests,
    /// Input and output tokens together.
    Tokens,
    InputTokens,
    OutputTokens,
}

impl Measure {
    pub const ALL: [Measure; 4] = [
        Measure::Requests,
        Measure::Tokens,
        Measure::InputTokens,
        Measure::OutputTokens,
    ];

    /// The key of `[limit.NAME]` that sets it, and its word in the views.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Measure::Requests => "requests",
            Measure::Tokens => "tokens",
            Measure::InputTokens => "input_tokens",
            Measure::OutputTokens => "output_tokens",
        }
    }
}

/// One limit of a pool: a measure at a rate (`tokens 250000/min`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimit {
    pub measure: Measure,
    pub rate: PoolRate,
}

impl PoolLimit {
    /// Its name in the store and the views: `tokens/min`.
    #[must_use]
    pub fn dimension(&self) -> String {
        let rate = self.rate.to_string();
        let unit = rate.split_once('/').map_or("", |(_, u)| u);
        format!("{}/{unit}", self.measure.key())
    }
}

/// A `[limit.NAME]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitPool {
    pub name: String,
    pub limits: Vec<PoolLimit>,
    /// Calls in flight across every runner using the pool.
    pub concurrency: Option<u32>,
    /// Spend of every batch of the pool per window (`runner::budget`).
    pub budget: Option<super::budget::Budget>,
}

/// One key of a `[limit.NAME]` table, as the man page lists it: its
/// name, an example value and what it sets.
pub struct LimitRow {
    pub key: &'static str,
    pub example: &'static str,
    pub doc: &'static [&'static str],
}

/// The keys of a `[limit.NAME]` table, in the order the docs list them.
/// Every key is optional; a pool sets at least one.
pub const LIMIT: &[LimitRow] = &[
    LimitRow {
        key: "requests",
        example: "[\"3000/min\", \"10000/day\"]",
        doc: &[
            "Calls per window across every batch and runner of the pool: a rate",
            "like \"3000/min\" (per s, min, h or day), or an array of them, one per unit.",
        ],
    },
    LimitRow {
        key: "tokens",
        example: "\"250000/min\"",
        doc: &[
            "Tokens (input and output together) per window, as the provider counts them.",
            "A call reserves its batch's `token_estimate` (or `estimate_field`) before it",
            "starts; the worker's reported `usage` settles it (the estimate stands when",
            "it reports nothing).",
        ],
    },
    LimitRow {
        key: "input_tokens",
        example: "\"200000/min\"",
        doc: &["Input tokens alone per window (a provider that limits them apart)."],
    },
    LimitRow {
        key: "output_tokens",
        example: "\"50000/min\"",
        doc: &["Output tokens alone per window."],
    },
    LimitRow {
        key: "concurrency",
        example: "16",
        doc: &[
            "Calls in flight at once across every runner of the pool, on every host",
            "sharing the store.",
        ],
    },
    LimitRow {
        key: "budget",
        example: "\"50.0/day\"",
        doc: &[
            "Spend of every batch of the pool together per UTC-aligned window",
            "(\"50.0/day\"); at it no call of any of them starts until the window ends.",
        ],
    },
];

const LIMIT_KEYS: [&str; LIMIT.len()] = {
    let mut keys = [""; LIMIT.len()];
    let mut i = 0;
    while i < LIMIT.len() {
        keys[i] = LIMIT[i].key;
        i += 1;
    }
    keys
};

/// Keys allowed in a `[limit.NAME]` table.
pub const LIMIT_FIELDS: &[&str] = &LIMIT_KEYS;

/// One rate, or an array of them (`["3000/min", "10000/day"]`).
pub(super) fn rates(value: &Spanned<DeValue<'_>>) -> Conv<Vec<PoolRate>> {
    let one = |v: &Spanned<DeValue<'_>>| {
        string(v)?
            .parse::<PoolRate>()
            .map_err(|e| bad(v, e.to_string()))
    };
    if let DeValue::String(_) = value.get_ref() {
        return Ok(vec![one(value)?]);
    }
    let items = array(value, "a rate like \"3000/min\" or an array of them").map_err(|mut b| {
        b.message = format!(
            "expected a rate like \"3000/min\" or an array of them, found {}",
            describe(value.get_ref())
        );
        b
    })?;
    if items.is_empty() {
        return Err(bad(value, "must list at least one rate"));
    }
    let mut out: Vec<PoolRate> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let rate = one(item).map_err(|b| at(i, b))?;
        if out.iter().any(|r| r.per == rate.per) {
            return Err(at(i, bad(item, "two rates of the same unit")));
        }
        out.push(rate);
    }
    Ok(out)
}

/// A pool's `concurrency`.
pub(super) fn concurrency(value: &Spanned<DeValue<'_>>) -> Conv<u32> {
    int_in(value, 1, MAX_POOL_CONCURRENCY)
}

/// The measure a key of `[limit.NAME]` sets, if it is one.
pub(super) fn measure_of(key: &str) -> Option<Measure> {
    Measure::ALL.into_iter().find(|m| m.key() == key)
}
