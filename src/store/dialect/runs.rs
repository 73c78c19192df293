//! Statements on runs.

use super::seats::holder_at;
use super::sql::{self, Arg, Row, Sql};
use crate::model::{Holder, Millis, Run, RunCounts, StopCause, Tier, Trigger};
use crate::store::Result;
use crate::store::api::OpenRun;
use crate::store::api::RunEnd;
use crate::store::rows::run_columns;
use crate::util::money::{from_micros, to_micros};

fn run_from_row(r: &dyn Row) -> Result<Run> {
    Ok(Run {
        id: r.int(0)?,
        batch: r.text(1)?,
        trigger: sql::parsed(r, 2)?,
        host: r.text(3)?,
        pid: r.int(4)? as u32,
        started_at: r.time(5)?,
        ended_at: r.opt_time(6)?,
        state: sql::parsed(r, 7)?,
        stopped: sql::opt_parsed(r, 21)?,
        counts: RunCounts {
            done: r.int(8)?,
            empty: r.int(9)?,
            failed: r.int(10)?,
            retry: r.int(11)?,
            manual: r.int(12)?,
            retried: r.int(13)?,
            skipped_done: r.int(14)?,
            redriven: r.int(15)?,
            released: r.int(16)?,
            cancelled: r.int(20)?,
            // Summed in the row one float at a time: kept to millionths,
            // as the budgets' ledger keeps them, not to a float's noise.
            cost: from_micros(to_micros(r.real(17)?)),
        },
        summary: r.opt_text(18)?,
        actor: r.opt_text(19)?,
    })
}

const RUN_BY_ID: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs r JOIN batches b ON b.id = r.batch_id WHERE r.id = ?1"
);
const RUNS_RECENT: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs r JOIN batches b ON b.id = r.batch_id
      WHERE r.batch_id = ?1 ORDER BY r.id DESC LIMIT ?2"
);
/// The newest run that did not step down at once (`Run::stepped_down`, in
/// SQL).
const RUN_LAST_WORKED: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs r JOIN batches b ON b.id = r.batch_id
      WHERE r.batch_id = ?1
        AND NOT (r.state = 'lock-held' OR (r.state IN ('paused', 'aborted')
             AND r.done + r.empty + r.failed + r.redriven + r.released + r.cancelled = 0))
      ORDER BY r.id DESC LIMIT 1"
);
const RUNS_OPEN: &str = "SELECT id, host, pid, pid_start, started_at FROM runs
  WHERE state = 'running' AND batch_id = ?1 ORDER BY id";
/// One statement, so one snapshot even in a group's transaction: a run
/// and its seat are recorded together (`start_run`), and two reads could
/// see a run started between them without its seat.
const RUNS_UNSEATED: &str = "SELECT id, host, pid, pid_start, started_at FROM runs r
  WHERE state = 'running' AND batch_id = ?1 AND id <> ?2
    AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.batch_id = ?1 AND l.run_id = r.id)
  ORDER BY id";
const RUN_INSERT: &str =
    "INSERT INTO runs (batch_id, trigger, actor, host, pid, pid_start, started_at, state)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running') RETURNING id";
const RUN_FINISH: &str = "UPDATE runs
    SET state = ?2, summary = ?3, skipped_done = ?4, retried = ?5, ended_at = ?6, stopped = ?7
  WHERE id = ?1 AND state = 'running'";
const RUN_ADD_RETRIED: &str = "UPDATE runs SET retried = retried + ?2 WHERE id = ?1";
const RUN_COUNT_FAILURE: &str = "UPDATE runs SET failed = failed + 1,
        retry = retry + CASE WHEN ?2 = 'retry' THEN 1 ELSE 0 END,
        manual = manual + CASE WHEN ?2 = 'manual' THEN 1 ELSE 0 END,
        cost = cost + coalesce(CAST(?3 AS DOUBLE PRECISION), 0)
  WHERE id = ?1";
const RUN_ADD_COST: &str =
    "UPDATE runs SET cost = cost + CAST(?2 AS DOUBLE PRECISION) WHERE id = ?1";
const RUN_COUNT_RELEASED: &str = "UPDATE runs SET released = released + 1 WHERE id = ?1";
const RUN_COUNT_CANCELLED: &str = "UPDATE runs SET cancelled = cancelled + 1 WHERE id = ?1";
const RUN_ADD_REDRIVEN: &str = "UPDATE runs SET redriven = redriven + ?2 WHERE id = ?1";

/// The newest run that did work, and the newest run when it stepped down
/// after it (see `BatchInfo::last_run`).
pub(crate) fn last<S: Sql + ?Sized>(s: &mut S, batch: i64) -> Result<(Option<Run>, Option<Run>)> {
    let Some(newest) = recent(s, batch, 1)?.pop() else {
        return Ok((None, None));
    };
    if !newest.stepped_down() {
        return Ok((Some(newest), None));
    }
    let worked = sql::opt(s, RUN_LAST_WORKED, &[Arg::Int(batch)], run_from_row)?;
    Ok((worked, Some(newest)))
}

/// The newest `limit` runs of a batch, newest first.
fn recent<S: Sql + ?Sized>(s: &mut S, batch: i64, limit: usize) -> Result<Vec<Run>> {
    let args = [Arg::Int(batch), Arg::Int(limit as i64)];
    sql::all(s, RUNS_RECENT, &args, run_from_row)
}

pub(crate) trait RunsRead: Sql {
    fn run_by_id(&mut self, run: i64) -> Result<Option<Run>> {
        sql::opt(self, RUN_BY_ID, &[Arg::Int(run)], run_from_row)
    }

    /// The newest `limit` runs of a batch, newest first.
    fn runs_recent(&mut self, batch: i64, limit: usize) -> Result<Vec<Run>> {
        recent(self, batch, limit)
    }

    /// Runs of a batch still marked running, oldest first.
    fn runs_open(&mut self, batch: i64) -> Result<Vec<OpenRun>> {
        sql::all(self, RUNS_OPEN, &[Arg::Int(batch)], open_run)
    }

    /// `runs_open` but `except`, and those holding a seat of the lock.
    fn runs_unseated(&mut self, batch: i64, except: i64) -> Result<Vec<OpenRun>> {
        sql::all(
            self,
            RUNS_UNSEATED,
            &[Arg::Int(batch), Arg::Int(except)],
            open_run,
        )
    }
}

impl<T: Sql + ?Sized> RunsRead for T {}

fn open_run(r: &dyn sql::Row) -> Result<OpenRun> {
    Ok(OpenRun {
        id: r.int(0)?,
        holder: holder_at(r, 1)?,
        started_at: r.time(4)?,
    })
}

pub(crate) trait RunsWrite: Sql {
    /// A new run, `running` from `now`.
    fn run_insert(
        &mut self,
        batch: i64,
        trigger: Trigger,
        actor: Option<&str>,
        holder: &Holder,
        now: Millis,
    ) -> Result<i64> {
        let args = [
            Arg::Int(batch),
            Arg::Text(trigger.as_str()),
            Arg::OptText(actor),
            Arg::Text(&holder.host),
            Arg::Int(i64::from(holder.pid)),
            Arg::OptInt(holder.pid_start.map(|s| s as i64)),
            Arg::Time(now),
        ];
        sql::one(self, RUN_INSERT, &args, |r| r.int(0))
    }
    /// Ends a run that is still `running`: a run that lost its lock was
    /// marked `crashed` by the run that took over, and that verdict stands.
    fn run_finish(&mut self, run: i64, end: &RunEnd<'_>, now: Millis) -> Result<()> {
        let args = [
            Arg::Int(run),
            Arg::Text(end.state.as_str()),
            Arg::Text(end.summary),
            Arg::Int(end.skipped_done),
            Arg::Int(end.retried),
            Arg::Time(now),
            Arg::OptText(end.stopped.map(StopCause::as_str)),
        ];
        self.exec(RUN_FINISH, &args)?;
        Ok(())
    }

    fn run_add_retried(&mut self, run: i64, n: i64) -> Result<()> {
        self.exec(RUN_ADD_RETRIED, &[Arg::Int(run), Arg::Int(n)])?;
        Ok(())
    }

    /// Marks `running` runs crashed, but never one that holds a seat now,
    /// checked in the statement itself: the caller found these seatless
    /// with two reads (seats, then open runs), and a runner that took its
    /// seat in between is alive (PostgreSQL's READ COMMITTED lets the
    /// second read see what the first did not).
    fn runs_mark_crashed(&mut self, runs: &[i64], now: Millis) -> Result<()>;
    /// Counts one failure of the run, in its tier, and its cost.
    fn run_count_failure(&mut self, run: i64, tier: Tier, cost: Option<f64>) -> Result<()> {
        let args = [Arg::Int(run), Arg::Text(tier.as_str()), Arg::OptReal(cost)];
        self.exec(RUN_COUNT_FAILURE, &args)?;
        Ok(())
    }

    /// Adds an attempt's cost to the run's.
    fn run_add_cost(&mut self, run: i64, cost: f64) -> Result<()> {
        self.exec(RUN_ADD_COST, &[Arg::Int(run), Arg::OptReal(Some(cost))])?;
        Ok(())
    }

    fn run_count_released(&mut self, run: i64) -> Result<()> {
        self.exec(RUN_COUNT_RELEASED, &[Arg::Int(run)])?;
        Ok(())
    }

    fn run_count_cancelled(&mut self, run: i64) -> Result<()> {
        self.exec(RUN_COUNT_CANCELLED, &[Arg::Int(run)])?;
        Ok(())
    }

    fn run_add_redriven(&mut self, run: i64, n: i64) -> Result<()> {
        self.exec(RUN_ADD_REDRIVEN, &[Arg::Int(run), Arg::Int(n)])?;
        Ok(())
    }
}
