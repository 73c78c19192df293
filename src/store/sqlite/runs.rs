//! Runs: one execution of a batch, with its summary counts.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{SqliteTx, parse_col};
use crate::model::{Holder, Millis, Run, RunCounts, RunState, Tier, Trigger};
use crate::store::Result;
use crate::store::api::OpenRun;
use crate::store::dialect::{RunsRead, RunsWrite};
use crate::store::rows::run_columns;

const COLUMNS: &str = run_columns!();

fn run_from_row(r: &Row<'_>) -> rusqlite::Result<Run> {
    Ok(Run {
        id: r.get(0)?,
        batch: r.get(1)?,
        trigger: parse_col(2, r.get_ref(2)?.as_str()?)?,
        host: r.get(3)?,
        pid: r.get(4)?,
        started_at: r.get(5)?,
        ended_at: r.get(6)?,
        state: parse_col(7, r.get_ref(7)?.as_str()?)?,
        counts: RunCounts {
            done: r.get(8)?,
            empty: r.get(9)?,
            failed: r.get(10)?,
            retry: r.get(11)?,
            manual: r.get(12)?,
            retried: r.get(13)?,
            skipped_done: r.get(14)?,
            redriven: r.get(15)?,
            released: r.get(16)?,
            cancelled: r.get(20)?,
            cost: r.get(17)?,
        },
        summary: r.get(18)?,
        actor: r.get(19)?,
    })
}

/// A run that stepped down at once (`Run::stepped_down`, in SQL).
const STEPPED_DOWN: &str = "(r.state = 'lock-held' OR (r.state IN ('paused', 'aborted')
    AND r.done + r.empty + r.failed + r.redriven + r.released + r.cancelled = 0))";

/// The newest run that did work, and the newest run when it stepped down
/// after it (see `BatchInfo::last_run`).
pub(crate) fn last(c: &Connection, batch_id: i64) -> Result<(Option<Run>, Option<Run>)> {
    let Some(newest) = recent(c, batch_id, 1)?.pop() else {
        return Ok((None, None));
    };
    if !newest.stepped_down() {
        return Ok((Some(newest), None));
    }
    let worked = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM runs r JOIN batches b ON b.id = r.batch_id
              WHERE r.batch_id = ?1 AND NOT {STEPPED_DOWN} ORDER BY r.id DESC LIMIT 1"
        ))?
        .query_row([batch_id], run_from_row)
        .optional()?;
    Ok((worked, Some(newest)))
}

/// The newest `limit` runs of a batch, newest first.
pub(crate) fn recent(c: &Connection, batch_id: i64, limit: usize) -> Result<Vec<Run>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM runs r JOIN batches b ON b.id = r.batch_id
          WHERE r.batch_id = ?1 ORDER BY r.id DESC LIMIT ?2"
    ))?;
    let rows = st
        .query_map(params![batch_id, limit as i64], run_from_row)?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

const RUN_BY_ID: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs r JOIN batches b ON b.id = r.batch_id WHERE r.id = ?1"
);
const RUNS_OPEN: &str = "SELECT id, host, pid, pid_start, started_at FROM runs
  WHERE state = 'running' AND batch_id = ?1";
const RUN_INSERT: &str =
    "INSERT INTO runs (batch_id, trigger, actor, host, pid, pid_start, started_at, state)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running')";
const RUN_FINISH: &str = "UPDATE runs
    SET state = ?2, summary = ?3, skipped_done = ?4, retried = ?5, ended_at = ?6
  WHERE id = ?1 AND state = 'running'";
const RUN_ADD_RETRIED: &str = "UPDATE runs SET retried = retried + ?2 WHERE id = ?1";
const RUNS_MARK_CRASHED: &str = "UPDATE runs SET state = 'crashed', ended_at = ?2,
        summary = coalesce(summary, 'crashed: the runner stopped without finishing')
  WHERE id = ?1 AND state = 'running'
    AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.run_id = runs.id)";

const RUN_COUNT_FAILURE: &str =
    "UPDATE runs SET failed = failed + 1, retry = retry + (?2 = 'retry'), manual = manual + (?2 = 'manual'),
            cost = cost + coalesce(?3, 0)
      WHERE id = ?1";
const RUN_COUNT_RELEASED: &str = "UPDATE runs SET released = released + 1 WHERE id = ?1";
const RUN_COUNT_CANCELLED: &str = "UPDATE runs SET cancelled = cancelled + 1 WHERE id = ?1";
const RUN_ADD_REDRIVEN: &str = "UPDATE runs SET redriven = redriven + ?2 WHERE id = ?1";

impl RunsRead for SqliteTx<'_> {
    fn run_by_id(&mut self, run: i64) -> Result<Option<Run>> {
        Ok(self
            .conn
            .prepare_cached(RUN_BY_ID)?
            .query_row([run], run_from_row)
            .optional()?)
    }

    fn runs_recent(&mut self, batch: i64, limit: usize) -> Result<Vec<Run>> {
        recent(self.conn, batch, limit)
    }

    fn runs_open(&mut self, batch: i64) -> Result<Vec<OpenRun>> {
        let mut st = self.conn.prepare_cached(RUNS_OPEN)?;
        let rows = st
            .query_map([batch], |r| {
                Ok(OpenRun {
                    id: r.get(0)?,
                    holder: Holder {
                        host: r.get(1)?,
                        pid: r.get(2)?,
                        pid_start: r.get::<_, Option<i64>>(3)?.map(|s| s as u64),
                    },
                    started_at: r.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

impl RunsWrite for SqliteTx<'_> {
    fn run_insert(
        &mut self,
        batch: i64,
        trigger: Trigger,
        actor: Option<&str>,
        holder: &Holder,
        now: Millis,
    ) -> Result<i64> {
        self.conn.prepare_cached(RUN_INSERT)?.execute(params![
            batch,
            trigger.as_str(),
            actor,
            holder.host,
            holder.pid,
            holder.pid_start.map(|s| s as i64),
            now
        ])?;
        Ok(self.conn.last_insert_rowid())
    }

    fn run_finish(
        &mut self,
        run: i64,
        state: RunState,
        summary: &str,
        skipped_done: i64,
        retried: i64,
        now: Millis,
    ) -> Result<()> {
        self.conn.prepare_cached(RUN_FINISH)?.execute(params![
            run,
            state.as_str(),
            summary,
            skipped_done,
            retried,
            now
        ])?;
        Ok(())
    }

    fn run_add_retried(&mut self, run: i64, n: i64) -> Result<()> {
        self.conn
            .prepare_cached(RUN_ADD_RETRIED)?
            .execute(params![run, n])?;
        Ok(())
    }

    fn runs_mark_crashed(&mut self, runs: &[i64], now: Millis) -> Result<()> {
        let mut st = self.conn.prepare_cached(RUNS_MARK_CRASHED)?;
        for id in runs {
            st.execute(params![id, now])?;
        }
        Ok(())
    }

    fn run_count_failure(&mut self, run: i64, tier: Tier, cost: Option<f64>) -> Result<()> {
        self.conn
            .prepare_cached(RUN_COUNT_FAILURE)?
            .execute(params![run, tier.as_str(), cost])?;
        Ok(())
    }

    fn run_count_cancelled(&mut self, run: i64) -> Result<()> {
        self.conn
            .prepare_cached(RUN_COUNT_CANCELLED)?
            .execute([run])?;
        Ok(())
    }

    fn run_count_released(&mut self, run: i64) -> Result<()> {
        self.conn
            .prepare_cached(RUN_COUNT_RELEASED)?
            .execute([run])?;
        Ok(())
    }

    fn run_add_redriven(&mut self, run: i64, n: i64) -> Result<()> {
        self.conn
            .prepare_cached(RUN_ADD_REDRIVEN)?
            .execute(params![run, n])?;
        Ok(())
    }
}
