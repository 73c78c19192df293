//! Removing old history: done items (keeping their tombstones), events,
//! runs, and (only when asked) failed items and dead letters, and the
//! tombstones of keys done before the cutoff. Deletes go in paced chunks
//! (`chunks`), one write transaction each, so runners are not held up.

use std::collections::BTreeMap;

use super::pools::POOL_HISTORY_MS;
use crate::model::{EventKind, Millis, NewEvent};
use crate::store::api::PruneReport;
use crate::store::chunks::Chunks;
use crate::store::dialect::{PruneTarget, Write};
use crate::store::{Result, Store};

impl Store {
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
        let mut report = self.read_tx(|tx| {
            Ok(PruneReport {
                done_items: tx.prune_count(PruneTarget::DoneItems, cutoff)?,
                events: tx.prune_count(PruneTarget::Events, cutoff)?,
                attempt_logs: tx.prune_count(PruneTarget::AttemptLogs, cutoff)?,
                runs: tx.prune_count(PruneTarget::Runs, cutoff)?,
                failed_items: tx.prune_count(PruneTarget::FailedItems, cutoff)?,
                dead_letters: tx.prune_count(PruneTarget::DeadLetters, cutoff)?,
                forgotten_keys: if forget_keys {
                    tx.prune_forgettable(cutoff)?
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
        let mut targets = vec![
            PruneTarget::DoneItems,
            PruneTarget::Events,
            PruneTarget::AttemptLogs,
            PruneTarget::Runs,
        ];
        if include_failed {
            targets.push(PruneTarget::FailedItems);
            targets.push(PruneTarget::DeadLetters);
        }
        for target in targets {
            in_chunks(self, |tx, size| {
                tx.prune_delete_chunk(target, cutoff, size, now)
            })?;
        }
        if forget_keys {
            report.forgotten_keys = self.forget_keys(cutoff)?;
        }
        self.write_tx(|tx| {
            // A pool's minutes go only once no view reads them, whatever
            // the cutoff.
            let pools_before = cutoff.min(now.saturating_sub(POOL_HISTORY_MS));
            tx.prune_rollups(cutoff, include_failed, pools_before)?;
            tx.event_insert(&NewEvent {
                at: now,
                kind: EventKind::Pruned.to_string(),
                actor: Some(actor.to_string()),
                message: report.message(),
                fields: serde_json::to_value(&report).ok(),
                ..NewEvent::default()
            })?;
            for (batch, n) in &report.forgotten_keys {
                tx.event_insert(&keys_forgotten_event(batch, *n, cutoff, actor, now))?;
            }
            Ok(())
        })?;
        Ok(report)
    }

    /// How many keys of pruned done items the batch keeps.
    pub fn pruned_keys(&self, batch: &str) -> Result<i64> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.pruned_keys(b)
        })
    }

    /// Drops the tombstones of items done before `cutoff`, in chunks taken
    /// in key order after a cursor. Returns how many went, by batch.
    fn forget_keys(&mut self, cutoff: Millis) -> Result<BTreeMap<String, i64>> {
        let mut by_id: BTreeMap<i64, i64> = BTreeMap::new();
        let mut after: (i64, String) = (i64::MIN, String::new());
        let mut chunks = Chunks::new(5_000);
        loop {
            let store = &mut *self;
            let (rows, size) = chunks.run(|size| {
                let rows = store.write_tx(|tx| tx.tombstones_forget_chunk(&after, cutoff, size));
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
        let names = self.read_tx(|tx| tx.batch_names_by_id())?;
        Ok(by_id
            .into_iter()
            .filter_map(|(id, n)| names.get(&id).map(|name| (name.clone(), n)))
            .collect())
    }
}

/// Runs `chunk` (given the chunk size; returns the rows it deleted) in
/// paced transactions until one deletes fewer rows than its size.
fn in_chunks(
    store: &mut Store,
    mut chunk: impl FnMut(&mut dyn Write, usize) -> Result<usize>,
) -> Result<()> {
    let mut chunks = Chunks::new(5_000);
    loop {
        let (n, size) = chunks.run(|size| (store.write_tx(|tx| chunk(tx, size)), size));
        if n? < size {
            return Ok(());
        }
    }
}

/// The `keys-forgotten` event of one batch: `n` tombstones dropped by
/// `prune --forget-keys`.
fn keys_forgotten_event(
    batch: &str,
    n: i64,
    done_before: Millis,
    actor: &str,
    now: Millis,
) -> NewEvent {
    let before = crate::util::time::rfc3339(done_before);
    NewEvent::new(
        now,
        batch,
        EventKind::KeysForgotten,
        format!(
            "forgot the keys of {n} pruned items done before {before}: adding them again runs them again"
        ),
    )
    .actor(actor)
    .fields(serde_json::json!({"keys": n, "done_before": before}))
}
