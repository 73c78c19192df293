//! The worker's own words (the rules are in `ops::attempts`).

use super::PgTx;
use super::conn::{Conn, text};
use crate::store::Result;
use crate::store::api::AttemptLog;
use crate::store::dialect::{AttemptsRead, AttemptsWrite};

const LOGS_OF_ITEM: &str = "SELECT attempt, run_id, at, stderr, cut FROM attempt_logs
      WHERE item_id = $1 ORDER BY id DESC LIMIT $2";
const LOG_INSERT: &str = "INSERT INTO attempt_logs (item_id, attempt, run_id, at, stderr, cut) VALUES ($1, $2, $3, $4, $5, $6)";
const LOGS_TRIM: &str = "DELETE FROM attempt_logs WHERE item_id = $1 AND id < (
      SELECT min(id) FROM (SELECT id FROM attempt_logs WHERE item_id = $1 ORDER BY id DESC LIMIT $2) newest)";

/// What the newest `limit` attempts of an item printed, newest first.
pub(crate) fn of_item(c: &mut Conn, item: i64, limit: i64) -> Result<Vec<AttemptLog>> {
    let rows = c.q(LOGS_OF_ITEM, &[&item, &limit])?;
    Ok(rows
        .iter()
        .map(|r| AttemptLog {
            attempt: r.get::<_, i64>(0) as u32,
            run_id: r.get(1),
            at: c.tout(r.get(2)),
            stderr: r.get(3),
            cut: r.get(4),
        })
        .collect())
}

impl AttemptsRead for PgTx<'_> {
    fn attempt_logs(&mut self, item: i64, limit: i64) -> Result<Vec<AttemptLog>> {
        of_item(self.c, item, limit)
    }
}

impl AttemptsWrite for PgTx<'_> {
    fn attempt_log_insert(&mut self, item: i64, log: &AttemptLog) -> Result<()> {
        let attempt = i64::from(log.attempt);
        let at = self.c.tin(log.at);
        let stderr = text(&log.stderr);
        self.c.x(
            LOG_INSERT,
            &[
                &item,
                &attempt,
                &log.run_id,
                &at,
                &stderr.as_ref(),
                &log.cut,
            ],
        )?;
        Ok(())
    }

    fn attempt_logs_trim(&mut self, item: i64, keep: i64) -> Result<()> {
        self.c.x(LOGS_TRIM, &[&item, &keep])?;
        Ok(())
    }
}
