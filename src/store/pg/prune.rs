//! Statements of `prune` (the decisions are in `ops::prune`). The chunks
//! that write or drop tombstones hold the tombstone lock (see
//! `pg::tombstones`), so no add runs beside them.

use super::PgTx;
use super::tombstones;
use crate::model::Millis;
use crate::store::Result;
use crate::store::dialect::{PruneTarget, PruneWrite};

/// The table of `target` and `FROM` its rows older than `$1`.
fn rows_of(target: PruneTarget) -> (&'static str, String) {
    let (table, older) = target.older();
    (table, format!("FROM {table} WHERE {older} $1"))
}

/// The per-attempt rows of the items in `gone` (stderr logs; token usage
/// is on the item's row), deleted in the same statement, so no attempt
/// outlives its item.
macro_rules! attempts_of_gone {
    () => {
        "logs AS (DELETE FROM attempt_logs a USING gone g WHERE a.item_id = g.id)"
    };
}

/// A chunk of old done items (`$1` cutoff, `$2` chunk size) deleted, with
/// their attempts, and their tombstones written (`$3` now), in one
/// statement.
const PRUNE_DONE_ITEMS: &str = concat!(
    "WITH gone AS (
         DELETE FROM items WHERE id IN (
             SELECT id FROM items WHERE status = 'done' AND updated_at < $1 LIMIT $2)
         RETURNING id, batch_id, key, updated_at, outcome), ",
    attempts_of_gone!(),
    "
     INSERT INTO tombstones (batch_id, key, done_at, outcome, pruned_at)
     SELECT batch_id, key, updated_at, outcome, $3 FROM gone
     ON CONFLICT (batch_id, key) DO UPDATE
        SET done_at = excluded.done_at, outcome = excluded.outcome, pruned_at = excluded.pruned_at"
);

/// A chunk of old failed items deleted with their attempts; how many.
const PRUNE_FAILED_ITEMS: &str = concat!(
    "WITH gone AS (
         DELETE FROM items WHERE id IN (
             SELECT id FROM items WHERE status = 'failed' AND updated_at < $1 LIMIT $2)
         RETURNING id, batch_id, key), ",
    attempts_of_gone!(),
    "
     SELECT count(*)::int8 FROM gone"
);

/// The next chunk of tombstones done before `$3` after the cursor (`$1`,
/// `$2`), at most `$4`, in key order, deleted; their keys returned.
const FORGET_AFTER: &str = "WITH picked AS (
         SELECT batch_id, key FROM tombstones
          WHERE (batch_id, key) > ($1, $2) AND done_at < $3 ORDER BY batch_id, key LIMIT $4),
     gone AS (
         DELETE FROM tombstones t USING picked p
          WHERE t.batch_id = p.batch_id AND t.key = p.key
         RETURNING t.batch_id, t.key)
     SELECT batch_id, key FROM gone ORDER BY batch_id, key";

impl PruneWrite for PgTx<'_> {
    // Twin of sqlite/prune.rs by its signature: a chunk of items is one CTE
    // here (items, attempts, tombstones), statements by rowid there.
    fn prune_delete_chunk(
        &mut self,
        target: PruneTarget,
        cutoff: Millis,
        n: usize,
        now: Millis,
    ) -> Result<usize> {
        let cutoff = self.c.tin(cutoff);
        let n = n as i64;
        let deleted = if target == PruneTarget::DoneItems {
            tombstones::exclusive_lock(self.c)?;
            let at = self.c.tin(now);
            self.c.x(PRUNE_DONE_ITEMS, &[&cutoff, &n, &at])?
        } else if target == PruneTarget::FailedItems {
            let gone: i64 = self.c.one(PRUNE_FAILED_ITEMS, &[&cutoff, &n])?.get(0);
            gone as u64
        } else {
            let (table, from) = rows_of(target);
            self.c.x(
                &format!("DELETE FROM {table} WHERE id IN (SELECT id {from} LIMIT $2)"),
                &[&cutoff, &n],
            )?
        };
        Ok(deleted as usize)
    }

    fn tombstones_forget_chunk(
        &mut self,
        after: &(i64, String),
        cutoff: Millis,
        n: usize,
    ) -> Result<Vec<(i64, String)>> {
        tombstones::exclusive_lock(self.c)?;
        let cutoff = self.c.tin(cutoff);
        Ok(self
            .c
            .q(FORGET_AFTER, &[&after.0, &after.1, &cutoff, &(n as i64)])?
            .iter()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
            .collect())
    }
}
