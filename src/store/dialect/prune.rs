//! Statements of `prune`: counting and deleting old history in chunks.

use std::collections::BTreeMap;

use super::sql::{self, Arg, Sql};
use crate::model::Millis;
use crate::store::Result;

/// What `prune` deletes, each older than the cutoff by its own time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PruneTarget {
    /// Done items (by `updated_at`), each leaving its tombstone.
    DoneItems,
    Events,
    /// What attempts printed on stderr (by `at`), as the events go.
    AttemptLogs,
    /// Finished runs (by `ended_at`) but the store's newest.
    Runs,
    FailedItems,
    DeadLetters,
}

impl PruneTarget {
    /// Its table, and what makes a row older than the cutoff: a condition
    /// each dialect ends with its cutoff parameter (`?1`, `$1`).
    pub(crate) fn older(self) -> (&'static str, &'static str) {
        match self {
            PruneTarget::DoneItems => ("items", "status = 'done' AND updated_at <"),
            PruneTarget::Events => ("events", "at <"),
            PruneTarget::AttemptLogs => ("attempt_logs", "at <"),
            // The newest run stays: SQLite gives a deleted highest id
            // again, and a dead letter's or an event's run number would
            // then name another run.
            PruneTarget::Runs => (
                "runs",
                "id < (SELECT max(id) FROM runs) AND ended_at IS NOT NULL AND ended_at <",
            ),
            PruneTarget::FailedItems => ("items", "status = 'failed' AND updated_at <"),
            PruneTarget::DeadLetters => ("dead_letters", "failed_at <"),
        }
    }
}

const PRUNE_FORGETTABLE: &str = "SELECT b.name, count(*) FROM (
         SELECT batch_id FROM tombstones WHERE done_at < ?1
         UNION ALL SELECT batch_id FROM items WHERE status = 'done' AND updated_at < ?1) x
       JOIN batches b ON b.id = x.batch_id GROUP BY b.name";
const PRUNED_KEYS: &str = "SELECT pruned_keys FROM batches WHERE id = ?1";
const BATCH_NAMES_BY_ID: &str = "SELECT id, name FROM batches";
/// Rollups are kept by minute and by hour of the (database's) clock.
const PRUNE_MINUTES: &str = "DELETE FROM minute_stats WHERE minute < CAST(?1 AS BIGINT) / 60000";
const PRUNE_HOURS: &str = "DELETE FROM dlq_hourly WHERE hour < CAST(?1 AS BIGINT) / 3600000";
/// A pool's minutes are stamped by the runners' clocks.
const PRUNE_POOL_MINUTES: &str = "DELETE FROM pool_usage WHERE minute < CAST(?1 AS BIGINT) / 60000";

pub(crate) trait PruneRead: Sql {
    /// How many rows of `target` are older than `cutoff`.
    fn prune_count(&mut self, target: PruneTarget, cutoff: Millis) -> Result<i64> {
        let (table, older) = target.older();
        let sql = format!("SELECT count(*) FROM {table} WHERE {older} ?1");
        sql::one(self, &sql, &[Arg::Time(cutoff)], |r| r.int(0))
    }

    /// By batch name: tombstones of items done before `cutoff`, and the
    /// done items a prune at `cutoff` turns into such.
    fn prune_forgettable(&mut self, cutoff: Millis) -> Result<BTreeMap<String, i64>> {
        let rows = sql::all(self, PRUNE_FORGETTABLE, &[Arg::Time(cutoff)], |r| {
            Ok((r.text(0)?, r.int(1)?))
        })?;
        Ok(rows.into_iter().collect())
    }

    /// How many keys of pruned done items the batch keeps (its counter).
    fn pruned_keys(&mut self, batch: i64) -> Result<i64> {
        sql::one(self, PRUNED_KEYS, &[Arg::Int(batch)], |r| r.int(0))
    }

    /// Every batch's name, by id.
    fn batch_names_by_id(&mut self) -> Result<BTreeMap<i64, String>> {
        let rows = sql::all(self, BATCH_NAMES_BY_ID, &[], |r| {
            Ok((r.int(0)?, r.text(1)?))
        })?;
        Ok(rows.into_iter().collect())
    }
}

impl<T: Sql + ?Sized> PruneRead for T {}

pub(crate) trait PruneWrite: Sql {
    /// Deletes up to `n` rows of `target` older than `cutoff`; done items
    /// write their tombstones (pruned at `now`) in the same transaction, so
    /// a prune cut short anywhere leaves no done key forgotten. The rows
    /// deleted.
    fn prune_delete_chunk(
        &mut self,
        target: PruneTarget,
        cutoff: Millis,
        n: usize,
        now: Millis,
    ) -> Result<usize>;
    /// Deletes up to `n` tombstones of items done before `cutoff`, the next
    /// ones after `after` in (batch, key) order; their (batch id, key).
    fn tombstones_forget_chunk(
        &mut self,
        after: &(i64, String),
        cutoff: Millis,
        n: usize,
    ) -> Result<Vec<(i64, String)>>;
    /// Drops the minute rollups before `cutoff`, and the hourly dead-letter
    /// rollups too with `include_failed`; the pools' minutes before
    /// `pools_before`.
    fn prune_rollups(
        &mut self,
        cutoff: Millis,
        include_failed: bool,
        pools_before: Millis,
    ) -> Result<()> {
        self.exec(PRUNE_MINUTES, &[Arg::Time(cutoff)])?;
        self.exec(PRUNE_POOL_MINUTES, &[Arg::Time(pools_before)])?;
        if include_failed {
            self.exec(PRUNE_HOURS, &[Arg::Time(cutoff)])?;
        }
        Ok(())
    }
}
