//! The worker's own words (the rules are in `ops::attempts`).

use rusqlite::{Connection, params};

use super::SqliteTx;
use crate::store::Result;
use crate::store::api::AttemptLog;
use crate::store::dialect::sql::kept;
use crate::store::dialect::{AttemptsRead, AttemptsWrite};

const LOGS_OF_ITEM: &str = "SELECT attempt, run_id, at, stderr, cut FROM attempt_logs
      WHERE item_id = ?1 ORDER BY id DESC LIMIT ?2";
const LOG_INSERT: &str = "INSERT INTO attempt_logs (item_id, attempt, run_id, at, stderr, cut) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const LOGS_TRIM: &str = "DELETE FROM attempt_logs WHERE item_id = ?1 AND id < (
      SELECT min(id) FROM (SELECT id FROM attempt_logs WHERE item_id = ?1 ORDER BY id DESC LIMIT ?2))";

/// What the newest `limit` attempts of an item printed, newest first.
pub(crate) fn of_item(c: &Connection, item: i64, limit: i64) -> Result<Vec<AttemptLog>> {
    let rows = c
        .prepare_cached(LOGS_OF_ITEM)?
        .query_map(params![item, limit], |r| {
            Ok(AttemptLog {
                attempt: r.get::<_, i64>(0)? as u32,
                run_id: r.get(1)?,
                at: r.get(2)?,
                stderr: r.get(3)?,
                cut: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

impl AttemptsRead for SqliteTx<'_> {
    fn attempt_logs(&mut self, item: i64, limit: i64) -> Result<Vec<AttemptLog>> {
        of_item(self.conn, item, limit)
    }
}

impl AttemptsWrite for SqliteTx<'_> {
    fn attempt_log_insert(&mut self, item: i64, log: &AttemptLog) -> Result<()> {
        self.conn.prepare_cached(LOG_INSERT)?.execute(params![
            item,
            i64::from(log.attempt),
            log.run_id,
            log.at,
            kept(&log.stderr),
            log.cut
        ])?;
        Ok(())
    }

    fn attempt_logs_trim(&mut self, item: i64, keep: i64) -> Result<()> {
        self.conn
            .prepare_cached(LOGS_TRIM)?
            .execute(params![item, keep])?;
        Ok(())
    }
}
