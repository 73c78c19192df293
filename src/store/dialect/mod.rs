//! The thinnest layer over each SQL dialect: one method, one statement
//! (River's `riverdriver::Executor`). `ops` decides, over these traits as
//! `dyn`; `sqlite::SqliteTx` and `pg::PgTx` implement them. Rules every
//! impl keeps:
//! - Times in and out are on the caller's clock; `PgTx` moves them by the
//!   measured offset (`Conn::tin`/`tout`).
//! - Any Rust text may be passed; `PgTx` stores NUL as U+FFFD
//!   (`conn::text`).
//! - A method of a `…Write` trait may lock the rows it reads until commit
//!   (PostgreSQL `FOR UPDATE`, `FOR SHARE`); SQLite's `BEGIN IMMEDIATE`
//!   already excludes every other writer. Such methods end in `_locked`.
//! - No decisions: no error text, no event text, no branching on results.

mod batches;
mod dead_letters;
mod events;
mod items;
mod pools;
mod runs;
mod seats;

pub(crate) use batches::{BatchState, BatchesRead, BatchesWrite};
pub(crate) use dead_letters::DeadLettersRead;
pub(crate) use events::{EventsRead, EventsWrite};
pub(crate) use items::{ItemsRead, ItemsWrite};
pub(crate) use pools::{PoolsRead, PoolsWrite, fill_minutes};
pub(crate) use runs::{RunsRead, RunsWrite};
pub(crate) use seats::{SeatsRead, SeatsWrite};

/// Every statement a read snapshot may run.
pub(crate) trait Read:
    BatchesRead + DeadLettersRead + EventsRead + ItemsRead + PoolsRead + RunsRead + SeatsRead
{
}
impl<
    T: ?Sized
        + BatchesRead
        + DeadLettersRead
        + EventsRead
        + ItemsRead
        + PoolsRead
        + RunsRead
        + SeatsRead,
> Read for T
{
}

/// Every statement a write transaction may run.
pub(crate) trait Write:
    Read + BatchesWrite + EventsWrite + ItemsWrite + PoolsWrite + RunsWrite + SeatsWrite
{
}
impl<
    T: ?Sized + Read + BatchesWrite + EventsWrite + ItemsWrite + PoolsWrite + RunsWrite + SeatsWrite,
> Write for T
{
}
