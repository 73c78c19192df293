//! Statements for steering a live batch: a cancel asked of an item, a stop
//! asked of a seat's holder.

use super::sql::{self, Arg, Sql, Texts};
use crate::model::Millis;
use crate::store::Result;

/// A cancel asked of a claimed item, as stored.
#[derive(Debug, Clone)]
pub(crate) struct CancelAsk {
    pub(crate) key: String,
    pub(crate) to: String,
    pub(crate) by: Option<String>,
    pub(crate) reason: Option<String>,
}

const SEAT_STOP: &str = "SELECT stop, stop_by FROM locks
  WHERE batch_id = ?1 AND token = ?2 AND stop IS NOT NULL";
const RUN_CANCELS: &str = "SELECT id FROM items
  WHERE batch_id = ?1 AND lease_run = ?2 AND cancel_to IS NOT NULL AND status = 'claimed'";
const SEAT_ASK_STOP: &str = "UPDATE locks
    SET stop = CASE WHEN ?3 OR stop = 'now' THEN 'now' ELSE 'graceful' END, stop_by = ?4
  WHERE batch_id = ?1 AND token = ?2";
const ASK_CANCEL: &str = "UPDATE items SET cancel_to = ?2, cancel_by = ?3, cancel_reason = ?4
  WHERE id = ?1 AND status = 'claimed'";
const DROP_CANCEL: &str =
    "UPDATE items SET cancel_to = NULL, cancel_by = NULL, cancel_reason = NULL WHERE id = ?1";
/// PostgreSQL locks the row until commit; SQLite's `BEGIN IMMEDIATE`
/// already excludes every other writer.
const CANCEL_ASK_LOCKED: Texts = Texts {
    sqlite: "SELECT key, cancel_to, cancel_by, cancel_reason FROM items
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NOT NULL",
    pg: "SELECT key, cancel_to, cancel_by, cancel_reason FROM items
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NOT NULL
  FOR UPDATE",
};
const TO_PENDING: &str = concat!(
    "UPDATE items SET status = 'pending', tier = NULL, next_attempt_at = NULL,
       lease_run = NULL, lease_until = NULL, cancel_to = NULL, cancel_by = NULL,
       cancel_reason = NULL, updated_at = ?2, attempts = ",
    attempts_given_back!("?3"),
    " WHERE id = ?1"
);
const TO_MANUAL: &str = concat!(
    "UPDATE items SET status = 'failed', tier = 'manual',
       error_class = 'Cancelled', error_message = ?2, next_attempt_at = NULL,
       lease_run = NULL, lease_until = NULL, cancel_to = NULL, cancel_by = NULL,
       cancel_reason = NULL, updated_at = ?3, attempts = ",
    attempts_given_back!("?4"),
    " WHERE id = ?1"
);
const DEAD_LETTER: &str = "INSERT INTO dead_letters (batch_id, item_id, key, label, payload,
       error_class, message, attempt, failed_at, tier, run_id)
 SELECT batch_id, id, key, label, payload, 'Cancelled', ?2, attempts, ?3, 'manual', ?4
   FROM items WHERE id = ?1";

pub(crate) trait SteerRead: Sql {
    /// The stop asked of the seat `token` (`graceful` or `now`) and who asked.
    fn seat_stop(&mut self, batch: i64, token: &str) -> Result<Option<(String, Option<String>)>> {
        sql::opt(self, SEAT_STOP, &[Arg::Int(batch), Arg::Text(token)], |r| {
            Ok((r.text(0)?, r.opt_text(1)?))
        })
    }

    /// Ids of the items `run` holds that were asked to be cancelled.
    fn run_cancels(&mut self, batch: i64, run: i64) -> Result<Vec<i64>> {
        sql::all(self, RUN_CANCELS, &[Arg::Int(batch), Arg::Int(run)], |r| {
            r.int(0)
        })
    }
}

pub(crate) trait SteerWrite: Sql {
    /// Asks the holder of seat `token` to stop (`now`: at once; a graceful
    /// ask never weakens an earlier `now`); whether the seat was there.
    fn seat_ask_stop(&mut self, batch: i64, token: &str, now: bool, by: &str) -> Result<bool> {
        let args = [
            Arg::Int(batch),
            Arg::Text(token),
            Arg::Bool(now),
            Arg::Text(by),
        ];
        Ok(self.exec(SEAT_ASK_STOP, &args)? == 1)
    }

    /// Asks the runner holding `item` to cancel it; whether it is claimed.
    fn item_ask_cancel(&mut self, item: i64, to: &str, by: &str, reason: &str) -> Result<bool> {
        let args = [
            Arg::Int(item),
            Arg::Text(to),
            Arg::Text(by),
            Arg::Text(reason),
        ];
        Ok(self.exec(ASK_CANCEL, &args)? == 1)
    }

    /// The cancel asked of `item` while still claimed under `token`,
    /// locking its row until commit.
    fn item_cancel_ask_locked(&mut self, item: i64, token: i64) -> Result<Option<CancelAsk>> {
        let sql = self.text_of(&CANCEL_ASK_LOCKED);
        sql::opt(self, sql, &[Arg::Int(item), Arg::Int(token)], |r| {
            Ok(CancelAsk {
                key: r.text(0)?,
                to: r.text(1)?,
                by: r.opt_text(2)?,
                reason: r.opt_text(3)?,
            })
        })
    }

    /// Moves `item` to pending, out of any claim, tier or cancel; with
    /// `give_back`, the attempt its claim counted is not (`attempts_given_back!`).
    fn item_cancel_to_pending(&mut self, item: i64, give_back: bool, now: Millis) -> Result<()> {
        let args = [
            Arg::Int(item),
            Arg::Time(now),
            Arg::Int(i64::from(give_back)),
        ];
        self.exec(TO_PENDING, &args)?;
        Ok(())
    }

    /// Moves `item` to the `manual` tier as `Cancelled` with `message`, out
    /// of any claim or cancel; with `give_back`, as `item_cancel_to_pending`.
    fn item_cancel_to_manual(
        &mut self,
        item: i64,
        message: &str,
        give_back: bool,
        now: Millis,
    ) -> Result<()> {
        // A cancel is no answer of its worker: no failed completion.
        self.exec(super::items::LET_GO, &[Arg::Int(item)])?;
        let args = [
            Arg::Int(item),
            Arg::Text(message),
            Arg::Time(now),
            Arg::Int(i64::from(give_back)),
        ];
        self.exec(TO_MANUAL, &args)?;
        Ok(())
    }

    /// Forgets the cancel asked of `item` (its runner died before honouring
    /// it: the claim is taken back like any other).
    fn item_drop_cancel(&mut self, item: i64) -> Result<()> {
        self.exec(DROP_CANCEL, &[Arg::Int(item)])?;
        Ok(())
    }

    /// Appends `item`'s dead letter in the `manual` tier as `Cancelled`.
    fn item_cancel_dead_letter(
        &mut self,
        item: i64,
        message: &str,
        run: Option<i64>,
        now: Millis,
    ) -> Result<()> {
        let args = [
            Arg::Int(item),
            Arg::Text(message),
            Arg::Time(now),
            Arg::OptInt(run),
        ];
        self.exec(DEAD_LETTER, &args)?;
        Ok(())
    }
}

impl<T: Sql + ?Sized> SteerRead for T {}
impl<T: Sql + ?Sized> SteerWrite for T {}
