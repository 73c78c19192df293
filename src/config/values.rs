//! The values a setting can take that are more than a number or a string.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;

use crate::duration::format_duration;

/// What the daemon does when a fire time comes while the batch still runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Overlap {
    /// Drop this fire; the running cycle will pick up the work anyway.
    #[default]
    Skip,
    /// Run one more cycle right after the current one ends.
    Queue,
}

impl Overlap {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How worker processes are run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WorkerMode {
    /// One process per item.
    #[default]
    Process,
    /// One long-lived process per slot, JSON lines in and out.
    Persistent,
}

impl WorkerMode {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerMode::Process => "process",
            WorkerMode::Persistent => "persistent",
        }
    }
}

impl fmt::Display for WorkerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `count` calls per `per`, e.g. `60/min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub count: u32,
    pub per: Duration,
}

/// A `rate_limit` that is not `N/sec`, `N/min` or `N/hour`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "invalid rate limit {0:?}: expected COUNT/UNIT with a positive count, e.g. 10/sec, 60/min, 1000/hour"
)]
pub struct RateLimitError(pub String);

impl FromStr for RateLimit {
    type Err = RateLimitError;

    fn from_str(s: &str) -> Result<RateLimit, RateLimitError> {
        let err = || RateLimitError(s.to_string());
        let (count, unit) = s.split_once('/').ok_or_else(err)?;
        let count = count.trim();
        // `u32::from_str` takes a leading `+`; a rate is plain digits.
        if !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let count: u32 = count.parse().map_err(|_| err())?;
        let per = match unit.trim() {
            "sec" | "s" => Duration::from_secs(1),
            "min" | "m" => Duration::from_mins(1),
            "hour" | "h" => Duration::from_hours(1),
            _ => return Err(err()),
        };
        if count == 0 {
            return Err(err());
        }
        Ok(RateLimit { count, per })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "sec".to_string(),
            60 => "min".to_string(),
            3600 => "hour".to_string(),
            _ => format_duration(self.per),
        };
        write!(f, "{}/{unit}", self.count)
    }
}
