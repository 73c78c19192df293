//! The hot paths of PostgreSQL, whole: claim, complete and complete_all
//! run once per item (or chunk) at full speed, and their statements are
//! shaped for this engine (one CTE per claim, one statement per group of
//! completions), so they are not split into the shared statement interface
//! of `dialect`. (The add, the other one, is `add`.)

use super::PgStore;
use super::batches::batch_id;
use super::conn::{Conn, text, text_opt};
use super::events::EventColumns;
use super::items::claim_from_row;
use crate::model::{Claim, Millis, NewEvent, Outcome};
use crate::store::Result;
use crate::store::api::Completion;
use crate::store::rows::claim_order;

/// A claim, whole (see `PgStore::claim`): `$1` batch id, `$2` how many,
/// `$3` the run, `$4` the lease's end, `$5` now. `picked` reads the first
/// entries of `items_claimable` (higher priority first, then older),
/// whatever the batch holds. PostgreSQL keeps this partial index beside
/// `items_queue` (SQLite folded the two, issue 16): it does not take `IS
/// NULL` as an equality for ordering, so `priority DESC, id` after the
/// queue columns still ends in a Sort of every claimable row (PostgreSQL
/// 15's EXPLAIN, even with `enable_sort = off`).
///
/// `claimed` names its rows by an array of the picked ids (`ANY`, one
/// index lookup each), not by a join with `picked`: at the ~1,000 rows of a
/// persistent run's claim the join was planned as a hash join over a Seq
/// Scan of every item, each claim reading the whole table.
///
/// It counts itself (`bucketed`: pending to claimed, once per statement),
/// and marks itself so (`counts_itself`), so `items_counted` passes over it
/// (version 21).
const CLAIM: &str = concat!(
    "WITH held AS (
     SELECT stop FROM locks WHERE batch_id = $1 AND run_id = $3 FOR SHARE),
 picked AS (
     SELECT id FROM items
      WHERE batch_id = $1 AND status = 'pending' AND tier IS NULL
        AND next_attempt_at IS NULL AND EXISTS (SELECT 1 FROM held WHERE stop IS NULL)
      ORDER BY ",
    claim_order!(""),
    " LIMIT $2 FOR UPDATE SKIP LOCKED),
 claimed AS (
     UPDATE items i
        SET status = 'claimed', lease_run = $3, lease_until = $4,
            lease_token = nextval('lease_tokens'), attempts = i.attempts + 1,
            updated_at = $5, pool_wait_since = NULL, retry_at = NULL
      WHERE i.id = ANY(ARRAY(SELECT id FROM picked)) AND (SELECT counts_itself())
     RETURNING i.id, i.key, i.label, i.payload, i.attempts, i.op_id,
               i.lease_token, i.priority),
 bucketed AS (
     INSERT INTO counts AS c (batch_id, bucket, shard, n)
     SELECT $1, v.b, shard(), v.n
       FROM (SELECT count(*) AS k FROM claimed) t,
            LATERAL (VALUES ('claimed', t.k), ('pending', -t.k)) v(b, n)
      WHERE t.k > 0 ORDER BY v.b
     ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n),
 logged AS (
     INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message)
     SELECT $5, $1, $3, key, id, 'claimed', 'claimed (attempt ' || attempts || ')'
       FROM claimed ORDER BY id)
 SELECT c.*, (SELECT count(*) FROM held)::int8 AS held
   FROM (SELECT 1) one LEFT JOIN claimed c ON true
  ORDER BY ",
    claim_order!("c.")
);

/// The done mark, the one text of it on PostgreSQL: the rows of `d` (id,
/// token, outcome, result, cost, at, n, version) that still hold their
/// lease and were not asked to cancel become done; their `n` returned.
/// `COMPLETE_ONE` and `COMPLETE_MANY` differ only in where `d` comes from.
/// An item's cost is every attempt's: the done mark adds its own.
///
/// The row's own tests (claimed, not asked to cancel) are folded into its
/// join with `d` (the token, `NULL` where they fail) and `ids` names the
/// rows by key: the items side is then estimated as the rows of `d`, and
/// joined by hash or merge. As tests of the row alone they were estimated
/// at one row (few items are claimed at once), which nested the join:
/// every row of a group of n compared with every one of `d`, n² pairs.
///
/// The done mark counts itself, once per statement, where `items_counted`
/// counted it (version 21: it passes over a statement that `counts_itself`):
/// claimed to its outcome in `counts` (`bucketed`), a completion in
/// `minute_stats` (`rated`), after the counts as the trigger wrote them,
/// so sessions that share a shard take the rows in one order. Its CTEs end
/// in `rated`, which returns a row when a completion was accepted.
macro_rules! done_mark {
    ($ids:literal) => {
        concat!(
            "UPDATE items i SET status = 'done', outcome = d.outcome, result = d.result,
                cost = CASE WHEN d.cost IS NULL THEN i.cost ELSE coalesce(i.cost, 0) + d.cost END,
                tier = NULL, error_class = NULL, error_message = NULL,
                next_attempt_at = NULL, lease_run = NULL, lease_until = NULL,
                updated_at = d.at, done_version = d.version,
                usage = CASE WHEN d.usage IS NULL THEN i.usage
                             ELSE coalesce(i.usage || E'\\n', '') || d.usage END
           FROM d
          WHERE i.id = ",
            $ids,
            " AND i.id = d.id
            AND CASE WHEN i.status = 'claimed' AND i.cancel_to IS NULL THEN i.lease_token END
                = d.token
            AND (SELECT counts_itself())
         RETURNING d.n, d.id, d.outcome, d.cost, d.at, i.batch_id),
     tally AS (
         SELECT batch_id, outcome, at / 60000 AS minute, count(*) AS k FROM up GROUP BY 1, 2, 3),
     bucketed AS (
         INSERT INTO counts AS c (batch_id, bucket, shard, n)
         SELECT batch_id, b, shard(), sum(n) FROM (
             SELECT batch_id, 'claimed' AS b, -k AS n FROM tally
             UNION ALL
             SELECT batch_id, outcome, k FROM tally) x
          GROUP BY 1, 2 ORDER BY 1, 2
         ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n
         RETURNING 1),
     rated AS (
         INSERT INTO minute_stats AS m (batch_id, minute, shard, done, failed)
         SELECT batch_id, minute, shard(), sum(k), 0 FROM tally
          WHERE EXISTS (SELECT 1 FROM bucketed)
          GROUP BY 1, 2 ORDER BY 1, 2
         ON CONFLICT (batch_id, minute, shard) DO UPDATE SET done = m.done + excluded.done
         RETURNING 1)"
        )
    };
}

/// One completion in one statement (one round trip, no BEGIN/COMMIT
/// outside a group): the done mark of one row of parameters, its run's
/// counts and its event.
const COMPLETE_ONE: &str = concat!(
    "WITH d AS (
         SELECT $1::int8 AS id, $2::int8 AS token, $3::text AS outcome, $4::text AS result,
                $5::float8 AS cost, $6::int8 AS at, 1::int8 AS n, $16::text AS version,
                $17::text AS usage),
     up AS (",
    done_mark!("$1"),
    ",
     counted AS (
         UPDATE runs SET done = done + ($3 = 'done')::int,
                empty = empty + ($3 = 'empty')::int,
                cost = cost + coalesce($5::float8, 0)
          WHERE id = $7 AND EXISTS (SELECT 1 FROM rated)),
     logged AS (
         INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor, message, fields)
         SELECT $8, $9, $10, $11::text,
                (SELECT item_id FROM item_keys WHERE batch_id = $9 AND key = $11::text),
                $12, $13, $14, $15
           FROM up)
     SELECT count(*)::int8 FROM up"
);

/// A group of completions, whole, in one statement (one round trip): the
/// done mark over arrays (`unnest`), whatever their number, and the
/// accepted ones' events (`$8`..`$15`, one per completion, in order). The
/// run's counts follow (`COUNT_GROUP`). An event about an item (a batch
/// and a key) is about the item just marked: its id is known, not looked
/// up by key.
const COMPLETE_MANY: &str = concat!(
    "WITH d AS (
         SELECT u.*, $7::text AS version
           FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::float8[], $6::int8[],
                       $16::text[])
                WITH ORDINALITY AS u(id, token, outcome, result, cost, at, usage, n)),
     up AS (",
    done_mark!("ANY($1)"),
    ",
     logged AS (
         INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor, message, fields)
         SELECT e.at, b.id, e.run_id, e.key,
                CASE WHEN b.id IS NOT NULL AND e.key IS NOT NULL THEN up.id END,
                e.kind, e.actor, e.message, e.fields
           FROM up
           JOIN unnest($8::int8[], $9::text[], $10::int8[], $11::text[], $12::text[],
                       $13::text[], $14::text[], $15::text[])
                WITH ORDINALITY AS e(at, batch, run_id, key, kind, actor, message, fields, n)
             ON e.n = up.n
           LEFT JOIN batches b ON b.name = e.batch
          ORDER BY e.n)
     SELECT n FROM up"
);

/// The run's counts of a group's accepted completions (`$1` the run, then
/// how many done, how many empty, their cost): a statement of its own after
/// `COMPLETE_MANY`, so the run's row, which every session of the run
/// updates, is locked only from here to the commit, not through the done
/// mark's triggers; another session's group waits that much less for it.
const COUNT_GROUP: &str = "UPDATE runs SET done = done + $2, empty = empty + $3, cost = cost + $4
      WHERE id = $1";

/// The parameters of `COMPLETE_MANY` for a group of completions (one run,
/// one version: the first's), built in one place for the real call and for
/// its plan (`complete_all_plan`), so the two cannot drift.
struct ManyParams<'a> {
    ids: Vec<i64>,
    tokens: Vec<i64>,
    outcomes: Vec<&'a str>,
    results: Vec<Option<String>>,
    costs: Vec<Option<f64>>,
    ats: Vec<i64>,
    version: Option<String>,
    run: i64,
    events: EventColumns<'a>,
    usages: Vec<Option<String>>,
}

impl<'a> ManyParams<'a> {
    fn of(c: &Conn, done: &[(Completion<'a>, &'a NewEvent)]) -> ManyParams<'a> {
        let owned = |t: Option<&str>| text_opt(t).map(|t| t.into_owned());
        let events: Vec<&NewEvent> = done.iter().map(|(_, e)| *e).collect();
        ManyParams {
            ids: done.iter().map(|(d, _)| d.item_id).collect(),
            tokens: done.iter().map(|(d, _)| d.token).collect(),
            outcomes: done.iter().map(|(d, _)| d.outcome.as_str()).collect(),
            results: done.iter().map(|(d, _)| owned(d.result)).collect(),
            costs: done.iter().map(|(d, _)| d.cost).collect(),
            ats: done.iter().map(|(d, _)| c.tin(d.now)).collect(),
            version: done.first().and_then(|(d, _)| owned(d.version)),
            run: done.first().map_or(0, |(d, _)| d.run_id),
            events: EventColumns::of(c, &events),
            usages: done.iter().map(|(d, _)| owned(d.usage)).collect(),
        }
    }

    /// `$1`..`$16` in `COMPLETE_MANY`'s order.
    fn refs(&self) -> [&(dyn postgres::types::ToSql + Sync); 16] {
        let e = &self.events;
        [
            &self.ids,
            &self.tokens,
            &self.outcomes,
            &self.results,
            &self.costs,
            &self.ats,
            &self.version,
            &e.ats,
            &e.batches,
            &e.runs,
            &e.keys,
            &e.kinds,
            &e.actors,
            &e.messages,
            &e.fields,
            &self.usages,
        ]
    }
}

impl PgStore {
    /// How PostgreSQL plans a claim (`EXPLAIN`), one line per row: for
    /// the tests that keep its cost flat.
    pub fn claim_plan(&self, batch: &str) -> Result<Vec<String>> {
        self.claim_plan_of(batch, 8)
    }

    /// `claim_plan` of a claim of `n` items (a persistent run claims up to
    /// 1,024 at once).
    #[doc(hidden)]
    pub fn claim_plan_of(&self, batch: &str, n: i64) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let (until, at) = (c.tin(0), c.tin(0));
            let rows = c.q(&format!("EXPLAIN {CLAIM}"), &[&id, &n, &0i64, &until, &at])?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// How PostgreSQL runs the done mark of a group (`EXPLAIN ANALYZE` of
    /// `COMPLETE_MANY`, rolled back) over the first `n` claimed items of
    /// `batch`, each with its done event, one line per row: for the test
    /// that keeps a group's cost linear in its size. The parameters are
    /// built as `complete_all` builds them (`ManyParams`).
    #[doc(hidden)]
    pub fn complete_all_plan(&mut self, batch: &str, n: usize) -> Result<Vec<String>> {
        let mut c = self.conn();
        c.simple("BEGIN")?;
        let out = (|| {
            let id = batch_id(&mut c, batch)?;
            let held = c.q(
                "SELECT id, lease_token, lease_run, key FROM items
                  WHERE batch_id = $1 AND status = 'claimed' ORDER BY id LIMIT $2",
                &[&id, &(n as i64)],
            )?;
            let events: Vec<NewEvent> = held
                .iter()
                .map(|r| {
                    NewEvent::new(0, batch, crate::model::EventKind::Done, "done")
                        .run(r.get(2))
                        .key(r.get(3))
                })
                .collect();
            let done: Vec<(Completion<'_>, &NewEvent)> = held
                .iter()
                .zip(&events)
                .map(|(r, e)| {
                    let d = Completion {
                        item_id: r.get(0),
                        token: r.get(1),
                        run_id: r.get(2),
                        outcome: crate::model::Outcome::Done,
                        result: None,
                        cost: None,
                        version: None,
                        usage: None,
                        now: 0,
                    };
                    (d, e)
                })
                .collect();
            let p = ManyParams::of(&c, &done);
            let sql = format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {COMPLETE_MANY}");
            let rows = c.q(&sql, &p.refs())?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })();
        c.simple("ROLLBACK")?;
        out
    }

    // Twin of sqlite/hot/claim.rs, kept: a hot path (one CTE, `SKIP LOCKED`: hosts never wait for each other's rows).
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
        // `holds_lock`; a seat asked to stop claims nothing), the claim and its events.
        self.write_one(|c| {
            let id = batch_id(c, batch)?;
            let (until, at) = (c.tin(lease_until), c.tin(now));
            let rows = c.q_alone(CLAIM, &[&id, &(n as i64), &run_id, &until, &at])?;
            if rows.first().is_none_or(|r| r.get::<_, i64>(8) == 0) {
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

    /// Marks a claimed item done — only after its worker succeeded. False
    /// (and nothing written) if the lease token no longer matches.
    pub fn complete(&mut self, done: &Completion<'_>, event: &NewEvent) -> Result<bool> {
        // One statement: the item, its run's counts and the event.
        self.write_one(|c| {
            let batch = match &event.batch {
                Some(name) => Some(batch_id(c, name)?),
                None => None,
            };
            let (at, event_at) = (c.tin(done.now), c.tin(event.at));
            let result = text_opt(done.result);
            let version = text_opt(done.version);
            let usage = text_opt(done.usage);
            let fields = event
                .fields
                .as_ref()
                .map(|f| text(&f.to_string()).into_owned());
            let message = text(&event.message);
            let key = event.key.as_deref();
            let rows = c.q_alone(
                COMPLETE_ONE,
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
                    &version,
                    &usage,
                ],
            )?;
            Ok(rows[0].get::<_, i64>(0) == 1)
        })
    }

    /// Marks several claimed items done in one transaction (a persistent
    /// worker's batch): as `complete` for each, with the run's counters
    /// updated once. All must belong to one run. One flag per item, in
    /// order: false where the lease token no longer matched. One
    /// statement whatever the number of items (`COMPLETE_MANY`: arrays,
    /// not a round trip per item, nor one for the counts and one for the
    /// events).
    pub fn complete_all(&mut self, done: &[(Completion<'_>, &NewEvent)]) -> Result<Vec<bool>> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|c| {
            let p = ManyParams::of(c, done);
            let kept = c.q(COMPLETE_MANY, &p.refs())?;
            let mut accepted = vec![false; done.len()];
            for r in &kept {
                accepted[r.get::<_, i64>(0) as usize - 1] = true;
            }
            // Counted in the order given, as the done mark's sum was.
            let (mut n_done, mut n_empty, mut cost) = (0i64, 0i64, 0f64);
            for ((d, _), _) in done.iter().zip(&accepted).filter(|(_, ok)| **ok) {
                match d.outcome {
                    Outcome::Empty => n_empty += 1,
                    _ => n_done += 1,
                }
                cost += d.cost.unwrap_or(0.0);
            }
            if n_done + n_empty > 0 {
                c.x(COUNT_GROUP, &[&p.run, &n_done, &n_empty, &cost])?;
            }
            Ok(accepted)
        })
    }
}
