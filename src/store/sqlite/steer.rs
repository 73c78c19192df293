//! Steering a live batch: SQLite's own statement (the others are written
//! once in `dialect::steer`, the rules in `ops::steer`).

use rusqlite::{OptionalExtension, params};

use super::SqliteTx;
use crate::store::Result;
use crate::store::dialect::{CancelAsk, SteerRead, SteerWrite};

const CANCEL_ASK: &str = "SELECT key, cancel_to, cancel_by, cancel_reason FROM items
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NOT NULL";

impl SteerRead for SqliteTx<'_> {}

impl SteerWrite for SqliteTx<'_> {
    /// `BEGIN IMMEDIATE` already excludes every other writer.
    fn item_cancel_ask_locked(&mut self, item: i64, token: i64) -> Result<Option<CancelAsk>> {
        Ok(self
            .conn
            .prepare_cached(CANCEL_ASK)?
            .query_row(params![item, token], |r| {
                Ok(CancelAsk {
                    key: r.get(0)?,
                    to: r.get(1)?,
                    by: r.get(2)?,
                    reason: r.get(3)?,
                })
            })
            .optional()?)
    }
}
