//! What a step decides about a fire time, the outcome it is recorded
//! with, and its reason in plain words.

use chrono::{DateTime, Utc};

use super::Plan;
use crate::schedule::outcome::Outcome;
use crate::util::time::compact;

/// Why a cycle is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunWhy {
    /// Its fire time has come.
    OnTime,
    /// The fire time was missed while the daemon was down, within `catch_up`.
    CatchUp,
    /// The fire came while the previous cycle ran (`overlap = "queue"`).
    Queued,
    /// The cycle of the fire at this time was cut short when the daemon
    /// stopped; run again once on start, within `catch_up`.
    Resume(DateTime<Utc>),
}

/// One thing to do (or record) about a fire time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start a cycle now for the fire at `at`.
    Fire {
        at: DateTime<Utc>,
        why: RunWhy,
        /// Earlier on-time fire times folded into this one.
        folded: usize,
    },
    /// The batch is paused: nothing runs.
    SkipPaused { at: DateTime<Utc>, reason: String },
    /// The previous cycle still runs: nothing runs for this fire.
    SkipOverlap {
        at: DateTime<Utc>,
        /// A run is already queued behind the running cycle.
        already_queued: bool,
    },
    /// The previous cycle still runs: this fire runs once it has ended.
    Queue { at: DateTime<Utc> },
    /// Fire times that passed while nobody was there to fire them.
    Missed {
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        /// How many (at most [`MAX_COUNTED`](super::MAX_COUNTED); `more` says there were more).
        count: usize,
        more: bool,
        /// Why none of them runs now.
        why: MissedWhy,
    },
    /// A fire the last daemon queued and stopped before running, not run
    /// now either (recorded `missed`).
    Dropped { at: DateTime<Utc>, why: MissedWhy },
}

/// Why missed fire times are recorded rather than run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedWhy {
    /// The batch has no `catch_up` window.
    NoWindow,
    /// Even the latest is older than the `catch_up` window.
    TooOld,
    /// Catch-up runs once, for this later missed fire time.
    CaughtUpLater(DateTime<Utc>),
    /// A fire on time came with them (the machine slept): it runs instead.
    OnTimeInstead(DateTime<Utc>),
}

impl Plan {
    /// The plain-words reason stored with a decision's fire record, with
    /// times in the batch's zone. `None` for a fire that starts a cycle
    /// on time.
    #[must_use]
    pub fn reason(&self, decision: &Decision) -> Option<String> {
        match decision {
            Decision::Fire { why, folded, .. } => match why {
                RunWhy::OnTime if *folded == 0 => None,
                RunWhy::OnTime => Some(format!(
                    "{folded} earlier fire time{} came late (under {}: the daemon was held up, \
                     stopped or restarting) and {} not run apart: this fire runs once for them",
                    if *folded == 1 { "" } else { "s" },
                    compact(super::ON_TIME.as_secs()),
                    if *folded == 1 { "was" } else { "were" },
                )),
                RunWhy::CatchUp => Some(
                    "catch-up: this fire time passed while the daemon was not running".to_string(),
                ),
                RunWhy::Queued => {
                    Some("queued: it came while the previous cycle was still running".to_string())
                }
                RunWhy::Resume(cut) => Some(format!(
                    "catch-up: resumes the fire at {}, whose cycle was cut short when the daemon stopped",
                    self.local(*cut)
                )),
            },
            Decision::SkipPaused { reason, .. } => Some(reason.clone()),
            Decision::SkipOverlap { already_queued, .. } => Some(if *already_queued {
                "one run was already queued after it (overlap = \"queue\")".to_string()
            } else {
                "overlap = \"skip\": the running cycle picks up the work".to_string()
            }),
            Decision::Queue { .. } => {
                Some("overlap = \"queue\": it runs as soon as the previous cycle ends".to_string())
            }
            Decision::Missed {
                first,
                last,
                count,
                more,
                why,
            } => {
                let what = if *count == 1 && !*more {
                    format!("the fire at {}", self.local(*last))
                } else {
                    format!(
                        "{}{count} fire times, from {} to {}",
                        if *more { "more than " } else { "" },
                        self.local(*first),
                        self.local(*last)
                    )
                };
                Some(format!("{what}; {}", self.missed_why(*why)))
            }
            Decision::Dropped { why, .. } => Some(format!(
                "queued, but the daemon stopped before running it; {}",
                self.missed_why(*why)
            )),
        }
    }

    fn missed_why(&self, why: MissedWhy) -> String {
        match why {
            MissedWhy::NoWindow => "no catch_up window is set".to_string(),
            MissedWhy::TooOld => format!(
                "older than the catch_up window ({})",
                compact(self.catch_up.unwrap_or_default().as_secs())
            ),
            MissedWhy::CaughtUpLater(at) => format!(
                "catch-up runs once, for the latest missed fire time ({})",
                self.local(at)
            ),
            MissedWhy::OnTimeInstead(at) => {
                format!("not caught up: the fire at {} runs on time", self.local(at))
            }
        }
    }
}

impl Decision {
    /// The fire time the decision is about (the latest, for `Missed`).
    #[must_use]
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            Decision::Fire { at, .. }
            | Decision::SkipPaused { at, .. }
            | Decision::SkipOverlap { at, .. }
            | Decision::Queue { at }
            | Decision::Dropped { at, .. } => *at,
            Decision::Missed { last, .. } => *last,
        }
    }

    /// The outcome recorded for it right away.
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        match self {
            Decision::Fire { .. } => Outcome::Running,
            Decision::SkipPaused { .. } => Outcome::SkippedPaused,
            Decision::SkipOverlap { .. } => Outcome::SkippedOverlap,
            Decision::Queue { .. } => Outcome::Queued,
            Decision::Missed { .. } | Decision::Dropped { .. } => Outcome::Missed,
        }
    }
}
