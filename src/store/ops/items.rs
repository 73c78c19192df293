//! Items outside the hot paths: reads, attempts and leases of a claim,
//! its end in failure or release, a claim by key, and skip.

use std::collections::HashSet;

use crate::model::waiting::{RetryTier, RetryWaits, WaitReason, claim_wait};
use crate::model::{
    AddOrder, AddReport, Claim, EventKind, Item, Millis, NewEvent, NewItem, SkipReport, Status,
};
use crate::store::api::{Failure, ItemFilter, Retrying};
use crate::store::dialect::{Read, Write};
use crate::store::refused::{KeyVerdicts, Why};
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
            let live = live_runs(tx, b, batch, now)?;
            let found = skip_plan(batch, keys, |key| match tx.item_status_locked(b, key)? {
                Some(Status::Claimed) => claim_status(tx, b, batch, key, &live, now),
                Some(status) => Ok(Standing::Free(status)),
                None => Err(missing(tx, b, batch, key)),
            })?;
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
                    &NewEvent::new(now, batch, EventKind::Skipped, message)
                        .key(key)
                        .actor(actor)
                        .fields(serde_json::json!({"reason": reason})),
                )?;
                report.skipped.push(key.clone());
            }
            Ok(report)
        })
    }

    /// Ends a claim in `failed` with a tier, appending a dead letter. False
    /// (and nothing written) if the lease token no longer matches.
    pub fn fail(&mut self, f: &Failure<'_>, event: &NewEvent) -> Result<bool> {
        self.write_tx(|tx| fail_in(tx, f, event))
    }

    /// Gives a claimed item back to pending (a graceful stop). With
    /// `cut_short`, the attempt in progress was stopped by the runner itself
    /// before any verdict and is not counted: otherwise an item stopped on
    /// its last attempt would run past `max_attempts` next time. False if
    /// the lease was lost meanwhile.
    pub fn release(
        &mut self,
        item_id: i64,
        token: i64,
        run_id: i64,
        cut_short: bool,
        event: &NewEvent,
    ) -> Result<bool> {
        self.write_tx(|tx| {
            let released = tx.item_release(item_id, token, cut_short, event.at)?;
            if released {
                tx.run_count_released(run_id)?;
                tx.event_insert(event)?;
            }
            Ok(released)
        })
    }

    /// Claims one named item (`run --key`): pending, or failed (run again
    /// now, whatever its tier). A done or in-flight item is refused.
    pub fn claim_key(
        &mut self,
        batch: &str,
        key: &str,
        run_id: i64,
        lease_until: Millis,
        now: Millis,
    ) -> Result<Claim> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            if !tx.seat_held_locked(b, run_id)? {
                return Err(Refusal::SeatLost {
                    run: run_id,
                    batch: batch.to_string(),
                }
                .into());
            }
            match tx.item_status_locked(b, key)? {
                None => return Err(missing(tx, b, batch, key)),
                Some(Status::Done) => {
                    return Err(Refusal::AlreadyDone {
                        key: key.to_string(),
                    }
                    .into());
                }
                Some(Status::Claimed) => {
                    return Err(Refusal::InFlightClaim {
                        key: key.to_string(),
                    }
                    .into());
                }
                Some(_) => {}
            }
            let claim = tx.item_claim_by_key(b, key, run_id, lease_until, now)?;
            let message = format!("claimed (attempt {}, by key)", claim.attempt);
            tx.event_insert(
                &NewEvent::new(now, batch, EventKind::Claimed, message)
                    .run(run_id)
                    .key(key),
            )?;
            Ok(claim)
        })
    }

    /// What [`Store::skip`] would do, changing nothing: the same refusals,
    /// and the keys it would mark (`skipped`) and those done already.
    pub fn skip_dry_run(&self, batch: &str, keys: &[String], now: Millis) -> Result<SkipReport> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let live = live_runs(tx, b, batch, now)?;
            let found = skip_plan(batch, keys, |key| match tx.item_by_key(b, key)? {
                Some(item) if item.status == Status::Claimed => {
                    claim_status(tx, b, batch, key, &live, now)
                }
                Some(item) => Ok(Standing::Free(item.status)),
                None => Err(missing(tx, b, batch, key)),
            })?;
            let mut report = SkipReport::default();
            for (key, done) in found {
                let list = if done {
                    &mut report.already_done
                } else {
                    &mut report.skipped
                };
                list.push(key.clone());
            }
            Ok(report)
        })
    }

    /// What `add` would do, changing nothing: which keys are new, which
    /// present (as items, or as tombstones of pruned ones).
    pub fn add_dry_run(&self, batch: &str, items: &[NewItem]) -> Result<AddReport> {
        self.read_tx(|tx| {
            // What the add would give them, as its report says it.
            let mut report = AddReport {
                order: AddOrder::of(items),
                ..AddReport::default()
            };
            let Some(b) = tx.batch_seen(batch)? else {
                report.added = items.len() as u64;
                return Ok(report);
            };
            for item in items {
                // The key it is stored under: its written form, where an
                // item was added under that before keys were composed.
                let mut key = item.key.as_str();
                if let Some(written) = item.written_key.as_deref()
                    && tx.item_by_key(b, key)?.is_none()
                    && tx.item_tombstone(b, key)?.is_none()
                {
                    key = written;
                }
                if tx.item_by_key(b, key)?.is_some() {
                    report.present += 1;
                } else if let Some(t) = tx.item_tombstone(b, key)? {
                    report.count_pruned(t.pruned_at);
                } else {
                    report.added += 1;
                }
            }
            Ok(report)
        })
    }

    /// The key under which `batch` holds the item (or a pruned one's
    /// tombstone) that a person named `name`: the first of its forms
    /// (`key::stored_forms`: as given, composed, decomposed) the batch
    /// holds. So an item is found by its key in either Unicode form, both
    /// when `add` stored it composed and when an older version stored it as
    /// written. `None`: no form is held (or the batch is not seen).
    pub fn held_key(&self, batch: &str, name: &str) -> Result<Option<String>> {
        self.read_tx(|tx| {
            let Some(b) = tx.batch_seen(batch)? else {
                return Ok(None);
            };
            for form in crate::key::stored_forms(name) {
                if tx.item_by_key(b, &form)?.is_some() || tx.item_tombstone(b, &form)?.is_some() {
                    return Ok(Some(form));
                }
            }
            Ok(None)
        })
    }

    /// `items`, each whose written key (`NewItem::written_key`) the batch
    /// holds (an item, or a pruned one's tombstone) and its composed key
    /// not, keyed by that written form: an item added under it before keys
    /// were composed is the same item, present, not one to add and run
    /// again. `None` when no item has a written key apart (nearly every
    /// add: nothing is read then).
    pub fn keyed_as_written(&self, batch: &str, items: &[NewItem]) -> Result<Option<Vec<NewItem>>> {
        if items.iter().all(|i| i.written_key.is_none()) {
            return Ok(None);
        }
        self.read_tx(|tx| {
            let Some(b) = tx.batch_seen(batch)? else {
                return Ok(None);
            };
            let mut out = items.to_vec();
            for item in &mut out {
                let Some(written) = item.written_key.take() else {
                    continue;
                };
                let composed_held = tx.item_by_key(b, &item.key)?.is_some()
                    || tx.item_tombstone(b, &item.key)?.is_some();
                if !composed_held
                    && (tx.item_by_key(b, &written)?.is_some()
                        || tx.item_tombstone(b, &written)?.is_some())
                {
                    item.key = written;
                }
            }
            Ok(Some(out))
        })
    }

    /// The items a prune with this `cutoff` would delete: done ones, and
    /// failed ones when `include_failed`.
    pub fn prunable_items(&self, cutoff: Millis, include_failed: bool) -> Result<Vec<Item>> {
        self.read_tx(|tx| tx.items_older_than(cutoff, include_failed))
    }

    /// Counts a further immediate attempt of a claimed item. `None` if the
    /// lease was lost meanwhile.
    pub fn begin_attempt(&mut self, item_id: i64, token: i64, now: Millis) -> Result<Option<u32>> {
        self.write_tx(|tx| tx.item_begin_attempt(item_id, token, now))
    }

    /// Records that a claimed item's attempt failed and runs again at
    /// `r.at` (with its error, so every view says what it waits for), and
    /// its `retry` event. False if the claim is no longer ours (its lease
    /// lost, or a cancel asked of it): no event then, only its cost.
    pub fn await_retry(&mut self, r: &Retrying<'_>, event: &NewEvent) -> Result<bool> {
        self.write_tx(|tx| {
            let held = tx.item_awaits_retry(r)?;
            if let Some(cost) = r.cost {
                cost_in(tx, r.item_id, r.run_id, cost)?;
            }
            // A claim no longer ours (another run holds it, or a cancel was
            // asked) waits for no retry of ours: no event promises one.
            if held {
                tx.event_insert(event)?;
            }
            Ok(held)
        })
    }

    /// Counts the cost of an attempt the runner stopped before its answer
    /// (a cancel, a stop, its lease lost) on its item and its run: the
    /// call was paid all the same, whoever holds the item now.
    pub fn count_cost(&mut self, item_id: i64, run_id: i64, cost: f64) -> Result<()> {
        self.write_tx(|tx| cost_in(tx, item_id, run_id, cost))
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

    /// The `retry` tier now: how many are due, how many later, and the
    /// earliest of those (what the run summary and dry run say waits).
    pub fn retry_tier(&self, batch: &str, now: Millis) -> Result<RetryTier> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            retry_tier(tx, b, now)
        })
    }

    /// Claimed items of the batch whose calls their pool deferred: they
    /// wait for a place, they are not in flight.
    pub fn pool_waiting(&self, batch: &str) -> Result<i64> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.pool_waiting(b)
        })
    }

    /// Claimed items of the batch leased to runs other than `live` (those
    /// holding a live seat): nothing works them (see `liveness::runners`).
    pub fn orphaned_claims(&self, batch: &str, live: &[i64]) -> Result<i64> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            Ok(tx.claimed_attempts(b, live)?.iter().map(|(_, n)| n).sum())
        })
    }

    /// Claimed items of the batch whose failed attempt runs again after
    /// `now`: they wait to retry, they are not in flight.
    pub fn retry_waiting(&self, batch: &str, now: Millis) -> Result<RetryWaits> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.retry_waiting(b, now)
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

    /// Is the item `key` claimed by a run whose runner is live (it has
    /// one to finish it)? `run --key` refuses it before it makes a run of
    /// its own; a dead run's claim is not (the run takes it back first).
    pub fn claimed_live(&self, batch: &str, key: &str, now: Millis) -> Result<bool> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let Some(item) = tx.item_by_key(b, key)? else {
                return Ok(false);
            };
            Ok(item.status == Status::Claimed
                && super::liveness::holds_live_seat(&tx.seats(b, batch)?, item.lease_run, now))
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

    /// Creation time of the oldest pending item a claim would take now
    /// (none: a claim would find nothing).
    pub fn oldest_pending(&self, batch: &str) -> Result<Option<Millis>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.oldest_pending(b)
        })
    }
}

/// `fail` inside a transaction: the item (fenced by its lease token), its
/// dead letter, the run's counts and the event, or nothing.
pub(super) fn fail_in(tx: &mut dyn Write, f: &Failure<'_>, event: &NewEvent) -> Result<bool> {
    let failed = tx.item_fail(f)?;
    if failed {
        tx.dead_letter_insert(f)?;
        tx.run_count_failure(f.run_id, f.tier, f.cost)?;
        tx.event_insert(event)?;
    }
    Ok(failed)
}

/// An attempt's cost, with no outcome of its own, on its item and its run.
fn cost_in(tx: &mut dyn Write, item: i64, run: i64, cost: f64) -> Result<()> {
    tx.item_add_cost(item, cost)?;
    tx.run_add_cost(run, cost)
}

/// The runs holding a live seat of the batch lock: only they work their
/// claims (one crashed here is dead at once, as every view says).
fn live_runs(tx: &mut dyn Read, b: i64, batch: &str, now: Millis) -> Result<Vec<i64>> {
    let locks = tx.seats(b, batch)?;
    let seats: Vec<_> = locks
        .iter()
        .map(|l| super::liveness::seat(l, now))
        .collect();
    Ok(super::liveness::live_runs(&locks, &seats))
}

/// An item as a skip sees it.
enum Standing {
    /// Not claimed by a live run: its status (a dead run's claim is as good
    /// as pending, as nothing works it).
    Free(Status),
    /// A live run's claim, in flight or waiting (its words, "to retry at …").
    Held { waiting: Option<String> },
}

/// A claimed item as a skip sees it: held by a live run (in flight, or
/// waiting to retry or for its pool, as `show` says it), or orphaned.
fn claim_status(
    tx: &mut dyn Read,
    b: i64,
    batch: &str,
    key: &str,
    live: &[i64],
    now: Millis,
) -> Result<Standing> {
    match tx.item_by_key(b, key)? {
        Some(item) if item.lease_run.is_some_and(|r| live.contains(&r)) => Ok(Standing::Held {
            waiting: claim_wait(item.retry_at, item.pool_wait_since.is_some(), now).map(
                |w| match w {
                    WaitReason::Backoff => format!(
                        "to retry at {} after a failed attempt",
                        crate::util::time::rfc3339(item.retry_at.unwrap_or(now))
                    ),
                    _ => "for a place in its pool".into(),
                },
            ),
        }),
        Some(_) => Ok(Standing::Free(Status::Pending)),
        None => Err(missing(tx, b, batch, key)),
    }
}

/// Which of `keys` (each once) a skip marks (`false`) and which are done
/// already (`true`), given each one's status; a key missing or in flight
/// refuses the whole skip, every such key said at once.
fn skip_plan<'k>(
    batch: &str,
    keys: &'k [String],
    mut standing_of: impl FnMut(&str) -> Result<Standing>,
) -> Result<Vec<(&'k String, bool)>> {
    let mut verdicts = KeyVerdicts::new(batch, "skipped");
    let mut found = Vec::with_capacity(keys.len());
    let mut seen = HashSet::new();
    for key in keys.iter().filter(|k| seen.insert(*k)) {
        let hint = || Some("stop the run or `cancel` first, then skip again".into());
        match standing_of(key) {
            Ok(Standing::Held { waiting: None }) => verdicts.refuse(
                Why::InFlight,
                || "in flight (claimed by a running runner)".into(),
                hint(),
                key,
                None,
            ),
            Ok(Standing::Held { waiting }) => verdicts.refuse(
                Why::Waiting,
                || "claimed by a running runner, waiting".into(),
                hint(),
                key,
                waiting,
            ),
            Ok(Standing::Free(status)) => found.push((key, status == Status::Done)),
            Err(e) => verdicts.missing(e)?,
        }
    }
    verdicts.finish()?;
    Ok(found)
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

/// Counted exactly up to here before the other side of a range is taken
/// from a total instead (`retry_tier`).
const WAITING_CAP: i64 = 256;

/// What waits for a time in batch `b` at `now` (see [`RetryTier`]), every
/// count exact, read in time bounded by `WAITING_CAP` entries of the queue
/// index while one side of each split is smaller than it: the retry tier's
/// other side is its total (`counts`, exact in the same snapshot) less the
/// smaller side and the failures with no time. A dashboard poll reads this
/// (the "waiting" line): summing 66,000 retry entries took 15 ms a poll.
pub(crate) fn retry_tier(tx: &mut dyn Read, b: i64, now: Millis) -> Result<RetryTier> {
    use crate::store::dialect::items::Waiting;
    // A part that is rarely large: counted up to the cap, then whole.
    let mut whole = |part| match tx.waiting_count(b, part, now, WAITING_CAP)? {
        n if n < WAITING_CAP => Ok(n),
        _ => tx.waiting_count(b, part, now, i64::MAX),
    };
    let pending_due = whole(Waiting::PendingDue)?;
    let pending_later = whole(Waiting::PendingLater)?;
    let untimed = whole(Waiting::RetryUntimed)?;
    let timed = tx.batch_counts(b)?.retry - untimed;
    // The retry tier, often large on one side: the smaller side counted,
    // the other the rest of the total.
    let due = tx.waiting_count(b, Waiting::RetryDue, now, WAITING_CAP)?;
    let due = if due < WAITING_CAP {
        due
    } else {
        match tx.waiting_count(b, Waiting::RetryLater, now, WAITING_CAP)? {
            later if later < WAITING_CAP => timed - later,
            _ => tx.waiting_count(b, Waiting::RetryDue, now, i64::MAX)?,
        }
    };
    Ok(RetryTier {
        due: due + pending_due,
        later: timed - due + pending_later,
        next_at: tx.waiting_next_at(b, now)?,
        pending_due,
        pending_later,
    })
}
