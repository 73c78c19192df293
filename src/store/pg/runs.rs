//! Runs: one execution of a batch, with its summary counts.

use crate::store::Fault;
use postgres::Row;

use super::PgTx;
use super::conn::{Conn, text};
use crate::model::{Holder, Millis, Run, RunCounts, RunState, Tier, Trigger};
use crate::store::api::OpenRun;
use crate::store::dialect::{RunsRead, RunsWrite};
use crate::store::rows::run_columns;
use crate::store::{Result, StoreError};

const COLUMNS: &str = run_columns!();

fn run_from_row(c: &Conn, r: &Row) -> Result<Run> {
    let parse =
        |e: String| StoreError::Fault(Fault::Unreadable(format!("unreadable run row: {e}")));
    Ok(Run {
        id: r.get(0),
        batch: r.get(1),
        trigger: r.get::<_, &str>(2).parse::<Trigger>().map_err(parse)?,
        host: r.get(3),
        pid: r.get::<_, i64>(4) as u32,
        started_at: c.tout(r.get(5)),
        ended_at: c.tout_opt(r.get(6)),
        state: r.get::<_, &str>(7).parse::<RunState>().map_err(parse)?,
        counts: RunCounts {
            done: r.get(8),
            empty: r.get(9),
            failed: r.get(10),
            retry: r.get(11),
            manual: r.get(12),
            retried: r.get(13),
            skipped_done: r.get(14),
            redriven: r.get(15),
            released: r.get(16),
            cancelled: r.get(20),
            cost: r.get(17),
        },
        summary: r.get(18),
        actor: r.get(19),
    })
}

/// A run that stepped down at once (`Run::stepped_down`, in SQL).
const STEPPED_DOWN: &str = "(r.state = 'lock-held' OR (r.state IN ('paused', 'aborted')
    AND r.done + r.empty + r.failed + r.redriven + r.released + r.cancelled = 0))";

/// The newest run that did work, and the newest run when it stepped down
/// after it (see `BatchInfo::last_run`).
pub(crate) fn last(c: &mut Conn, id: i64) -> Result<(Option<Run>, Option<Run>)> {
    let Some(newest) = recent(c, id, 1)?.pop() else {
        return Ok((None, None));
    };
    if !newest.stepped_down() {
        return Ok((Some(newest), None));
    }
    let worked = c.opt(
        &format!(
            "SELECT {COLUMNS} FROM runs r JOIN batches b ON b.id = r.batch_id
              WHERE r.batch_id = $1 AND NOT {STEPPED_DOWN} ORDER BY r.id DESC LIMIT 1"
        ),
        &[&id],
    )?;
    let worked = worked.map(|r| run_from_row(c, &r)).transpose()?;
    Ok((worked, Some(newest)))
}

/// The newest `limit` runs of a batch, newest first.
pub(crate) fn recent(c: &mut Conn, id: i64, limit: usize) -> Result<Vec<Run>> {
    let rows = c.q(
        &format!(
            "SELECT {COLUMNS} FROM runs r JOIN batches b ON b.id = r.batch_id
              WHERE r.batch_id = $1 ORDER BY r.id DESC LIMIT $2"
        ),
        &[&id, &(limit as i64)],
    )?;
    rows.iter().map(|r| run_from_row(c, r)).collect()
}

const RUN_BY_ID: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs r JOIN batches b ON b.id = r.batch_id WHERE r.id = $1"
);
const RUNS_OPEN: &str = "SELECT id, host, pid, pid_start, started_at FROM runs
  WHERE state = 'running' AND batch_id = $1 ORDER BY id";
const RUN_INSERT: &str =
    "INSERT INTO runs (batch_id, trigger, actor, host, pid, pid_start, started_at, state)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'running') RETURNING id";
const RUN_FINISH: &str = "UPDATE runs
    SET state = $2, summary = $3, skipped_done = $4, retried = $5, ended_at = $6
  WHERE id = $1 AND state = 'running'";
const RUN_ADD_RETRIED: &str = "UPDATE runs SET retried = retried + $2 WHERE id = $1";
const RUNS_MARK_CRASHED: &str = "UPDATE runs SET state = 'crashed', ended_at = $2,
        summary = coalesce(summary, 'crashed: the runner stopped without finishing')
  WHERE id = ANY($1) AND state = 'running'
    AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.run_id = runs.id)";

const RUN_COUNT_FAILURE: &str =
    "UPDATE runs SET failed = failed + 1, retry = retry + ($2 = 'retry')::int,
        manual = manual + ($2 = 'manual')::int, cost = cost + coalesce($3::float8, 0)
  WHERE id = $1";
const RUN_COUNT_RELEASED: &str = "UPDATE runs SET released = released + 1 WHERE id = $1";
const RUN_COUNT_CANCELLED: &str = "UPDATE runs SET cancelled = cancelled + 1 WHERE id = $1";
const RUN_ADD_REDRIVEN: &str = "UPDATE runs SET redriven = redriven + $2 WHERE id = $1";

impl RunsRead for PgTx<'_> {
    fn run_by_id(&mut self, run: i64) -> Result<Option<Run>> {
        let c = &mut *self.c;
        let row = c.opt(RUN_BY_ID, &[&run])?;
        row.map(|r| run_from_row(c, &r)).transpose()
    }

    fn runs_recent(&mut self, batch: i64, limit: usize) -> Result<Vec<Run>> {
        recent(self.c, batch, limit)
    }

    fn runs_open(&mut self, batch: i64) -> Result<Vec<OpenRun>> {
        let c = &mut *self.c;
        let rows = c.q(RUNS_OPEN, &[&batch])?;
        Ok(rows
            .iter()
            .map(|r| OpenRun {
                id: r.get(0),
                holder: Holder {
                    host: r.get(1),
                    pid: r.get::<_, i64>(2) as u32,
                    pid_start: r.get::<_, Option<i64>>(3).map(|s| s as u64),
                },
                started_at: c.tout(r.get(4)),
            })
            .collect())
    }
}

impl RunsWrite for PgTx<'_> {
    fn run_insert(
        &mut self,
        batch: i64,
        trigger: Trigger,
        actor: Option<&str>,
        holder: &Holder,
        now: Millis,
    ) -> Result<i64> {
        let c = &mut *self.c;
        let at = c.tin(now);
        Ok(c.one(
            RUN_INSERT,
            &[
                &batch,
                &trigger.as_str(),
                &actor,
                &holder.host,
                &i64::from(holder.pid),
                &holder.pid_start.map(|s| s as i64),
                &at,
            ],
        )?
        .get(0))
    }

    // Twin of sqlite/runs.rs, kept: one statement per dialect (times moved by the clock offset here).
    fn run_finish(
        &mut self,
        run: i64,
        state: RunState,
        summary: &str,
        skipped_done: i64,
        retried: i64,
        now: Millis,
    ) -> Result<()> {
        let c = &mut *self.c;
        let at = c.tin(now);
        c.x(
            RUN_FINISH,
            &[
                &run,
                &state.as_str(),
                &text(summary),
                &skipped_done,
                &retried,
                &at,
            ],
        )?;
        Ok(())
    }

    fn run_add_retried(&mut self, run: i64, n: i64) -> Result<()> {
        self.c.x(RUN_ADD_RETRIED, &[&run, &n])?;
        Ok(())
    }

    fn runs_mark_crashed(&mut self, runs: &[i64], now: Millis) -> Result<()> {
        let c = &mut *self.c;
        let at = c.tin(now);
        c.x(RUNS_MARK_CRASHED, &[&runs, &at])?;
        Ok(())
    }

    fn run_count_failure(&mut self, run: i64, tier: Tier, cost: Option<f64>) -> Result<()> {
        self.c
            .x(RUN_COUNT_FAILURE, &[&run, &tier.as_str(), &cost])?;
        Ok(())
    }

    fn run_count_cancelled(&mut self, run: i64) -> Result<()> {
        self.c.x(RUN_COUNT_CANCELLED, &[&run])?;
        Ok(())
    }

    fn run_count_released(&mut self, run: i64) -> Result<()> {
        self.c.x(RUN_COUNT_RELEASED, &[&run])?;
        Ok(())
    }

    fn run_add_redriven(&mut self, run: i64, n: i64) -> Result<()> {
        self.c.x(RUN_ADD_REDRIVEN, &[&run, &n])?;
        Ok(())
    }
}
