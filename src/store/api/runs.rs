//! A run's lock, its end, and what stays open of it.

use crate::model::{Holder, LockInfo, Millis, RunState, StopCause};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    /// We hold a seat now; `took_over` names the stale holder whose seat
    /// we took, if any.
    Acquired { took_over: Option<LockInfo> },
    /// Every seat is held by a live runner (oldest first; never empty).
    Held(Vec<LockInfo>),
}

/// How a run ended, as [`Store::finish_run`](crate::store::Store::finish_run)
/// records it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunEnd<'a> {
    pub state: RunState,
    /// Why it stopped before it ran out of work, if it did.
    pub stopped: Option<StopCause>,
    /// Its one-line summary.
    pub summary: &'a str,
    /// Items already done when it began: the work a resume did not pay for.
    pub skipped_done: i64,
    /// Extra attempts its immediate retries made.
    pub retried: i64,
}

impl<'a> RunEnd<'a> {
    /// A run that ended in `state`, not stopped early, that skipped and
    /// retried nothing.
    #[must_use]
    pub fn new(state: RunState, summary: &'a str) -> RunEnd<'a> {
        RunEnd {
            state,
            stopped: None,
            summary,
            skipped_done: 0,
            retried: 0,
        }
    }
}

/// A run that has not ended, and who ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRun {
    pub id: i64,
    pub holder: Holder,
    pub started_at: Millis,
}
