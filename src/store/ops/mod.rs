//! Every decision of the store, written once as `impl Store` methods over
//! the statements of `dialect`. An op runs in one transaction
//! ([`Store::read_tx`], [`Store::write_tx`]).

pub(super) mod add;
mod attempts;
mod batches;
mod budgets;
mod daemons;
pub(super) mod dead_letters;
mod events;
mod items;
pub(super) mod liveness;
mod pools;
mod prune;
mod reclaim;
mod requeue;
mod runs;
mod seats;
mod steer;
mod views;
mod workers;

use super::dialect::{Read, Write};
use super::pg::PgTx;
use super::sqlite::SqliteTx;
use super::{Result, Store};

impl Store {
    /// Runs `f` in one read snapshot (inside a group: the group's
    /// transaction, seeing its writes).
    pub(crate) fn read_tx<T>(&self, f: impl Fn(&mut dyn Read) -> Result<T>) -> Result<T> {
        match self {
            Store::Sqlite(s) => s.read(|conn| f(&mut SqliteTx::reading(conn, s))),
            Store::Pg(s) => s.read(|c| f(&mut PgTx::new(c))),
        }
    }

    /// Runs `f` in one write transaction (a savepoint inside `group`). `f`
    /// may run more than once (PostgreSQL retries serialisation failures
    /// and deadlocks): it may only compute from its arguments and `tx`.
    pub(crate) fn write_tx<T>(
        &mut self,
        mut f: impl FnMut(&mut dyn Write) -> Result<T>,
    ) -> Result<T> {
        match self {
            Store::Sqlite(s) => s.write(|conn| f(&mut SqliteTx::new(conn))),
            Store::Pg(s) => s.write(|c| f(&mut PgTx::new(c))),
        }
    }

    /// Whether the store has one writer at a time (SQLite): only there do
    /// bulk writes pace their chunks to let a waiting runner in.
    pub(crate) fn single_writer(&self) -> bool {
        matches!(self, Store::Sqlite(_))
    }

    /// The signal that asked bulk writes to stop between chunks, if any
    /// (`set_stop`).
    pub(crate) fn stop_requested(&self) -> Option<String> {
        match self {
            Store::Sqlite(s) => s.stop().requested(),
            Store::Pg(s) => s.stop().requested(),
        }
    }
}
