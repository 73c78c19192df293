//! Removing old history (see `store::prune`), in paced chunks. The chunks
//! that write or drop tombstones hold the tombstone lock (see
//! `pg::tombstones`), so no add runs beside them.

use std::collections::BTreeMap;

use super::PgStore;
use super::conn::Conn;
use super::tombstones;
use crate::model::{Millis, NewEvent};
use crate::store::api::PruneReport;
use crate::store::chunks::Chunks;
use crate::store::{Result, shared};

const DONE_ITEMS: &str = "FROM items WHERE status = 'done' AND updated_at < $1";
const FAILED_ITEMS: &str = "FROM items WHERE status = 'failed' AND updated_at < $1";
const EVENTS: &str = "FROM events WHERE at < $1";
const RUNS: &str = "FROM runs WHERE ended_at IS NOT NULL AND ended_at < $1";
const DEAD_LETTERS: &str = "FROM dead_letters WHERE failed_at < $1";
/// What attempts printed on stderr goes by age, as the events do.
const ATTEMPT_LOGS: &str = "FROM attempt_logs WHERE at < $1";

/// A chunk of old done items (`$1` cutoff, `$2` chunk size) deleted, and
/// their tombstones written (`$3` now), in one statement.
const PRUNE_DONE_ITEMS: &str = "WITH gone AS (
         DELETE FROM items WHERE id IN (
             SELECT id FROM items WHERE status = 'done' AND updated_at < $1 LIMIT $2)
         RETURNING batch_id, key, updated_at, outcome)
     INSERT INTO tombstones (batch_id, key, done_at, outcome, pruned_at)
     SELECT batch_id, key, updated_at, outcome, $3 FROM gone
     ON CONFLICT (batch_id, key) DO UPDATE
        SET done_at = excluded.done_at, outcome = excluded.outcome, pruned_at = excluded.pruned_at";

/// The next chunk of tombstones done before `$3` after the cursor (`$1`,
/// `$2`), at most `$4`, in key order, deleted; their keys returned.
const FORGET_AFTER: &str = "WITH picked AS (
         SELECT batch_id, key FROM tombstones
          WHERE (batch_id, key) > ($1, $2) AND done_at < $3 ORDER BY batch_id, key LIMIT $4),
     gone AS (
         DELETE FROM tombstones t USING picked p
          WHERE t.batch_id = p.batch_id AND t.key = p.key
         RETURNING t.batch_id, t.key)
     SELECT batch_id, key FROM gone ORDER BY batch_id, key";

fn count(c: &mut Conn, from: &str, cutoff: i64) -> Result<i64> {
    Ok(c.one(&format!("SELECT count(*)::int8 {from}"), &[&cutoff])?
        .get(0))
}

/// Keys `--forget-keys` would forget, by batch (see `store::prune`).
fn forgettable(c: &mut Conn, cutoff: i64) -> Result<BTreeMap<String, i64>> {
    Ok(c.q(
        "SELECT b.name, count(*)::int8 FROM (
             SELECT batch_id FROM tombstones WHERE done_at < $1
             UNION ALL SELECT batch_id FROM items WHERE status = 'done' AND updated_at < $1) x
           JOIN batches b ON b.id = x.batch_id GROUP BY b.name",
        &[&cutoff],
    )?
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect())
}

/// Runs `chunk` (given the chunk size; returns the rows it deleted) in
/// paced transactions until one deletes fewer rows than its size.
fn in_chunks(
    store: &mut PgStore,
    mut chunk: impl FnMut(&mut Conn, usize) -> Result<u64>,
) -> Result<()> {
    let mut chunks = Chunks::new(5_000);
    loop {
        let (n, size) = chunks.run(|size| (store.write(|c| chunk(c, size)), size));
        if n? < size as u64 {
            return Ok(());
        }
    }
}

impl PgStore {
    /// Deletes history older than `cutoff` (see `Store::prune`).
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
            let cutoff = c.tin(cutoff);
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
        in_chunks(self, |c, size| {
            tombstones::exclusive_lock(c)?;
            let (cutoff, at) = (c.tin(cutoff), c.tin(now));
            c.x(PRUNE_DONE_ITEMS, &[&cutoff, &(size as i64), &at])
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
            in_chunks(self, |c, size| {
                let cutoff = c.tin(cutoff);
                c.x(
                    &format!("DELETE FROM {table} WHERE id IN (SELECT id {from} LIMIT $2)"),
                    &[&cutoff, &(size as i64)],
                )
            })?;
        }
        if forget_keys {
            report.forgotten_keys = self.forget_keys(cutoff)?;
        }
        self.write(|c| {
            let cutoff = c.tin(cutoff);
            c.x(
                "DELETE FROM minute_stats WHERE minute < $1",
                &[&(cutoff / 60_000)],
            )?;
            if include_failed {
                c.x(
                    "DELETE FROM dlq_hourly WHERE hour < $1",
                    &[&(cutoff / 3_600_000)],
                )?;
            }
            super::events::insert(
                c,
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
                    c,
                    &shared::keys_forgotten_event(batch, *n, cutoff, actor, now),
                )?;
            }
            Ok(())
        })?;
        Ok(report)
    }

    /// Drops the tombstones of items done before `cutoff`, in chunks after a
    /// cursor in key order. Returns how many went, by batch.
    fn forget_keys(&mut self, cutoff: Millis) -> Result<BTreeMap<String, i64>> {
        let mut by_id: BTreeMap<i64, i64> = BTreeMap::new();
        let mut after: (i64, String) = (i64::MIN, String::new());
        let mut chunks = Chunks::new(5_000);
        loop {
            let store = &mut *self;
            let (rows, size) = chunks.run(|size| {
                let rows = store.write(|c| {
                    tombstones::exclusive_lock(c)?;
                    let cutoff = c.tin(cutoff);
                    Ok(
                        c.q(FORGET_AFTER, &[&after.0, &after.1, &cutoff, &(size as i64)])?
                            .iter()
                            .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
                            .collect::<Vec<_>>(),
                    )
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
            Ok(c.q("SELECT id, name FROM batches", &[])?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect())
        })?;
        Ok(by_id
            .into_iter()
            .filter_map(|(id, n)| names.get(&id).map(|name| (name.clone(), n)))
            .collect())
    }
}
