//! Dead letters: an append-only record each time an item lands in `failed`.

use postgres::Row;

use super::PgTx;
use super::conn::Conn;
use super::conn::text;
use crate::model::{DeadLetter, DlqGroup, Millis, Tier};
use crate::store::api::Failure;
use crate::store::dialect::{DeadLettersRead, DeadLettersWrite};
use crate::store::rows::dead_letter_columns;
use crate::store::{Fault, Result, StoreError};

pub(crate) fn dead_letter_from_row(c: &Conn, r: &Row) -> Result<DeadLetter> {
    let payload: String = r.get(4);
    Ok(DeadLetter {
        id: r.get(0),
        batch: r.get(1),
        key: r.get(2),
        label: r.get(3),
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        error_class: r.get(5),
        message: r.get(6),
        attempt: r.get::<_, i64>(7) as u32,
        failed_at: c.tout(r.get(8)),
        tier: tier(r.get(9))?,
        run_id: r.get(10),
    })
}

const OF_ITEM: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters d JOIN batches b ON b.id = d.batch_id
      WHERE d.item_id = $1 ORDER BY d.id DESC"
);

const SINCE: &str = concat!(
    "SELECT ",
    dead_letter_columns!(),
    " FROM dead_letters d JOIN batches b ON b.id = d.batch_id
      WHERE d.batch_id = $1 AND d.failed_at >= $2
        AND ($3::text IS NULL OR d.error_class = $3::text)
      ORDER BY d.failed_at, d.id"
);

const WINDOW_COUNTS: &str = "SELECT error_class,
        count(*) FILTER (WHERE failed_at > $2::int8 - $3::int8)::int8,
        count(*) FILTER (WHERE failed_at <= $2::int8 - $3::int8)::int8
   FROM dead_letters
  WHERE batch_id = $1 AND failed_at > $2::int8 - 2 * $3::int8
    AND failed_at <= $2::int8
  GROUP BY error_class";

const HOURLY: &str = "SELECT error_class,
        coalesce(sum(n) FILTER (WHERE hour > $2::int8 - $3::int8), 0)::int8,
        coalesce(sum(n) FILTER (WHERE hour > $2::int8 - 2 * $3::int8
                                  AND hour <= $2::int8 - $3::int8), 0)::int8,
        sum(n)::int8
   FROM dlq_hourly WHERE batch_id = $1 GROUP BY error_class";

/// The shards of a class's count summed.
const FAILED_CLASSES: &str = "SELECT error_class, tier, sum(n)::int8 FROM failed_classes
  WHERE batch_id = $1 GROUP BY 1, 2 HAVING sum(n) > 0";

/// Every dead letter of one item, newest first (also read by the
/// dashboard's detail).
const DEAD_LETTER_INSERT: &str =
    "INSERT INTO dead_letters (batch_id, item_id, key, label, payload, error_class,
                           message, attempt, failed_at, tier, run_id)
 SELECT batch_id, id, key, label, payload, $2, $3, attempts, $4, $5, $6
   FROM items WHERE id = $1";

pub(crate) fn of_item(c: &mut Conn, item_id: i64) -> Result<Vec<DeadLetter>> {
    let rows = c.q(OF_ITEM, &[&item_id])?;
    rows.iter().map(|r| dead_letter_from_row(c, r)).collect()
}

// Twin of sqlite/dead_letters.rs, kept: one statement per dialect (shards summed, the clock offset).
impl DeadLettersRead for PgTx<'_> {
    fn dead_letters_since(
        &mut self,
        batch: i64,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>> {
        let since = since.map_or(i64::MIN, |s| self.c.tin(s));
        let rows = self.c.q(SINCE, &[&batch, &since, &class])?;
        rows.iter()
            .map(|r| dead_letter_from_row(self.c, r))
            .collect()
    }

    fn dead_letters_of_item(&mut self, item: i64) -> Result<Vec<DeadLetter>> {
        of_item(self.c, item)
    }

    fn dlq_window_counts(
        &mut self,
        batch: i64,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>> {
        let now = self.c.tin(now);
        Ok(self
            .c
            .q(WINDOW_COUNTS, &[&batch, &now, &window])?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    fn dlq_hourly(&mut self, batch: i64, now: Millis, hours: i64) -> Result<Vec<DlqGroup>> {
        let hour = self.c.tin(now) / 3_600_000;
        Ok(self
            .c
            .q(HOURLY, &[&batch, &hour, &hours])?
            .iter()
            .map(|r| DlqGroup {
                error_class: r.get(0),
                last_24h: r.get(1),
                prev_24h: r.get(2),
                total: r.get(3),
                retry_now: 0,
                manual_now: 0,
            })
            .collect())
    }

    fn failed_classes(&mut self, batch: i64) -> Result<Vec<(String, Tier, i64)>> {
        self.c
            .q(FAILED_CLASSES, &[&batch])?
            .iter()
            .map(|r| Ok((r.get(0), tier(r.get(1))?, r.get(2))))
            .collect()
    }
}

fn tier(text: &str) -> Result<Tier> {
    text.parse::<Tier>()
        .map_err(|e| StoreError::Fault(Fault::Unreadable(e)))
}

impl DeadLettersWrite for PgTx<'_> {
    fn dead_letter_insert(&mut self, f: &Failure<'_>) -> Result<()> {
        let at = self.c.tin(f.now);
        let (class, message) = (text(f.error_class), text(f.message));
        self.c.x(
            DEAD_LETTER_INSERT,
            &[
                &f.item_id,
                &class,
                &message,
                &at,
                &f.tier.as_str(),
                &f.run_id,
            ],
        )?;
        Ok(())
    }
}
