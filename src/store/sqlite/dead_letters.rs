//! Dead letters: an append-only record each time an item lands in `failed`.

use rusqlite::{Connection, Row, params};

use super::{SqliteTx, parse_col};
use crate::model::{DeadLetter, DlqGroup, Millis, Tier};
use crate::store::Result;
use crate::store::api::Failure;
use crate::store::dialect::{DeadLettersRead, DeadLettersWrite};
use crate::store::rows::dead_letter_columns;

pub(crate) fn dead_letter_from_row(r: &Row<'_>) -> rusqlite::Result<DeadLetter> {
    let payload: String = r.get(4)?;
    Ok(DeadLetter {
        id: r.get(0)?,
        batch: r.get(1)?,
        key: r.get(2)?,
        label: r.get(3)?,
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        error_class: r.get(5)?,
        message: r.get(6)?,
        attempt: r.get(7)?,
        failed_at: r.get(8)?,
        tier: parse_col(9, r.get_ref(9)?.as_str()?)?,
        run_id: r.get(10)?,
    })
}

const SINCE: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters d JOIN batches b ON b.id = d.batch_id
      WHERE d.batch_id = ?1 AND d.failed_at >= ?2 AND (?3 IS NULL OR d.error_class = ?3)
      ORDER BY d.failed_at, d.id"
);

const WINDOW_COUNTS: &str =
    "SELECT error_class, sum(failed_at > ?2 - ?3), sum(failed_at <= ?2 - ?3)
       FROM dead_letters
      WHERE batch_id = ?1 AND failed_at > ?2 - 2 * ?3 AND failed_at <= ?2
      GROUP BY error_class";

const HOURLY: &str = "SELECT error_class,
        sum(CASE WHEN hour > ?2 - ?3 THEN n ELSE 0 END),
        sum(CASE WHEN hour > ?2 - 2 * ?3 AND hour <= ?2 - ?3 THEN n ELSE 0 END),
        sum(n)
   FROM dlq_hourly WHERE batch_id = ?1 GROUP BY error_class";

const FAILED_CLASSES: &str =
    "SELECT error_class, tier, n FROM failed_classes WHERE batch_id = ?1 AND n > 0";

const OF_ITEM: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters d JOIN batches b ON b.id = d.batch_id
      WHERE d.item_id = ?1 ORDER BY d.id DESC"
);

/// Every dead letter of one item, newest first (also read by the
/// dashboard's detail).
const DEAD_LETTER_INSERT: &str =
    "INSERT INTO dead_letters (batch_id, item_id, key, label, payload, error_class,
                           message, attempt, failed_at, tier, run_id)
 SELECT batch_id, id, key, label, payload, ?2, ?3, attempts, ?4, ?5, ?6 FROM items WHERE id = ?1";

pub(crate) fn of_item(c: &Connection, item_id: i64) -> rusqlite::Result<Vec<DeadLetter>> {
    let mut st = c.prepare_cached(OF_ITEM)?;
    st.query_map([item_id], dead_letter_from_row)?.collect()
}

impl DeadLettersRead for SqliteTx<'_> {
    fn dead_letters_since(
        &mut self,
        batch: i64,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>> {
        let mut st = self.conn.prepare_cached(SINCE)?;
        let rows = st
            .query_map(
                params![batch, since.unwrap_or(i64::MIN), class],
                dead_letter_from_row,
            )?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn dead_letters_of_item(&mut self, item: i64) -> Result<Vec<DeadLetter>> {
        Ok(of_item(self.conn, item)?)
    }

    fn dlq_window_counts(
        &mut self,
        batch: i64,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>> {
        let mut st = self.conn.prepare_cached(WINDOW_COUNTS)?;
        let rows = st
            .query_map(params![batch, now, window], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn dlq_hourly(&mut self, batch: i64, now: Millis, hours: i64) -> Result<Vec<DlqGroup>> {
        let mut st = self.conn.prepare_cached(HOURLY)?;
        let rows = st
            .query_map(params![batch, now / 3_600_000, hours], |r| {
                Ok(DlqGroup {
                    error_class: r.get(0)?,
                    last_24h: r.get(1)?,
                    prev_24h: r.get(2)?,
                    total: r.get(3)?,
                    retry_now: 0,
                    manual_now: 0,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn failed_classes(&mut self, batch: i64) -> Result<Vec<(String, Tier, i64)>> {
        let mut st = self.conn.prepare_cached(FAILED_CLASSES)?;
        let rows = st
            .query_map([batch], |r| {
                Ok((r.get(0)?, parse_col(1, r.get_ref(1)?.as_str()?)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

impl DeadLettersWrite for SqliteTx<'_> {
    fn dead_letter_insert(&mut self, f: &Failure<'_>) -> Result<()> {
        self.conn
            .prepare_cached(DEAD_LETTER_INSERT)?
            .execute(params![
                f.item_id,
                f.error_class,
                f.message,
                f.now,
                f.tier.as_str(),
                f.run_id
            ])?;
        Ok(())
    }
}
