//! Runs: PostgreSQL's own statement (the others are written once in
//! `dialect::runs`).

use super::PgTx;
use crate::model::Millis;
use crate::store::Result;
use crate::store::dialect::RunsWrite;

const RUNS_MARK_CRASHED: &str = "UPDATE runs SET state = 'crashed', ended_at = $2,
        summary = coalesce(summary, 'crashed: the runner stopped without finishing')
  WHERE id = ANY($1) AND state = 'running'
    AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.run_id = runs.id)";

impl RunsWrite for PgTx<'_> {
    /// One statement for all of them (an array).
    fn runs_mark_crashed(&mut self, runs: &[i64], now: Millis) -> Result<()> {
        let at = self.c.tin(now);
        self.c.x(RUNS_MARK_CRASHED, &[&runs, &at])?;
        Ok(())
    }
}
