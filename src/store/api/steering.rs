//! Steering from outside a run: unpausing, cancelling an item, stopping a run.

use crate::model::{Hold, LockInfo, Millis};

/// What `unpause` found and undid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpaused {
    pub was_paused: bool,
    /// The retry-after hold it lifted (one still on).
    pub lifted: Option<Hold>,
}

/// Where a cancelled item goes (`cancel --to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelTo {
    /// Back to pending: it runs again (the cancelled attempt counts).
    Pending,
    /// The `manual` tier as `Cancelled`: it waits for a human.
    Manual,
}

impl CancelTo {
    pub fn as_str(self) -> &'static str {
        match self {
            CancelTo::Pending => "pending",
            CancelTo::Manual => "manual",
        }
    }
}

/// What `cancel` did to an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Claimed by a live run, which was asked to stop its worker (or,
    /// with `waiting`, to drop it: not started, waiting for its backoff
    /// or a place in its pool) and move it (its heartbeat hears it within
    /// a second).
    Asked {
        run_id: Option<i64>,
        waiting: Option<crate::model::waiting::WaitReason>,
    },
    /// Not running: moved at once, from where it was (`pending`,
    /// `failed/retry`, ...).
    Moved { from: String },
    /// Not running and already where it was to go: nothing changed.
    Already { at: String },
    /// Claimed by a run whose runner is gone (crashed, or silent past its
    /// lock's expiry): nobody runs it, so it was moved at once.
    Orphaned { run_id: Option<i64> },
}

/// Where a cancelled claim was when its runner honoured the cancel: the
/// `cancelled` event says it, not that a worker was stopped when none ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelledWhile {
    /// Its worker was on it, and was stopped.
    Running,
    /// Its attempt had failed and it waited out the backoff.
    WaitingToRetry,
    /// Its call had not started (waiting for its pool, or not yet sent
    /// to its persistent worker).
    NotStarted,
    /// Its worker had answered, after the cancel: the answer is not kept.
    Answered,
}

impl CancelledWhile {
    /// The event's words for it.
    #[must_use]
    pub fn words(self) -> &'static str {
        match self {
            CancelledWhile::Running => "its worker was stopped",
            CancelledWhile::WaitingToRetry => "it was waiting to retry; no worker ran",
            CancelledWhile::NotStarted => "its call had not started",
            CancelledWhile::Answered => {
                "its worker's answer came after the cancel and was not kept"
            }
        }
    }
}

/// A cancel the runner honoured: the item moved where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelSettled {
    pub key: String,
    pub to: CancelTo,
    pub by: Option<String>,
}

/// A seat `ask_stop` asked: its runner, and when it was last heard from
/// when it is silent (its seat lapsed, on another host or stopped here):
/// it stops if it comes back, unless a run takes its seat over first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopAsked {
    pub seat: LockInfo,
    pub silent_since: Option<Millis>,
}

impl StopAsked {
    /// `vm:4242`, or `host-x:12 (silent since 02:14Z)`.
    pub fn said(&self, now: Millis) -> String {
        match self.silent_since {
            None => self.seat.holder.to_string(),
            Some(t) => format!(
                "{} (silent since {})",
                self.seat.holder,
                crate::util::time::utc_clock(t, now)
            ),
        }
    }
}

/// What the store asks of a running cycle (read by its heartbeat).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steering {
    /// A stop asked of its seat: `true` for `--now`, and who asked.
    pub stop: Option<(bool, Option<String>)>,
    /// The items it holds that were asked to be cancelled.
    pub cancels: Vec<i64>,
}
