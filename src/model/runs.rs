//! Runs: how one ended (`RunState`) and why it stopped early
//! (`StopCause`), what started it, and what it counted.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

use super::{Millis, RunSeen};

/// How a run ended (or that it has not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    Running,
    Ok,
    Failed,
    Aborted,
    Paused,
    LockHeld,
    /// Found unfinished with its process gone.
    Crashed,
}
str_enum!(RunState {
    Running => "running",
    Ok => "ok",
    Failed => "failed",
    Aborted => "aborted",
    Paused => "paused",
    LockHeld => "lock-held",
    Crashed => "crashed",
});

impl RunState {
    /// How a run that ended this way is recorded: the one rule its exit
    /// code, its alert and `nightshift_last_run_success` follow. `aborted`
    /// for a signal or `nightshift stop` (130; and for a store lost under
    /// it, which takes nothing more), `paused` for a pause, `failed` when
    /// anything failed in it or it lost its lock or its worker (1), and
    /// `ok` otherwise (0), also when it stopped where its `max_duration` or
    /// `max_cost` told it to: that is what it was set to do, and the rest
    /// waits for the next cycle.
    #[must_use]
    pub fn ended(stopped: Option<StopCause>, failed: bool) -> RunState {
        match stopped {
            Some(StopCause::Paused) => RunState::Paused,
            Some(
                StopCause::Signal | StopCause::Stop | StopCause::StoreLost | StopCause::StoreFailed,
            ) => RunState::Aborted,
            Some(StopCause::LockLost | StopCause::WorkerCannotStart) => RunState::Failed,
            Some(StopCause::MaxDuration | StopCause::MaxCost) | None if failed => RunState::Failed,
            Some(StopCause::MaxDuration | StopCause::MaxCost) | None => RunState::Ok,
        }
    }
}

/// Why a run stopped before it ran out of work, kept with the run
/// (`stopped` in `--json`, a label of the metrics): words a script can
/// match, where its summary says it in a sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopCause {
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// `nightshift stop` (the dashboard's `X`).
    Stop,
    MaxDuration,
    MaxCost,
    Paused,
    LockLost,
    StoreLost,
    /// A write the run needed failed (the store unreachable past what a
    /// run waits for, a full disk...).
    StoreFailed,
    WorkerCannotStart,
}
str_enum!(StopCause {
    Signal => "signal",
    Stop => "stop",
    MaxDuration => "max_duration",
    MaxCost => "max_cost",
    Paused => "paused",
    LockLost => "lock-lost",
    StoreLost => "store-lost",
    StoreFailed => "store-failed",
    WorkerCannotStart => "worker-cannot-start",
});

impl Serialize for StopCause {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl StopCause {
    /// One of the batch's own limits (`max_duration`, `max_cost`): the run
    /// stopped claiming as set, and what is left waits for the next cycle.
    #[must_use]
    pub fn is_limit(self) -> bool {
        matches!(self, StopCause::MaxDuration | StopCause::MaxCost)
    }

    /// What a view says beside the run's state.
    #[must_use]
    pub fn note(self) -> &'static str {
        match self {
            StopCause::Signal => "interrupted",
            StopCause::Stop => "stopped by request",
            StopCause::MaxDuration => "max_duration reached",
            StopCause::MaxCost => "max_cost reached",
            StopCause::Paused => "paused",
            StopCause::LockLost => "lock lost",
            StopCause::StoreLost => "store lost",
            StopCause::StoreFailed => "store failed",
            StopCause::WorkerCannotStart => "worker cannot start",
        }
    }
}

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Manual,
    Schedule,
    Dashboard,
}
str_enum!(Trigger { Manual => "manual", Schedule => "schedule", Dashboard => "dashboard" });

/// The one-line summary counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RunCounts {
    pub done: i64,
    pub empty: i64,
    pub failed: i64,
    pub retry: i64,
    pub manual: i64,
    /// Extra attempts made by immediate retries.
    pub retried: i64,
    /// Items already done when the run started: the work a resume did not pay for twice.
    pub skipped_done: i64,
    pub redriven: i64,
    pub released: i64,
    /// Items whose worker the run stopped for a `nightshift cancel`.
    pub cancelled: i64,
    pub cost: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: i64,
    pub batch: String,
    pub trigger: Trigger,
    /// Who started it (`user@host`): the one who typed `nightshift run`,
    /// pressed `r` in the dashboard, or runs the daemon. `None` for runs
    /// recorded before nightshift kept it.
    pub actor: Option<String>,
    pub host: String,
    pub pid: u32,
    #[serde(serialize_with = "crate::util::time::json")]
    pub started_at: Millis,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub ended_at: Option<Millis>,
    pub state: RunState,
    /// Why it stopped before it ran out of work, if it did.
    pub stopped: Option<StopCause>,
    pub counts: RunCounts,
    pub summary: Option<String>,
}

impl Run {
    /// Why it stopped early, as a view says it beside its state `seen`
    /// (`ok, max_duration reached`): not for a pause (its state says so),
    /// nor once it is seen crashed or silent (its runner said nothing).
    #[must_use]
    pub fn stop_note(&self, seen: RunSeen) -> Option<&'static str> {
        match (seen, self.stopped) {
            (RunSeen::Stored(_), Some(cause)) if cause != StopCause::Paused => Some(cause.note()),
            _ => None,
        }
    }

    /// Did it step down at once, doing nothing: it found the lock held,
    /// or ended paused or aborted without touching an item (it found the
    /// batch paused, or was stopped while waiting for the lock)? Such a
    /// run never hides the run that did work (`BatchInfo::last_run`).
    /// The stores' `STEPPED_DOWN` condition says the same in SQL.
    pub fn stepped_down(&self) -> bool {
        let c = &self.counts;
        match self.state {
            RunState::LockHeld => true,
            RunState::Paused | RunState::Aborted => {
                c.done + c.empty + c.failed + c.redriven + c.released + c.cancelled == 0
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run is `aborted` only when a signal or `nightshift stop` ended it
    /// (as the README's exit codes say: 130); one that stopped at its own
    /// `max_duration` or `max_cost` did what it was set to, and is `ok`
    /// unless something failed in it (it was `aborted`, and monitoring
    /// took every capped night for a failure).
    #[test]
    fn a_run_is_aborted_only_by_a_signal_or_a_stop() {
        use StopCause as C;
        let cases = [
            (None, false, RunState::Ok),
            (None, true, RunState::Failed),
            (Some(C::MaxDuration), false, RunState::Ok),
            (Some(C::MaxCost), false, RunState::Ok),
            (Some(C::MaxDuration), true, RunState::Failed),
            (Some(C::MaxCost), true, RunState::Failed),
            (Some(C::Signal), false, RunState::Aborted),
            (Some(C::Signal), true, RunState::Aborted),
            (Some(C::Stop), true, RunState::Aborted),
            (Some(C::StoreLost), false, RunState::Aborted),
            (Some(C::Paused), true, RunState::Paused),
            (Some(C::Paused), false, RunState::Paused),
            (Some(C::LockLost), false, RunState::Failed),
            (Some(C::WorkerCannotStart), false, RunState::Failed),
        ];
        for (stopped, failed, state) in cases {
            assert_eq!(
                RunState::ended(stopped, failed),
                state,
                "{stopped:?}, {failed}"
            );
        }
    }
}
