//! Items outside the hot paths: reads, attempts and leases of a claim.

use std::collections::HashSet;

use crate::model::waiting::RetryTier;
use crate::model::{EventKind, Item, Millis, NewEvent, SkipReport, Status};
use crate::store::api::ItemFilter;
use crate::store::dialect::Read;
use crate::store::{Refusal, Result, Store, StoreError};

impl Store {
    /// Marks items done without running them (outcome `skipped`, the reason
    /// and who in the result and a `skipped` event). Every key must exist
    /// and none may be in flight, else nothing changes; a done key is
    /// reported as already done and left as it is.
    pub fn skip(
        &mut self,
        batch: &str,
        keys: &[String],
        reason: &str,
        actor: &str,
        now: Millis,
    ) -> Result<SkipReport> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let mut found = Vec::with_capacity(keys.len());
            let mut seen = HashSet::new();
            for key in keys.iter().filter(|k| seen.insert(*k)) {
                match tx.item_status_locked(b, key)? {
                    None => return Err(missing(tx, b, batch, key)),
                    Some(Status::Claimed) => {
                        return Err(Refusal::InFlightSkip {
                            key: key.to_string(),
                        }
                        .into());
                    }
                    Some(status) => found.push((key, status == Status::Done)),
                }
            }
            let result = serde_json::json!({"skipped": reason, "by": actor}).to_string();
            let mut report = SkipReport::default();
            for (key, done) in found {
                if done {
                    report.already_done.push(key.clone());
                    continue;
                }
                tx.item_mark_skipped(b, key, &result, now)?;
                let message = format!("skipped by {actor}: {reason}");
                tx.event_insert(
                    &NewEvent::of(now, batch, EventKind::Skipped, message)
                        .key(key)
                        .actor(actor)
                        .fields(serde_json::json!({"reason": reason})),
                )?;
                report.skipped.push(key.clone());
            }
            Ok(report)
        })
    }

    /// Counts a further immediate attempt of a claimed item. `None` if the
    /// lease was lost meanwhile.
    pub fn begin_attempt(&mut self, item_id: i64, token: i64, now: Millis) -> Result<Option<u32>> {
        self.write_tx(|tx| tx.item_begin_attempt(item_id, token, now))
    }

    /// Stores the operation id a worker reported, at once, so a later
    /// attempt can resume the remote operation. False if the lease was lost.
    pub fn set_op_id(
        &mut self,
        item_id: i64,
        token: i64,
        op_id: &str,
        event: &NewEvent,
    ) -> Result<bool> {
        self.write_tx(|tx| {
            let set = tx.item_set_op_id(item_id, token, op_id)?;
            if set {
                tx.event_insert(event)?;
            }
            Ok(set)
        })
    }

    /// Extends the leases of every item `run_id` holds in `batch`; returns
    /// the ids of the items it still holds.
    pub fn renew_leases(&mut self, batch: &str, run_id: i64, until: Millis) -> Result<Vec<i64>> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.items_renew_leases(b, run_id, until)
        })
    }

    /// Retry-tier failures that are due (what a dry run would redrive).
    pub fn due_retries(&self, batch: &str, now: Millis) -> Result<Vec<Item>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.items_due_retry(b, now)
        })
    }

    /// The `retry` tier now: how many are due, how many later, and the
    /// earliest of those (what the run summary and dry run say waits).
    pub fn retry_tier(&self, batch: &str, now: Millis) -> Result<RetryTier> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.retry_tier(b, now)
        })
    }

    /// One item by key.
    pub fn item(&self, batch: &str, key: &str) -> Result<Item> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            match tx.item_by_key(b, key)? {
                Some(item) => Ok(item),
                None => Err(missing(tx, b, batch, key)),
            }
        })
    }

    /// Items of a batch in insertion order, filtered.
    pub fn items(&self, batch: &str, filter: &ItemFilter) -> Result<Vec<Item>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.items_list(b, filter)
        })
    }

    /// How many items match a filter (the dashboard's "n of m").
    pub fn count_items(&self, batch: &str, filter: &ItemFilter) -> Result<i64> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.items_count(b, filter)
        })
    }

    /// Creation time of the oldest pending item.
    pub fn oldest_pending(&self, batch: &str) -> Result<Option<Millis>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.oldest_pending(b)
        })
    }
}

/// The error for `key`, not among the batch's items: `Pruned` when its
/// tombstone says what became of it, else `UnknownKey`.
pub(super) fn missing(tx: &mut dyn Read, b: i64, batch: &str, key: &str) -> StoreError {
    match tx.item_tombstone(b, key) {
        Ok(Some(tombstone)) => StoreError::Pruned {
            batch: batch.into(),
            tombstone,
        },
        Ok(None) => StoreError::UnknownKey {
            batch: batch.into(),
            key: key.into(),
        },
        Err(e) => e,
    }
}
