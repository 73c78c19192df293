//! What a runner holds while it works: the seats of a batch's lock (who
//! holds each, whether its runners are all stopping) and its workers'
//! process groups.

use serde::Serialize;
use std::fmt;

use super::{Millis, Seat};

/// Who holds a batch lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// Process start time (clock ticks since boot on Linux), so a reused pid
    /// is not mistaken for the holder.
    pub pid_start: Option<u64>,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.pid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockInfo {
    pub batch: String,
    pub token: String,
    pub holder: Holder,
    pub run_id: Option<i64>,
    #[serde(serialize_with = "crate::util::time::json")]
    pub acquired_at: Millis,
    #[serde(serialize_with = "crate::util::time::json")]
    pub expires_at: Millis,
    /// Its last renewal (its expiry less the holder's TTL; the acquisition
    /// for a seat recorded before the TTL was).
    #[serde(serialize_with = "crate::util::time::json")]
    pub renewed_at: Millis,
    /// Who asked its runner to stop (`stop`, the dashboard's `X`), not yet
    /// heard to the end: it is finishing its in-flight items.
    pub stop_by: Option<String>,
}

/// A worker's process group as its runner recorded it (one per slot), so
/// a later run on the same host can stop it once the runner died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerGroup {
    pub run_id: i64,
    pub slot: u32,
    pub host: String,
    /// The kernel's boot id: start times count from boot.
    pub boot: String,
    pub pgid: u32,
    /// When its leader started (clock ticks since boot): a reused pid has
    /// another.
    pub started: u64,
}

/// Whether some seat of `locks` (judged `seats`, in the same order) is
/// live and every live one was asked to stop (a signal, `nightshift
/// stop`): its runner claims nothing more, so what waits for the lock
/// waits for a run after it.
#[must_use]
pub fn all_stopping(locks: &[LockInfo], seats: &[Seat]) -> bool {
    let mut live = locks
        .iter()
        .zip(seats)
        .filter(|(_, s)| s.is_live())
        .peekable();
    live.peek().is_some() && live.all(|(l, _)| l.stop_by.is_some())
}
