//! Runs: SQLite's own statement (the others are written once in
//! `dialect::runs`).

use rusqlite::params;

use super::SqliteTx;
use crate::model::Millis;
use crate::store::Result;
use crate::store::dialect::RunsWrite;

const RUNS_MARK_CRASHED: &str = "UPDATE runs SET state = 'crashed', ended_at = ?2,
        summary = coalesce(summary, 'crashed: the runner stopped without finishing')
  WHERE id = ?1 AND state = 'running'
    AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.run_id = runs.id)";

impl RunsWrite for SqliteTx<'_> {
    /// One statement per run: SQLite binds no arrays.
    fn runs_mark_crashed(&mut self, runs: &[i64], now: Millis) -> Result<()> {
        let mut st = self.conn.prepare_cached(RUNS_MARK_CRASHED)?;
        for id in runs {
            st.execute(params![id, now])?;
        }
        Ok(())
    }
}
