//! Worker process groups, one row per run slot, written as each worker
//! starts: what a later run on this host stops when the runner died
//! (`runner::child::groups`). Rows go once their run has ended.

use crate::model::WorkerGroup;
use crate::store::{Result, Store};

impl Store {
    /// Records the worker now serving `group.slot` of `group.run_id`
    /// (replacing the slot's earlier worker, whose group is gone).
    pub fn record_worker(&mut self, group: &WorkerGroup) -> Result<()> {
        self.write_tx(|tx| tx.worker_upsert(group))
    }

    /// The worker groups recorded for `run_ids`.
    pub fn worker_groups(&self, run_ids: &[i64]) -> Result<Vec<WorkerGroup>> {
        self.read_tx(|tx| tx.workers_of_runs(run_ids))
    }

    /// Forgets the worker groups of those of `run_ids` that have ended.
    pub fn forget_workers(&mut self, run_ids: &[i64]) -> Result<()> {
        self.write_tx(|tx| tx.workers_delete_ended(run_ids))
    }
}
