//! Statements on dead letters and their rollups.

use super::sql::{self, Arg, Row, Sql, Texts};
use crate::model::{DeadLetter, DlqGroup, FailedAttempt, Millis, Tier};
use crate::store::Result;
use crate::store::api::Failure;
use crate::store::rows::dead_letter_columns;
use crate::util::json_text::JsonText;

fn dead_letter_from_row(r: &dyn Row) -> Result<DeadLetter> {
    let payload = r.text(4)?;
    Ok(DeadLetter {
        id: r.int(0)?,
        batch: r.text(1)?,
        key: r.text(2)?,
        label: r.text(3)?,
        payload: JsonText::stored(&payload),
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
/// An item's failed attempts retried at once, in the same claim: they end
/// no claim, so they leave no dead letter, only their `retry` event.
const RETRIED_OF_ITEM: &str = "SELECT at, run_id, fields, message FROM events
  WHERE item_id = ?1 AND kind = 'retry' ORDER BY id DESC";
/// The dead letter copied from its item row (the payload too, for the
/// dashboard's detail).
const DEAD_LETTER_INSERT: &str =
    "INSERT INTO dead_letters (batch_id, item_id, key, label, payload, error_class,
                           message, attempt, failed_at, tier, run_id)
 SELECT batch_id, id, key, label, payload, ?2, ?3, attempts, ?4, ?5, ?6
   FROM items WHERE id = ?1";

/// `(class, in (now - window, now], in the window before)`.
const WINDOW_COUNTS: Texts = Texts {
    sqlite: "SELECT error_class, sum(failed_at > ?2 - ?3), sum(failed_at <= ?2 - ?3)
       FROM dead_letters
      WHERE batch_id = ?1 AND failed_at > ?2 - 2 * ?3 AND failed_at <= ?2
      GROUP BY error_class",
    pg: "SELECT error_class,
        count(*) FILTER (WHERE failed_at > ?2::int8 - ?3::int8)::int8,
        count(*) FILTER (WHERE failed_at <= ?2::int8 - ?3::int8)::int8
   FROM dead_letters
  WHERE batch_id = ?1 AND failed_at > ?2::int8 - 2 * ?3::int8
    AND failed_at <= ?2::int8
  GROUP BY error_class",
};
/// Per class: the last `?3` hours up to the hour of `?2` (a time), the
/// `?3` before, all time.
const HOURLY: Texts = Texts {
    sqlite: "SELECT error_class,
        sum(CASE WHEN hour > ?2 / 3600000 - ?3 THEN n ELSE 0 END),
        sum(CASE WHEN hour > ?2 / 3600000 - 2 * ?3 AND hour <= ?2 / 3600000 - ?3
                 THEN n ELSE 0 END),
        sum(n)
   FROM dlq_hourly WHERE batch_id = ?1 GROUP BY error_class",
    pg: "SELECT error_class,
        coalesce(sum(n) FILTER (WHERE hour > ?2::int8 / 3600000 - ?3::int8), 0)::int8,
        coalesce(sum(n) FILTER (WHERE hour > ?2::int8 / 3600000 - 2 * ?3::int8
                                  AND hour <= ?2::int8 / 3600000 - ?3::int8), 0)::int8,
        sum(n)::int8
   FROM dlq_hourly WHERE batch_id = ?1 GROUP BY error_class",
};
/// Per class, the dead letters of the hour in which the window `?4`
/// windows of `?3` hours back from `?2` begins, after its start: the
/// rollups count that hour whole, in the window before. An index range
/// of at most an hour.
const EDGE: Texts = Texts {
    sqlite: "SELECT error_class, count(*) FROM dead_letters
  WHERE batch_id = ?1 AND failed_at > ?2 - ?4 * ?3 * 3600000
    AND failed_at < (?2 / 3600000 - ?4 * ?3 + 1) * 3600000
  GROUP BY error_class",
    pg: "SELECT error_class, count(*)::int8 FROM dead_letters
  WHERE batch_id = ?1 AND failed_at > ?2::int8 - ?4::int8 * ?3::int8 * 3600000
    AND failed_at < (?2::int8 / 3600000 - ?4::int8 * ?3::int8 + 1) * 3600000
  GROUP BY error_class",
};
/// PostgreSQL sums the shards of a class's count.
const FAILED_CLASSES: Texts = Texts {
    sqlite: "SELECT error_class, tier, n FROM failed_classes WHERE batch_id = ?1 AND n > 0",
    pg: "SELECT error_class, tier, sum(n)::int8 FROM failed_classes
  WHERE batch_id = ?1 GROUP BY 1, 2 HAVING sum(n) > 0",
};

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

    /// Every failed attempt of one item retried at once, newest first, as
    /// its `retry` event says it (the event's words where a field is
    /// missing).
    fn retried_of_item(&mut self, item: i64) -> Result<Vec<FailedAttempt>> {
        sql::all(self, RETRIED_OF_ITEM, &[Arg::Int(item)], |r| {
            let fields: serde_json::Value = r
                .opt_text(2)?
                .and_then(|f| serde_json::from_str(&f).ok())
                .unwrap_or_default();
            let text = |k: &str| fields[k].as_str().map(str::to_string);
            Ok(FailedAttempt {
                attempt: fields["attempt"].as_u64().unwrap_or_default() as u32,
                failed_at: r.time(0)?,
                error_class: text("error_class").unwrap_or_default(),
                message: text("message").map_or_else(|| r.text(3), Ok)?,
                tier: None,
                run_id: r.opt_int(1)?,
            })
        })
    }

    /// `(class, in (now - window, now], in the window before)`, read from the
    /// dead letters themselves.
    fn dlq_window_counts(
        &mut self,
        batch: i64,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>> {
        let args = [Arg::Int(batch), Arg::Time(now), Arg::Int(window)];
        let sql = self.text_of(&WINDOW_COUNTS);
        sql::all(self, sql, &args, |r| Ok((r.text(0)?, r.int(1)?, r.int(2)?)))
    }

    /// Per class from the hourly rollups: the last `hours` up to the hour of
    /// `now`, the `hours` before, and all time (the `_now` counts zero).
    fn dlq_hourly(&mut self, batch: i64, now: Millis, hours: i64) -> Result<Vec<DlqGroup>> {
        let args = [Arg::Int(batch), Arg::Time(now), Arg::Int(hours)];
        let sql = self.text_of(&HOURLY);
        sql::all(self, sql, &args, |r| {
            Ok(DlqGroup {
                error_class: r.text(0)?,
                last_24h: r.int(1)?,
                prev_24h: r.int(2)?,
                total: r.int(3)?,
                retry_now: 0,
                manual_now: 0,
            })
        })
    }

    /// Per class, the dead letters in the first hour of the window that
    /// begins `windows` windows of `hours` back from `now`, after its
    /// start (see `EDGE`).
    fn dlq_edge(
        &mut self,
        batch: i64,
        now: Millis,
        hours: i64,
        windows: i64,
    ) -> Result<Vec<(String, i64)>> {
        let args = [
            Arg::Int(batch),
            Arg::Time(now),
            Arg::Int(hours),
            Arg::Int(windows),
        ];
        let sql = self.text_of(&EDGE);
        sql::all(self, sql, &args, |r| Ok((r.text(0)?, r.int(1)?)))
    }

    /// `(class, tier, n)` of the failed items now, each pair once, `n > 0`.
    fn failed_classes(&mut self, batch: i64) -> Result<Vec<(String, Tier, i64)>> {
        let sql = self.text_of(&FAILED_CLASSES);
        sql::all(self, sql, &[Arg::Int(batch)], |r| {
            Ok((r.text(0)?, sql::parsed(r, 1)?, r.int(2)?))
        })
    }
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

impl<T: Sql + ?Sized> DeadLettersRead for T {}
impl<T: Sql + ?Sized> DeadLettersWrite for T {}
