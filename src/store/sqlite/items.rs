//! Statements on items outside the hot paths (add, claim with its lease
//! and fencing token, and complete are in `hot.rs`).
//!
//! Every transition that ends a claim is conditional on the lease token, so
//! a runner that lost its lease cannot overwrite a newer claim.

use rusqlite::{OptionalExtension, Row, params, params_from_iter};

use super::{SqliteTx, parse_col};
use crate::model::{Claim, Item, Millis, waiting::RetryTier};
use crate::model::{Status, Tombstone};
use crate::store::api::{Failure, ItemFilter, Requeue, Selection};
use crate::store::dialect::{ItemsRead, ItemsWrite, Orphaned};
use crate::store::rows::item_columns;
use crate::store::{Result, json_col};

pub(crate) const ITEM_COLUMNS: &str = item_columns!();

pub(crate) fn item_from_row(r: &Row<'_>) -> rusqlite::Result<Item> {
    let payload: String = r.get(4)?;
    Ok(Item {
        id: r.get(0)?,
        batch: r.get(1)?,
        key: r.get(2)?,
        label: r.get(3)?,
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        status: parse_col(5, r.get_ref(5)?.as_str()?)?,
        tier: r
            .get::<_, Option<String>>(6)?
            .map(|t| parse_col(6, &t))
            .transpose()?,
        outcome: r
            .get::<_, Option<String>>(7)?
            .map(|t| parse_col(7, &t))
            .transpose()?,
        attempts: r.get(8)?,
        op_id: r.get(9)?,
        result: json_col(r.get(10)?),
        cost: r.get(11)?,
        error_class: r.get(12)?,
        error_message: r.get(13)?,
        next_attempt_at: r.get(14)?,
        lease_run: r.get(15)?,
        lease_until: r.get(16)?,
        lease_token: r.get(17)?,
        created_at: r.get(18)?,
        updated_at: r.get(19)?,
        done_version: r.get(20)?,
        priority: r.get(21)?,
    })
}

/// Appends numbered placeholders (`?2`, `?3`, ...) after `?1`, the batch id.
pub(crate) fn filter_sql(filter: &ItemFilter, args: &mut Vec<rusqlite::types::Value>) -> String {
    use rusqlite::types::Value as V;
    let mut sql = String::new();
    let bind = |args: &mut Vec<V>, value: V| {
        args.push(value);
        args.len()
    };
    // Status, tier and outcome are fixed words, written into the SQL: the
    // planner can then use the partial index of failed items.
    if let Some(s) = filter.status {
        sql.push_str(&format!(" AND i.status = '{}'", s.as_str()));
    }
    if let Some(t) = filter.tier {
        sql.push_str(&format!(" AND i.tier = '{}'", t.as_str()));
    }
    if let Some(o) = filter.outcome {
        sql.push_str(&format!(" AND i.outcome = '{}'", o.as_str()));
    }
    if let Some(c) = &filter.error_class {
        let n = bind(args, V::Text(c.clone()));
        sql.push_str(&format!(" AND i.error_class = ?{n}"));
    }
    if let Some(q) = filter.search.as_ref().filter(|q| !q.is_empty()) {
        let n = bind(args, V::Text(q.clone()));
        sql.push_str(&format!(
            " AND (instr(i.key, ?{n}) > 0 OR instr(i.label, ?{n}) > 0 \
               OR instr(coalesce(i.error_message, ''), ?{n}) > 0)"
        ));
    }
    if let Some(v) = &filter.stale {
        let n = bind(args, V::Text(v.clone()));
        sql.push_str(&crate::store::api::stale_sql(&format!("?{n}")));
    }
    if let Some(at) = filter.claimable_at {
        let n = bind(args, V::Integer(at));
        sql.push_str(&format!(
            " AND i.status = 'pending' AND i.tier IS NULL \
               AND (i.next_attempt_at IS NULL OR i.next_attempt_at <= ?{n})"
        ));
    }
    sql
}

fn selection_sql(sel: &Selection, args: &mut Vec<rusqlite::types::Value>) -> String {
    use rusqlite::types::Value as V;
    let version = sel.stale.as_ref().map_or(String::new(), |v| {
        args.push(V::Text(v.clone()));
        format!("?{}", args.len())
    });
    let mut sql = sel.moves_sql(&version);
    if let Some(c) = &sel.class {
        args.push(V::Text(c.clone()));
        sql.push_str(&format!(" AND i.error_class = ?{}", args.len()));
    }
    if let Some(t) = sel.tier {
        args.push(V::Text(t.as_str().into()));
        sql.push_str(&format!(" AND i.tier = ?{}", args.len()));
    }
    sql
}

const ITEM_BY_KEY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = ?1 AND i.key = ?2"
);

/// What prune would delete (`?1` cutoff, `?2` failed ones too).
const OLDER_THAN: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.updated_at < ?1 AND (i.status = 'done' OR (?2 AND i.status = 'failed'))
      ORDER BY b.name, i.id"
);
const DUE_RETRY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.batch_id = ?1 AND i.status = 'failed' AND i.tier = 'retry' AND i.next_attempt_at <= ?2
      ORDER BY i.id"
);

/// The retry tier, and the pending items with a not-before time (each
/// half a range of `items_queue`).
const RETRY_TIER: &str =
    "SELECT coalesce(sum(next_attempt_at <= ?2), 0), coalesce(sum(next_attempt_at > ?2), 0),
            min(CASE WHEN next_attempt_at > ?2 THEN next_attempt_at END),
            coalesce(sum(status = 'pending' AND next_attempt_at <= ?2), 0),
            coalesce(sum(status = 'pending' AND next_attempt_at > ?2), 0)
       FROM (SELECT status, next_attempt_at FROM items
              WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry'
             UNION ALL
             SELECT status, next_attempt_at FROM items
              WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL
                AND next_attempt_at IS NOT NULL)";

/// Pending items whose not-before time came: claimable from now on.
const RELEASE_DUE: &str = "UPDATE items SET next_attempt_at = NULL, updated_at = ?2
  WHERE id IN (SELECT id FROM items
                WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL
                  AND next_attempt_at <= ?2 LIMIT ?3)";

const OLDEST_PENDING: &str = "SELECT created_at FROM items
  WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY id LIMIT 1";

const BEGIN_ATTEMPT: &str = "UPDATE items SET attempts = attempts + 1, updated_at = ?3
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL
 RETURNING attempts";

const SET_OP_ID: &str =
    "UPDATE items SET op_id = ?3 WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed'";

const RENEW_LEASES: &str = "UPDATE items SET lease_until = ?3
  WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run = ?2
 RETURNING id";

const ITEM_FOR_REQUEUE: &str =
    "SELECT id, key, label, tier, outcome, error_class, attempts, status FROM items
      WHERE batch_id = ?1 AND key = ?2";

const ITEMS_FOR_REQUEUE: &str =
    "SELECT i.id, i.key, i.label, i.tier, i.outcome, i.error_class, i.attempts
       FROM items i WHERE i.batch_id = ?1";

/// A row of `ITEM_FOR_REQUEUE`, its status as stored.
fn requeue_from_row(r: &Row<'_>) -> rusqlite::Result<(i64, Requeue, String)> {
    let (id, req) = requeue_only(r)?;
    Ok((id, req, r.get(7)?))
}

/// The item of a row of `ITEMS_FOR_REQUEUE` (or `ITEM_FOR_REQUEUE`). Tier
/// and outcome are parsed where they lie, not copied first: a requeue of
/// 100,000 items reads them all.
fn requeue_only(r: &Row<'_>) -> rusqlite::Result<(i64, Requeue)> {
    fn parsed<T: std::str::FromStr<Err = String>>(
        r: &Row<'_>,
        idx: usize,
    ) -> rusqlite::Result<Option<T>> {
        r.get_ref(idx)?
            .as_str_or_null()?
            .map(|t| parse_col(idx, t))
            .transpose()
    }
    Ok((
        r.get(0)?,
        Requeue {
            key: r.get(1)?,
            label: r.get(2)?,
            tier: parsed(r, 3)?,
            outcome: parsed(r, 4)?,
            error_class: r.get(5)?,
            attempts: r.get(6)?,
        },
    ))
}

impl ItemsRead for SqliteTx<'_> {
    fn item_by_key(&mut self, batch: i64, key: &str) -> Result<Option<Item>> {
        Ok(self
            .conn
            .prepare_cached(ITEM_BY_KEY)?
            .query_row(params![batch, key], item_from_row)
            .optional()?)
    }

    fn item_tombstone(&mut self, batch: i64, key: &str) -> Result<Option<Tombstone>> {
        super::tombstones::find(self.conn, batch, key)
    }

    fn items_list(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<Item>> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let where_sql = filter_sql(filter, &mut args);
        let limit = filter.limit.map_or(-1, |l| l as i64);
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE i.batch_id = ?1{where_sql} ORDER BY {} LIMIT {limit} OFFSET {}",
            crate::store::rows::order_sql(filter),
            filter.offset
        );
        let mut st = self.conn.prepare(&sql)?;
        let rows = st
            .query_map(params_from_iter(args), item_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let where_sql = filter_sql(filter, &mut args);
        let sql = format!("SELECT count(*) FROM items i WHERE i.batch_id = ?1{where_sql}");
        Ok(self
            .conn
            .query_row(&sql, params_from_iter(args), |r| r.get(0))?)
    }

    fn oldest_pending(&mut self, batch: i64) -> Result<Option<Millis>> {
        Ok(self
            .conn
            .prepare_cached(OLDEST_PENDING)?
            .query_row([batch], |r| r.get(0))
            .optional()?)
    }

    fn items_older_than(&mut self, cutoff: Millis, failed: bool) -> Result<Vec<Item>> {
        let mut st = self.conn.prepare_cached(OLDER_THAN)?;
        let rows = st
            .query_map(params![cutoff, failed], item_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn items_due_retry(&mut self, batch: i64, now: Millis) -> Result<Vec<Item>> {
        let mut st = self.conn.prepare_cached(DUE_RETRY)?;
        let rows = st
            .query_map(params![batch, now], item_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn retry_tier(&mut self, batch: i64, now: Millis) -> Result<RetryTier> {
        Ok(self
            .conn
            .prepare_cached(RETRY_TIER)?
            .query_row(params![batch, now], |r| {
                Ok(RetryTier {
                    due: r.get(0)?,
                    later: r.get(1)?,
                    next_at: r.get(2)?,
                    pending_due: r.get(3)?,
                    pending_later: r.get(4)?,
                })
            })?)
    }

    fn item_for_requeue(
        &mut self,
        batch: i64,
        key: &str,
    ) -> Result<Option<(i64, Requeue, String)>> {
        Ok(self
            .conn
            .prepare_cached(ITEM_FOR_REQUEUE)?
            .query_row(params![batch, key], requeue_from_row)
            .optional()?)
    }

    fn items_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let cond = selection_sql(sel, &mut args);
        let mut st = self.conn.prepare(&format!("{ITEMS_FOR_REQUEUE}{cond}"))?;
        let rows = st
            .query_map(params_from_iter(args), requeue_only)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

const STATUS: &str = "SELECT status FROM items WHERE batch_id = ?1 AND key = ?2";

const MARK_SKIPPED: &str = "UPDATE items SET status = 'done', outcome = 'skipped', tier = NULL,
       next_attempt_at = NULL, result = ?3, updated_at = ?4
 WHERE batch_id = ?1 AND key = ?2";

const ITEM_FAIL: &str =
    "UPDATE items SET status = 'failed', tier = ?3, error_class = ?4, error_message = ?5,
            next_attempt_at = ?6, cost = CASE WHEN ?7 IS NULL THEN cost ELSE coalesce(cost, 0) + ?7 END,
            lease_run = NULL, lease_until = NULL, updated_at = ?8
      WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL";

const ITEM_RELEASE: &str =
    "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL, updated_at = ?3,
            attempts = max(attempts - ?4, 0)
      WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND cancel_to IS NULL";

const ITEM_RELEASE_ORPHAN: &str =
    "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL, updated_at = ?2
      WHERE id = ?1";

const CLAIMS_ORPHANED_LOCKED: &str = "SELECT id, key, attempts, lease_run, lease_token FROM items
      WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run <> ?2
        AND lease_run NOT IN
            (SELECT run_id FROM locks WHERE batch_id = ?1 AND run_id IS NOT NULL)";

const ITEM_CLAIM_BY_KEY: &str = "UPDATE items
    SET status = 'claimed', tier = NULL, next_attempt_at = NULL, lease_run = ?3,
        lease_until = ?4, lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?5
  WHERE batch_id = ?1 AND key = ?2
 RETURNING id, key, label, payload, attempts, op_id, lease_token";

impl ItemsWrite for SqliteTx<'_> {
    fn item_status_locked(&mut self, batch: i64, key: &str) -> Result<Option<Status>> {
        Ok(self
            .conn
            .prepare_cached(STATUS)?
            .query_row(params![batch, key], |r| {
                parse_col(0, r.get_ref(0)?.as_str()?)
            })
            .optional()?)
    }

    fn item_mark_skipped(
        &mut self,
        batch: i64,
        key: &str,
        result: &str,
        now: Millis,
    ) -> Result<()> {
        self.conn
            .prepare_cached(MARK_SKIPPED)?
            .execute(params![batch, key, result, now])?;
        Ok(())
    }

    fn item_begin_attempt(&mut self, item: i64, token: i64, now: Millis) -> Result<Option<u32>> {
        Ok(self
            .conn
            .prepare_cached(BEGIN_ATTEMPT)?
            .query_row(params![item, token, now], |r| r.get(0))
            .optional()?)
    }

    fn item_set_op_id(&mut self, item: i64, token: i64, op_id: &str) -> Result<bool> {
        let n = self
            .conn
            .prepare_cached(SET_OP_ID)?
            .execute(params![item, token, op_id])?;
        Ok(n == 1)
    }

    fn items_release_due(&mut self, batch: i64, now: Millis, limit: usize) -> Result<usize> {
        Ok(self
            .conn
            .prepare_cached(RELEASE_DUE)?
            .execute(params![batch, now, limit as i64])?)
    }

    fn items_renew_leases(&mut self, batch: i64, run: i64, until: Millis) -> Result<Vec<i64>> {
        let held = self
            .conn
            .prepare_cached(RENEW_LEASES)?
            .query_map(params![batch, run, until], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(held)
    }

    fn item_fail(&mut self, f: &Failure<'_>) -> Result<bool> {
        let n = self.conn.prepare_cached(ITEM_FAIL)?.execute(params![
            f.item_id,
            f.token,
            f.tier.as_str(),
            f.error_class,
            f.message,
            f.next_attempt_at,
            f.cost,
            f.now
        ])?;
        Ok(n == 1)
    }

    fn item_release(
        &mut self,
        item: i64,
        token: i64,
        cut_short: bool,
        now: Millis,
    ) -> Result<bool> {
        let n = self.conn.prepare_cached(ITEM_RELEASE)?.execute(params![
            item,
            token,
            now,
            i64::from(cut_short)
        ])?;
        Ok(n == 1)
    }

    fn item_release_orphan(&mut self, item: i64, now: Millis) -> Result<()> {
        self.conn
            .prepare_cached(ITEM_RELEASE_ORPHAN)?
            .execute(params![item, now])?;
        Ok(())
    }

    fn claims_orphaned_locked(&mut self, batch: i64, current: i64) -> Result<Vec<Orphaned>> {
        let rows = self
            .conn
            .prepare_cached(CLAIMS_ORPHANED_LOCKED)?
            .query_map(params![batch, current], |r| {
                Ok(Orphaned {
                    item: r.get(0)?,
                    key: r.get(1)?,
                    attempts: r.get(2)?,
                    lease_run: r.get(3)?,
                    token: r.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn item_claim_by_key(
        &mut self,
        batch: i64,
        key: &str,
        run: i64,
        until: Millis,
        now: Millis,
    ) -> Result<Claim> {
        Ok(self.conn.prepare_cached(ITEM_CLAIM_BY_KEY)?.query_row(
            params![batch, key, run, until, now],
            |r| {
                Ok(Claim {
                    item_id: r.get(0)?,
                    key: r.get(1)?,
                    label: r.get(2)?,
                    payload: r.get(3)?,
                    attempt: r.get(4)?,
                    op_id: r.get(5)?,
                    token: r.get(6)?,
                })
            },
        )?)
    }
}
