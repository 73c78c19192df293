//! The thinnest layer over each SQL dialect: one method, one statement
//! (River's `riverdriver::Executor`). `ops` decides, over these traits as
//! `dyn`; `sqlite::SqliteTx` and `pg::PgTx` implement them. A statement
//! the same on both engines (or differing only in its text: `sql::Texts`)
//! is written once, as a default method over `sql::Sql`, the one-statement
//! interface each engine implements; `sqlite/` and `pg/` keep what differs
//! on purpose (statements built at run time, arrays, engine mechanisms, the
//! hot paths). Rules every impl keeps:
//! - Times in and out are on the caller's clock; `PgTx` moves them by the
//!   measured offset (`Conn::tin`/`tout`).
//! - Any Rust text may be passed; both keep it by one rule (`sql::kept`):
//!   a NUL, which PostgreSQL's text cannot hold, as the `\x00` every view
//!   shows it as, on SQLite too, so the same bytes read back the same.
//! - A method of a `…Write` trait may lock the rows it reads until commit
//!   (PostgreSQL `FOR UPDATE`, `FOR SHARE`); SQLite's `BEGIN IMMEDIATE`
//!   already excludes every other writer. Such methods end in `_locked`.
//! - No decisions: no error text, no event text, no branching on results.

mod attempts;
pub(crate) mod batches;
mod budgets;
mod bulk;
mod daemons;
mod dead_letters;
pub(crate) mod events;
pub(crate) mod items;
mod pools;
mod prune;
mod runs;
mod seats;
pub(crate) mod sql;
mod steer;
mod views;
mod workers;

pub(crate) use attempts::{AttemptsRead, AttemptsWrite};
pub(crate) use batches::{BatchState, BatchesRead, BatchesWrite};
pub(crate) use budgets::{BudgetsRead, BudgetsWrite};
pub(crate) use bulk::Bulk;
pub(crate) use daemons::{DaemonsRead, DaemonsWrite};
pub(crate) use dead_letters::{DeadLettersRead, DeadLettersWrite};
pub(crate) use events::{EventsRead, EventsWrite};
pub(crate) use items::{ItemsRead, ItemsWrite};
pub(crate) use pools::{PoolsRead, PoolsWrite, fill_minutes};
pub(crate) use prune::{PruneRead, PruneTarget, PruneWrite};
pub(crate) use runs::{RunsRead, RunsWrite};
pub(crate) use seats::{ANY_LIVE_SEAT, SeatsRead, SeatsWrite};
pub(crate) use steer::{SteerRead, SteerWrite};
pub(crate) use views::{DrawnSearch, RowsPage, ViewsRead};
pub(crate) use workers::{WorkersRead, WorkersWrite};

/// Every statement a read snapshot may run.
pub(crate) trait Read:
    AttemptsRead
    + BatchesRead
    + BudgetsRead
    + DaemonsRead
    + DeadLettersRead
    + EventsRead
    + ItemsRead
    + PoolsRead
    + PruneRead
    + RunsRead
    + SeatsRead
    + SteerRead
    + ViewsRead
    + WorkersRead
{
}
impl<
    T: ?Sized
        + AttemptsRead
        + BatchesRead
        + BudgetsRead
        + DaemonsRead
        + DeadLettersRead
        + EventsRead
        + ItemsRead
        + PoolsRead
        + PruneRead
        + RunsRead
        + SeatsRead
        + SteerRead
        + ViewsRead
        + WorkersRead,
> Read for T
{
}

/// Every statement a write transaction may run.
pub(crate) trait Write:
    Read
    + AttemptsWrite
    + BatchesWrite
    + BudgetsWrite
    + Bulk
    + DaemonsWrite
    + DeadLettersWrite
    + EventsWrite
    + ItemsWrite
    + PoolsWrite
    + PruneWrite
    + RunsWrite
    + SeatsWrite
    + SteerWrite
    + WorkersWrite
{
}
impl<
    T: ?Sized
        + Read
        + AttemptsWrite
        + BatchesWrite
        + BudgetsWrite
        + Bulk
        + DaemonsWrite
        + DeadLettersWrite
        + EventsWrite
        + ItemsWrite
        + PoolsWrite
        + PruneWrite
        + RunsWrite
        + SeatsWrite
        + SteerWrite
        + WorkersWrite,
> Write for T
{
}
