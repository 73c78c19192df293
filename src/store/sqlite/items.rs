//! Items and their transitions: fail, release, reclaim, redrive, requeue,
//! skip, claim by key (add, claim with its lease and fencing token, and
//! complete are the hot paths in `hot.rs`).
//!
//! Every transition that ends a claim is conditional on the lease token, so
//! a runner that lost its lease cannot overwrite a newer claim.

use crate::store::{Fault, Refusal};
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use super::batches::batch_id;
use super::events::insert as insert_event;
use super::{SqliteStore, SqliteTx, parse_col};
use crate::model::{Claim, Item, Millis, NewEvent, waiting::RetryTier};
use crate::model::{Status, Tombstone};
use crate::store::api::{Failure, ItemFilter, Requeue, Selection};
use crate::store::chunks::Chunks;
use crate::store::dialect::{ItemsRead, ItemsWrite};
use crate::store::rows::item_columns;
use crate::store::shared::Orphan;
use crate::store::{Result, StoreError, json_col};

/// Rows moved per write transaction by bulk operations, so a runner waiting
/// for the write lock is never held up for long.
const CHUNK: usize = 2_000;

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

impl SqliteStore {
    /// Ends a claim in `failed` with a tier, appending a dead letter. False
    /// (and nothing written) if the lease token no longer matches.
    pub fn fail(&mut self, f: &Failure<'_>, event: &NewEvent) -> Result<bool> {
        self.write(|tx| fail_in(tx, f, event))
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
        self.write(|tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL, updated_at = ?3,
                            attempts = max(attempts - ?4, 0)
                      WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed'",
                )?
                .execute(params![item_id, token, event.at, i64::from(cut_short)])?;
            if n == 1 {
                tx.prepare_cached("UPDATE runs SET released = released + 1 WHERE id = ?1")?
                    .execute([run_id])?;
                insert_event(tx, event)?;
            }
            Ok(n == 1)
        })
    }

    /// Takes back every claim of `batch` whose run holds no seat of the
    /// batch lock (`current_run` must hold one): claims need a seat, so such
    /// a claim was left by a run that died or was cut off — whatever its
    /// lease says and whether or not that run was already marked crashed.
    /// Callers free stale seats first (`free_stale_locks`).
    /// Items that already used `max_attempts` are quarantined instead of
    /// being run again (a poison item that kills its runner every time).
    /// Returns (released to pending, quarantined).
    pub fn reclaim(
        &mut self,
        batch: &str,
        current_run: i64,
        max_attempts: u32,
        now: Millis,
    ) -> Result<(usize, usize)> {
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            let orphans: Vec<(i64, String, u32, i64, i64)> = tx
                .prepare_cached(
                    "SELECT id, key, attempts, lease_run, lease_token FROM items
                      WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run <> ?2
                        AND lease_run NOT IN
                            (SELECT run_id FROM locks WHERE batch_id = ?1 AND run_id IS NOT NULL)",
                )?
                .query_map(params![id, current_run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
                .collect::<rusqlite::Result<_>>()?;
            let (mut released, mut quarantined) = (0, 0);
            for (item_id, key, attempts, lease_run, token) in orphans {
                match crate::store::shared::orphan(batch, &key, i64::from(attempts), lease_run, max_attempts, now) {
                    Orphan::Quarantine { message, event } => {
                        let failure = crate::store::shared::interrupted(item_id, token, lease_run, &message, now);
                        fail_in(tx, &failure, &event)?;
                        quarantined += 1;
                    }
                    Orphan::Release(event) => {
                        tx.execute(
                            "UPDATE items SET status = 'pending', lease_run = NULL, lease_until = NULL, updated_at = ?2
                              WHERE id = ?1",
                            params![item_id, now],
                        )?;
                        insert_event(tx, &event)?;
                        released += 1;
                    }
                }
            }
            Ok((released, quarantined))
        })
    }

    /// Moves retry-tier failures whose next-attempt time has passed back to
    /// pending. Returns their keys.
    pub fn redrive_due(
        &mut self,
        batch: &str,
        run_id: Option<i64>,
        now: Millis,
    ) -> Result<Vec<String>> {
        let mut all = Vec::new();
        loop {
            let keys = self.write(|tx| {
                let id = batch_id(tx, batch)?;
                let keys: Vec<String> = tx
                    .prepare_cached(
                        "UPDATE items SET status = 'pending', tier = NULL, next_attempt_at = NULL, updated_at = ?2
                          WHERE id IN (SELECT id FROM items
                                        WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry'
                                          AND next_attempt_at <= ?2 LIMIT ?3)
                         RETURNING key",
                    )?
                    .query_map(params![id, now, CHUNK as i64], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                for key in &keys {
                    let mut e = NewEvent::new(now, batch, "redriven", "redriven: retry time reached").key(key);
                    e.run_id = run_id;
                    insert_event(tx, &e)?;
                }
                if let (Some(run), false) = (run_id, keys.is_empty()) {
                    tx.execute("UPDATE runs SET redriven = redriven + ?2 WHERE id = ?1", params![run, keys.len() as i64])?;
                }
                Ok(keys)
            })?;
            let done = keys.len() < CHUNK;
            all.extend(keys);
            if done {
                return Ok(all);
            }
        }
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
        let matched = self.read(|c| select(c, batch, sel))?;
        if dry_run || matched.is_empty() {
            return Ok(matched.into_iter().map(|(_, r)| r).collect());
        }
        // Chunks of the selection, each one set-based (two statements, so
        // the triggers' per-statement setup is paid once per chunk) and
        // paced to hold the write lock for about 20 ms while a runner is
        // live; long ones (about a second) while none is, as `add_items`.
        let mut moved = Vec::with_capacity(matched.len());
        let mut chunks = Chunks::new(1_000);
        let mut rest = matched.into_iter().peekable();
        let total = rest.len();
        while rest.peek().is_some() {
            if let Some(signal) = self.stop.requested() {
                let cause = StoreError::Interrupted(signal);
                return Err(crate::store::shared::requeue_cut_short(
                    sel,
                    moved.len(),
                    total,
                    cause,
                ));
            }
            let live = self.read(|c| super::locks::any_live(c, crate::util::time::now_ms()));
            chunks.requeue_pace(live.unwrap_or(true));
            let store = &mut *self;
            let step = chunks.run(|size| -> Result<()> {
                let chunk: Vec<_> = rest.by_ref().take(size).collect();
                let ids = store.write(|tx| {
                    requeue_chunk(tx, batch, sel, &chunk, reset_attempts, actor, now)
                })?;
                moved.extend(
                    chunk
                        .into_iter()
                        .filter(|(id, _)| ids.contains(id))
                        .map(|(_, r)| r),
                );
                Ok(())
            });
            if let Err(cause) = step {
                return Err(crate::store::shared::requeue_cut_short(
                    sel,
                    moved.len(),
                    total,
                    cause,
                ));
            }
        }
        Ok(moved)
    }
}

/// Moves the items of `chunk` that are still failed back to pending, with a
/// `requeued` event each (written first: it records the tier and class the
/// item leaves). Items that changed since the selection are left alone.
/// Returns the ids of the items moved.
fn requeue_chunk(
    tx: &Connection,
    batch: &str,
    sel: &Selection,
    chunk: &[(i64, Requeue)],
    reset_attempts: bool,
    actor: &str,
    now: Millis,
) -> Result<std::collections::HashSet<i64>> {
    let id = batch_id(tx, batch)?;
    let ids = serde_json::to_string(&chunk.iter().map(|(id, _)| *id).collect::<Vec<_>>())
        .map_err(|e| StoreError::Fault(Fault::Encoding(format!("encoding item ids: {e}"))))?;
    // Still in the state the selection moves (a run may have changed it).
    let from = sel.moves_sql("?6");
    let version = sel.stale.as_deref();
    tx.prepare_cached(&format!(
        "INSERT INTO events (at, batch_id, key, item_id, kind, actor, message, fields)
         SELECT ?2, ?3, i.key, i.id, 'requeued', ?4,
                'requeued from ' || coalesce(i.tier, i.outcome) || ' by ' || ?4,
                json_object('tier', i.tier, 'outcome', i.outcome, 'error_class', i.error_class,
                            'op_id', i.op_id,
                            'reset_attempts', json(CASE WHEN ?5 THEN 'true' ELSE 'false' END))
           FROM items i
          WHERE i.id IN (SELECT value FROM json_each(?1)){from}
          ORDER BY i.id"
    ))?
    .execute(params_from_iter(
        params![ids, now, id, actor, reset_attempts]
            .iter()
            .copied()
            .chain(version.as_ref().map(|v| v as &dyn rusqlite::ToSql)),
    ))?;
    // A done item runs again from scratch: no result, and not its finished
    // operation's id (polling that would give the same answer).
    let moved: std::collections::HashSet<i64> = tx
        .prepare_cached(&format!(
            "UPDATE items AS i SET status = 'pending', tier = NULL, next_attempt_at = NULL,
                    outcome = NULL, result = CASE WHEN status = 'done' THEN NULL ELSE result END,
                    op_id = CASE WHEN status = 'done' THEN NULL ELSE op_id END,
                    attempts = CASE WHEN ?3 THEN 0 ELSE attempts END, updated_at = ?2
              WHERE i.id IN (SELECT value FROM json_each(?1)){}
             RETURNING id",
            sel.moves_sql("?4")
        ))?
        .query_map(
            params_from_iter(
                params![ids, now, reset_attempts]
                    .iter()
                    .copied()
                    .chain(version.as_ref().map(|v| v as &dyn rusqlite::ToSql)),
            ),
            |r| r.get(0),
        )?
        .collect::<rusqlite::Result<_>>()?;
    Ok(moved)
}

fn select(c: &Connection, batch: &str, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
    let id = batch_id(c, batch)?;
    let row = |r: &Row<'_>| -> rusqlite::Result<(i64, Requeue, String)> {
        let tier: Option<String> = r.get(3)?;
        let outcome: Option<String> = r.get(4)?;
        Ok((
            r.get(0)?,
            Requeue {
                key: r.get(1)?,
                label: r.get(2)?,
                tier: tier.as_deref().map(|t| parse_col(3, t)).transpose()?,
                outcome: outcome.as_deref().map(|o| parse_col(4, o)).transpose()?,
                error_class: r.get(5)?,
                attempts: r.get(6)?,
            },
            r.get(7)?,
        ))
    };
    if sel.stale.is_some() {
        crate::store::shared::check_selection(sel)?;
    }
    if !sel.keys.is_empty() {
        let mut named = crate::store::shared::Named::default();
        let mut st = c.prepare_cached(
            "SELECT id, key, label, tier, outcome, error_class, attempts, status FROM items
              WHERE batch_id = ?1 AND key = ?2",
        )?;
        for key in &sel.keys {
            let (item_id, r, status) = st
                .query_row(params![id, key], row)
                .optional()?
                .ok_or_else(|| super::tombstones::missing(c, id, batch, key))?;
            named.add(sel, item_id, r, &status);
        }
        return named.finish(batch, sel);
    }
    crate::store::shared::check_selection(sel)?;
    let mut args = vec![rusqlite::types::Value::Integer(id)];
    let cond = selection_sql(sel, &mut args);
    // Sorted here rather than by an ORDER BY: SQLite found the rows through
    // the queue index and sorted them in a temporary b-tree, which took
    // longer than finding them (0.1 s at 100,000 failed items).
    let mut st = c.prepare(&format!(
        "SELECT i.id, i.key, i.label, i.tier, i.outcome, i.error_class, i.attempts, i.status
           FROM items i WHERE i.batch_id = ?1{cond}"
    ))?;
    let mut rows: Vec<(i64, Requeue)> = st
        .query_map(params_from_iter(args), row)?
        .map(|r| r.map(|(id, req, _)| (id, req)))
        .collect::<rusqlite::Result<_>>()?;
    rows.sort_unstable_by_key(|(id, _)| *id);
    Ok(rows)
}

/// Does `run_id` hold a seat of the batch lock (see `start_run`)?
pub(super) fn holds_lock(tx: &Connection, batch_id: i64, run_id: i64) -> Result<bool> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM locks WHERE batch_id = ?1 AND run_id = ?2")?
        .query_row(params![batch_id, run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(crate) fn fail_in(tx: &Connection, f: &Failure<'_>, event: &NewEvent) -> Result<bool> {
    let n = tx
        .prepare_cached(
            "UPDATE items SET status = 'failed', tier = ?3, error_class = ?4, error_message = ?5,
                    next_attempt_at = ?6, cost = CASE WHEN ?7 IS NULL THEN cost ELSE coalesce(cost, 0) + ?7 END,
                    lease_run = NULL, lease_until = NULL, updated_at = ?8
              WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed'",
        )?
        .execute(params![
            f.item_id,
            f.token,
            f.tier.as_str(),
            f.error_class,
            f.message,
            f.next_attempt_at,
            f.cost,
            f.now
        ])?;
    if n == 1 {
        tx.prepare_cached(
            "INSERT INTO dead_letters (batch_id, item_id, key, label, payload, error_class, message, attempt,
                                       failed_at, tier, run_id)
             SELECT batch_id, id, key, label, payload, ?2, ?3, attempts, ?4, ?5, ?6 FROM items WHERE id = ?1",
        )?
        .execute(params![f.item_id, f.error_class, f.message, f.now, f.tier.as_str(), f.run_id])?;
        tx.prepare_cached(
            "UPDATE runs SET failed = failed + 1, retry = retry + (?2 = 'retry'), manual = manual + (?2 = 'manual'),
                    cost = cost + coalesce(?3, 0)
              WHERE id = ?1",
        )?
        .execute(params![f.run_id, f.tier.as_str(), f.cost])?;
        insert_event(tx, event)?;
    }
    Ok(n == 1)
}

impl SqliteStore {
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
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            if !holds_lock(tx, id, run_id)? {
                return Err(Refusal::SeatLost { run: run_id, batch: batch.to_string() }.into());
            }
            let status: String = tx
                .query_row("SELECT status FROM items WHERE batch_id = ?1 AND key = ?2", params![id, key], |r| r.get(0))
                .optional()?
                .ok_or_else(|| super::tombstones::missing(tx, id, batch, key))?;
            match status.as_str() {
                "done" => {
                    return Err(Refusal::AlreadyDone { key: key.to_string() }.into());
                }
                "claimed" => {
                    return Err(Refusal::InFlightClaim { key: key.to_string() }.into());
                }
                _ => {}
            }
            let claim = tx.query_row(
                "UPDATE items
                    SET status = 'claimed', tier = NULL, next_attempt_at = NULL, lease_run = ?3,
                        lease_until = ?4, lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?5
                  WHERE batch_id = ?1 AND key = ?2
                 RETURNING id, key, label, payload, attempts, op_id, lease_token",
                params![id, key, run_id, lease_until, now],
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
            )?;
            insert_event(
                tx,
                &NewEvent::new(now, batch, "claimed", format!("claimed (attempt {}, by key)", claim.attempt))
                    .run(run_id)
                    .key(key),
            )?;
            Ok(claim)
        })
    }
}

const ITEM_BY_KEY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = ?1 AND i.key = ?2"
);

const DUE_RETRY: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items i JOIN batches b ON b.id = i.batch_id
      WHERE i.batch_id = ?1 AND i.status = 'failed' AND i.tier = 'retry' AND i.next_attempt_at <= ?2
      ORDER BY i.id"
);

const RETRY_TIER: &str =
    "SELECT coalesce(sum(next_attempt_at <= ?2), 0), coalesce(sum(next_attempt_at > ?2), 0),
            min(CASE WHEN next_attempt_at > ?2 THEN next_attempt_at END)
       FROM items WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry'";

const OLDEST_PENDING: &str = "SELECT created_at FROM items
  WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY id LIMIT 1";

const BEGIN_ATTEMPT: &str = "UPDATE items SET attempts = attempts + 1, updated_at = ?3
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed'
 RETURNING attempts";

const SET_OP_ID: &str =
    "UPDATE items SET op_id = ?3 WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed'";

const RENEW_LEASES: &str = "UPDATE items SET lease_until = ?3
  WHERE batch_id = ?1 AND status = 'claimed' AND tier IS NULL AND lease_run = ?2
 RETURNING id";

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
              WHERE i.batch_id = ?1{where_sql} ORDER BY i.id LIMIT {limit} OFFSET {}",
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
                })
            })?)
    }
}

const STATUS: &str = "SELECT status FROM items WHERE batch_id = ?1 AND key = ?2";

const MARK_SKIPPED: &str = "UPDATE items SET status = 'done', outcome = 'skipped', tier = NULL,
       next_attempt_at = NULL, result = ?3, updated_at = ?4
 WHERE batch_id = ?1 AND key = ?2";

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

    fn items_renew_leases(&mut self, batch: i64, run: i64, until: Millis) -> Result<Vec<i64>> {
        let held = self
            .conn
            .prepare_cached(RENEW_LEASES)?
            .query_map(params![batch, run, until], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(held)
    }
}
