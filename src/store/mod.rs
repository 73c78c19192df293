//! The store: a SQLite file (`sqlite`) or a PostgreSQL database (`pg`)
//! holding items, dead letters, runs, the run log, locks and schedule
//! state. Every SQL statement of the program lives under this module;
//! callers speak in `crate::model` types and the contract types of `api`
//! to [`Store`], which forwards to the backend its location names
//! (`facade`).
//!
//! On SQLite, writes are short `BEGIN IMMEDIATE` transactions and reads
//! short deferred ones, never held open (a long reader stops WAL
//! checkpoints). A read-only store never writes the database, its `-wal`
//! or its `-shm` (`sqlite::readonly`). What is at a file's path is judged
//! before SQLite opens it, and a new store appears whole (`sqlite::file`);
//! a long-lived user notices its store deleted or replaced (`identity`).

mod api;
mod chunks;
mod dialect;
mod error;
mod facade;
mod identity;
mod location;
mod ops;
pub mod pg;
mod rows;
pub mod sqlite;

pub use api::{
    Access, Admission, AliveWatch, AttemptLog, AttemptUsage, BatchView, COUNT_CAP, CancelOutcome,
    CancelSettled, CancelTo, Completion, DashQuery, Dashboard, EventFilter, EventsQuery, Failure,
    FollowCursor, ItemDetail, ItemFilter, ItemPage, ItemRow, ItemsQuery, LockOutcome, OpenRun,
    PoolCall, PoolDim, PoolDimView, PoolHold, PoolSpec, PoolView, PoolWait, PruneReport, Requeue,
    Selection, SinceSummary, Steering, Unpaused, UsageSum,
};
pub use error::{CutShort, Fault, Refusal, StoreError};
pub use facade::Store;
pub use identity::{StoreIdentity, Verdict};
pub use location::{absolute, beside, beside_file, file_id, is_server, paused_file, place};
pub use ops::liveness::{lapsed as seat_lapsed, seat};
pub use sqlite::SCHEMA_VERSION;
pub use sqlite::SqliteStore;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Reads an optional JSON text column.
pub(crate) fn json_col(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}
