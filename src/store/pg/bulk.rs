//! PostgreSQL's bulk chunks (`dialect::Bulk`): a requeue's and a
//! redrive's, each in one write transaction (see `ops::requeue`).
//!
//! Why they differ from SQLite's (`sqlite/bulk.rs`): each chunk is one
//! CTE, one round trip, its rows locked (`FOR UPDATE`, and `SKIP LOCKED`
//! for redrive, so hosts redriving at once take disjoint items), where
//! SQLite pays its triggers' setup once per statement.
//!
//! Each update names its rows by id (`id = ANY(ARRAY(SELECT id FROM ...))`),
//! an index lookup a row: joined to the picked rows instead, it was planned
//! as a hash join over a Seq Scan of every item, as the claim was
//! (`hot.rs`), so each chunk read the whole table.

use std::collections::HashSet;

use super::batches::batch_id;
use super::conn::text;
use super::{PgStore, PgTx};
use crate::model::Millis;
use crate::store::Result;
use crate::store::api::Selection;
use crate::store::dialect::Bulk;

/// A requeue chunk of `sel`: `$1` the ids, `$2` the time, `$3` the batch,
/// `$4` the actor, `$5` whether attempts are reset, then the version (only
/// with `sel.stale`), then the not-before time as stored and as the event
/// says it. Returns the ids moved.
fn requeue_sql(sel: &Selection) -> String {
    // Still in the state the selection moves (a run may have changed it).
    let from = sel.moves_sql("$6");
    let nb_at = if sel.stale.is_some() { 7 } else { 6 };
    let nb_text = nb_at + 1;
    // The update's `i.status` is the row as picked (locked by `picked`).
    format!(
        "WITH picked AS (
             SELECT i.id, i.key, i.tier, i.outcome, i.error_class, i.op_id FROM items i
              WHERE i.id = ANY($1){from} ORDER BY i.id FOR UPDATE),
         logged AS (
             INSERT INTO events (at, batch_id, key, item_id, kind, actor, message, fields)
             SELECT $2, $3, key, id, 'requeued', $4,
                    'requeued from ' || coalesce(tier, outcome) || ' by ' || $4,
                    (json_build_object('tier', tier, 'outcome', outcome,
                                       'error_class', error_class, 'op_id', op_id,
                                       'reset_attempts', $5::bool)::jsonb
                     || CASE WHEN ${nb_text}::text IS NULL THEN '{{}}'::jsonb
                        ELSE jsonb_build_object('not_before', ${nb_text}::text) END)::text
               FROM picked ORDER BY id)
         UPDATE items i SET status = 'pending', tier = NULL, next_attempt_at = ${nb_at}::int8,
                outcome = NULL,
                result = CASE WHEN i.status = 'done' THEN NULL ELSE i.result END,
                op_id = CASE WHEN i.status = 'done' THEN NULL ELSE i.op_id END,
                attempts = CASE WHEN $5::bool THEN 0 ELSE i.attempts END, updated_at = $2
          WHERE i.id = ANY(ARRAY(SELECT id FROM picked))
         RETURNING i.id"
    )
}

/// A redrive chunk: `$1` the batch, `$2` the time, `$3` at most this many,
/// `$4` the run, `$5` the events' message. Returns the keys moved.
const REDRIVE: &str = "WITH due AS (
     SELECT id FROM items
      WHERE batch_id = $1 AND status = 'failed' AND tier = 'retry'
        AND next_attempt_at <= $2
      ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED),
 moved AS (
     UPDATE items i SET status = 'pending', tier = NULL,
            next_attempt_at = NULL, updated_at = $2
      WHERE i.id = ANY(ARRAY(SELECT id FROM due))
     RETURNING i.id, i.key),
 logged AS (
     INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message)
     SELECT $2, $1, $4, key, id, 'redriven', $5
       FROM moved ORDER BY id)
 SELECT key FROM moved ORDER BY id";

impl Bulk for PgTx<'_> {
    fn requeue_chunk(
        &mut self,
        batch: i64,
        sel: &Selection,
        ids: &[i64],
        reset_attempts: bool,
        actor: &str,
        now: Millis,
    ) -> Result<HashSet<i64>> {
        let at = self.c.tin(now);
        let mut values: Vec<&(dyn postgres::types::ToSql + Sync)> =
            vec![&ids, &at, &batch, &actor, &reset_attempts];
        if let Some(v) = &sel.stale {
            values.push(v);
        }
        let not_before = (
            self.c.tin_opt(sel.not_before),
            sel.not_before.map(crate::util::time::rfc3339),
        );
        values.push(&not_before.0);
        values.push(&not_before.1);
        Ok(self
            .c
            .q(&requeue_sql(sel), &values)?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn redrive_chunk(
        &mut self,
        batch: i64,
        run: Option<i64>,
        now: Millis,
        limit: usize,
        message: &str,
    ) -> Result<Vec<String>> {
        let at = self.c.tin(now);
        Ok(self
            .c
            .q(
                REDRIVE,
                &[&batch, &at, &(limit as i64), &run, &text(message)],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }
}

impl PgStore {
    /// How PostgreSQL plans a requeue chunk of every failed item among the
    /// first `n` items of `batch` (`EXPLAIN`), one line per row: for the
    /// test that keeps a chunk's cost in its own rows.
    #[doc(hidden)]
    pub fn requeue_plan_of(&self, batch: &str, n: i64) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let ids: Vec<i64> = c
                .q(
                    "SELECT id FROM items WHERE batch_id = $1 ORDER BY id LIMIT $2",
                    &[&id, &n],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let sel = Selection {
                all_failed: true,
                ..Selection::default()
            };
            let (at, none) = (c.tin(0), c.tin_opt(None));
            let rows = c.q(
                &format!("EXPLAIN {}", requeue_sql(&sel)),
                &[&ids, &at, &id, &"plan", &false, &none, &None::<String>],
            )?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// How PostgreSQL plans a redrive chunk at `now` of up to `n` items
    /// (`EXPLAIN`).
    #[doc(hidden)]
    pub fn redrive_plan_of(&self, batch: &str, n: i64, now: Millis) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let at = c.tin(now);
            let rows = c.q(
                &format!("EXPLAIN {REDRIVE}"),
                &[&id, &at, &n, &None::<i64>, &text("plan")],
            )?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }
}
