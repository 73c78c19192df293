//! Dead letters: an append-only record each time an item lands in `failed`.

use rusqlite::params;

use super::{SqliteTx, parse_col};
use crate::model::{DlqGroup, Millis, Tier};
use crate::store::Result;
use crate::store::dialect::{DeadLettersRead, DeadLettersWrite};

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
impl DeadLettersRead for SqliteTx<'_> {
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

impl DeadLettersWrite for SqliteTx<'_> {}
