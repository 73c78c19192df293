//! The batch lock's seats: SQLite's own statements (the others are written
//! once in `dialect::seats`, the rules in `ops::seats`).

use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteTx;
use crate::model::Millis;
use crate::store::Result;
use crate::store::dialect::{ANY_LIVE_SEAT, SeatsRead, SeatsWrite};

/// Does any batch have a live lock (a runner that may be writing)?
pub(crate) fn any_live(c: &Connection, now: Millis) -> Result<bool> {
    Ok(c.prepare_cached(ANY_LIVE_SEAT)?
        .query_row([now], |r| r.get(0))?)
}

const SEAT_HELD: &str = "SELECT 1 FROM locks WHERE batch_id = ?1 AND run_id = ?2";
const SEAT_STOP: &str = "SELECT stop IS NOT NULL FROM locks WHERE batch_id = ?1 AND run_id = ?2";

/// Does `run_id` hold a seat of the batch lock (see `start_run`)?
pub(crate) fn holds_lock(c: &Connection, batch_id: i64, run_id: i64) -> Result<bool> {
    Ok(c.prepare_cached(SEAT_HELD)?
        .query_row(params![batch_id, run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether `run_id` holds a seat of the batch lock, and if so whether a
/// stop is asked of it: a runner frozen while `stop` was asked must claim
/// nothing more when it wakes, before its heartbeat reads the ask.
pub(crate) fn seat_stop(c: &Connection, batch_id: i64, run_id: i64) -> Result<Option<bool>> {
    Ok(c.prepare_cached(SEAT_STOP)?
        .query_row(params![batch_id, run_id], |r| r.get(0))
        .optional()?)
}

impl SeatsRead for SqliteTx<'_> {}

impl SeatsWrite for SqliteTx<'_> {
    /// `BEGIN IMMEDIATE` already excludes every other writer.
    fn seats_locked(&mut self, _batch: i64) -> Result<()> {
        Ok(())
    }

    fn seat_held_locked(&mut self, batch: i64, run: i64) -> Result<bool> {
        holds_lock(self.conn, batch, run)
    }
}
