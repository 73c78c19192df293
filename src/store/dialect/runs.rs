//! Statements on runs.

use crate::model::{Holder, Millis, Run, RunState, Tier, Trigger};
use crate::store::Result;
use crate::store::api::OpenRun;

pub(crate) trait RunsRead {
    fn run_by_id(&mut self, run: i64) -> Result<Option<Run>>;
    /// The newest `limit` runs of a batch, newest first.
    fn runs_recent(&mut self, batch: i64, limit: usize) -> Result<Vec<Run>>;
    /// Runs of a batch still marked running.
    fn runs_open(&mut self, batch: i64) -> Result<Vec<OpenRun>>;
}

pub(crate) trait RunsWrite {
    /// A new run, `running` from `now`.
    fn run_insert(
        &mut self,
        batch: i64,
        trigger: Trigger,
        actor: Option<&str>,
        holder: &Holder,
        now: Millis,
    ) -> Result<i64>;
    /// Ends a run that is still `running`: a run that lost its lock was
    /// marked `crashed` by the run that took over, and that verdict stands.
    fn run_finish(
        &mut self,
        run: i64,
        state: RunState,
        summary: &str,
        skipped_done: i64,
        retried: i64,
        now: Millis,
    ) -> Result<()>;
    fn run_add_retried(&mut self, run: i64, n: i64) -> Result<()>;
    /// Marks `running` runs crashed, but never one that holds a seat now,
    /// checked in the statement itself: the caller found these seatless
    /// with two reads (seats, then open runs), and a runner that took its
    /// seat in between is alive (PostgreSQL's READ COMMITTED lets the
    /// second read see what the first did not).
    fn runs_mark_crashed(&mut self, runs: &[i64], now: Millis) -> Result<()>;
    /// Counts one failure of the run, in its tier, and its cost.
    fn run_count_failure(&mut self, run: i64, tier: Tier, cost: Option<f64>) -> Result<()>;
    fn run_count_released(&mut self, run: i64) -> Result<()>;
    fn run_count_cancelled(&mut self, run: i64) -> Result<()>;
    fn run_add_redriven(&mut self, run: i64, n: i64) -> Result<()>;
}
