//! Statements on dead letters and their rollups.

use super::sql::{self, Arg, Row, Sql};
use crate::model::{DeadLetter, DlqGroup, Millis, Tier};
use crate::store::Result;
use crate::store::api::Failure;
use crate::store::rows::dead_letter_columns;

fn dead_letter_from_row(r: &dyn Row) -> Result<DeadLetter> {
    let payload = r.text(4)?;
    Ok(DeadLetter {
        id: r.int(0)?,
        batch: r.text(1)?,
        key: r.text(2)?,
        label: r.text(3)?,
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        error_class: r.text(5)?,
        message: r.text(6)?,
        attempt: r.int(7)? as u32,
        failed_at: r.time(8)?,
        tier: sql::parsed(r, 9)?,
        run_id: r.opt_int(10)?,
    })
}

const SINCE: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters d JOIN batches b ON b.id = d.batch_id
      WHERE d.batch_id = ?1 AND d.failed_at >= ?2
        AND (CAST(?3 AS TEXT) IS NULL OR d.error_class = CAST(?3 AS TEXT))
      ORDER BY d.failed_at, d.id"
);
const OF_ITEM: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters d JOIN batches b ON b.id = d.batch_id
      WHERE d.item_id = ?1 ORDER BY d.id DESC"
);
/// The dead letter copied from its item row (the payload too, for the
/// dashboard's detail).
const DEAD_LETTER_INSERT: &str =
    "INSERT INTO dead_letters (batch_id, item_id, key, label, payload, error_class,
                           message, attempt, failed_at, tier, run_id)
 SELECT batch_id, id, key, label, payload, ?2, ?3, attempts, ?4, ?5, ?6
   FROM items WHERE id = ?1";

pub(crate) trait DeadLettersRead: Sql {
    /// A batch's dead letters since `since` (all when `None`), of `class`
    /// when given, oldest first.
    fn dead_letters_since(
        &mut self,
        batch: i64,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>> {
        let since = since.map_or(Arg::Int(i64::MIN), Arg::Time);
        let args = [Arg::Int(batch), since, Arg::OptText(class)];
        sql::all(self, SINCE, &args, dead_letter_from_row)
    }

    /// Every dead letter of one item, newest first.
    fn dead_letters_of_item(&mut self, item: i64) -> Result<Vec<DeadLetter>> {
        sql::all(self, OF_ITEM, &[Arg::Int(item)], dead_letter_from_row)
    }

    /// `(class, in (now - window, now], in the window before)`, read from the
    /// dead letters themselves.
    fn dlq_window_counts(
        &mut self,
        batch: i64,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>>;
    /// Per class from the hourly rollups: the last `hours` up to the hour of
    /// `now`, the `hours` before, and all time (the `_now` counts zero).
    fn dlq_hourly(&mut self, batch: i64, now: Millis, hours: i64) -> Result<Vec<DlqGroup>>;
    /// `(class, tier, n)` of the failed items now, each pair once, `n > 0`.
    fn failed_classes(&mut self, batch: i64) -> Result<Vec<(String, Tier, i64)>>;
}

pub(crate) trait DeadLettersWrite: Sql {
    /// The dead letter of `f`, copied from its item row (which `item_fail`
    /// just wrote).
    fn dead_letter_insert(&mut self, f: &Failure<'_>) -> Result<()> {
        let args = [
            Arg::Int(f.item_id),
            Arg::Text(f.error_class),
            Arg::Text(f.message),
            Arg::Time(f.now),
            Arg::Text(f.tier.as_str()),
            Arg::Int(f.run_id),
        ];
        self.exec(DEAD_LETTER_INSERT, &args)?;
        Ok(())
    }
}
