//! The counters of the hot statements that count themselves (schema
//! version 18): a claim and a done mark flip `items.self_counted` on the
//! rows they change, which the per-row triggers pass over, and count the
//! whole statement here instead, one `counts` update per bucket and one
//! `minute_stats` upsert per minute rather than two or four statements
//! of a trigger per row. A requeue chunk (version 19) counts itself the
//! same way, the failed items by class and tier with it. Whatever else
//! writes an item is counted by the triggers, as before.

use rusqlite::{Connection, params};

use crate::model::Millis;
use crate::store::Result;

/// Adds ?3 (negative: takes) to bucket ?2 of batch ?1.
const ADD: &str = "UPDATE counts SET n = n + ?3 WHERE batch_id = ?1 AND bucket = ?2";

/// Adds ?3 worker completions done in minute ?2 of batch ?1.
const DONE_IN_MINUTE: &str = "INSERT INTO minute_stats (batch_id, minute, done, failed)
     VALUES (?1, ?2, ?3, 0)
     ON CONFLICT (batch_id, minute) DO UPDATE SET done = done + excluded.done";

fn add(tx: &Connection, batch: i64, bucket: &str, n: i64) -> Result<()> {
    if n != 0 {
        tx.prepare_cached(ADD)?.execute(params![batch, bucket, n])?;
    }
    Ok(())
}

/// `n` items of `batch` claimed by one statement: pending to claimed.
pub(super) fn claimed(tx: &Connection, batch: i64, n: i64) -> Result<()> {
    add(tx, batch, "pending", -n)?;
    add(tx, batch, "claimed", n)
}

/// One item a done mark moved from claimed to done: its batch, its
/// outcome (the bucket it now counts in) and when (`updated_at`).
pub(super) struct Marked<'a> {
    pub batch: i64,
    pub outcome: &'a str,
    pub at: Millis,
}

/// The items one done mark moved (each listed once): out of `claimed`,
/// into their outcome's bucket and their minute's completions.
pub(super) fn done(tx: &Connection, marked: &[Marked<'_>]) -> Result<()> {
    // Nearly always one batch, one or two outcomes and one minute: sums
    // kept in short lists, in the order first seen.
    let mut buckets: Vec<(i64, &str, i64)> = Vec::new();
    let mut minutes: Vec<(i64, i64, i64)> = Vec::new();
    for m in marked {
        bump(&mut buckets, (m.batch, "claimed"), -1);
        bump(&mut buckets, (m.batch, m.outcome), 1);
        bump(&mut minutes, (m.batch, m.at / 60_000), 1);
    }
    for (batch, bucket, n) in buckets {
        add(tx, batch, bucket, n)?;
    }
    let mut st = tx.prepare_cached(DONE_IN_MINUTE)?;
    for (batch, minute, n) in minutes {
        st.execute(params![batch, minute, n])?;
    }
    Ok(())
}

/// What a requeue chunk moves to pending, summed by where it was: its
/// bucket and, for a failed one, its class and tier.
#[derive(Default)]
pub(super) struct Left {
    buckets: Vec<(String, i64)>,
    failed: Vec<(String, String, i64)>,
}

impl Left {
    /// One item leaving `bucket` (as `schema::bucket!` reads it); a failed
    /// one also its class (`tier`: its tier, None unless failed).
    pub(super) fn add(&mut self, bucket: &str, tier: Option<&str>, class: Option<&str>) {
        match self.buckets.iter_mut().find(|b| b.0 == bucket) {
            Some(b) => b.1 += 1,
            None => self.buckets.push((bucket.to_string(), 1)),
        }
        if let (Some(tier), Some(class)) = (tier, class) {
            match self.failed.iter_mut().find(|f| f.0 == class && f.1 == tier) {
                Some(f) => f.2 += 1,
                None => self.failed.push((class.to_string(), tier.to_string(), 1)),
            }
        }
    }

    pub(super) fn total(&self) -> i64 {
        self.buckets.iter().map(|b| b.1).sum()
    }
}

/// The items of `batch` one requeue chunk moved to pending (`left`): out
/// of their buckets and failed classes, into pending.
pub(super) fn requeued(tx: &Connection, batch: i64, left: &Left) -> Result<()> {
    for (bucket, n) in &left.buckets {
        add(tx, batch, bucket, -n)?;
    }
    add(tx, batch, "pending", left.total())?;
    let mut st = tx.prepare_cached(
        "UPDATE failed_classes SET n = n - ?4 WHERE batch_id = ?1 AND error_class = ?2 AND tier = ?3",
    )?;
    for (class, tier, n) in &left.failed {
        st.execute(params![batch, class, tier, n])?;
    }
    Ok(())
}

/// The triggers off on a connection while a statement set that counts
/// itself runs (a requeue chunk), on again when dropped. They would pass
/// over its rows anyway (`self_counted`), but a trigger that does nothing
/// still costs its OLD and NEW rows, built for each row it is asked
/// about: a sixth of a requeue's update. SQLite decides on triggers when
/// it prepares a statement, so each switch has the cached statements
/// prepared again (a few per chunk); the hot paths of a run, one item at
/// a time, keep theirs.
pub(super) struct TriggersOff<'c>(&'c Connection);

impl<'c> TriggersOff<'c> {
    pub(super) fn new(conn: &'c Connection) -> Result<TriggersOff<'c>> {
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
            false,
        )?;
        Ok(TriggersOff(conn))
    }
}

impl Drop for TriggersOff<'_> {
    fn drop(&mut self) {
        // Failing, the connection would count nothing from here on: it
        // cannot be let go on.
        self.0
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
                true,
            )
            .expect("switching SQLite's triggers back on");
    }
}

/// Adds `n` to the sum of `key` in `sums`, appending it if new.
fn bump<K: PartialEq + Copy>(sums: &mut Vec<(i64, K, i64)>, key: (i64, K), n: i64) {
    match sums.iter_mut().find(|s| (s.0, s.1) == key) {
        Some(s) => s.2 += n,
        None => sums.push((key.0, key.1, n)),
    }
}
