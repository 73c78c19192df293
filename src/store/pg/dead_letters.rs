//! Dead letters: an append-only record each time an item lands in `failed`.

use super::PgTx;
use crate::model::{DlqGroup, Millis, Tier};
use crate::store::dialect::{DeadLettersRead, DeadLettersWrite};
use crate::store::{Fault, Result, StoreError};

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
// Twin of sqlite/dead_letters.rs, kept: one statement per dialect (shards summed, the clock offset).
impl DeadLettersRead for PgTx<'_> {
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

impl DeadLettersWrite for PgTx<'_> {}
