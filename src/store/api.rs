//! The contract types both dialects speak: what callers pass to [`Store`]
//! and what they get back. Neutral ground: `sqlite/` and `pg/` import
//! from here, never from each other.
//!
//! [`Store`]: super::Store

mod items;
mod pools;
mod prune;
mod runs;
mod steering;
mod views;

pub(crate) use items::stale_sql;
pub use items::{
    AddFeed, Claimable, Completion, Failure, FeedRefused, ItemFilter, Requeue, Retrying, Selection,
};
pub use pools::{
    Admission, AttemptUsage, GonePlaces, PoolCall, PoolDim, PoolDimView, PoolHold, PoolItem,
    PoolSpec, PoolView, PoolWait, SpendAdd, SpendKey, SpendScope, Spent, UsageSum, place_key,
    place_runner,
};
pub use prune::PruneReport;
pub use runs::{LockOutcome, OpenRun, RunEnd};
pub use steering::{
    CancelOutcome, CancelSettled, CancelTo, CancelledWhile, Steering, StopAsked, Unpaused,
};
pub(crate) use views::counted;
pub use views::{
    AliveWatch, AttemptLog, BatchView, COUNT_CAP, DashQuery, Dashboard, EventFilter, EventsQuery,
    FollowCursor, ItemDetail, ItemPage, ItemRow, ItemsQuery, SinceSummary,
};

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Monitoring: SQLite's read-only flag; no byte of any file changes.
    ReadOnly,
    ReadWrite,
}
