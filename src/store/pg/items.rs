//! Items and their transitions (see `store::items` for the semantics).
//!
//! Claims take pending rows `FOR UPDATE SKIP LOCKED`: runners on several
//! hosts claim disjoint items without waiting for each other. Fencing
//! tokens come from one sequence. Every transition that ends a claim is
//! conditional on the lease token, so a runner that lost its lease cannot
//! overwrite a newer claim.

use crate::store::Refusal;
use postgres::Row;

use super::PgStore;
use super::batches::{batch_id, ensure};
use super::conn::{Conn, parse_col_text, text, text_opt};
use super::events::{Args, insert as insert_event, insert_many as insert_events};
use super::tombstones;
use crate::model::waiting::RetryTier;
use crate::model::{AddReport, Claim, Item, Millis, NewEvent, NewItem, SkipReport};
use crate::store::api::{Completion, Failure, ItemFilter, Requeue, Selection};
use crate::store::chunks::Chunks;
use crate::store::json_col;
use crate::store::shared::{self, Orphan};
use crate::store::{Result, StoreError};

/// Rows moved per write transaction by bulk operations.
const CHUNK: i64 = 2_000;
/// Items inserted per statement by `add_items`.
const ADD_ROWS: usize = 5_000;

/// One part of an add: `$1` batch id, `$2` the time, then keys, labels and
/// payloads as arrays.
const INSERT_ITEMS: &str = "INSERT INTO items (batch_id, key, label, payload, status, created_at,
                                               updated_at)
     SELECT $1, k, l, p, 'pending', $2, $2
       FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(k, l, p, o)
      ORDER BY o
     ON CONFLICT (batch_id, key) DO NOTHING";

/// `INSERT_ITEMS` for a batch that keeps tombstones: a key with one is
/// present, and counted with the first and last time of its prune.
const INSERT_ITEMS_BESIDE_TOMBSTONES: &str = "WITH u AS (
         SELECT k, l, p, o FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY
                AS u(k, l, p, o)),
     gone AS (
         SELECT t.key, t.pruned_at FROM tombstones t JOIN u ON t.key = u.k
          WHERE t.batch_id = $1),
     added AS (
         INSERT INTO items (batch_id, key, label, payload, status, created_at, updated_at)
         SELECT $1, k, l, p, 'pending', $2, $2 FROM u
          WHERE NOT EXISTS (SELECT 1 FROM gone WHERE gone.key = u.k)
          ORDER BY o
         ON CONFLICT (batch_id, key) DO NOTHING
         RETURNING 1)
     SELECT (SELECT count(*) FROM added)::int8, count(*)::int8, min(pruned_at), max(pruned_at)
       FROM gone";

pub(crate) const ITEM_COLUMNS: &str =
    "i.id, b.name, i.key, i.label, i.payload, i.status, i.tier, i.outcome,
    i.attempts, i.op_id, i.result, i.cost, i.error_class, i.error_message, i.next_attempt_at,
    i.lease_run, i.lease_until, i.lease_token, i.created_at, i.updated_at";

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

/// One part of an add into a batch that keeps tombstones.
fn add_part_beside_tombstones(
    c: &mut Conn,
    id: i64,
    at: i64,
    keys: &[&str],
    labels: &[&str],
    payloads: &[&str],
) -> Result<AddReport> {
    let r = c.one(
        INSERT_ITEMS_BESIDE_TOMBSTONES,
        &[&id, &at, &keys, &labels, &payloads],
    )?;
    let (added, pruned) = (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64);
    let span = match (r.get::<_, Option<i64>>(2), r.get::<_, Option<i64>>(3)) {
        (Some(first), Some(last)) => Some((c.tout(first), c.tout(last))),
        _ => None,
    };
    Ok(AddReport {
        added,
        present: keys.len() as u64 - added,
        pruned,
        pruned_span: span,
    })
}

fn claim_from_row(r: &Row) -> Claim {
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
    /// Adds items idempotently in one transaction: an item whose key is
    /// already in the batch, or was and has been pruned (its tombstone), is
    /// left exactly as it is. A stop request (checked between statements)
    /// rolls it back whole.
    pub fn add_items(
        &mut self,
        batch: &str,
        items: &[NewItem],
        now: Millis,
        mut progress: impl FnMut(usize),
    ) -> Result<AddReport> {
        let stop = self.stop.clone();
        self.write(|c| {
            // Before anything else: a prune in progress commits first (see
            // `tombstones`).
            tombstones::share_lock(c)?;
            let id = ensure(c, batch, now)?;
            let pruned = tombstones::any(c, id)?;
            let at = c.tin(now);
            let mut report = AddReport::default();
            let mut done = 0;
            for part in items.chunks(ADD_ROWS) {
                if let Some(signal) = stop.requested() {
                    return Err(StoreError::Interrupted(signal));
                }
                let keys: Vec<&str> = part.iter().map(|i| i.key.as_str()).collect();
                let labels: Vec<&str> = part.iter().map(|i| i.label.as_str()).collect();
                let payloads: Vec<&str> = part.iter().map(|i| i.payload.as_str()).collect();
                let part_report = if pruned {
                    add_part_beside_tombstones(c, id, at, &keys, &labels, &payloads)?
                } else {
                    let added = c.x(INSERT_ITEMS, &[&id, &at, &keys, &labels, &payloads])?;
                    AddReport {
                        added,
                        present: part.len() as u64 - added,
                        ..AddReport::default()
                    }
                };
                report = report.then(part_report);
                // Progress in steps of 10,000, as the SQLite store reports it.
                for step in (done..done + part.len()).filter(|n| n % 10_000 == 0) {
                    progress(step);
                }
                done += part.len();
            }
            if report.added > 0 {
                insert_event(c, &shared::added_event(batch, &report, None, now))?;
            }
            Ok(report)
        })
    }

    /// Claims up to `n` pending items for `run_id` (see `Store::claim`).
    /// `None` when `run_id` no longer holds the batch lock.
    pub fn claim(
        &mut self,
        batch: &str,
        run_id: i64,
        n: usize,
        lease_until: Millis,
        now: Millis,
    ) -> Result<Option<Vec<Claim>>> {
        // One statement: the lock check (its row shared-locked, see
        // `holds_lock`), the claim and its events.
        self.write_one(|c| {
            let id = batch_id(c, batch)?;
            let (until, at) = (c.tin(lease_until), c.tin(now));
            let rows = c.q_alone(
                "WITH held AS (
                     SELECT 1 FROM locks WHERE batch_id = $1 AND run_id = $3 FOR SHARE),
                 picked AS (
                     SELECT id FROM items
                      WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL
                        AND next_attempt_at IS NULL AND EXISTS (SELECT 1 FROM held)
                      ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED),
                 claimed AS (
                     UPDATE items i
                        SET status = 'claimed', lease_run = $3, lease_until = $4,
                            lease_token = nextval('lease_tokens'), attempts = i.attempts + 1,
                            updated_at = $5
                       FROM picked WHERE i.id = picked.id
                     RETURNING i.id, i.key, i.label, i.payload, i.attempts, i.op_id,
                               i.lease_token),
                 logged AS (
                     INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message)
                     SELECT $5, $1, $3, key, id, 'claimed', 'claimed (attempt ' || attempts || ')'
                       FROM claimed ORDER BY id)
                 SELECT c.*, (SELECT count(*) FROM held)::int8 AS held
                   FROM (SELECT 1) one LEFT JOIN claimed c ON true ORDER BY c.id",
                &[&id, &(n as i64), &run_id, &until, &at],
            )?;
            if rows.first().is_none_or(|r| r.get::<_, i64>(7) == 0) {
                return Ok(None);
            }
            Ok(Some(
                rows.iter()
                    .filter(|r| r.get::<_, Option<i64>>(0).is_some())
                    .map(claim_from_row)
                    .collect(),
            ))
        })
    }

    /// Counts a further immediate attempt of a claimed item. `None` if the
    /// lease was lost meanwhile.
    pub fn begin_attempt(&mut self, item_id: i64, token: i64, now: Millis) -> Result<Option<u32>> {
        self.write(|c| {
            let at = c.tin(now);
            Ok(c.opt(
                "UPDATE items SET attempts = attempts + 1, updated_at = $3
                  WHERE id = $1 AND lease_token = $2 AND status = 'claimed'
                 RETURNING attempts",
                &[&item_id, &token, &at],
            )?
            .map(|r| r.get::<_, i64>(0) as u32))
        })
    }

    /// Stores the operation id a worker reported. False if the lease was lost.
    pub fn set_op_id(
        &mut self,
        item_id: i64,
        token: i64,
        op_id: &str,
        event: &NewEvent,
    ) -> Result<bool> {
        self.write(|c| {
            let n = c.x(
                "UPDATE items SET op_id = $3
                  WHERE id = $1 AND lease_token = $2 AND status = 'claimed'",
                &[&item_id, &token, &text(op_id)],
            )?;
            if n == 1 {
                insert_event(c, event)?;
            }
            Ok(n == 1)
        })
    }

    /// Extends the leases of every item `run_id` holds in `batch`; returns
    /// the ids of the items it still holds.
    pub fn renew_leases(&mut self, batch: &str, run_id: i64, until: Millis) -> Result<Vec<i64>> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            let until = c.tin(until);
            Ok(c.q(
                "UPDATE items SET lease_until = $3
                  WHERE batch_id = $1 AND status = 'claimed' AND tier IS NULL AND lease_run = $2
                 RETURNING id",
                &[&id, &run_id, &until],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
    }

    /// Marks a claimed item done — only after its worker succeeded. False
    /// (and nothing written) if the lease token no longer matches.
    pub fn complete(&mut self, done: &Completion<'_>, event: &NewEvent) -> Result<bool> {
        if self.in_group {
            return self.write(|c| complete_in(c, done, event));
        }
        // One statement: the item, its run's counts and the event.
        self.write_one(|c| {
            let batch = match &event.batch {
                Some(name) => Some(batch_id(c, name)?),
                None => None,
            };
            let (at, event_at) = (c.tin(done.now), c.tin(event.at));
            let result = text_opt(done.result);
            let fields = event
                .fields
                .as_ref()
                .map(|f| text(&f.to_string()).into_owned());
            let message = text(&event.message);
            let key = event.key.as_deref();
            let rows = c.q_alone(
                "WITH up AS (
                     UPDATE items SET status = 'done', outcome = $3, result = $4, cost = $5,
                            tier = NULL, error_class = NULL, error_message = NULL,
                            next_attempt_at = NULL, lease_run = NULL, lease_until = NULL,
                            updated_at = $6
                      WHERE id = $1 AND lease_token = $2 AND status = 'claimed'
                     RETURNING id),
                 counted AS (
                     UPDATE runs SET done = done + ($3 = 'done')::int,
                            empty = empty + ($3 = 'empty')::int,
                            cost = cost + coalesce($5::float8, 0)
                      WHERE id = $7 AND EXISTS (SELECT 1 FROM up)),
                 logged AS (
                     INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor,
                                         message, fields)
                     SELECT $8, $9, $10, $11::text,
                            (SELECT id FROM items WHERE batch_id = $9 AND key = $11::text),
                            $12, $13, $14, $15
                       FROM up)
                 SELECT count(*)::int8 FROM up",
                &[
                    &done.item_id,
                    &done.token,
                    &done.outcome.as_str(),
                    &result,
                    &done.cost,
                    &at,
                    &done.run_id,
                    &event_at,
                    &batch,
                    &event.run_id,
                    &key,
                    &event.kind,
                    &event.actor,
                    &message,
                    &fields,
                ],
            )?;
            Ok(rows[0].get::<_, i64>(0) == 1)
        })
    }

    /// Marks several claimed items done in one transaction (a persistent
    /// worker's batch): as `complete` for each, with the run's counters
    /// updated once. All must belong to one run. One flag per item, in
    /// order: false where the lease token no longer matched. Three
    /// statements whatever the number of items (arrays, not a round trip
    /// per item).
    pub fn complete_all(&mut self, done: &[(Completion<'_>, &NewEvent)]) -> Result<Vec<bool>> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|c| {
            let ids: Vec<i64> = done.iter().map(|(d, _)| d.item_id).collect();
            let tokens: Vec<i64> = done.iter().map(|(d, _)| d.token).collect();
            let outcomes: Vec<&str> = done.iter().map(|(d, _)| d.outcome.as_str()).collect();
            let results: Vec<Option<String>> = done
                .iter()
                .map(|(d, _)| text_opt(d.result).map(|t| t.into_owned()))
                .collect();
            let costs: Vec<Option<f64>> = done.iter().map(|(d, _)| d.cost).collect();
            let ats: Vec<i64> = done.iter().map(|(d, _)| c.tin(d.now)).collect();
            let kept = c.q(
                "WITH d AS (
                     SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[],
                                          $5::float8[], $6::int8[])
                            WITH ORDINALITY AS d(id, token, outcome, result, cost, at, n))
                 UPDATE items i SET status = 'done', outcome = d.outcome, result = d.result,
                        cost = d.cost, tier = NULL, error_class = NULL, error_message = NULL,
                        next_attempt_at = NULL, lease_run = NULL, lease_until = NULL,
                        updated_at = d.at
                   FROM d
                  WHERE i.id = d.id AND i.lease_token = d.token AND i.status = 'claimed'
                 RETURNING d.n",
                &[&ids, &tokens, &outcomes, &results, &costs, &ats],
            )?;
            let mut accepted = vec![false; done.len()];
            for r in &kept {
                accepted[r.get::<_, i64>(0) as usize - 1] = true;
            }
            let (mut n_done, mut n_empty, mut cost) = (0i64, 0i64, 0f64);
            let mut events = Vec::new();
            for ((d, event), ok) in done.iter().zip(&accepted) {
                if *ok {
                    match d.outcome {
                        crate::model::Outcome::Empty => n_empty += 1,
                        _ => n_done += 1,
                    }
                    cost += d.cost.unwrap_or(0.0);
                    events.push(*event);
                }
            }
            if n_done + n_empty > 0 {
                c.x(
                    "UPDATE runs SET done = done + $2, empty = empty + $3, cost = cost + $4
                      WHERE id = $1",
                    &[&done[0].0.run_id, &n_done, &n_empty, &cost],
                )?;
                insert_events(c, &events)?;
            }
            Ok(accepted)
        })
    }

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

    /// Retry-tier failures that are due (what a dry run would redrive).
    pub fn due_retries(&self, batch: &str, now: Millis) -> Result<Vec<Item>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let at = c.tin(now);
            let rows = c.q(
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
                      WHERE i.batch_id = $1 AND i.status = 'failed' AND i.tier = 'retry'
                        AND i.next_attempt_at <= $2
                      ORDER BY i.id"
                ),
                &[&id, &at],
            )?;
            rows.iter().map(|r| item_from_row(c, r)).collect()
        })
    }

    /// The `retry` tier now (see `Store::retry_tier`).
    pub fn retry_tier(&self, batch: &str, now: Millis) -> Result<RetryTier> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let at = c.tin(now);
            let r = c.one(
                "SELECT count(*) FILTER (WHERE next_attempt_at <= $2),
                        count(*) FILTER (WHERE next_attempt_at > $2),
                        min(next_attempt_at) FILTER (WHERE next_attempt_at > $2)
                   FROM items WHERE batch_id = $1 AND status = 'failed' AND tier = 'retry'",
                &[&id, &at],
            )?;
            Ok(RetryTier {
                due: r.get(0),
                later: r.get(1),
                next_at: c.tout_opt(r.get(2)),
            })
        })
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

    /// Marks items done without running them (see `Store::skip`).
    pub fn skip(
        &mut self,
        batch: &str,
        keys: &[String],
        reason: &str,
        actor: &str,
        now: Millis,
    ) -> Result<SkipReport> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            let mut found = Vec::with_capacity(keys.len());
            let mut seen = std::collections::HashSet::new();
            for key in keys.iter().filter(|k| seen.insert(*k)) {
                let status: Option<String> = c
                    .opt(
                        "SELECT status FROM items WHERE batch_id = $1 AND key = $2 FOR UPDATE",
                        &[&id, key],
                    )?
                    .map(|r| r.get(0));
                let Some(status) = status else {
                    return Err(tombstones::missing(c, id, batch, key));
                };
                if status == "claimed" {
                    return Err(Refusal::InFlightSkip {
                        key: key.to_string(),
                    }
                    .into());
                }
                found.push((key, status == "done"));
            }
            let result = serde_json::json!({"skipped": reason, "by": actor}).to_string();
            let at = c.tin(now);
            let mut report = SkipReport::default();
            for (key, done) in found {
                if done {
                    report.already_done.push(key.clone());
                    continue;
                }
                c.x(
                    "UPDATE items SET status = 'done', outcome = 'skipped', tier = NULL,
                            next_attempt_at = NULL, result = $3, updated_at = $4
                      WHERE batch_id = $1 AND key = $2",
                    &[&id, key, &text(&result), &at],
                )?;
                insert_event(
                    c,
                    &NewEvent::new(
                        now,
                        batch,
                        "skipped",
                        format!("skipped by {actor}: {reason}"),
                    )
                    .key(key)
                    .actor(actor)
                    .fields(serde_json::json!({"reason": reason})),
                )?;
                report.skipped.push(key.clone());
            }
            Ok(report)
        })
    }

    /// One item by key.
    pub fn item(&self, batch: &str, key: &str) -> Result<Item> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let row = c.opt(
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
                      WHERE i.batch_id = $1 AND i.key = $2"
                ),
                &[&id, &key],
            )?;
            match row {
                Some(r) => item_from_row(c, &r),
                None => Err(tombstones::missing(c, id, batch, key)),
            }
        })
    }

    /// Items of a batch in insertion order, filtered.
    pub fn items(&self, batch: &str, filter: &ItemFilter) -> Result<Vec<Item>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut args = Args::new();
            args.push(id);
            let cond = filter_sql(filter, &mut args);
            let limit = filter
                .limit
                .map_or_else(|| "ALL".to_string(), |l| l.to_string());
            let sql = format!(
                "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
                  WHERE i.batch_id = $1{cond} ORDER BY i.id LIMIT {limit} OFFSET {}",
                filter.offset
            );
            let rows = c.q(&sql, &args.refs())?;
            rows.iter().map(|r| item_from_row(c, r)).collect()
        })
    }

    /// How many items match a filter.
    pub fn count_items(&self, batch: &str, filter: &ItemFilter) -> Result<i64> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut args = Args::new();
            args.push(id);
            let cond = filter_sql(filter, &mut args);
            let sql = format!("SELECT count(*)::int8 FROM items i WHERE i.batch_id = $1{cond}");
            Ok(c.one(&sql, &args.refs())?.get(0))
        })
    }

    /// Creation time of the oldest pending item.
    pub fn oldest_pending(&self, batch: &str) -> Result<Option<Millis>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let at: Option<i64> = c
                .opt(
                    "SELECT created_at FROM items
                      WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL
                        AND next_attempt_at IS NULL
                      ORDER BY id LIMIT 1",
                    &[&id],
                )?
                .map(|r| r.get(0));
            Ok(c.tout_opt(at))
        })
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

pub(crate) fn complete_in(c: &mut Conn, done: &Completion<'_>, event: &NewEvent) -> Result<bool> {
    let at = c.tin(done.now);
    let result = text_opt(done.result);
    let n = c.x(
        "UPDATE items SET status = 'done', outcome = $3, result = $4, cost = $5, tier = NULL,
                error_class = NULL, error_message = NULL, next_attempt_at = NULL,
                lease_run = NULL, lease_until = NULL, updated_at = $6
          WHERE id = $1 AND lease_token = $2 AND status = 'claimed'",
        &[
            &done.item_id,
            &done.token,
            &done.outcome.as_str(),
            &result,
            &done.cost,
            &at,
        ],
    )?;
    if n == 1 {
        c.x(
            "UPDATE runs SET done = done + ($2 = 'done')::int, empty = empty + ($2 = 'empty')::int,
                    cost = cost + coalesce($3::float8, 0)
              WHERE id = $1",
            &[&done.run_id, &done.outcome.as_str(), &done.cost],
        )?;
        insert_event(c, event)?;
    }
    Ok(n == 1)
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
    let from = sel.moves_sql();
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
            &[&ids, &at, &id, &actor, &reset_attempts],
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
    let mut cond = sel.moves_sql();
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
