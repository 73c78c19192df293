//! Statements on the scheduler daemons' heartbeat rows.

use crate::model::Daemon;
use crate::store::Result;

pub(crate) trait DaemonsRead {
    /// Every daemon recorded, newest beat first.
    fn daemons_all(&mut self) -> Result<Vec<Daemon>>;
}

pub(crate) trait DaemonsWrite {
    /// Every daemon recorded, newest beat first; no other write
    /// transaction reads them so until this one ends (PostgreSQL: an
    /// advisory lock, as its rows may be none to lock; SQLite's `BEGIN
    /// IMMEDIATE` already excludes every other writer).
    fn daemons_all_locked(&mut self) -> Result<Vec<Daemon>>;
    /// Records the daemon (or its new beat, stop and batches).
    fn daemon_upsert(&mut self, d: &Daemon) -> Result<()>;
    /// Forgets the daemons of these tokens.
    fn daemons_delete(&mut self, tokens: &[&str]) -> Result<()>;
}
