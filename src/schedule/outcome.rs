//! How a fire ended, as stored with the batch, and in plain words for
//! `status` and the dashboard.

use std::fmt;

/// How a fire ended, as stored in `batches.last_fire_outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A cycle is running for it.
    Running,
    Ran,
    SkippedPaused,
    SkippedOverlap,
    Queued,
    Missed,
    /// Another runner (a manual `run`, another daemon) held the batch lock.
    LockHeld,
    /// The cycle could not run (e.g. the store failed).
    Error,
}

impl Outcome {
    pub const ALL: &[Outcome] = &[
        Outcome::Running,
        Outcome::Ran,
        Outcome::SkippedPaused,
        Outcome::SkippedOverlap,
        Outcome::Queued,
        Outcome::Missed,
        Outcome::LockHeld,
        Outcome::Error,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Ran => "ran",
            Outcome::SkippedPaused => "skipped-paused",
            Outcome::SkippedOverlap => "skipped-overlap",
            Outcome::Queued => "queued",
            Outcome::Missed => "missed",
            Outcome::LockHeld => "lock-held",
            Outcome::Error => "error",
        }
    }

    #[must_use]
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.iter().copied().find(|o| o.as_str() == s)
    }

    /// The outcome in plain words, for `status` and the dashboard.
    #[must_use]
    pub fn plain(self) -> &'static str {
        match self {
            Outcome::Running => "running now",
            Outcome::Ran => "ran",
            Outcome::SkippedPaused => "did not run: the batch was paused",
            Outcome::SkippedOverlap => "did not run: the previous cycle was still running",
            Outcome::Queued => "queued: runs as soon as the previous cycle ends",
            Outcome::Missed => "did not run: the daemon was not running (or the machine slept)",
            Outcome::LockHeld => "did not run: another runner held the batch lock",
            Outcome::Error => "did not run: the cycle failed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fire outcome as stored, in plain words: `did not run: the batch was
/// paused — paused by ops@db1: migration` (unknown outcomes shown as stored).
#[must_use]
pub fn describe(outcome: &str, reason: Option<&str>) -> String {
    let head =
        Outcome::parse(outcome).map_or_else(|| outcome.to_string(), |o| o.plain().to_string());
    match reason {
        Some(r) if !r.is_empty() => format!("{head} — {r}"),
        _ => head.to_string(),
    }
}
