//! Statements on items outside the hot paths (add, claim and complete are
//! in `hot.rs`).
//!
//! Claims take pending rows `FOR UPDATE SKIP LOCKED`: runners on several
//! hosts claim disjoint items without waiting for each other. Fencing
//! tokens come from one sequence. Every transition that ends a claim is
//! conditional on the lease token, so a runner that lost its lease cannot
//! overwrite a newer claim.

use postgres::Row;

use super::PgTx;
use super::conn::{Conn, parse_col_text, text};
use super::events::Args;
use super::tombstones;
use crate::model::waiting::RetryTier;
use crate::model::{Claim, Item, Millis};
use crate::model::{Status, Tombstone};
use crate::store::Result;
use crate::store::api::{Failure, ItemFilter, Requeue, Selection};
use crate::store::dialect::{ItemsRead, ItemsWrite, Orphaned};
use crate::store::json_col;
use crate::store::rows::item_columns;

pub(crate) const ITEM_COLUMNS: &str = item_columns!();

pub(crate) fn item_from_row(c: &Conn, r: &Row) -> Result<Item> {
    let payload: String = r.get(4);
    Ok(Item {
        id: r.get(0),
        batch: r.get(1),
        key: r.get(2),
        label: r.get(3),
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        status: parse_col_text(r.get(5))?,
        tier: r
            .get::<_, Option<&str>>(6)
            .map(parse_col_text)
            .transpose()?,
        outcome: r
            .get::<_, Option<&str>>(7)
            .map(parse_col_text)
            .transpose()?,
        attempts: r.get::<_, i64>(8) as u32,
        op_id: r.get(9),
        result: json_col(r.get(10)),
        cost: r.get(11),
        error_class: r.get(12),
        error_message: r.get(13),
        next_attempt_at: c.tout_opt(r.get(14)),
        lease_run: r.get(15),
        lease_until: c.tout_opt(r.get(16)),
        lease_token: r.get(17),
        created_at: c.tout(r.get(18)),
        updated_at: c.tout(r.get(19)),
        done_version: r.get(20),
        priority: r.get(21),
    })
}

/// The filter's conditions on `i`, with their values added to `args`.
pub(crate) fn filter_sql(filter: &ItemFilter, args: &mut Args) -> String {
    let mut sql = String::new();
    if let Some(s) = filter.status {
        sql.push_str(&format!(" AND i.status = {}", args.push(s.as_str())));
    }
    if let Some(t) = filter.tier {
        sql.push_str(&format!(" AND i.tier = {}", args.push(t.as_str())));
    }
    if let Some(o) = filter.outcome {
        sql.push_str(&format!(" AND i.outcome = {}", args.push(o.as_str())));
    }
    if let Some(c) = &filter.error_class {
        sql.push_str(&format!(" AND i.error_class = {}", args.push(c.clone())));
    }
    if let Some(q) = filter.search.as_ref().filter(|q| !q.is_empty()) {
        let n = args.push(q.clone());
        sql.push_str(&format!(
            " AND (strpos(i.key, {n}) > 0 OR strpos(i.label, {n}) > 0 \
               OR strpos(coalesce(i.error_message, ''), {n}) > 0)"
        ));
    }
    if let Some(v) = &filter.stale {
        sql.push_str(&crate::store::api::stale_sql(&args.push(v.clone())));
    }
    if let Some(at) = filter.claimable_at {
        let n = args.push(at);
        sql.push_str(&format!(
            " AND i.status = 'pending' AND i.tier IS NULL \
               AND (i.next_attempt_at IS NULL OR i.next_attempt_at <= {n})"
        ));
    }
    sql
}

pub(super) fn claim_from_row(r: &Row) -> Claim {
    Claim {
        item_id: r.get(0),
        key: r.get(1),
        label: r.get(2),
        payload: r.get(3),
        attempt: r.get::<_, i64>(4) as u32,
        op_id: r.get(5),
        token: r.get(6),
    }
}

// Twins of sqlite/items.rs, kept: one statement per dialect (placeholders, types, row locks).
const ITEM_BY_KEY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = $1 AND i.key = $2"
);

/// What prune would delete (`$1` cutoff, `$2` failed ones too).
const OLDER_THAN: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.updated_at < $1 AND (i.status = 'done' OR ($2 AND i.status = 'failed'))
      ORDER BY b.name, i.id"
);
const DUE_RETRY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.batch_id = $1 AND i.status = 'failed' AND i.tier = 'retry'
        AND i.next_attempt_at <= $2
      ORDER BY i.id"
);

/// The retry tier, and the pending items with a not-before time.
const RETRY_TIER: &str = "SELECT count(*) FILTER (WHERE next_attempt_at <= $2),
        count(*) FILTER (WHERE next_attempt_at > $2),
        min(next_attempt_at) FILTER (WHERE next_attempt_at > $2),
        count(*) FILTER (WHERE status = 'pending' AND next_attempt_at <= $2),
        count(*) FILTER (WHERE status = 'pending' AND next_attempt_at > $2)
   FROM (SELECT status, next_attempt_at FROM items
          WHERE batch_id = $1 AND status = 'failed' AND tier = 'retry'
         UNION ALL
         SELECT status, next_attempt_at FROM items
          WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL
            AND next_attempt_at IS NOT NULL) w";

/// Pending items whose not-before time came: claimable from now on.
const RELEASE_DUE: &str = "UPDATE items SET next_attempt_at = NULL, updated_at = $2
  WHERE id IN (SELECT id FROM items
                WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL
                  AND next_attempt_at <= $2 LIMIT $3)";

const OLDEST_PENDING: &str = "SELECT created_at FROM items
  WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY id LIMIT 1";

const BEGIN_ATTEMPT: &str = "UPDATE items SET attempts = attempts + 1, updated_at = $3
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed' AND cancel_to IS NULL
 RETURNING attempts";

const SET_OP_ID: &str = "UPDATE items SET op_id = $3
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed'";

const RENEW_LEASES: &str = "UPDATE items SET lease_until = $3
  WHERE batch_id = $1 AND status = 'claimed' AND tier IS NULL AND lease_run = $2
 RETURNING id";

const ITEM_FOR_REQUEUE: &str =
    "SELECT id, key, label, tier, outcome, error_class, attempts, status FROM items
      WHERE batch_id = $1 AND key = $2";

const ITEMS_FOR_REQUEUE: &str =
    "SELECT i.id, i.key, i.label, i.tier, i.outcome, i.error_class, i.attempts, i.status
       FROM items i WHERE i.batch_id = $1";

/// A row of `ITEM_FOR_REQUEUE`.
fn requeue_from_row(r: &Row) -> Result<(i64, Requeue, String)> {
    Ok((
        r.get(0),
        Requeue {
            key: r.get(1),
            label: r.get(2),
            tier: r
                .get::<_, Option<&str>>(3)
                .map(parse_col_text)
                .transpose()?,
            outcome: r
                .get::<_, Option<&str>>(4)
                .map(parse_col_text)
                .transpose()?,
            error_class: r.get(5),
            attempts: r.get::<_, i64>(6) as u32,
        },
        r.get(7),
    ))
}

impl ItemsRead for PgTx<'_> {
    fn item_by_key(&mut self, batch: i64, key: &str) -> Result<Option<Item>> {
        match self.c.opt(ITEM_BY_KEY, &[&batch, &key])? {
            Some(r) => item_from_row(self.c, &r).map(Some),
            None => Ok(None),
        }
    }

    fn item_tombstone(&mut self, batch: i64, key: &str) -> Result<Option<Tombstone>> {
        tombstones::find(self.c, batch, key)
    }

    fn items_list(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<Item>> {
        let mut args = Args::new();
        args.push(batch);
        // Times in the SQL are on the database's clock.
        let filter = &ItemFilter {
            claimable_at: self.c.tin_opt(filter.claimable_at),
            ..filter.clone()
        };
        let cond = filter_sql(filter, &mut args);
        let limit = filter
            .limit
            .map_or_else(|| "ALL".to_string(), |l| l.to_string());
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE i.batch_id = $1{cond} ORDER BY {} LIMIT {limit} OFFSET {}",
            crate::store::rows::order_sql(filter),
            filter.offset
        );
        let rows = self.c.q(&sql, &args.refs())?;
        rows.iter().map(|r| item_from_row(self.c, r)).collect()
    }

    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64> {
        let mut args = Args::new();
        args.push(batch);
        // Times in the SQL are on the database's clock.
        let filter = &ItemFilter {
            claimable_at: self.c.tin_opt(filter.claimable_at),
            ..filter.clone()
        };
        let cond = filter_sql(filter, &mut args);
        let sql = format!("SELECT count(*)::int8 FROM items i WHERE i.batch_id = $1{cond}");
        Ok(self.c.one(&sql, &args.refs())?.get(0))
    }

    fn oldest_pending(&mut self, batch: i64) -> Result<Option<Millis>> {
        let at: Option<i64> = self.c.opt(OLDEST_PENDING, &[&batch])?.map(|r| r.get(0));
        Ok(self.c.tout_opt(at))
    }

    fn items_older_than(&mut self, cutoff: Millis, failed: bool) -> Result<Vec<Item>> {
        let at = self.c.tin(cutoff);
        let rows = self.c.q(OLDER_THAN, &[&at, &failed])?;
        rows.iter().map(|r| item_from_row(self.c, r)).collect()
    }

    fn items_due_retry(&mut self, batch: i64, now: Millis) -> Result<Vec<Item>> {
        let at = self.c.tin(now);
        let rows = self.c.q(DUE_RETRY, &[&batch, &at])?;
        rows.iter().map(|r| item_from_row(self.c, r)).collect()
    }

    fn retry_tier(&mut self, batch: i64, now: Millis) -> Result<RetryTier> {
        let at = self.c.tin(now);
        let r = self.c.one(RETRY_TIER, &[&batch, &at])?;
        Ok(RetryTier {
            due: r.get(0),
            later: r.get(1),
            next_at: self.c.tout_opt(r.get(2)),
            pending_due: r.get(3),
            pending_later: r.get(4),
        })
    }

    fn item_for_requeue(
        &mut self,
        batch: i64,
        key: &str,
    ) -> Result<Option<(i64, Requeue, String)>> {
        match self.c.opt(ITEM_FOR_REQUEUE, &[&batch, &key])? {
            Some(r) => requeue_from_row(&r).map(Some),
            None => Ok(None),
        }
    }

    fn items_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
        let mut args = Args::new();
        args.push(batch);
        let version = sel
            .stale
            .as_ref()
            .map_or(String::new(), |v| args.push(v.clone()));
        let mut cond = sel.moves_sql(&version);
        if let Some(class) = &sel.class {
            cond.push_str(&format!(
                " AND i.error_class = {}",
                args.push(class.clone())
            ));
        }
        if let Some(t) = sel.tier {
            cond.push_str(&format!(" AND i.tier = {}", args.push(t.as_str())));
        }
        let rows = self
            .c
            .q(&format!("{ITEMS_FOR_REQUEUE}{cond}"), &args.refs())?;
        rows.iter()
            .map(|r| requeue_from_row(r).map(|(id, req, _)| (id, req)))
            .collect()
    }
}

const STATUS_LOCKED: &str = "SELECT status FROM items WHERE batch_id = $1 AND key = $2 FOR UPDATE";

const MARK_SKIPPED: &str = "UPDATE items SET status = 'done', outcome = 'skipped', tier = NULL,
       next_attempt_at = NULL, result = $3, updated_at = $4
 WHERE batch_id = $1 AND key = $2";

const ITEM_FAIL: &str =
    "UPDATE items SET status = 'failed', tier = $3, error_class = $4, error_message = $5,
            next_attempt_at = $6,
            cost = CASE WHEN $7::float8 IS NULL THEN cost ELSE coalesce(cost, 0) + $7::float8 END,
            lease_run = NULL, lease_until = NULL, updated_at = $8
      WHERE id = $1 AND lease_token = $2 AND status = 'claimed' AND cancel_to IS NULL";

const ITEM_RELEASE: &str =
    "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL,
        updated_at = $3, attempts = greatest(attempts - $4, 0)
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed' AND cancel_to IS NULL";

const ITEM_RELEASE_ORPHAN: &str = "UPDATE items SET status = 'pending', lease_run = NULL,
        lease_until = NULL, updated_at = $2
  WHERE id = $1";

const CLAIMS_ORPHANED_LOCKED: &str = "SELECT id, key, attempts, lease_run, lease_token FROM items
  WHERE batch_id = $1 AND status = 'claimed' AND tier IS NULL
    AND lease_run <> $2
    AND lease_run NOT IN
        (SELECT run_id FROM locks WHERE batch_id = $1 AND run_id IS NOT NULL)
  ORDER BY id FOR UPDATE";

const ITEM_CLAIM_BY_KEY: &str = "UPDATE items
    SET status = 'claimed', tier = NULL, next_attempt_at = NULL, lease_run = $3,
        lease_until = $4, lease_token = nextval('lease_tokens'),
        attempts = attempts + 1, updated_at = $5
  WHERE batch_id = $1 AND key = $2
 RETURNING id, key, label, payload, attempts, op_id, lease_token";

impl ItemsWrite for PgTx<'_> {
    fn item_status_locked(&mut self, batch: i64, key: &str) -> Result<Option<Status>> {
        match self.c.opt(STATUS_LOCKED, &[&batch, &key])? {
            Some(r) => parse_col_text(r.get(0)).map(Some),
            None => Ok(None),
        }
    }

    fn item_mark_skipped(
        &mut self,
        batch: i64,
        key: &str,
        result: &str,
        now: Millis,
    ) -> Result<()> {
        let at = self.c.tin(now);
        self.c
            .x(MARK_SKIPPED, &[&batch, &key, &text(result), &at])?;
        Ok(())
    }

    fn item_begin_attempt(&mut self, item: i64, token: i64, now: Millis) -> Result<Option<u32>> {
        let at = self.c.tin(now);
        Ok(self
            .c
            .opt(BEGIN_ATTEMPT, &[&item, &token, &at])?
            .map(|r| r.get::<_, i64>(0) as u32))
    }

    fn item_set_op_id(&mut self, item: i64, token: i64, op_id: &str) -> Result<bool> {
        Ok(self.c.x(SET_OP_ID, &[&item, &token, &text(op_id)])? == 1)
    }

    fn items_release_due(&mut self, batch: i64, now: Millis, limit: usize) -> Result<usize> {
        let at = self.c.tin(now);
        Ok(self.c.x(RELEASE_DUE, &[&batch, &at, &(limit as i64)])? as usize)
    }

    fn items_renew_leases(&mut self, batch: i64, run: i64, until: Millis) -> Result<Vec<i64>> {
        let until = self.c.tin(until);
        Ok(self
            .c
            .q(RENEW_LEASES, &[&batch, &run, &until])?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn item_fail(&mut self, f: &Failure<'_>) -> Result<bool> {
        let at = self.c.tin(f.now);
        let next = self.c.tin_opt(f.next_attempt_at);
        let (class, message) = (text(f.error_class), text(f.message));
        let n = self.c.x(
            ITEM_FAIL,
            &[
                &f.item_id,
                &f.token,
                &f.tier.as_str(),
                &class,
                &message,
                &next,
                &f.cost,
                &at,
            ],
        )?;
        Ok(n == 1)
    }

    fn item_release(
        &mut self,
        item: i64,
        token: i64,
        cut_short: bool,
        now: Millis,
    ) -> Result<bool> {
        let at = self.c.tin(now);
        let n = self
            .c
            .x(ITEM_RELEASE, &[&item, &token, &at, &i64::from(cut_short)])?;
        Ok(n == 1)
    }

    fn item_release_orphan(&mut self, item: i64, now: Millis) -> Result<()> {
        let at = self.c.tin(now);
        self.c.x(ITEM_RELEASE_ORPHAN, &[&item, &at])?;
        Ok(())
    }

    fn claims_orphaned_locked(&mut self, batch: i64, current: i64) -> Result<Vec<Orphaned>> {
        Ok(self
            .c
            .q(CLAIMS_ORPHANED_LOCKED, &[&batch, &current])?
            .iter()
            .map(|r| Orphaned {
                item: r.get(0),
                key: r.get(1),
                attempts: r.get(2),
                lease_run: r.get(3),
                token: r.get(4),
            })
            .collect())
    }

    fn item_claim_by_key(
        &mut self,
        batch: i64,
        key: &str,
        run: i64,
        until: Millis,
        now: Millis,
    ) -> Result<Claim> {
        let (until, at) = (self.c.tin(until), self.c.tin(now));
        Ok(claim_from_row(&self.c.one(
            ITEM_CLAIM_BY_KEY,
            &[&batch, &key, &run, &until, &at],
        )?))
    }
}
