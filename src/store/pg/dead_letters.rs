//! Dead letters: an append-only record each time an item lands in `failed`.

use crate::store::Fault;
use postgres::Row;

use super::PgStore;
use super::batches::batch_id;
use super::conn::Conn;
use crate::model::{DeadLetter, DlqGroup, Millis, Tier};
use crate::store::{Result, StoreError};

const DAY_HOURS: i64 = 24;

pub(crate) const COLUMNS: &str = "d.id, b.name, d.key, d.label, d.payload, d.error_class,
    d.message, d.attempt, d.failed_at, d.tier, d.run_id";

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
        tier: r
            .get::<_, &str>(9)
            .parse::<Tier>()
            .map_err(|e| StoreError::Fault(Fault::Unreadable(e)))?,
        run_id: r.get(10),
    })
}

pub(crate) fn of_item(c: &mut Conn, item_id: i64) -> Result<Vec<DeadLetter>> {
    let rows = c.q(
        &format!(
            "SELECT {COLUMNS} FROM dead_letters d JOIN batches b ON b.id = d.batch_id
              WHERE d.item_id = $1 ORDER BY d.id DESC"
        ),
        &[&item_id],
    )?;
    rows.iter().map(|r| dead_letter_from_row(c, r)).collect()
}

impl PgStore {
    pub fn dead_letters(
        &self,
        batch: &str,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let since = since.map_or(i64::MIN, |s| c.tin(s));
            let rows = c.q(
                &format!(
                    "SELECT {COLUMNS} FROM dead_letters d JOIN batches b ON b.id = d.batch_id
                      WHERE d.batch_id = $1 AND d.failed_at >= $2
                        AND ($3::text IS NULL OR d.error_class = $3::text)
                      ORDER BY d.failed_at, d.id"
                ),
                &[&id, &since, &class],
            )?;
            rows.iter().map(|r| dead_letter_from_row(c, r)).collect()
        })
    }

    pub fn item_failures(&self, item_id: i64) -> Result<Vec<DeadLetter>> {
        self.read(|c| of_item(c, item_id))
    }

    pub fn dlq_window_counts(
        &self,
        batch: &str,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let now = c.tin(now);
            Ok(c.q(
                "SELECT error_class,
                        count(*) FILTER (WHERE failed_at > $2::int8 - $3::int8)::int8,
                        count(*) FILTER (WHERE failed_at <= $2::int8 - $3::int8)::int8
                   FROM dead_letters
                  WHERE batch_id = $1 AND failed_at > $2::int8 - 2 * $3::int8
                    AND failed_at <= $2::int8
                  GROUP BY error_class",
                &[&id, &now, &window],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
        })
    }

    pub fn dlq_groups(&self, batch: &str, now: Millis) -> Result<Vec<DlqGroup>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            groups(c, id, now)
        })
    }
}

/// Dead letters by error class: last 24 h, the 24 h before, all time, and
/// the failed items of the class now by tier. Read from the rollups.
pub(crate) fn groups(c: &mut Conn, id: i64, now: Millis) -> Result<Vec<DlqGroup>> {
    let hour = c.tin(now) / 3_600_000;
    let mut groups: Vec<DlqGroup> = c
        .q(
            "SELECT error_class,
                    coalesce(sum(n) FILTER (WHERE hour > $2::int8 - $3::int8), 0)::int8,
                    coalesce(sum(n) FILTER (WHERE hour > $2::int8 - 2 * $3::int8
                                              AND hour <= $2::int8 - $3::int8), 0)::int8,
                    sum(n)::int8
               FROM dlq_hourly WHERE batch_id = $1 GROUP BY error_class",
            &[&id, &hour, &DAY_HOURS],
        )?
        .iter()
        .map(|r| DlqGroup {
            error_class: r.get(0),
            last_24h: r.get(1),
            prev_24h: r.get(2),
            total: r.get(3),
            retry_now: 0,
            manual_now: 0,
        })
        .collect();
    for r in c.q(
        "SELECT error_class, tier, sum(n)::int8 FROM failed_classes WHERE batch_id = $1
          GROUP BY 1, 2 HAVING sum(n) > 0",
        &[&id],
    )? {
        let class: String = r.get(0);
        let tier: &str = r.get(1);
        let n: i64 = r.get(2);
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
