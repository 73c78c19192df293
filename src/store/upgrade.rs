//! A store's layout is upgraded only while no runner uses it. A runner of
//! the older build keeps writing with that build's statements: under a
//! newer layout they can miss what it now keeps (a counter that once was a
//! trigger's, and is now each statement's own), so its counts would go
//! wrong without a word. A writable open of an older layout (`add`, a
//! writable dashboard, a newer runner) therefore looks at the batch lock's
//! seats first, in the migration's own transaction, and refuses while one
//! is live by the one rule for seats (`ops::liveness::seat`): a crashed
//! holder here, or a silent one elsewhere, does not hold it back.

use std::path::Path;

use super::StoreError;
use crate::model::{Holder, LockInfo, Millis};

/// Every seat of the batch lock, read the same way at every layout since
/// the first (the lock's columns have not changed): `prefix` names the
/// schema where tables are qualified.
pub(crate) fn seats_sql(prefix: &str) -> String {
    format!(
        "SELECT b.name, l.token, l.host, l.pid, l.pid_start, l.run_id, l.acquired_at, l.expires_at
           FROM {prefix}locks l JOIN {prefix}batches b ON b.id = l.batch_id
          ORDER BY b.name, l.acquired_at"
    )
}

/// A seat as `seats_sql` reads it.
pub(crate) struct SeatRow {
    pub batch: String,
    pub token: String,
    pub host: String,
    pub pid: i64,
    pub pid_start: Option<i64>,
    pub run_id: Option<i64>,
    pub acquired_at: Millis,
    pub expires_at: Millis,
}

impl SeatRow {
    fn lock(self) -> LockInfo {
        LockInfo {
            batch: self.batch,
            token: self.token,
            holder: Holder {
                host: self.host,
                pid: u32::try_from(self.pid).unwrap_or(0),
                pid_start: self.pid_start.and_then(|s| u64::try_from(s).ok()),
            },
            run_id: self.run_id,
            acquired_at: self.acquired_at,
            expires_at: self.expires_at,
            // Only a silent seat's words read it; a live one is all that counts here.
            renewed_at: self.acquired_at,
            stop_by: None,
        }
    }
}

/// The refusal to upgrade `path` from layout `found` while a seat of
/// `seats` is live; `None` when none is.
pub(crate) fn refusal(
    path: &Path,
    found: i32,
    supported: i32,
    seats: Vec<SeatRow>,
    now: Millis,
) -> Option<StoreError> {
    let live: Vec<String> = seats
        .into_iter()
        .map(SeatRow::lock)
        .filter(|l| super::seat(l, now).is_live())
        .map(|l| {
            let run = l.run_id.map_or(String::new(), |r| format!("run {r} of "));
            format!(
                "{run}batch {}, pid {} on {}",
                l.batch, l.holder.pid, l.holder.host
            )
        })
        .collect();
    (!live.is_empty()).then(|| StoreError::UpgradeUnderRunner {
        path: path.to_path_buf(),
        found,
        supported,
        runners: live.join("; "),
    })
}
