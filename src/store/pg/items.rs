//! Items and their transitions (add, claim and complete are the hot paths
//! in `hot.rs`).
//!
//! Claims take pending rows `FOR UPDATE SKIP LOCKED`: runners on several
//! hosts claim disjoint items without waiting for each other. Fencing
//! tokens come from one sequence. Every transition that ends a claim is
//! conditional on the lease token, so a runner that lost its lease cannot
//! overwrite a newer claim.

use crate::store::Refusal;
use postgres::Row;

use super::batches::batch_id;
use super::conn::{Conn, parse_col_text, text};
use super::events::{Args, insert as insert_event};
use super::tombstones;
use super::{PgStore, PgTx};
use crate::model::waiting::RetryTier;
use crate::model::{Claim, Item, Millis, NewEvent};
use crate::model::{Status, Tombstone};
use crate::store::api::{Failure, ItemFilter, Requeue, Selection};
use crate::store::chunks::Chunks;
use crate::store::dialect::{ItemsRead, ItemsWrite};
use crate::store::json_col;
use crate::store::rows::item_columns;
use crate::store::shared::{self, Orphan};
use crate::store::{Result, StoreError};

/// Rows moved per write transaction by bulk operations.
const CHUNK: i64 = 2_000;

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
    sql
}

/// Does `run_id` hold a seat of the batch lock? The seat's row stays shared-locked to
/// the end of the transaction, so a takeover waits for this claim to
/// commit, and a claim after a takeover sees the new holder.
fn holds_lock(c: &mut Conn, batch_id: i64, run_id: i64) -> Result<bool> {
    Ok(c.opt(
        "SELECT 1 FROM locks WHERE batch_id = $1 AND run_id = $2 FOR SHARE",
        &[&batch_id, &run_id],
    )?
    .is_some())
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

impl PgStore {
    /// Ends a claim in `failed` with a tier, appending a dead letter.
    pub fn fail(&mut self, f: &Failure<'_>, event: &NewEvent) -> Result<bool> {
        self.write(|c| fail_in(c, f, event))
    }

    /// Gives a claimed item back to pending (see `Store::release`).
    pub fn release(
        &mut self,
        item_id: i64,
        token: i64,
        run_id: i64,
        cut_short: bool,
        event: &NewEvent,
    ) -> Result<bool> {
        self.write(|c| {
            let at = c.tin(event.at);
            let n = c.x(
                "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL,
                        updated_at = $3, attempts = greatest(attempts - $4, 0)
                  WHERE id = $1 AND lease_token = $2 AND status = 'claimed'",
                &[&item_id, &token, &at, &i64::from(cut_short)],
            )?;
            if n == 1 {
                c.x(
                    "UPDATE runs SET released = released + 1 WHERE id = $1",
                    &[&run_id],
                )?;
                insert_event(c, event)?;
            }
            Ok(n == 1)
        })
    }

    /// Takes back every claim of `batch` not held by `current_run` (which
    /// holds the batch lock); see `Store::reclaim`.
    pub fn reclaim(
        &mut self,
        batch: &str,
        current_run: i64,
        max_attempts: u32,
        now: Millis,
    ) -> Result<(usize, usize)> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            let orphans: Vec<(i64, String, i64, i64, i64)> = c
                .q(
                    "SELECT id, key, attempts, lease_run, lease_token FROM items
                      WHERE batch_id = $1 AND status = 'claimed' AND tier IS NULL
                        AND lease_run <> $2
                        AND lease_run NOT IN
                            (SELECT run_id FROM locks WHERE batch_id = $1 AND run_id IS NOT NULL)
                      ORDER BY id FOR UPDATE",
                    &[&id, &current_run],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
                .collect();
            let (mut released, mut quarantined) = (0, 0);
            let at = c.tin(now);
            for (item_id, key, attempts, lease_run, token) in orphans {
                match shared::orphan(batch, &key, attempts, lease_run, max_attempts, now) {
                    Orphan::Quarantine { message, event } => {
                        let failure = shared::interrupted(item_id, token, lease_run, &message, now);
                        fail_in(c, &failure, &event)?;
                        quarantined += 1;
                    }
                    Orphan::Release(event) => {
                        c.x(
                            "UPDATE items SET status = 'pending', lease_run = NULL,
                                    lease_until = NULL, updated_at = $2
                              WHERE id = $1",
                            &[&item_id, &at],
                        )?;
                        insert_event(c, &event)?;
                        released += 1;
                    }
                }
            }
            Ok((released, quarantined))
        })
    }

    /// Moves retry-tier failures whose next-attempt time has passed back to
    /// pending, in chunks. Returns their keys.
    pub fn redrive_due(
        &mut self,
        batch: &str,
        run_id: Option<i64>,
        now: Millis,
    ) -> Result<Vec<String>> {
        let mut all = Vec::new();
        loop {
            let keys = self.write(|c| {
                let id = batch_id(c, batch)?;
                let at = c.tin(now);
                let keys: Vec<String> = c
                    .q(
                        "WITH due AS (
                             SELECT id FROM items
                              WHERE batch_id = $1 AND status = 'failed' AND tier = 'retry'
                                AND next_attempt_at <= $2
                              ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED),
                         moved AS (
                             UPDATE items i SET status = 'pending', tier = NULL,
                                    next_attempt_at = NULL, updated_at = $2
                               FROM due WHERE i.id = due.id
                             RETURNING i.id, i.key),
                         logged AS (
                             INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message)
                             SELECT $2, $1, $4, key, id, 'redriven', 'redriven: retry time reached'
                               FROM moved ORDER BY id)
                         SELECT key FROM moved ORDER BY id",
                        &[&id, &at, &CHUNK, &run_id],
                    )?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if let (Some(run), false) = (run_id, keys.is_empty()) {
                    c.x(
                        "UPDATE runs SET redriven = redriven + $2 WHERE id = $1",
                        &[&run, &(keys.len() as i64)],
                    )?;
                }
                Ok(keys)
            })?;
            let done = (keys.len() as i64) < CHUNK;
            all.extend(keys);
            if done {
                return Ok(all);
            }
        }
    }

    /// Failed items back to pending (see `Store::requeue`).
    pub fn requeue(
        &mut self,
        batch: &str,
        sel: &Selection,
        reset_attempts: bool,
        dry_run: bool,
        actor: &str,
        now: Millis,
    ) -> Result<Vec<Requeue>> {
        let matched = self.read(|c| select(c, batch, sel))?;
        if dry_run || matched.is_empty() {
            return Ok(matched.into_iter().map(|(_, r)| r).collect());
        }
        let mut moved = Vec::with_capacity(matched.len());
        let mut chunks = Chunks::new(1_000);
        let mut rest = matched.as_slice();
        while !rest.is_empty() {
            if let Some(signal) = self.stop.requested() {
                let cause = StoreError::Interrupted(signal);
                return Err(shared::requeue_cut_short(
                    sel,
                    moved.len(),
                    matched.len(),
                    cause,
                ));
            }
            let store = &mut *self;
            let done = chunks.run(|size| {
                let (chunk, later) = rest.split_at(size.min(rest.len()));
                rest = later;
                store.write(|c| requeue_chunk(c, batch, sel, chunk, reset_attempts, actor, now))
            });
            match done {
                Ok(done) => moved.extend(done),
                Err(cause) => {
                    return Err(shared::requeue_cut_short(
                        sel,
                        moved.len(),
                        matched.len(),
                        cause,
                    ));
                }
            }
        }
        Ok(moved)
    }

    /// Claims one named item (`run --key`): pending, or failed (whatever its
    /// tier). A done or in-flight item is refused.
    pub fn claim_key(
        &mut self,
        batch: &str,
        key: &str,
        run_id: i64,
        lease_until: Millis,
        now: Millis,
    ) -> Result<Claim> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            if !holds_lock(c, id, run_id)? {
                return Err(Refusal::SeatLost {
                    run: run_id,
                    batch: batch.to_string(),
                }
                .into());
            }
            let status: Option<String> = c
                .opt(
                    "SELECT status FROM items WHERE batch_id = $1 AND key = $2 FOR UPDATE",
                    &[&id, &key],
                )?
                .map(|r| r.get(0));
            let Some(status) = status else {
                return Err(tombstones::missing(c, id, batch, key));
            };
            match status.as_str() {
                "done" => {
                    return Err(Refusal::AlreadyDone {
                        key: key.to_string(),
                    }
                    .into());
                }
                "claimed" => {
                    return Err(Refusal::InFlightClaim {
                        key: key.to_string(),
                    }
                    .into());
                }
                _ => {}
            }
            let (until, at) = (c.tin(lease_until), c.tin(now));
            let claim = claim_from_row(&c.one(
                "UPDATE items
                    SET status = 'claimed', tier = NULL, next_attempt_at = NULL, lease_run = $3,
                        lease_until = $4, lease_token = nextval('lease_tokens'),
                        attempts = attempts + 1, updated_at = $5
                  WHERE batch_id = $1 AND key = $2
                 RETURNING id, key, label, payload, attempts, op_id, lease_token",
                &[&id, &key, &run_id, &until, &at],
            )?);
            insert_event(
                c,
                &NewEvent::new(
                    now,
                    batch,
                    "claimed",
                    format!("claimed (attempt {}, by key)", claim.attempt),
                )
                .run(run_id)
                .key(key),
            )?;
            Ok(claim)
        })
    }
}

pub(crate) fn fail_in(c: &mut Conn, f: &Failure<'_>, event: &NewEvent) -> Result<bool> {
    let at = c.tin(f.now);
    let next = c.tin_opt(f.next_attempt_at);
    let (class, message) = (text(f.error_class), text(f.message));
    let n = c.x(
        "UPDATE items SET status = 'failed', tier = $3, error_class = $4, error_message = $5,
                next_attempt_at = $6,
                cost = CASE WHEN $7::float8 IS NULL THEN cost ELSE coalesce(cost, 0) + $7::float8 END,
                lease_run = NULL, lease_until = NULL, updated_at = $8
          WHERE id = $1 AND lease_token = $2 AND status = 'claimed'",
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
    if n == 1 {
        c.x(
            "INSERT INTO dead_letters (batch_id, item_id, key, label, payload, error_class,
                                       message, attempt, failed_at, tier, run_id)
             SELECT batch_id, id, key, label, payload, $2, $3, attempts, $4, $5, $6
               FROM items WHERE id = $1",
            &[
                &f.item_id,
                &class,
                &message,
                &at,
                &f.tier.as_str(),
                &f.run_id,
            ],
        )?;
        c.x(
            "UPDATE runs SET failed = failed + 1, retry = retry + ($2 = 'retry')::int,
                    manual = manual + ($2 = 'manual')::int, cost = cost + coalesce($3::float8, 0)
              WHERE id = $1",
            &[&f.run_id, &f.tier.as_str(), &f.cost],
        )?;
        insert_event(c, event)?;
    }
    Ok(n == 1)
}

/// Moves the items of `chunk` that are still failed back to pending, with a
/// `requeued` event each (written first: it records the tier and class the
/// item leaves).
fn requeue_chunk(
    c: &mut Conn,
    batch: &str,
    sel: &Selection,
    chunk: &[(i64, Requeue)],
    reset_attempts: bool,
    actor: &str,
    now: Millis,
) -> Result<Vec<Requeue>> {
    let id = batch_id(c, batch)?;
    let ids: Vec<i64> = chunk.iter().map(|(id, _)| *id).collect();
    let at = c.tin(now);
    // Still in the state the selection moves (a run may have changed it).
    // A done item runs again from scratch: no result, and not its finished
    // operation's id (polling that would give the same answer).
    let from = sel.moves_sql("$6");
    let mut values: Vec<&(dyn postgres::types::ToSql + Sync)> =
        vec![&ids, &at, &id, &actor, &reset_attempts];
    if let Some(v) = &sel.stale {
        values.push(v);
    }
    let moved: std::collections::HashSet<i64> = c
        .q(
            &format!(
                "WITH picked AS (
                     SELECT i.id, i.key, i.tier, i.outcome, i.error_class, i.op_id, i.status FROM items i
                      WHERE i.id = ANY($1){from} ORDER BY i.id FOR UPDATE),
                 logged AS (
                     INSERT INTO events (at, batch_id, key, item_id, kind, actor, message, fields)
                     SELECT $2, $3, key, id, 'requeued', $4,
                            'requeued from ' || coalesce(tier, outcome) || ' by ' || $4,
                            json_build_object('tier', tier, 'outcome', outcome,
                                              'error_class', error_class, 'op_id', op_id,
                                              'reset_attempts', $5::bool)::text
                       FROM picked ORDER BY id)
                 UPDATE items i SET status = 'pending', tier = NULL, next_attempt_at = NULL,
                        outcome = NULL,
                        result = CASE WHEN picked.status = 'done' THEN NULL ELSE i.result END,
                        op_id = CASE WHEN picked.status = 'done' THEN NULL ELSE i.op_id END,
                        attempts = CASE WHEN $5::bool THEN 0 ELSE i.attempts END, updated_at = $2
                   FROM picked WHERE i.id = picked.id
                 RETURNING i.id"
            ),
            &values,
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(chunk
        .iter()
        .filter(|(id, _)| moved.contains(id))
        .map(|(_, r)| r.clone())
        .collect())
}

fn select(c: &mut Conn, batch: &str, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
    let id = batch_id(c, batch)?;
    let row = |r: &Row| -> Result<(i64, Requeue, String)> {
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
    };
    if sel.stale.is_some() {
        crate::store::shared::check_selection(sel)?;
    }
    if !sel.keys.is_empty() {
        let mut named = shared::Named::default();
        for key in &sel.keys {
            let found = c.opt(
                "SELECT id, key, label, tier, outcome, error_class, attempts, status FROM items
                  WHERE batch_id = $1 AND key = $2",
                &[&id, key],
            )?;
            let Some(found) = found else {
                return Err(tombstones::missing(c, id, batch, key));
            };
            let (item_id, r, status) = row(&found)?;
            named.add(sel, item_id, r, &status);
        }
        return named.finish(batch, sel);
    }
    shared::check_selection(sel)?;
    let mut args = Args::new();
    args.push(id);
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
    let rows = c.q(
        &format!(
            "SELECT i.id, i.key, i.label, i.tier, i.outcome, i.error_class, i.attempts, i.status
               FROM items i WHERE i.batch_id = $1{cond} ORDER BY i.id"
        ),
        &args.refs(),
    )?;
    rows.iter()
        .map(|r| row(r).map(|(id, req, _)| (id, req)))
        .collect()
}

const ITEM_BY_KEY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = $1 AND i.key = $2"
);

const DUE_RETRY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.batch_id = $1 AND i.status = 'failed' AND i.tier = 'retry'
        AND i.next_attempt_at <= $2
      ORDER BY i.id"
);

const RETRY_TIER: &str = "SELECT count(*) FILTER (WHERE next_attempt_at <= $2),
        count(*) FILTER (WHERE next_attempt_at > $2),
        min(next_attempt_at) FILTER (WHERE next_attempt_at > $2)
   FROM items WHERE batch_id = $1 AND status = 'failed' AND tier = 'retry'";

const OLDEST_PENDING: &str = "SELECT created_at FROM items
  WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY id LIMIT 1";

const BEGIN_ATTEMPT: &str = "UPDATE items SET attempts = attempts + 1, updated_at = $3
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed'
 RETURNING attempts";

const SET_OP_ID: &str = "UPDATE items SET op_id = $3
  WHERE id = $1 AND lease_token = $2 AND status = 'claimed'";

const RENEW_LEASES: &str = "UPDATE items SET lease_until = $3
  WHERE batch_id = $1 AND status = 'claimed' AND tier IS NULL AND lease_run = $2
 RETURNING id";

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
        let cond = filter_sql(filter, &mut args);
        let limit = filter
            .limit
            .map_or_else(|| "ALL".to_string(), |l| l.to_string());
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE i.batch_id = $1{cond} ORDER BY i.id LIMIT {limit} OFFSET {}",
            filter.offset
        );
        let rows = self.c.q(&sql, &args.refs())?;
        rows.iter().map(|r| item_from_row(self.c, r)).collect()
    }

    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64> {
        let mut args = Args::new();
        args.push(batch);
        let cond = filter_sql(filter, &mut args);
        let sql = format!("SELECT count(*)::int8 FROM items i WHERE i.batch_id = $1{cond}");
        Ok(self.c.one(&sql, &args.refs())?.get(0))
    }

    fn oldest_pending(&mut self, batch: i64) -> Result<Option<Millis>> {
        let at: Option<i64> = self.c.opt(OLDEST_PENDING, &[&batch])?.map(|r| r.get(0));
        Ok(self.c.tout_opt(at))
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
        })
    }
}

const STATUS_LOCKED: &str = "SELECT status FROM items WHERE batch_id = $1 AND key = $2 FOR UPDATE";

const MARK_SKIPPED: &str = "UPDATE items SET status = 'done', outcome = 'skipped', tier = NULL,
       next_attempt_at = NULL, result = $3, updated_at = $4
 WHERE batch_id = $1 AND key = $2";

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

    fn items_renew_leases(&mut self, batch: i64, run: i64, until: Millis) -> Result<Vec<i64>> {
        let until = self.c.tin(until);
        Ok(self
            .c
            .q(RENEW_LEASES, &[&batch, &run, &until])?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }
}
