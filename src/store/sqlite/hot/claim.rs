//! The claim and complete path: a claim's read and its one update per
//! group, the done mark's statements (one, plain, shared, general) and the
//! completions' events.

use std::borrow::Cow;

use rusqlite::types::Value;
use rusqlite::{Connection, params};

use super::super::SqliteStore;
use super::super::batches::batch_id;
use super::super::counted::Marked;
use super::super::events::insert as insert_event;
use super::super::locks::seat_stop;
use super::ids_json;
use crate::model::{Claim, Millis, NewEvent, Outcome};
use crate::store::api::Completion;
use crate::store::dialect::sql::kept as kept_text;
use crate::store::rows::claim_order;
use crate::store::{Fault, Result, StoreError};

impl SqliteStore {
    /// Claims up to `n` pending items for `run_id`: each gets a lease until
    /// `lease_until`, a fresh (larger) fencing token and its attempt counted.
    /// `None` (and nothing claimed) when `run_id` no longer holds the batch
    /// lock: a runner that was cut off (stopped, partitioned) past its TTL
    /// and taken over must not start new work beside the new holder.
    pub fn claim(
        &mut self,
        batch: &str,
        run_id: i64,
        n: usize,
        lease_until: Millis,
        now: Millis,
    ) -> Result<Option<Vec<Claim>>> {
        // No savepoint in a group: it fails only as the store does.
        self.write_whole(|tx| {
            let id = batch_id(tx, batch)?;
            match seat_stop(tx, id, run_id)? {
                None => return Ok(None),
                // Asked to stop: nothing more is claimed.
                Some(true) => return Ok(Some(Vec::new())),
                Some(false) if n == 0 => return Ok(Some(Vec::new())),
                Some(false) => {}
            }
            // Select, then update each row by id, in this one transaction:
            // `UPDATE ... WHERE id IN (SELECT ...) RETURNING` builds two
            // temporary b-trees per claim, a large part of a claim's cost.
            let claims: Vec<Claim> = tx
                .prepare_cached(CLAIMABLE)?
                .query_map(params![id, n as i64], |r| {
                    Ok(Claim {
                        item_id: r.get(0)?,
                        key: r.get(1)?,
                        label: r.get(2)?,
                        payload: r.get(3)?,
                        attempt: r.get::<_, u32>(4)? + 1,
                        op_id: r.get(5)?,
                        token: r.get::<_, i64>(6)? + 1,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            if claims.is_empty() {
                return Ok(Some(claims));
            }
            // One statement for all of them, not one per item: each
            // statement that fires the counter triggers opens and releases
            // a statement journal, which cost more than the row updates.
            // One item (a runner in process mode claims one at a time) is
            // named by its id: the `json_each` list costs two temporary
            // b-trees per statement, more than the row's own update.
            let (claim_sql, log_sql, ids) = match claims.as_slice() {
                [one] => (CLAIM_ONE, LOG_CLAIM_ONE, Value::Integer(one.item_id)),
                _ => (
                    CLAIM_ITEMS,
                    LOG_CLAIMS,
                    Value::Text(ids_json(claims.iter().map(|c| c.item_id))?),
                ),
            };
            let moved =
                tx.prepare_cached(claim_sql)?
                    .execute(params![ids, run_id, lease_until, now])?;
            super::super::counted::claimed(tx, id, moved as i64)?;
            tx.prepare_cached(log_sql)?
                .execute(params![ids, now, id, run_id])?;
            Ok(Some(claims))
        })
    }

    /// Marks a claimed item done — only after its worker succeeded. False
    /// (and nothing written) if the lease token no longer matches.
    pub fn complete(&mut self, c: &Completion<'_>, event: &NewEvent) -> Result<bool> {
        // The done mark is one statement (`COMPLETE_ITEMS`), alone or in a group.
        Ok(self.complete_all(&[(c.clone(), event)])?[0])
    }

    /// Marks several claimed items done in one transaction (a persistent
    /// worker's batch): as `complete` for each, with the run's counters
    /// updated once. All must belong to one run. One flag per item, in
    /// order: false where the lease token no longer matched.
    pub fn complete_all(&mut self, done: &[(Completion<'_>, &NewEvent)]) -> Result<Vec<bool>> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        // No savepoint in a group: it fails only as the store does.
        self.write_whole(|tx| {
            // One statement for all successes (see `COMPLETE_ITEMS`).
            // The statement counts itself (`counted`), from what it wrote.
            let mut kept: std::collections::HashSet<i64> = match done {
                [] => Default::default(),
                [(c, _)] => {
                    let changed = tx.prepare_cached(COMPLETE_ONE)?.execute(fields(c))?;
                    if changed == 1 {
                        let batch = tx
                            .prepare_cached("SELECT batch_id FROM items WHERE id = ?1")?
                            .query_row([c.item_id], |r| r.get(0))?;
                        let outcome = c.outcome.as_str();
                        let marked = Marked { batch, outcome, at: c.now };
                        super::super::counted::done(tx, &[marked])?;
                    }
                    (changed == 1).then_some(c.item_id).into_iter().collect()
                }
                [(first, _), ..] => {
                    let (now, version, outcome) = (first.now, first.version, first.outcome);
                    let shared = done.iter().all(|(c, _)| (c.now, c.version) == (now, version));
                    let plain = shared
                        && done.iter().all(|(c, _)| {
                            c.outcome == outcome && c.cost.is_none() && c.usage.is_none()
                        });
                    let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
                    let rows: Vec<(i64, i64, String, Millis)> = if plain {
                        let json = completions_json(done, |c| {
                            (c.item_id, c.token, c.result.map(kept_text))
                        })?;
                        tx.prepare_cached(COMPLETE_PLAIN)?
                            .query_map(
                                params![json, now, version.map(kept_text), outcome.as_str()],
                                row,
                            )?
                            .collect::<rusqlite::Result<_>>()?
                    } else if shared {
                        tx.prepare_cached(COMPLETE_SHARED)?
                            .query_map(
                                params![completions_json(done, fields)?, now, version.map(kept_text)],
                                row,
                            )?
                            .collect::<rusqlite::Result<_>>()?
                    } else {
                        tx.prepare_cached(COMPLETE_ITEMS)?
                            .query_map(params![completions_json(done, fields)?], row)?
                            .collect::<rusqlite::Result<_>>()?
                    };
                    let marked: Vec<Marked<'_>> = rows
                        .iter()
                        .map(|(_, batch, outcome, at)| Marked { batch: *batch, outcome, at: *at })
                        .collect();
                    super::super::counted::done(tx, &marked)?;
                    rows.into_iter().map(|r| r.0).collect()
                }
            };
            // An item listed twice is accepted once, as by one statement each.
            let accepted: Vec<bool> = done.iter().map(|(c, _)| kept.remove(&c.item_id)).collect();
            let (mut n_done, mut n_empty, mut cost) = (0i64, 0i64, 0f64);
            let mut logged = Vec::new();
            for ((c, event), ok) in done.iter().zip(&accepted) {
                if *ok {
                    match c.outcome {
                        Outcome::Empty => n_empty += 1,
                        _ => n_done += 1,
                    }
                    cost += c.cost.unwrap_or(0.0);
                    logged.push((c.item_id, *event));
                }
            }
            log_done(tx, &logged)?;
            if n_done + n_empty > 0 {
                tx.prepare_cached(
                    "UPDATE runs SET done = done + ?2, empty = empty + ?3, cost = cost + ?4 WHERE id = ?1",
                )?
                .execute(params![done[0].0.run_id, n_done, n_empty, cost])?;
            }
            Ok(accepted)
        })
    }
}

/// The next `?2` items a claim takes: higher priority first, then older.
/// The first entries of `items_queue` past its four equalities (`IS NULL`
/// is one to SQLite), whatever the batch holds.
pub(in crate::store::sqlite) const CLAIMABLE: &str = concat!(
    "SELECT id, key, label, payload, attempts, op_id, lease_token FROM items
  WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY ",
    claim_order!(""),
    " LIMIT ?2"
);

impl SqliteStore {
    /// How SQLite plans a claim's read (`EXPLAIN QUERY PLAN`), one line
    /// per step: for the tests that keep its cost flat.
    pub fn claim_plan(&self, batch: &str) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            Ok(c.prepare(&format!("EXPLAIN QUERY PLAN {CLAIMABLE}"))?
                .query_map(params![id, 8], |r| r.get(3))?
                .collect::<rusqlite::Result<_>>()?)
        })
    }
}

// `OR ROLLBACK`: a statement that cannot abort alone needs no statement
// journal (a copy of each page it touches, ~10k instructions a claim); it
// never fails but as the store does, and then its transaction (or group,
// `write_whole`) is refused whole.
macro_rules! claim_items {
    () => {
        "UPDATE OR ROLLBACK items
    SET status = 'claimed', lease_run = ?2, lease_until = ?3,
        lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?4,
        self_counted = 1 - self_counted, pool_wait_since = NULL, retry_at = NULL
  WHERE "
    };
}

macro_rules! log_claims {
    () => {
        "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message, fields)
     SELECT ?2, ?3, ?4, key, id, 'claimed', 'claimed (attempt ' || attempts || ')', NULL
       FROM items WHERE "
    };
}

/// Claims the items whose ids are in the JSON array ?1 (selected pending
/// in the same transaction): a fresh, larger fencing token and the attempt
/// counted, as the claim's `SELECT` computed them.
const CLAIM_ITEMS: &str = concat!(claim_items!(), "id IN (SELECT value FROM json_each(?1))");
/// `CLAIM_ITEMS` for the one item whose id is ?1.
const CLAIM_ONE: &str = concat!(claim_items!(), "id = ?1");

/// The `claimed` event of each item just claimed by `CLAIM_ITEMS`.
const LOG_CLAIMS: &str = concat!(
    log_claims!(),
    "id IN (SELECT value FROM json_each(?1)) ORDER BY id"
);
/// `LOG_CLAIMS` for `CLAIM_ONE`.
const LOG_CLAIM_ONE: &str = concat!(log_claims!(), "id = ?1");

/// The done mark's `UPDATE … SET`, written once for `COMPLETE_ITEMS` and
/// `COMPLETE_ONE`: `$v` then each field's place makes the expression of
/// the completion's outcome, result, cost, time, version and usage line
/// (the id and the token are the statements' own `WHERE`).
macro_rules! complete_items {
    ($v:literal, $outcome:literal, $result:literal, $cost:literal, $now:literal,
     $version:literal, $usage:literal) => {
        concat!(
            "UPDATE items AS i SET status = 'done', outcome = ",
            $v,
            $outcome,
            ", result = ",
            $v,
            $result,
            // The completion's cost added, or the old one if it has none.
            ", cost = coalesce(coalesce(i.cost, 0) + (",
            $v,
            $cost,
            "), i.cost)",
            ", tier = NULL, error_class = NULL, error_message = NULL, next_attempt_at = NULL",
            ", lease_run = NULL, lease_until = NULL, self_counted = 1 - i.self_counted",
            ", updated_at = ",
            $v,
            $now,
            ", done_version = ",
            $v,
            $version,
            ", usage = coalesce(coalesce(i.usage || char(10), '') || (",
            $v,
            $usage,
            "), i.usage)"
        )
    };
}

/// The done mark's fence besides the token: a claim not asked to cancel.
macro_rules! complete_fence {
    () => {
        " AND i.status = 'claimed' AND i.cancel_to IS NULL"
    };
}

/// The done mark: successes, fenced (only the claim holding its lease
/// token is completed, and never one asked to be cancelled: `cancel_to`,
/// checked in this very statement, so a success racing the cancel loses,
/// see `ops::steer`), from a JSON array of
/// `[item_id, token, outcome, result, cost, now, version, usage]`; returns
/// the accepted ones (id, batch, outcome, time: what `counted::done`
/// counts). One statement for the whole batch: one statement journal
/// where a statement per item opened one each. An item's
/// cost is every attempt's: the done mark adds its own, as a failure does.
/// `jsonb_each`: each row's array comes as SQLite's binary JSON, which
/// `->>` reads as it is; `json_each` wrote it out as text and each `->>`
/// parsed it back (about 4 % of the runner in persistent mode).
const COMPLETE_ITEMS: &str = concat!(
    complete_items!("d.value ->> ", "2", "3", "4", "5", "6", "7"),
    " FROM jsonb_each(?1) AS d WHERE i.id = d.value ->> 0 AND i.lease_token = d.value ->> 1",
    complete_fence!(),
    " RETURNING id, batch_id, outcome, updated_at"
);

/// `COMPLETE_ITEMS` of completions sharing one time (?2) and version (?3),
/// as a runner's group does: two fewer `->>` per row (each about 700
/// instructions).
const COMPLETE_SHARED: &str = concat!(
    complete_items!(
        "",
        "d.value ->> 2",
        "d.value ->> 3",
        "d.value ->> 4",
        "?2",
        "?3",
        "d.value ->> 7"
    ),
    " FROM jsonb_each(?1) AS d WHERE i.id = d.value ->> 0 AND i.lease_token = d.value ->> 1",
    complete_fence!(),
    " RETURNING id, batch_id, outcome, updated_at"
);

/// `COMPLETE_SHARED` of completions that also share their outcome (?4)
/// and have no cost and no usage line, as a runner's group of one worker
/// nearly always does: each row of ?1 is `[item_id, token, result]`, three
/// fewer `->>` per row and a third of the JSON to parse (the store's calls
/// 4 % faster, `examples/persistent_sql_floor.rs`).
/// The cost and usage expressions of `NULL` keep the item's own.
const COMPLETE_PLAIN: &str = concat!(
    complete_items!("", "?4", "d.value ->> 2", "NULL", "?2", "?3", "NULL"),
    " FROM jsonb_each(?1) AS d WHERE i.id = d.value ->> 0 AND i.lease_token = d.value ->> 1",
    complete_fence!(),
    " RETURNING id, batch_id, outcome, updated_at"
);

/// `COMPLETE_ITEMS` for one completion, its fields bound as ?1 to ?8 (in
/// the array's order): no `jsonb_each` to join, and no `RETURNING` (one
/// row changed or none), each a temporary b-tree per statement, more than
/// the row's update (a runner in process mode completes one at a time).
const COMPLETE_ONE: &str = concat!(
    complete_items!("?", "3", "4", "5", "6", "7", "8"),
    " WHERE i.id = ?1 AND i.lease_token = ?2",
    complete_fence!()
);

/// An accepted completion's event, its batch (?2) and item (?5) known:
/// the general `events::insert` looks both up again by name and key (a
/// random descent of the key index per item). A row per statement, as no
/// trigger fires on events: no statement journal, and no JSON to unpack
/// per field (over `json_each` that cost more than the rows).
const LOG_DONE: &str =
    "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor, message, fields)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// Writes the events of the accepted completions (`(item_id, event)`), in
/// order.
fn log_done(tx: &Connection, events: &[(i64, &NewEvent)]) -> Result<()> {
    let mut st = tx.prepare_cached(LOG_DONE)?;
    let mut batch: Option<(&str, i64)> = None;
    for (item, e) in events {
        let (Some(name), Some(_)) = (e.batch.as_deref(), &e.key) else {
            insert_event(tx, e)?;
            continue;
        };
        let id = match batch {
            Some((b, id)) if b == name => id,
            _ => {
                let id = batch_id(tx, name)?;
                batch = Some((name, id));
                id
            }
        };
        st.execute(params![
            e.at,
            id,
            e.run_id,
            e.key,
            item,
            e.kind,
            e.actor,
            kept_text(&e.message),
            e.fields_text().as_deref().map(kept_text)
        ])?;
    }
    Ok(())
}

/// A completion's fields in the done mark's order: `COMPLETE_ONE`'s
/// parameters, one element of `COMPLETE_ITEMS`' array; its texts as the
/// stores keep them (`kept`).
type Fields<'a> = (
    i64,
    i64,
    &'a str,
    Option<Cow<'a, str>>,
    Option<f64>,
    Millis,
    Option<Cow<'a, str>>,
    Option<Cow<'a, str>>,
);

fn fields<'a>(c: &Completion<'a>) -> Fields<'a> {
    (
        c.item_id,
        c.token,
        c.outcome.as_str(),
        c.result.map(kept_text),
        c.cost,
        c.now,
        c.version.map(kept_text),
        c.usage.map(kept_text),
    )
}

/// The JSON array a done mark joins: one row per completion, as `row`
/// writes it (`fields`, or `COMPLETE_PLAIN`'s `[item_id, token, result]`).
fn completions_json<'a, R: serde::Serialize>(
    done: &'a [(Completion<'a>, &NewEvent)],
    row: impl Fn(&'a Completion<'a>) -> R,
) -> Result<String> {
    let rows: Vec<R> = done.iter().map(|(c, _)| row(c)).collect();
    serde_json::to_string(&rows)
        .map_err(|e| StoreError::Fault(Fault::Encoding(format!("encoding completions: {e}"))))
}
