//! Removing old history: done items (keeping their tombstones, see
//! `tombstones`), events, runs, and (only when asked) failed items and dead
//! letters, and the tombstones of keys done before the cutoff. Deletes go
//! in paced chunks (`chunks`), so runners are not held up; each chunk of
//! done items writes their tombstones in its own transaction, so a prune
//! cut short anywhere leaves no done key forgotten.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use super::SqliteStore;
use crate::model::{Millis, NewEvent};
use crate::store::Result;
use crate::store::api::PruneReport;
use crate::store::chunks::Chunks;

const DONE_ITEMS: &str = "FROM items WHERE status = 'done' AND updated_at < ?1";
const FAILED_ITEMS: &str = "FROM items WHERE status = 'failed' AND updated_at < ?1";
const EVENTS: &str = "FROM events WHERE at < ?1";
const RUNS: &str = "FROM runs WHERE ended_at IS NOT NULL AND ended_at < ?1";
const DEAD_LETTERS: &str = "FROM dead_letters WHERE failed_at < ?1";
/// What attempts printed on stderr goes by age, as the events do.
const ATTEMPT_LOGS: &str = "FROM attempt_logs WHERE at < ?1";

/// The tombstones of a chunk of old done items (`?1` cutoff, `?2` chunk
/// size, `?3` now), then the items: the same rows, in rowid order, in one
/// transaction.
const TOMBSTONE_DONE_ITEMS: &str =
    "INSERT INTO tombstones (batch_id, key, done_at, outcome, pruned_at)
     SELECT batch_id, key, updated_at, outcome, ?3 FROM items
      WHERE status = 'done' AND updated_at < ?1 ORDER BY rowid LIMIT ?2
     ON CONFLICT (batch_id, key) DO UPDATE
        SET done_at = excluded.done_at, outcome = excluded.outcome, pruned_at = excluded.pruned_at";
const DELETE_DONE_ITEMS: &str = "DELETE FROM items WHERE rowid IN (
     SELECT rowid FROM items WHERE status = 'done' AND updated_at < ?1 ORDER BY rowid LIMIT ?2)";

/// The next chunk of tombstones to forget after the cursor (`?1`, `?2`),
/// done before `?3`, at most `?4`, in key order.
const FORGETTABLE_AFTER: &str = "SELECT batch_id, key FROM tombstones
      WHERE (batch_id, key) > (?1, ?2) AND done_at < ?3 ORDER BY batch_id, key LIMIT ?4";
/// Deletes them: from after the cursor up to the chunk's last key.
const FORGET_UP_TO: &str = "DELETE FROM tombstones
      WHERE (batch_id, key) > (?1, ?2) AND (batch_id, key) <= (?3, ?4) AND done_at < ?5";

fn count(c: &Connection, from: &str, cutoff: Millis) -> Result<i64> {
    Ok(c.query_row(&format!("SELECT count(*) {from}"), [cutoff], |r| r.get(0))?)
}

/// Keys `--forget-keys` would forget, by batch: tombstones of items done
/// before the cutoff, and the done items this prune turns into such.
fn forgettable(c: &Connection, cutoff: Millis) -> Result<BTreeMap<String, i64>> {
    let mut st = c.prepare(
        "SELECT b.name, count(*) FROM (
             SELECT batch_id FROM tombstones WHERE done_at < ?1
             UNION ALL SELECT batch_id FROM items WHERE status = 'done' AND updated_at < ?1) x
           JOIN batches b ON b.id = x.batch_id GROUP BY b.name",
    )?;
    let rows = st
        .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Runs `chunk` (given the chunk size; returns the rows it deleted) in
/// paced transactions until one deletes fewer rows than its size.
fn in_chunks(
    store: &mut SqliteStore,
    mut chunk: impl FnMut(&Connection, usize) -> Result<usize>,
) -> Result<()> {
    let mut chunks = Chunks::new(5_000);
    loop {
        let (n, size) = chunks.run(|size| (store.write(|tx| chunk(tx, size)), size));
        if n? < size {
            return Ok(());
        }
    }
}

impl SqliteStore {
    /// Deletes history older than `cutoff`. Failed items and dead letters
    /// are only deleted with `include_failed`; otherwise they are counted
    /// and reported as kept. Done items leave their tombstones; with
    /// `forget_keys`, the tombstones of items done before `cutoff` go too
    /// (adding those items again runs them again). With `dry_run`, only
    /// counts.
    pub fn prune(
        &mut self,
        cutoff: Millis,
        include_failed: bool,
        forget_keys: bool,
        dry_run: bool,
        actor: &str,
        now: Millis,
    ) -> Result<PruneReport> {
        let mut report = self.read(|c| {
            Ok(PruneReport {
                done_items: count(c, DONE_ITEMS, cutoff)?,
                events: count(c, EVENTS, cutoff)?,
                attempt_logs: count(c, ATTEMPT_LOGS, cutoff)?,
                runs: count(c, RUNS, cutoff)?,
                failed_items: count(c, FAILED_ITEMS, cutoff)?,
                dead_letters: count(c, DEAD_LETTERS, cutoff)?,
                forgotten_keys: if forget_keys {
                    forgettable(c, cutoff)?
                } else {
                    BTreeMap::new()
                },
                ..PruneReport::default()
            })
        })?;
        if !include_failed {
            report.failed_items_kept = std::mem::take(&mut report.failed_items);
            report.dead_letters_kept = std::mem::take(&mut report.dead_letters);
        }
        if dry_run {
            return Ok(report);
        }
        in_chunks(self, |tx, size| {
            tx.prepare_cached(TOMBSTONE_DONE_ITEMS)?
                .execute(params![cutoff, size as i64, now])?;
            Ok(tx
                .prepare_cached(DELETE_DONE_ITEMS)?
                .execute(params![cutoff, size as i64])?)
        })?;
        let mut targets = vec![
            ("events", EVENTS),
            ("attempt_logs", ATTEMPT_LOGS),
            ("runs", RUNS),
        ];
        if include_failed {
            targets.push(("items", FAILED_ITEMS));
            targets.push(("dead_letters", DEAD_LETTERS));
        }
        for (table, from) in targets {
            in_chunks(self, |tx, size| {
                Ok(tx.execute(
                    &format!("DELETE FROM {table} WHERE rowid IN (SELECT rowid {from} LIMIT ?2)"),
                    params![cutoff, size as i64],
                )?)
            })?;
        }
        if forget_keys {
            report.forgotten_keys = self.forget_keys(cutoff)?;
        }
        self.write(|tx| {
            tx.execute(
                "DELETE FROM minute_stats WHERE minute < ?1",
                [cutoff / 60_000],
            )?;
            if include_failed {
                tx.execute(
                    "DELETE FROM dlq_hourly WHERE hour < ?1",
                    [cutoff / 3_600_000],
                )?;
            }
            super::events::insert(
                tx,
                &NewEvent {
                    at: now,
                    kind: "pruned".into(),
                    actor: Some(actor.to_string()),
                    message: report.message(),
                    fields: serde_json::to_value(&report).ok(),
                    ..NewEvent::default()
                },
            )?;
            for (batch, n) in &report.forgotten_keys {
                super::events::insert(
                    tx,
                    &crate::store::shared::keys_forgotten_event(batch, *n, cutoff, actor, now),
                )?;
            }
            Ok(())
        })?;
        Ok(report)
    }

    /// Drops the tombstones of items done before `cutoff`, in chunks taken
    /// in key order after a cursor (each chunk finds its rows through the
    /// primary key, not by scanning from the start). Returns how many went,
    /// by batch.
    fn forget_keys(&mut self, cutoff: Millis) -> Result<BTreeMap<String, i64>> {
        let mut by_id: BTreeMap<i64, i64> = BTreeMap::new();
        let mut after: (i64, String) = (i64::MIN, String::new());
        let mut chunks = Chunks::new(5_000);
        loop {
            let store = &mut *self;
            let (rows, size) = chunks.run(|size| {
                let rows = store.write(|tx| {
                    let rows: Vec<(i64, String)> = tx
                        .prepare_cached(FORGETTABLE_AFTER)?
                        .query_map(params![after.0, after.1, cutoff, size as i64], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })?
                        .collect::<rusqlite::Result<_>>()?;
                    if let Some((id, key)) = rows.last() {
                        tx.prepare_cached(FORGET_UP_TO)?
                            .execute(params![after.0, after.1, id, key, cutoff])?;
                    }
                    Ok(rows)
                });
                (rows, size)
            });
            let rows = rows?;
            for (id, _) in &rows {
                *by_id.entry(*id).or_default() += 1;
            }
            let full = rows.len() == size;
            if let Some(last) = rows.into_iter().last() {
                after = last;
            }
            if !full {
                break;
            }
        }
        let names: BTreeMap<i64, String> = self.read(|c| {
            let mut st = c.prepare("SELECT id, name FROM batches")?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })?;
        Ok(by_id
            .into_iter()
            .filter_map(|(id, n)| names.get(&id).map(|name| (name.clone(), n)))
            .collect())
    }
}
