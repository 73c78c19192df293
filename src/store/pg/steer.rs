//! Steering a live batch: PostgreSQL's own statement, which locks the row
//! it reads (the others are written once in `dialect::steer`, the rules in
//! `ops::steer`).

use super::PgTx;
use crate::store::Result;
use crate::store::dialect::{CancelAsk, SteerRead, SteerWrite};

const CANCEL_ASK_LOCKED: &str = "SELECT key, cancel_to, cancel_by, cancel_reason FROM items
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed' AND cancel_to IS NOT NULL
  FOR UPDATE";

impl SteerRead for PgTx<'_> {}

impl SteerWrite for PgTx<'_> {
    fn item_cancel_ask_locked(&mut self, item: i64, token: i64) -> Result<Option<CancelAsk>> {
        Ok(self
            .c
            .opt(CANCEL_ASK_LOCKED, &[&item, &token])?
            .map(|r| CancelAsk {
                key: r.get(0),
                to: r.get(1),
                by: r.get(2),
                reason: r.get(3),
            }))
    }
}
