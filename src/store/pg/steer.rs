//! Steering a live batch, PostgreSQL's statements (the rules are in
//! `ops::steer`). Times go in on the database's clock (see `conn`).

use super::PgTx;
use super::conn::text;
use crate::model::Millis;
use crate::store::Result;
use crate::store::dialect::{CancelAsk, SteerRead, SteerWrite};

/// Forgets the cancel asked of an item.
const DROP_CANCEL: &str =
    "UPDATE items SET cancel_to = NULL, cancel_by = NULL, cancel_reason = NULL WHERE id = $1";

const SEAT_STOP: &str = "SELECT stop, stop_by FROM locks
  WHERE batch_id = $1 AND token = $2 AND stop IS NOT NULL";
const RUN_CANCELS: &str = "SELECT id FROM items
  WHERE batch_id = $1 AND lease_run = $2 AND cancel_to IS NOT NULL AND status = 'claimed'";
const SEAT_ASK_STOP: &str = "UPDATE locks
    SET stop = CASE WHEN $3 OR stop = 'now' THEN 'now' ELSE 'graceful' END, stop_by = $4
  WHERE batch_id = $1 AND token = $2";
const ASK_CANCEL: &str = "UPDATE items SET cancel_to = $2, cancel_by = $3, cancel_reason = $4
  WHERE id = $1 AND status = 'claimed'";
const CANCEL_ASK_LOCKED: &str = "SELECT key, cancel_to, cancel_by, cancel_reason FROM items
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed' AND cancel_to IS NOT NULL
  FOR UPDATE";
const TO_PENDING: &str = "UPDATE items SET status = 'pending', tier = NULL, next_attempt_at = NULL,
       lease_run = NULL, lease_until = NULL, cancel_to = NULL, cancel_by = NULL,
       cancel_reason = NULL, updated_at = $2, attempts = greatest(attempts - $3, 0)
 WHERE id = $1";
const TO_MANUAL: &str = "UPDATE items SET status = 'failed', tier = 'manual',
       error_class = 'Cancelled', error_message = $2, next_attempt_at = NULL,
       lease_run = NULL, lease_until = NULL, cancel_to = NULL, cancel_by = NULL,
       cancel_reason = NULL, updated_at = $3
 WHERE id = $1";
const DEAD_LETTER: &str = "INSERT INTO dead_letters (batch_id, item_id, key, label, payload,
       error_class, message, attempt, failed_at, tier, run_id)
 SELECT batch_id, id, key, label, payload, 'Cancelled', $2, attempts, $3, 'manual', $4
   FROM items WHERE id = $1";

impl SteerRead for PgTx<'_> {
    fn seat_stop(&mut self, batch: i64, token: &str) -> Result<Option<(String, Option<String>)>> {
        Ok(self
            .c
            .opt(SEAT_STOP, &[&batch, &token])?
            .map(|r| (r.get(0), r.get(1))))
    }

    fn run_cancels(&mut self, batch: i64, run: i64) -> Result<Vec<i64>> {
        Ok(self
            .c
            .q(RUN_CANCELS, &[&batch, &run])?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }
}

impl SteerWrite for PgTx<'_> {
    fn item_drop_cancel(&mut self, item: i64) -> Result<()> {
        self.c.x(DROP_CANCEL, &[&item])?;
        Ok(())
    }

    fn seat_ask_stop(&mut self, batch: i64, token: &str, now: bool, by: &str) -> Result<bool> {
        Ok(self
            .c
            .x(SEAT_ASK_STOP, &[&batch, &token, &now, &text(by)])?
            == 1)
    }

    fn item_ask_cancel(&mut self, item: i64, to: &str, by: &str, reason: &str) -> Result<bool> {
        Ok(self
            .c
            .x(ASK_CANCEL, &[&item, &to, &text(by), &text(reason)])?
            == 1)
    }

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

    fn item_cancel_to_pending(&mut self, item: i64, uncount: bool, now: Millis) -> Result<()> {
        let at = self.c.tin(now);
        self.c.x(TO_PENDING, &[&item, &at, &i64::from(uncount)])?;
        Ok(())
    }

    fn item_cancel_to_manual(&mut self, item: i64, message: &str, now: Millis) -> Result<()> {
        let at = self.c.tin(now);
        self.c.x(TO_MANUAL, &[&item, &text(message), &at])?;
        Ok(())
    }

    fn item_cancel_dead_letter(
        &mut self,
        item: i64,
        message: &str,
        run: Option<i64>,
        now: Millis,
    ) -> Result<()> {
        let at = self.c.tin(now);
        self.c.x(DEAD_LETTER, &[&item, &text(message), &at, &run])?;
        Ok(())
    }
}
