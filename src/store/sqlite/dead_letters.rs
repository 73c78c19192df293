//! Dead letters: an append-only record each time an item lands in `failed`.

use rusqlite::{Row, params};

use super::batches::batch_id;
use super::{SqliteStore, parse_col};
use crate::model::{DeadLetter, DlqGroup, Millis};
use crate::store::Result;

const DAY_HOURS: i64 = 24;

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

pub(crate) const COLUMNS: &str =
    "d.id, b.name, d.key, d.label, d.payload, d.error_class, d.message, d.attempt,
    d.failed_at, d.tier, d.run_id";

impl SqliteStore {
    /// Dead letters of a batch since `since` (all when `None`), oldest first.
    pub fn dead_letters(
        &self,
        batch: &str,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut st = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM dead_letters d JOIN batches b ON b.id = d.batch_id
                  WHERE d.batch_id = ?1 AND d.failed_at >= ?2 AND (?3 IS NULL OR d.error_class = ?3)
                  ORDER BY d.failed_at, d.id"
            ))?;
            let rows = st
                .query_map(
                    params![id, since.unwrap_or(i64::MIN), class],
                    dead_letter_from_row,
                )?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }

    /// Every failure of one item, newest first.
    pub fn item_failures(&self, item_id: i64) -> Result<Vec<DeadLetter>> {
        self.read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM dead_letters d JOIN batches b ON b.id = d.batch_id
                  WHERE d.item_id = ?1 ORDER BY d.id DESC"
            ))?;
            let rows = st
                .query_map([item_id], dead_letter_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }

    /// Dead letters per error class in the window `(now - window, now]` and
    /// in the window before it: `(class, last, previous)`. Reads the dead
    /// letters of those two windows (an index range), for windows other
    /// than the 24 h the rollups serve.
    pub fn dlq_window_counts(
        &self,
        batch: &str,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut st = c.prepare_cached(
                "SELECT error_class, sum(failed_at > ?2 - ?3), sum(failed_at <= ?2 - ?3)
                   FROM dead_letters
                  WHERE batch_id = ?1 AND failed_at > ?2 - 2 * ?3 AND failed_at <= ?2
                  GROUP BY error_class",
            )?;
            let rows = st
                .query_map(params![id, now, window], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }

    /// Dead letters by error class: last 24 h, the 24 h before, all time,
    /// and how many items of the class are failed now by tier. Read from
    /// rollups, so the cost does not grow with the number of dead letters.
    pub fn dlq_groups(&self, batch: &str, now: Millis) -> Result<Vec<DlqGroup>> {
        self.read(|c| groups(c, batch_id(c, batch)?, now))
    }
}

/// Dead letters by error class (see [`Store::dlq_groups`]).
pub(crate) fn groups(c: &rusqlite::Connection, id: i64, now: Millis) -> Result<Vec<DlqGroup>> {
    let hour = now / 3_600_000;
    let mut st = c.prepare_cached(
        "SELECT error_class,
                sum(CASE WHEN hour > ?2 - ?3 THEN n ELSE 0 END),
                sum(CASE WHEN hour > ?2 - 2 * ?3 AND hour <= ?2 - ?3 THEN n ELSE 0 END),
                sum(n)
           FROM dlq_hourly WHERE batch_id = ?1 GROUP BY error_class",
    )?;
    let mut groups: Vec<DlqGroup> = st
        .query_map(params![id, hour, DAY_HOURS], |r| {
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
    let mut st = c.prepare_cached(
        "SELECT error_class, tier, n FROM failed_classes WHERE batch_id = ?1 AND n > 0",
    )?;
    let mut rows = st.query([id])?;
    while let Some(r) = rows.next()? {
        let class: String = r.get(0)?;
        let tier: String = r.get(1)?;
        let n: i64 = r.get(2)?;
        let pos = match groups.iter().position(|g| g.error_class == class) {
            Some(pos) => pos,
            None => {
                groups.push(DlqGroup {
                    error_class: class,
                    last_24h: 0,
                    prev_24h: 0,
                    total: 0,
                    retry_now: 0,
                    manual_now: 0,
                });
                groups.len() - 1
            }
        };
        if tier == "retry" {
            groups[pos].retry_now += n;
        } else {
            groups[pos].manual_now += n;
        }
    }
    groups.sort_by(|a, b| {
        (b.last_24h, b.retry_now + b.manual_now, &a.error_class).cmp(&(
            a.last_24h,
            a.retry_now + a.manual_now,
            &b.error_class,
        ))
    });
    Ok(groups)
}
