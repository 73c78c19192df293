//! Runs: one execution of a batch, with its summary counts.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::batches::{batch_id, ensure};
use super::{SqliteStore, parse_col};
use crate::model::{Holder, Millis, Run, RunCounts, RunState, Trigger};
use crate::store::Result;
use crate::store::api::OpenRun;

const COLUMNS: &str = "r.id, b.name, r.trigger, r.host, r.pid, r.started_at, r.ended_at, r.state,
    r.done, r.empty, r.failed, r.retry, r.manual, r.retried, r.skipped_done, r.redriven, r.released,
    r.cost, r.summary, r.actor";

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
            cost: r.get(17)?,
        },
        summary: r.get(18)?,
        actor: r.get(19)?,
    })
}

/// A run that stepped down at once (`Run::stepped_down`, in SQL).
const STEPPED_DOWN: &str = "(r.state = 'lock-held' OR (r.state IN ('paused', 'aborted')
    AND r.done + r.empty + r.failed + r.redriven + r.released = 0))";

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

impl SqliteStore {
    /// Records the start of a run, and who started it (`user@host`); with
    /// `seat`, in the same transaction names it as the run of the lock seat
    /// held under that token, so no other runner ever sees it open without
    /// a seat (and takes it for dead).
    pub fn start_run(
        &mut self,
        batch: &str,
        trigger: Trigger,
        actor: Option<&str>,
        holder: &Holder,
        now: Millis,
        seat: Option<&str>,
    ) -> Result<i64> {
        self.write(|tx| {
            let id = ensure(tx, batch, now)?;
            tx.execute(
                "INSERT INTO runs (batch_id, trigger, actor, host, pid, pid_start, started_at, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running')",
                params![
                    id,
                    trigger.as_str(),
                    actor,
                    holder.host,
                    holder.pid,
                    holder.pid_start.map(|s| s as i64),
                    now
                ],
            )?;
            let run_id = tx.last_insert_rowid();
            if let Some(token) = seat {
                tx.execute(
                    "UPDATE locks SET run_id = ?3 WHERE batch_id = ?1 AND token = ?2",
                    params![id, token, run_id],
                )?;
            }
            Ok(run_id)
        })
    }

    /// Ends a run with its state, summary line and resume figure.
    pub fn finish_run(
        &mut self,
        run_id: i64,
        state: RunState,
        summary: &str,
        skipped_done: i64,
        retried: i64,
        now: Millis,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                // A run that lost its lock was marked `crashed` by the run
                // that took over: that verdict stands.
                "UPDATE runs SET state = ?2, summary = ?3, skipped_done = ?4, retried = ?5, ended_at = ?6
                  WHERE id = ?1 AND state = 'running'",
                params![run_id, state.as_str(), summary, skipped_done, retried, now],
            )?;
            Ok(())
        })
    }

    /// Adds to a live run's retried count (shown while it runs).
    pub fn add_retried(&mut self, run_id: i64, n: i64) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE runs SET retried = retried + ?2 WHERE id = ?1",
                params![run_id, n],
            )?;
            Ok(())
        })
    }

    pub fn run(&self, run_id: i64) -> Result<Option<Run>> {
        self.read(|c| {
            Ok(c.query_row(
                &format!("SELECT {COLUMNS} FROM runs r JOIN batches b ON b.id = r.batch_id WHERE r.id = ?1"),
                [run_id],
                run_from_row,
            )
            .optional()?)
        })
    }

    /// The newest `limit` runs of a batch, newest first.
    pub fn runs(&self, batch: &str, limit: usize) -> Result<Vec<Run>> {
        self.read(|c| recent(c, batch_id(c, batch)?, limit))
    }

    /// Runs of a batch still marked running.
    pub fn open_runs(&self, batch: &str) -> Result<Vec<OpenRun>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut st = c.prepare_cached(
                "SELECT id, host, pid, pid_start, started_at FROM runs WHERE state = 'running' AND batch_id = ?1",
            )?;
            let rows = st
                .query_map([id], |r| {
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
        })
    }

    /// Marks runs whose process is gone as crashed; never one that holds a
    /// seat of its batch's lock (it started after the caller looked).
    pub fn mark_crashed(&mut self, run_ids: &[i64], now: Millis) -> Result<()> {
        self.write(|tx| {
            let mut st = tx.prepare_cached(
                "UPDATE runs SET state = 'crashed', ended_at = ?2,
                        summary = coalesce(summary, 'crashed: the runner stopped without finishing')
                  WHERE id = ?1 AND state = 'running'
                    AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.run_id = runs.id)",
            )?;
            for id in run_ids {
                st.execute(params![id, now])?;
            }
            Ok(())
        })
    }
}
