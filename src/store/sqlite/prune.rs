//! Statements of `prune` (the decisions are in `ops::prune`). Deletes go by
//! rowid, in chunks.

use rusqlite::params;

use super::SqliteTx;
use crate::model::Millis;
use crate::store::Result;
use crate::store::dialect::{PruneTarget, PruneWrite};

/// The table of `target` and `FROM` its rows older than `?1`.
fn rows_of(target: PruneTarget) -> (&'static str, String) {
    let (table, older) = target.older();
    (table, format!("FROM {table} WHERE {older} ?1"))
}

/// The tombstones of a chunk of old done items (`?1` cutoff, `?2` chunk
/// size, `?3` now), then the items: the same rows, in rowid order, in one
/// transaction.
const TOMBSTONE_DONE_ITEMS: &str =
    "INSERT INTO tombstones (batch_id, key, done_at, outcome, pruned_at)
     SELECT batch_id, key, updated_at, outcome, ?3 FROM items
      WHERE status = 'done' AND updated_at < ?1 ORDER BY rowid LIMIT ?2
     ON CONFLICT (batch_id, key) DO UPDATE
        SET done_at = excluded.done_at, outcome = excluded.outcome, pruned_at = excluded.pruned_at";
const DELETE_DONE_ITEMS: &str = "DELETE FROM items WHERE rowid IN (
     SELECT rowid FROM items WHERE status = 'done' AND updated_at < ?1 ORDER BY rowid LIMIT ?2)";

/// The per-attempt rows of a chunk of items about to go (`from`: their
/// rows older than `?1`; `?2` the chunk size, taken in rowid order as the
/// delete takes them): their stderr logs, in the same transaction, so no
/// attempt outlives its item (their token usage is on the item's row).
fn attempts_of_chunk(from: &str) -> [String; 1] {
    let chunk = format!("SELECT id, batch_id, key {from} ORDER BY rowid LIMIT ?2");
    [format!(
        "DELETE FROM attempt_logs WHERE item_id IN (SELECT id FROM ({chunk}))"
    )]
}

/// The next chunk of tombstones to forget after the cursor (`?1`, `?2`),
/// done before `?3`, at most `?4`, in key order: each chunk finds its rows
/// through the primary key, not by scanning from the start.
const FORGETTABLE_AFTER: &str = "SELECT batch_id, key FROM tombstones
      WHERE (batch_id, key) > (?1, ?2) AND done_at < ?3 ORDER BY batch_id, key LIMIT ?4";
/// Deletes them: from after the cursor up to the chunk's last key.
const FORGET_UP_TO: &str = "DELETE FROM tombstones
      WHERE (batch_id, key) > (?1, ?2) AND (batch_id, key) <= (?3, ?4) AND done_at < ?5";

impl PruneWrite for SqliteTx<'_> {
    fn prune_delete_chunk(
        &mut self,
        target: PruneTarget,
        cutoff: Millis,
        n: usize,
        now: Millis,
    ) -> Result<usize> {
        if matches!(target, PruneTarget::DoneItems | PruneTarget::FailedItems) {
            for sql in attempts_of_chunk(&rows_of(target).1) {
                self.conn
                    .prepare_cached(&sql)?
                    .execute(params![cutoff, n as i64])?;
            }
        }
        if target == PruneTarget::DoneItems {
            self.conn
                .prepare_cached(TOMBSTONE_DONE_ITEMS)?
                .execute(params![cutoff, n as i64, now])?;
            return Ok(self
                .conn
                .prepare_cached(DELETE_DONE_ITEMS)?
                .execute(params![cutoff, n as i64])?);
        }
        let (table, from) = rows_of(target);
        Ok(self.conn.execute(
            &format!(
                "DELETE FROM {table} WHERE rowid IN (SELECT rowid {from} ORDER BY rowid LIMIT ?2)"
            ),
            params![cutoff, n as i64],
        )?)
    }

    fn tombstones_forget_chunk(
        &mut self,
        after: &(i64, String),
        cutoff: Millis,
        n: usize,
    ) -> Result<Vec<(i64, String)>> {
        let rows: Vec<(i64, String)> = self
            .conn
            .prepare_cached(FORGETTABLE_AFTER)?
            .query_map(params![after.0, after.1, cutoff, n as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        if let Some((id, key)) = rows.last() {
            self.conn
                .prepare_cached(FORGET_UP_TO)?
                .execute(params![after.0, after.1, id, key, cutoff])?;
        }
        Ok(rows)
    }
}
