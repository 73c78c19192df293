//! Statements on the worker's own words (`attempt_logs`).

use crate::store::Result;
use crate::store::api::AttemptLog;

pub(crate) trait AttemptsRead {
    /// What the newest `limit` attempts of an item printed, newest first.
    fn attempt_logs(&mut self, item: i64, limit: i64) -> Result<Vec<AttemptLog>>;
}

pub(crate) trait AttemptsWrite {
    fn attempt_log_insert(&mut self, item: i64, log: &AttemptLog) -> Result<()>;
    /// Deletes all but the newest `keep` logs of an item.
    fn attempt_logs_trim(&mut self, item: i64, keep: i64) -> Result<()>;
}
