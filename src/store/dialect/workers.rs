//! Statements on the worker process groups, one row per run slot.

use crate::model::WorkerGroup;
use crate::store::Result;

pub(crate) trait WorkersRead {
    /// The groups recorded for these runs, each run's by slot (SQLite in
    /// the order of `runs`, PostgreSQL by run id).
    fn workers_of_runs(&mut self, runs: &[i64]) -> Result<Vec<WorkerGroup>>;
}

pub(crate) trait WorkersWrite {
    /// Records the group serving its slot, replacing the slot's earlier one.
    fn worker_upsert(&mut self, group: &WorkerGroup) -> Result<()>;
    /// Forgets the groups of those of `runs` that are not running: the
    /// run's state is read in the same statement, so a run still going
    /// keeps its rows.
    fn workers_delete_ended(&mut self, runs: &[i64]) -> Result<()>;
}
