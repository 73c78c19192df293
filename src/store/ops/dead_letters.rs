//! Dead letters: an append-only record each time an item lands in `failed`.

use crate::model::{DeadLetter, DlqGroup, FailedAttempt, Millis, Tier};
use crate::store::dialect::{DeadLettersRead, Read};
use crate::store::{Result, Store};

/// The rollups' window: a day of hours.
const DAY_HOURS: i64 = 24;

impl Store {
    /// Dead letters of a batch since `since` (all when `None`), oldest first.
    pub fn dead_letters(
        &self,
        batch: &str,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.dead_letters_since(b, since, class)
        })
    }

    /// Every failed attempt of one item, newest first.
    pub fn item_failures(&self, item_id: i64) -> Result<Vec<FailedAttempt>> {
        self.read_tx(|tx| failed_attempts(tx, item_id))
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
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.dlq_window_counts(b, now, window)
        })
    }

    /// Dead letters by error class: last 24 h, the 24 h before, all time,
    /// and how many items of the class are failed now by tier. Read from
    /// rollups, so the cost does not grow with the number of dead letters.
    pub fn dlq_groups(&self, batch: &str, now: Millis) -> Result<Vec<DlqGroup>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            groups(tx, b, now)
        })
    }
}

/// Dead letters by error class (see [`Store::dlq_groups`]), the busiest of
/// the last day first, then the most failed now, then by name; also read
/// by each dialect's dashboard.
pub(crate) fn groups(
    tx: &mut dyn DeadLettersRead,
    batch: i64,
    now: Millis,
) -> Result<Vec<DlqGroup>> {
    let mut groups = tx.dlq_hourly(batch, now, DAY_HOURS)?;
    // The rollups count whole hours: the hour in which each window begins
    // is counted whole in the window before. What of it lies inside the
    // window is read exactly, so a failure 23h50m ago is in the last 24 h,
    // as `dlq --since 24h` counts it.
    for (class, n) in tx.dlq_edge(batch, now, DAY_HOURS, 1)? {
        if let Some(g) = groups.iter_mut().find(|g| g.error_class == class) {
            g.last_24h += n;
            g.prev_24h = (g.prev_24h - n).max(0);
        }
    }
    for (class, n) in tx.dlq_edge(batch, now, DAY_HOURS, 2)? {
        if let Some(g) = groups.iter_mut().find(|g| g.error_class == class) {
            g.prev_24h += n;
        }
    }
    for (class, tier, n) in tx.failed_classes(batch)? {
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
        match tier {
            Tier::Retry => groups[pos].retry_now += n,
            Tier::Manual => groups[pos].manual_now += n,
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

/// Every failed attempt of one item, newest first: those that ended a
/// claim (its dead letters) and those retried at once (their `retry`
/// events), as `show` and the dashboard's item detail list them.
pub(super) fn failed_attempts(tx: &mut dyn Read, item: i64) -> Result<Vec<FailedAttempt>> {
    let mut all: Vec<FailedAttempt> = tx
        .dead_letters_of_item(item)?
        .into_iter()
        .map(FailedAttempt::from)
        .collect();
    all.extend(tx.retried_of_item(item)?);
    all.sort_by_key(|f| std::cmp::Reverse((f.failed_at, f.attempt)));
    Ok(all)
}
