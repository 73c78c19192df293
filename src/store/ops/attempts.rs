//! The worker's own words: what each attempt printed on stderr (its last
//! 16 KiB, see `runner::child::tail`), kept per attempt for `show
//! --attempts` and the dashboard's item detail.

use crate::store::api::AttemptLog;
use crate::store::{Result, Store};

/// Attempts of one item whose stderr is kept (older ones go as new ones
/// come), so an item retried for weeks stays bounded.
pub const KEPT_PER_ITEM: i64 = 20;

impl Store {
    /// Keeps what an attempt of item `item_id` printed on stderr.
    pub fn record_attempt_log(&mut self, item_id: i64, log: &AttemptLog) -> Result<()> {
        self.write_tx(|tx| {
            tx.attempt_log_insert(item_id, log)?;
            tx.attempt_logs_trim(item_id, KEPT_PER_ITEM)
        })
    }

    /// What the item's kept attempts printed on stderr, newest first.
    pub fn attempt_logs(&self, item_id: i64) -> Result<Vec<AttemptLog>> {
        self.read_tx(|tx| tx.attempt_logs(item_id, KEPT_PER_ITEM))
    }
}
