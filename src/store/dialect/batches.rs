//! Statements on batches.

use crate::model::{Counts, Fire, Hold, Millis, Pause};
use crate::store::Result;

/// A batch's pause flag, next fire time and last fire, as stored.
pub(crate) type BatchState = (Option<Pause>, Option<Millis>, Option<Fire>);

pub(crate) trait BatchesRead {
    /// The batch's id; `StoreError::UnknownBatch` (naming the known
    /// batches) when there is none.
    fn batch_id(&mut self, name: &str) -> Result<i64>;
    /// Every batch's name, in order.
    fn batch_names(&mut self) -> Result<Vec<String>>;
    /// The batch's counters (PostgreSQL sums their shards).
    fn batch_counts(&mut self, batch: i64) -> Result<Counts>;
    fn batch_paused(&mut self, batch: i64) -> Result<bool>;
    fn batch_state(&mut self, batch: i64) -> Result<BatchState>;
    /// The last retry-after hold: until when, the key that asked, and its
    /// label (while the item is kept).
    fn batch_hold(&mut self, batch: i64) -> Result<Option<Hold>>;
    /// Done and failed completions per minute, oldest first, for the last
    /// `minutes` minutes ending at `now` (zeros included), none from
    /// before the batch was created. The minutes are the database's, so
    /// they are counted inside the dialect, after its clock offset.
    fn minute_counts(&mut self, batch: i64, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>>;
}

pub(crate) trait BatchesWrite {
    /// The batch's id, its row (and zeroed counters) made if missing.
    fn batch_ensure(&mut self, name: &str, now: Millis) -> Result<i64>;
    /// Locks the batch's row until commit (PostgreSQL `FOR UPDATE`):
    /// a concurrent writer of its flags waits, then sees this one's.
    fn batch_row_locked(&mut self, batch: i64) -> Result<()>;
    fn batch_set_pause(&mut self, batch: i64, pause: &Pause) -> Result<()>;
    /// Clears the pause flag and the hold.
    fn batch_clear_pause(&mut self, batch: i64) -> Result<()>;
    /// Never shortens a hold: a shorter one changes nothing.
    fn batch_extend_hold(&mut self, name: &str, until: Millis, key: Option<&str>) -> Result<()>;
    fn batch_set_next_fire(&mut self, batch: i64, next: Option<Millis>) -> Result<()>;
    /// Keeps the latest fire time: an earlier fire changes nothing.
    fn batch_record_fire(&mut self, batch: i64, fire: &Fire) -> Result<()>;
}
