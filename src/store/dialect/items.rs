//! Statements on items outside the hot paths (which stay whole per dialect,
//! in `sqlite/hot.rs` and `pg/hot.rs`).

use super::sql::{self, Arg, Row, Sql, Texts};
use crate::model::waiting::RetryWaits;
use crate::model::{Claim, Item, Millis, Status, Tombstone};
use crate::store::Result;
use crate::store::api::{Failure, ItemFilter, Requeue, Retrying, Selection};
use crate::store::rows::item_columns;
use crate::util::json_text::JsonText;

/// An item read by `item_columns!`.
pub(crate) fn item_from_row(r: &dyn Row) -> Result<Item> {
    let payload = r.text(4)?;
    Ok(Item {
        id: r.int(0)?,
        batch: r.text(1)?,
        key: r.text(2)?,
        label: r.text(3)?,
        payload: JsonText::stored(&payload),
        status: sql::parsed(r, 5)?,
        tier: sql::opt_parsed(r, 6)?,
        outcome: sql::opt_parsed(r, 7)?,
        attempts: r.int(8)? as u32,
        op_id: r.opt_text(9)?,
        result: r.opt_text(10)?.map(|t| JsonText::stored(&t)),
        cost: r.opt_real(11)?,
        error_class: r.opt_text(12)?,
        error_message: r.opt_text(13)?,
        next_attempt_at: r.opt_time(14)?,
        lease_run: r.opt_int(15)?,
        lease_until: r.opt_time(16)?,
        lease_token: r.int(17)?,
        created_at: r.time(18)?,
        updated_at: r.time(19)?,
        done_version: r.opt_text(20)?,
        priority: r.int(21)? as i32,
        pool_wait_since: r.opt_time(22)?,
        retry_at: r.opt_time(23)?,
    })
}

/// A row of `ITEM_FOR_REQUEUE` (and of each dialect's `items_for_requeue`).
pub(crate) fn requeue_from_row(r: &dyn Row) -> Result<(i64, Requeue, String)> {
    Ok((
        r.int(0)?,
        Requeue {
            key: r.text(1)?,
            label: r.text(2)?,
            tier: sql::opt_parsed(r, 3)?,
            outcome: sql::opt_parsed(r, 4)?,
            error_class: r.opt_text(5)?,
            attempts: r.int(6)? as u32,
        },
        r.text(7)?,
    ))
}

/// The item of batch `?1` and key `?2`, named by `item_keys` on both
/// engines (`items` has no key index): `$head`, the condition on alias
/// `$i` (with its dot, or ""), `$tail`.
macro_rules! by_key {
    ($head:expr, $i:literal, $tail:literal) => {
        concat!(
            $head,
            $i,
            "id = (SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?2)",
            $tail
        )
    };
}

pub(crate) const ITEM_BY_KEY: &str = by_key!(
    concat!(
        "SELECT ",
        item_columns!(),
        " FROM items i JOIN batches b ON b.id = i.batch_id WHERE "
    ),
    "i.",
    ""
);
/// What prune would delete (`?1` cutoff, `?2` failed ones too).
const OLDER_THAN: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.updated_at < ?1 AND (i.status = 'done' OR (?2 AND i.status = 'failed'))
      ORDER BY b.name, i.id"
);
/// The oldest claimable item's time. SQLite's one queue index holds the
/// claimable items in claim order (priority, then id), so the oldest is the
/// first entry of one of its priorities: a skip over the distinct
/// priorities (`p`, a seek each) finds it without reading every claimable
/// entry. PostgreSQL reads its partial `items_claimable`.
pub(crate) const OLDEST_PENDING: Texts = Texts {
    sqlite: "WITH RECURSIVE p(v) AS (
       SELECT max(priority) FROM items
        WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
       UNION ALL
       SELECT (SELECT max(priority) FROM items
                WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL
                  AND next_attempt_at IS NULL AND priority < p.v)
         FROM p WHERE p.v IS NOT NULL)
     SELECT created_at FROM items
      WHERE id = (SELECT min((SELECT id FROM items
                               WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL
                                 AND next_attempt_at IS NULL AND priority = p.v
                               ORDER BY id LIMIT 1)) FROM p)",
    pg: "SELECT created_at FROM items
  WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY id LIMIT 1",
};
pub(crate) const ITEM_FOR_REQUEUE: &str = by_key!(
    "SELECT id, key, label, tier, outcome, error_class, attempts, status FROM items WHERE ",
    "",
    ""
);

/// Ends a claim with no worker's answer: the item back to pending, out of
/// its lease, before a writer by hand files it (a cancel to `manual`, a
/// skip). The completions per minute (`minute_stats`, the dashboard's
/// Activity) count a claim ending done or failed: that is a worker's
/// answer, as a run counts it, and a cancel or a skip is none. `?1` the
/// item (`LET_GO`), or `?1` the batch and `?2` the key (`LET_GO_KEYED`).
macro_rules! let_go {
    () => {
        "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL WHERE "
    };
}
pub(crate) const LET_GO: &str = concat!(let_go!(), "id = ?1 AND status = 'claimed'");
const LET_GO_KEYED: &str = by_key!(let_go!(), "", " AND status = 'claimed'");
pub(crate) const MARK_SKIPPED: &str = by_key!(
    "UPDATE items SET status = 'done', outcome = 'skipped', tier = NULL,
       next_attempt_at = NULL, result = ?3, updated_at = ?4,
       lease_run = NULL, lease_until = NULL, cancel_to = NULL, cancel_by = NULL,
       cancel_reason = NULL
 WHERE ",
    "",
    ""
);
const BEGIN_ATTEMPT: &str =
    "UPDATE items SET attempts = attempts + 1, updated_at = ?3, retry_at = NULL
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL
 RETURNING attempts";
/// An attempt's cost added to its item's.
const ITEM_ADD_COST: &str =
    "UPDATE items SET cost = coalesce(cost, 0) + CAST(?2 AS DOUBLE PRECISION)
  WHERE id = ?1";
/// A failed attempt that runs again in this cycle: when, and its error.
const ITEM_AWAITS_RETRY: &str =
    "UPDATE items SET retry_at = ?3, error_class = ?4, error_message = ?5, updated_at = ?6
      WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL";
const SET_OP_ID: &str = "UPDATE items SET op_id = ?3
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed'";
/// Pending items whose not-before time came: claimable from now on.
const RELEASE_DUE: &str = "UPDATE items SET next_attempt_at = NULL, updated_at = ?2
  WHERE id IN (SELECT id FROM items
                WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL
                  AND next_attempt_at <= ?2 LIMIT ?3)";
const RENEW_LEASES: &str = "UPDATE items SET lease_until = ?3
  WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run = ?2
 RETURNING id";
const ITEM_FAIL: &str =
    "UPDATE items SET status = 'failed', tier = ?3, error_class = ?4, error_message = ?5,
            next_attempt_at = ?6,
            cost = CASE WHEN CAST(?7 AS DOUBLE PRECISION) IS NULL THEN cost
                        ELSE coalesce(cost, 0) + CAST(?7 AS DOUBLE PRECISION) END,
            lease_run = NULL, lease_until = NULL, updated_at = ?8
      WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL";
const ITEM_RELEASE: &str = concat!(
    "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL, updated_at = ?3,
            attempts = ",
    attempts_given_back!("?4"),
    "
      WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL"
);
/// PostgreSQL locks the rows these read until commit; SQLite's `BEGIN
/// IMMEDIATE` already excludes every other writer.
pub(crate) const STATUS_LOCKED: Texts = Texts {
    sqlite: "SELECT status FROM items
      WHERE id = (SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?2)",
    pg: "SELECT status FROM items
      WHERE id = (SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?2) FOR UPDATE",
};
const CLAIMS_ORPHANED_LOCKED: Texts = Texts {
    sqlite: concat!(
        "SELECT id, key, ",
        attempts_used!(),
        ", lease_run, lease_token, attempts FROM items
      WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run <> ?2
        AND lease_run NOT IN
            (SELECT run_id FROM locks WHERE batch_id = ?1 AND run_id IS NOT NULL)"
    ),
    pg: concat!(
        "SELECT id, key, ",
        attempts_used!(),
        "::int8, lease_run, lease_token, attempts::int8 FROM items
      WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run <> ?2
        AND lease_run NOT IN
            (SELECT run_id FROM locks WHERE batch_id = ?1 AND run_id IS NOT NULL)
      ORDER BY id FOR UPDATE"
    ),
};
/// Lease tokens: one more than the item's last on SQLite (one writer), from
/// one sequence on PostgreSQL.
pub(crate) const ITEM_CLAIM_BY_KEY: Texts = Texts {
    sqlite: "UPDATE items
    SET status = 'claimed', tier = NULL, next_attempt_at = NULL, lease_run = ?3,
        lease_until = ?4, lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?5,
        pool_wait_since = NULL, retry_at = NULL
  WHERE id = (SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?2)
 RETURNING id, key, label, payload, attempts, op_id, lease_token",
    pg: "UPDATE items
    SET status = 'claimed', tier = NULL, next_attempt_at = NULL, lease_run = ?3,
        lease_until = ?4, lease_token = nextval('lease_tokens'),
        attempts = attempts + 1, updated_at = ?5, pool_wait_since = NULL, retry_at = NULL
  WHERE id = (SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?2)
 RETURNING id, key, label, payload, attempts, op_id, lease_token",
};
/// Its attempts become those it used (`attempts_used!`).
const ITEM_RELEASE_ORPHAN: &str = concat!(
    "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL, updated_at = ?2,
            attempts = ",
    attempts_used!(),
    ", pool_wait_since = NULL, retry_at = NULL
      WHERE id = ?1"
);

/// A part of what waits for a time (`ItemsRead::waiting_count`): the
/// retry tier's failures and the pending items with a not-before time,
/// each due at a moment or later; and the retry tier's failures with no
/// time at all, which are neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    RetryDue,
    RetryLater,
    RetryUntimed,
    PendingDue,
    PendingLater,
}

impl Waiting {
    fn sql(self) -> &'static str {
        match self {
            Waiting::RetryDue => WAITING_RETRY_DUE,
            Waiting::RetryLater => WAITING_RETRY_LATER,
            Waiting::RetryUntimed => WAITING_RETRY_UNTIMED,
            Waiting::PendingDue => WAITING_PENDING_DUE,
            Waiting::PendingLater => WAITING_PENDING_LATER,
        }
    }
}

/// `?1` the batch, `?2` now, `?3` the most to count: a count that stops at
/// `?3` entries of the queue index, as `$cond` picks them.
macro_rules! waiting_count {
    ($cond:literal) => {
        concat!(
            "SELECT count(*) FROM (SELECT 1 FROM items WHERE batch_id = ?1 AND ",
            $cond,
            " LIMIT ?3) w"
        )
    };
}
const WAITING_RETRY_DUE: &str =
    waiting_count!("status = 'failed' AND tier = 'retry' AND next_attempt_at <= ?2");
const WAITING_RETRY_LATER: &str =
    waiting_count!("status = 'failed' AND tier = 'retry' AND next_attempt_at > ?2");
/// No time to compare with: `?2` the most to count.
const WAITING_RETRY_UNTIMED: &str = "SELECT count(*) FROM (SELECT 1 FROM items
  WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry' AND next_attempt_at IS NULL
  LIMIT ?2) w";
const WAITING_PENDING_DUE: &str =
    waiting_count!("status = 'pending' AND tier IS NULL AND next_attempt_at <= ?2");
const WAITING_PENDING_LATER: &str =
    waiting_count!("status = 'pending' AND tier IS NULL AND next_attempt_at > ?2");
/// Each half a seek to the first entry past `?2` of its range.
const WAITING_NEXT_AT: &str = "SELECT min(t) FROM (
       SELECT min(next_attempt_at) AS t FROM items
        WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry' AND next_attempt_at > ?2
       UNION ALL
       SELECT min(next_attempt_at) FROM items
        WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at > ?2) w";
/// Claimed items whose calls their pool deferred: the claims of the
/// batch's runs (`items_claimed` on SQLite), no more.
const POOL_WAITING: &str = "SELECT count(*) FROM items
  WHERE batch_id = ?1 AND status = 'claimed' AND pool_wait_since IS NOT NULL";

/// Claimed items waiting to retry after `?2`, and the earliest: the claims
/// of the batch's runs (`items_claimed` on SQLite), no more.
const RETRY_WAITING: &str = "SELECT count(*), min(retry_at) FROM items
  WHERE batch_id = ?1 AND status = 'claimed' AND retry_at > ?2";

/// A claim whose run holds no seat (`claims_orphaned_locked`).
pub(crate) struct Orphaned {
    pub(crate) item: i64,
    pub(crate) key: String,
    /// The attempts it used (`attempts_used!`).
    pub(crate) attempts: i64,
    pub(crate) lease_run: i64,
    pub(crate) token: i64,
    /// Its claimed first attempt was waiting for a place in its pool: the
    /// call never started, and its attempt is not used.
    pub(crate) never_started: bool,
}

pub(crate) trait ItemsRead: Sql {
    fn item_by_key(&mut self, batch: i64, key: &str) -> Result<Option<Item>> {
        let args = [Arg::Int(batch), Arg::Text(key)];
        sql::opt(self, ITEM_BY_KEY, &args, item_from_row)
    }

    /// What became of a pruned key, if its tombstone is kept.
    fn item_tombstone(&mut self, batch: i64, key: &str) -> Result<Option<Tombstone>>;
    /// Items matching `filter`, in insertion order, with its offset and limit.
    fn items_list(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<Item>>;
    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64>;
    /// Creation time of the oldest item waiting for its first claim.
    fn oldest_pending(&mut self, batch: i64) -> Result<Option<Millis>> {
        let sql = self.text_of(&OLDEST_PENDING);
        sql::opt(self, sql, &[Arg::Int(batch)], |r| r.time(0))
    }

    /// How many items of `batch` wait in `part` at `now`, counted up to
    /// `cap` (a range of the queue index: reading it costs what it
    /// counts).
    fn waiting_count(&mut self, batch: i64, part: Waiting, now: Millis, cap: i64) -> Result<i64> {
        let timed = [Arg::Int(batch), Arg::Time(now), Arg::Int(cap)];
        let args = match part {
            Waiting::RetryUntimed => &[timed[0], timed[2]][..],
            _ => &timed[..],
        };
        sql::one(self, part.sql(), args, |r| r.int(0))
    }

    /// Claimed items waiting for a place in their pool, not in flight.
    fn pool_waiting(&mut self, batch: i64) -> Result<i64> {
        sql::one(self, POOL_WAITING, &[Arg::Int(batch)], |r| r.int(0))
    }

    /// Claimed items waiting to run again in this cycle after `now`.
    fn retry_waiting(&mut self, batch: i64, now: Millis) -> Result<RetryWaits> {
        let args = [Arg::Int(batch), Arg::Time(now)];
        sql::one(self, RETRY_WAITING, &args, |r| {
            Ok(RetryWaits {
                items: r.int(0)?,
                next: r.opt_time(1)?,
            })
        })
    }

    /// The earliest time after `now` something waits for (a retry-tier
    /// failure's next attempt, a pending item's not-before time).
    fn waiting_next_at(&mut self, batch: i64, now: Millis) -> Result<Option<Millis>> {
        let args = [Arg::Int(batch), Arg::Time(now)];
        sql::one(self, WAITING_NEXT_AT, &args, |r| r.opt_time(0))
    }
    /// One item as a requeue sees it, with its status as stored.
    fn item_for_requeue(
        &mut self,
        batch: i64,
        key: &str,
    ) -> Result<Option<(i64, Requeue, String)>> {
        let args = [Arg::Int(batch), Arg::Text(key)];
        sql::opt(self, ITEM_FOR_REQUEUE, &args, requeue_from_row)
    }

    /// The items a requeue without keys moves (`sel`'s state, class and
    /// tier), in any order.
    fn items_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<(i64, Requeue)>>;
    /// The ids alone of `items_for_requeue`, in any order: what a requeue
    /// that only counts what it moved needs (on SQLite, found in the
    /// failed index without reading a row).
    fn ids_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<i64>>;
    /// Items of every batch last changed before `cutoff`, done ones (and
    /// failed ones with `failed`), by batch and insertion order.
    fn items_older_than(&mut self, cutoff: Millis, failed: bool) -> Result<Vec<Item>> {
        let args = [Arg::Time(cutoff), Arg::Bool(failed)];
        sql::all(self, OLDER_THAN, &args, item_from_row)
    }
}

pub(crate) trait ItemsWrite: Sql {
    /// An item's status, locking its row until commit.
    fn item_status_locked(&mut self, batch: i64, key: &str) -> Result<Option<Status>> {
        let sql = self.text_of(&STATUS_LOCKED);
        let args = [Arg::Int(batch), Arg::Text(key)];
        sql::opt(self, sql, &args, |r| sql::parsed(r, 0))
    }

    /// Marks an item done with outcome `skipped` and `result`, out of any tier.
    fn item_mark_skipped(
        &mut self,
        batch: i64,
        key: &str,
        result: &str,
        now: Millis,
    ) -> Result<()> {
        let args = [
            Arg::Int(batch),
            Arg::Text(key),
            Arg::Text(result),
            Arg::Time(now),
        ];
        // An orphaned claim is skipped too: no answer of its worker.
        self.exec(LET_GO_KEYED, &args[..2])?;
        self.exec(MARK_SKIPPED, &args)?;
        Ok(())
    }

    /// Counts one more attempt of an item still claimed under `token`; the
    /// attempts now.
    fn item_begin_attempt(&mut self, item: i64, token: i64, now: Millis) -> Result<Option<u32>> {
        let args = [Arg::Int(item), Arg::Int(token), Arg::Time(now)];
        sql::opt(self, BEGIN_ATTEMPT, &args, |r| Ok(r.int(0)? as u32))
    }

    /// Records on an item still claimed under `r.token` that its attempt
    /// failed and runs again at `r.at`; whether it was still held.
    fn item_awaits_retry(&mut self, r: &Retrying<'_>) -> Result<bool> {
        let args = [
            Arg::Int(r.item_id),
            Arg::Int(r.token),
            Arg::Time(r.at),
            Arg::Text(r.error_class),
            Arg::Text(r.message),
            Arg::Time(r.now),
        ];
        Ok(self.exec(ITEM_AWAITS_RETRY, &args)? == 1)
    }

    /// Adds an attempt's cost to the item's, whoever holds it now.
    fn item_add_cost(&mut self, item: i64, cost: f64) -> Result<()> {
        self.exec(ITEM_ADD_COST, &[Arg::Int(item), Arg::OptReal(Some(cost))])?;
        Ok(())
    }

    /// Sets the op id of an item still claimed under `token`; whether it was.
    fn item_set_op_id(&mut self, item: i64, token: i64, op_id: &str) -> Result<bool> {
        let args = [Arg::Int(item), Arg::Int(token), Arg::Text(op_id)];
        Ok(self.exec(SET_OP_ID, &args)? == 1)
    }

    /// Extends the leases `run` holds in the batch; the ids still held.
    fn items_renew_leases(&mut self, batch: i64, run: i64, until: Millis) -> Result<Vec<i64>> {
        let args = [Arg::Int(batch), Arg::Int(run), Arg::Time(until)];
        sql::all(self, RENEW_LEASES, &args, |r| r.int(0))
    }

    /// Ends a claim still held under `f.token` in `failed` with its tier,
    /// class and message; whether it was still held.
    fn item_fail(&mut self, f: &Failure<'_>) -> Result<bool> {
        let args = [
            Arg::Int(f.item_id),
            Arg::Int(f.token),
            Arg::Text(f.tier.as_str()),
            Arg::Text(f.error_class),
            Arg::Text(f.message),
            Arg::OptTime(f.next_attempt_at),
            Arg::OptReal(f.cost),
            Arg::Time(f.now),
        ];
        Ok(self.exec(ITEM_FAIL, &args)? == 1)
    }

    /// Gives a claim still held under `token` back to pending, its attempt
    /// uncounted when `cut_short`; whether it was still held.
    fn item_release(
        &mut self,
        item: i64,
        token: i64,
        cut_short: bool,
        now: Millis,
    ) -> Result<bool> {
        let args = [
            Arg::Int(item),
            Arg::Int(token),
            Arg::Time(now),
            Arg::Int(i64::from(cut_short)),
        ];
        Ok(self.exec(ITEM_RELEASE, &args)? == 1)
    }

    /// Makes up to `limit` pending items whose not-before time has come
    /// claimable; how many.
    fn items_release_due(&mut self, batch: i64, now: Millis, limit: usize) -> Result<usize> {
        let args = [Arg::Int(batch), Arg::Time(now), Arg::Int(limit as i64)];
        Ok(self.exec(RELEASE_DUE, &args)? as usize)
    }

    /// Gives a dead run's claim back to pending with the attempts it used.
    fn item_release_orphan(&mut self, item: i64, now: Millis) -> Result<()> {
        self.exec(ITEM_RELEASE_ORPHAN, &[Arg::Int(item), Arg::Time(now)])?;
        Ok(())
    }

    /// The claims of the batch whose run is not `current` and holds no seat,
    /// their rows locked until commit.
    fn claims_orphaned_locked(&mut self, batch: i64, current: i64) -> Result<Vec<Orphaned>> {
        let sql = self.text_of(&CLAIMS_ORPHANED_LOCKED);
        sql::all(self, sql, &[Arg::Int(batch), Arg::Int(current)], |r| {
            Ok(Orphaned {
                item: r.int(0)?,
                key: r.text(1)?,
                attempts: r.int(2)?,
                lease_run: r.int(3)?,
                token: r.int(4)?,
                never_started: r.int(5)? > r.int(2)?,
            })
        })
    }

    /// Claims the item `key` for `run` under a new lease token, counting an
    /// attempt, out of any tier.
    fn item_claim_by_key(
        &mut self,
        batch: i64,
        key: &str,
        run: i64,
        until: Millis,
        now: Millis,
    ) -> Result<Claim> {
        let sql = self.text_of(&ITEM_CLAIM_BY_KEY);
        let args = [
            Arg::Int(batch),
            Arg::Text(key),
            Arg::Int(run),
            Arg::Time(until),
            Arg::Time(now),
        ];
        sql::one(self, sql, &args, |r| {
            Ok(Claim {
                item_id: r.int(0)?,
                key: r.text(1)?,
                label: r.text(2)?,
                payload: r.text(3)?,
                attempt: r.int(4)? as u32,
                op_id: r.opt_text(5)?,
                token: r.int(6)?,
            })
        })
    }
}

impl<T: Sql + ?Sized> ItemsWrite for T {}
