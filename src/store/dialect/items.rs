//! Statements on items outside the hot paths (which stay whole per dialect,
//! in `sqlite/hot.rs` and `pg/hot.rs`).

use crate::model::waiting::RetryTier;
use crate::model::{Claim, Item, Millis, Status, Tombstone};
use crate::store::Result;
use crate::store::api::{Failure, ItemFilter, Requeue, Selection};

/// A claim whose run holds no seat (`claims_orphaned_locked`).
pub(crate) struct Orphaned {
    pub(crate) item: i64,
    pub(crate) key: String,
    pub(crate) attempts: i64,
    pub(crate) lease_run: i64,
    pub(crate) token: i64,
}

pub(crate) trait ItemsRead {
    fn item_by_key(&mut self, batch: i64, key: &str) -> Result<Option<Item>>;
    /// What became of a pruned key, if its tombstone is kept.
    fn item_tombstone(&mut self, batch: i64, key: &str) -> Result<Option<Tombstone>>;
    /// Items matching `filter`, in insertion order, with its offset and limit.
    fn items_list(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<Item>>;
    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64>;
    /// Creation time of the oldest item waiting for its first claim.
    fn oldest_pending(&mut self, batch: i64) -> Result<Option<Millis>>;
    /// Retry-tier failures due at `now`, in insertion order.
    fn items_due_retry(&mut self, batch: i64, now: Millis) -> Result<Vec<Item>>;
    /// What waits for a time (the retry tier, and pending items with a
    /// not-before time): due and later counts, the earliest later time,
    /// and how many of them are pending.
    fn retry_tier(&mut self, batch: i64, now: Millis) -> Result<RetryTier>;
    /// One item as a requeue sees it, with its status as stored.
    fn item_for_requeue(&mut self, batch: i64, key: &str)
    -> Result<Option<(i64, Requeue, String)>>;
    /// The items a requeue without keys moves (`sel`'s state, class and
    /// tier), in any order.
    fn items_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<(i64, Requeue)>>;
    /// Items of every batch last changed before `cutoff`, done ones (and
    /// failed ones with `failed`), by batch and insertion order.
    fn items_older_than(&mut self, cutoff: Millis, failed: bool) -> Result<Vec<Item>>;
}

pub(crate) trait ItemsWrite {
    /// An item's status, locking its row until commit.
    fn item_status_locked(&mut self, batch: i64, key: &str) -> Result<Option<Status>>;
    /// Marks an item done with outcome `skipped` and `result`, out of any tier.
    fn item_mark_skipped(&mut self, batch: i64, key: &str, result: &str, now: Millis)
    -> Result<()>;
    /// Counts one more attempt of an item still claimed under `token`; the
    /// attempts now.
    fn item_begin_attempt(&mut self, item: i64, token: i64, now: Millis) -> Result<Option<u32>>;
    /// Sets the op id of an item still claimed under `token`; whether it was.
    fn item_set_op_id(&mut self, item: i64, token: i64, op_id: &str) -> Result<bool>;
    /// Extends the leases `run` holds in the batch; the ids still held.
    fn items_renew_leases(&mut self, batch: i64, run: i64, until: Millis) -> Result<Vec<i64>>;
    /// Ends a claim still held under `f.token` in `failed` with its tier,
    /// class and message; whether it was still held.
    fn item_fail(&mut self, f: &Failure<'_>) -> Result<bool>;
    /// Gives a claim still held under `token` back to pending, its attempt
    /// uncounted when `cut_short`; whether it was still held.
    fn item_release(&mut self, item: i64, token: i64, cut_short: bool, now: Millis)
    -> Result<bool>;
    /// Makes up to `limit` pending items whose not-before time has come
    /// claimable; how many.
    fn items_release_due(&mut self, batch: i64, now: Millis, limit: usize) -> Result<usize>;
    /// Gives a dead run's claim back to pending.
    fn item_release_orphan(&mut self, item: i64, now: Millis) -> Result<()>;
    /// The claims of the batch whose run is not `current` and holds no seat,
    /// their rows locked until commit.
    fn claims_orphaned_locked(&mut self, batch: i64, current: i64) -> Result<Vec<Orphaned>>;
    /// Claims the item `key` for `run` under a new lease token, counting an
    /// attempt, out of any tier.
    fn item_claim_by_key(
        &mut self,
        batch: i64,
        key: &str,
        run: i64,
        until: Millis,
        now: Millis,
    ) -> Result<Claim>;
}
