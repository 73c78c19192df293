//! Moving items back to pending in bulk: `requeue` (failed items, or done
//! ones of an outcome, by hand) and `redrive_due` (retry-tier failures whose
//! time came). Both run in chunks, one write transaction each, so no write
//! holds the store for long; each chunk is one `Bulk` statement set.

use super::items::missing;
use crate::model::Millis;
use crate::store::api::{Requeue, Selection};
use crate::store::chunks::Chunks;
use crate::store::dialect::Read;
use crate::store::refused::{KeyVerdicts, Why};
use crate::store::{CutShort, Refusal, Result, Store, StoreError};

/// Rows moved per write transaction by `redrive_due`, so a runner waiting
/// for the write lock is never held up for long.
const REDRIVE_CHUNK: usize = 2_000;

impl Store {
    /// Moves retry-tier failures whose next-attempt time has passed back to
    /// pending, and makes pending items whose not-before time has passed
    /// claimable: one rule for everything that waits for a time. Returns
    /// the keys of the failures moved.
    pub fn redrive_due(
        &mut self,
        batch: &str,
        run_id: Option<i64>,
        now: Millis,
    ) -> Result<Vec<String>> {
        let mut all = Vec::new();
        loop {
            let keys = self.write_tx(|tx| {
                let b = tx.batch_id(batch)?;
                let keys = tx.redrive_chunk(
                    b,
                    run_id,
                    now,
                    REDRIVE_CHUNK,
                    "redriven: retry time reached",
                )?;
                if let (Some(run), false) = (run_id, keys.is_empty()) {
                    tx.run_add_redriven(run, keys.len() as i64)?;
                }
                Ok(keys)
            })?;
            let done = keys.len() < REDRIVE_CHUNK;
            all.extend(keys);
            if done {
                break;
            }
        }
        while self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.items_release_due(b, now, REDRIVE_CHUNK)
        })? == REDRIVE_CHUNK
        {}
        Ok(all)
    }

    /// Failed items (or, with `sel.outcome`, done items of that outcome)
    /// back to pending. Explicit keys must all exist and be in that state
    /// (else nothing moves). Chunked: no write transaction holds the
    /// lock for long. With `dry_run`, only lists what would move. Stopped
    /// part-way (a full disk; a stop request, checked between chunks), it
    /// fails with `CutShort` saying how many moved: each of those has its
    /// `requeued` event, written in its chunk.
    pub fn requeue(
        &mut self,
        batch: &str,
        sel: &Selection,
        reset_attempts: bool,
        dry_run: bool,
        actor: &str,
        now: Millis,
    ) -> Result<Vec<Requeue>> {
        let matched = self.read_tx(|tx| select(tx, batch, sel))?;
        if dry_run || matched.is_empty() {
            return Ok(matched.into_iter().map(|(_, r)| r).collect());
        }
        self.requeue_chunks(batch, sel, matched, reset_attempts, actor, now)
    }

    /// [`Store::requeue`] that says only how many items it moved, for a
    /// caller that shows no list: without keys named, the items are found
    /// by id alone, no row read (at 100,000 failed items, a tenth of the
    /// requeue went to reading their keys and labels).
    pub fn requeue_counted(
        &mut self,
        batch: &str,
        sel: &Selection,
        reset_attempts: bool,
        actor: &str,
        now: Millis,
    ) -> Result<usize> {
        let matched = self.read_tx(|tx| {
            if sel.keys.is_empty() {
                let mut ids = select_ids(tx, batch, sel)?;
                ids.sort_unstable();
                Ok(ids.into_iter().map(|id| (id, ())).collect())
            } else {
                let named = select(tx, batch, sel)?;
                Ok(named
                    .into_iter()
                    .map(|(id, _)| (id, ()))
                    .collect::<Vec<_>>())
            }
        })?;
        if matched.is_empty() {
            return Ok(0);
        }
        let moved = self.requeue_chunks(batch, sel, matched, reset_attempts, actor, now)?;
        Ok(moved.len())
    }

    /// Moves the `matched` items (by id, each with what is returned of it
    /// when it moved) in chunks. On SQLite, chunks paced to hold the write
    /// lock for about 20 ms while a runner is live, long ones while none
    /// is, as `add_items`. PostgreSQL has no single write lock to share.
    fn requeue_chunks<R>(
        &mut self,
        batch: &str,
        sel: &Selection,
        matched: Vec<(i64, R)>,
        reset_attempts: bool,
        actor: &str,
        now: Millis,
    ) -> Result<Vec<R>> {
        let mut moved = Vec::with_capacity(matched.len());
        let mut chunks = if self.single_writer() {
            let live = self.read_tx(|tx| tx.any_live_seat(crate::util::time::now_ms()));
            Chunks::for_update(live.unwrap_or(true))
        } else {
            Chunks::new(1_000)
        };
        let total = matched.len();
        // Many commits: their checkpoints run beside them.
        self.with_checkpoints_beside(|store| {
            // Taken by value, chunk by chunk: the moved ones are returned
            // without a copy.
            let mut rest = matched.into_iter();
            while rest.len() > 0 {
                if let Some(signal) = store.stop_requested() {
                    let cause = StoreError::Interrupted(signal);
                    return Err(requeue_cut_short(sel, moved.len(), total, cause));
                }
                if store.single_writer() {
                    let live = store.read_tx(|tx| tx.any_live_seat(crate::util::time::now_ms()));
                    chunks.requeue_pace(live.unwrap_or(true));
                }
                let step = chunks.run(|size| -> Result<()> {
                    let chunk: Vec<(i64, R)> = rest.by_ref().take(size).collect();
                    // In id order (the events' order), whatever the keys' order.
                    let mut ids: Vec<i64> = chunk.iter().map(|(id, _)| *id).collect();
                    ids.sort_unstable();
                    let done = store.write_tx(|tx| {
                        let b = tx.batch_id(batch)?;
                        tx.requeue_chunk(b, sel, &ids, reset_attempts, actor, now)
                    })?;
                    moved.extend(
                        chunk
                            .into_iter()
                            .filter(|(id, _)| done.contains(id))
                            .map(|(_, r)| r),
                    );
                    Ok(())
                });
                if let Err(cause) = step {
                    return Err(requeue_cut_short(sel, moved.len(), total, cause));
                }
            }
            Ok(moved)
        })
    }
}

/// The ids of the items `sel` matches, without keys named.
fn select_ids(tx: &mut dyn Read, batch: &str, sel: &Selection) -> Result<Vec<i64>> {
    let b = tx.batch_id(batch)?;
    check_filters(sel)?;
    no_selection(sel)?;
    tx.ids_for_requeue(b, sel)
}

/// Refuses a requeue without keys that names no items either.
fn no_selection(sel: &Selection) -> Result<()> {
    if sel.stale.is_none()
        && sel.class.is_none()
        && sel.tier.is_none()
        && !sel.all_failed
        && sel.outcome.is_none()
    {
        return Err(Refusal::NoSelection.into());
    }
    Ok(())
}

/// The items `sel` names or matches, by id.
fn select(tx: &mut dyn Read, batch: &str, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
    let b = tx.batch_id(batch)?;
    check_filters(sel)?;
    if !sel.keys.is_empty() {
        let mut named = Named {
            taken: Vec::new(),
            verdicts: KeyVerdicts::new(batch, "requeued"),
        };
        // A key named twice (`requeue b k1 k1`, a list pasted twice) is
        // one item, moved once.
        let mut seen = std::collections::HashSet::new();
        for key in sel.keys.iter().filter(|k| seen.insert(k.as_str())) {
            match tx.item_for_requeue(b, key)? {
                Some((item, r, status)) => named.add(sel, item, r, &status),
                None => named.verdicts.missing(missing(tx, b, batch, key))?,
            }
        }
        named.verdicts.finish()?;
        return Ok(named.taken);
    }
    no_selection(sel)?;
    // Sorted here rather than by an ORDER BY: SQLite found the rows through
    // the queue index and sorted them in a temporary b-tree, which took
    // longer than finding them (0.1 s at 100,000 failed items).
    let mut rows = tx.items_for_requeue(b, sel)?;
    rows.sort_unstable_by_key(|(id, _)| *id);
    Ok(rows)
}

/// A requeue by key: each named item is taken, or refused, when missing,
/// not in the state the selection moves, or left out by its `--class` or
/// `--tier`. One refused item refuses the whole requeue, every refused
/// key said at once: a key named is moved or said why not, never passed
/// over in silence.
struct Named {
    taken: Vec<(i64, Requeue)>,
    verdicts: KeyVerdicts,
}

impl Named {
    /// Judges the item with `status` (as stored) that `key` named.
    fn add(&mut self, sel: &Selection, item_id: i64, r: Requeue, status: &str) {
        let movable = match sel.outcome {
            Some(o) => status == "done" && r.outcome == Some(o),
            None => status == "failed",
        };
        if !movable {
            let what = match r.outcome {
                Some(o) if status == "done" && o != crate::model::Outcome::Done => {
                    format!("{status}/{o}")
                }
                _ => status.to_string(),
            };
            match sel.outcome {
                Some(o) => self.verdicts.refuse(
                    Why::NotOfOutcome,
                    || format!("not done/{o}"),
                    Some(format!(
                        "--outcome {o} requeues done items with that outcome"
                    )),
                    &r.key,
                    Some(what),
                ),
                None => self.verdicts.refuse(
                    Why::NotFailed,
                    || "not failed".into(),
                    Some(
                        "only failed items are requeued; done ones run again with --outcome \
                         done|empty|skipped"
                            .into(),
                    ),
                    &r.key,
                    Some(what),
                ),
            }
            return;
        }
        let mut why = Vec::new();
        if sel.tier.is_some() && r.tier != sel.tier {
            why.push(match r.tier {
                Some(t) => format!("{t} tier"),
                None => "no tier".into(),
            });
        }
        if sel.class.is_some() && r.error_class != sel.class {
            why.push(match &r.error_class {
                Some(c) => format!("class {c}"),
                None => "no class".into(),
            });
        }
        if why.is_empty() {
            self.taken.push((item_id, r));
        } else {
            let filters = filters_named(sel);
            self.verdicts.refuse(
                Why::LeftOut,
                || format!("left out by {filters}"),
                Some(format!("each key named must match {filters} too")),
                &r.key,
                Some(why.join(", ")),
            );
        }
    }
}

/// The `--class` and `--tier` of a selection, as typed: "--class X --tier retry".
fn filters_named(sel: &Selection) -> String {
    let mut named = Vec::new();
    if let Some(c) = &sel.class {
        named.push(format!("--class {c}"));
    }
    if let Some(t) = sel.tier {
        named.push(format!("--tier {t}"));
    }
    named.join(" ")
}

/// Filters that cannot go together, with keys or without.
fn check_filters(sel: &Selection) -> Result<(), StoreError> {
    if sel.stale.is_some()
        && (!sel.keys.is_empty()
            || sel.outcome.is_some()
            || sel.class.is_some()
            || sel.tier.is_some()
            || sel.all_failed)
    {
        return Err(Refusal::StaleWithFilters.into());
    }
    if sel.outcome.is_some() && (sel.class.is_some() || sel.tier.is_some() || sel.all_failed) {
        return Err(Refusal::OutcomeWithFilters.into());
    }
    Ok(())
}

/// The error of a requeue whose chunks stopped after `moved` of `total`
/// items, or `cause` itself when nothing had moved. Each moved item has
/// its `requeued` event, written with it.
fn requeue_cut_short(sel: &Selection, moved: usize, total: usize, cause: StoreError) -> StoreError {
    if moved == 0 {
        return cause;
    }
    // A requeue by key refuses keys that are no longer failed.
    let state = match sel.outcome {
        Some(o) => format!("{o}"),
        None => "failed".into(),
    };
    let next = if sel.keys.is_empty() {
        "run it again for the rest".to_string()
    } else {
        format!(
            "the rest are still {state}: requeue them by key again, leaving out those now pending"
        )
    };
    StoreError::CutShort(Box::new(CutShort {
        done: moved as u64,
        total: total as u64,
        what: format!("{state} items requeued"),
        next,
        cause,
        unlogged: None,
    }))
}
