//! Set-based writes of the bulk operations (`ops::requeue`): one chunk
//! each. Their SQL differs on purpose per dialect, so each stays whole in
//! `sqlite/bulk.rs` and `pg/bulk.rs`.

use std::collections::HashSet;

use crate::model::Millis;
use crate::store::Result;
use crate::store::api::Selection;

pub(crate) trait Bulk {
    /// Moves those of `ids` (in ascending order) still in the state `sel`
    /// moves back to pending,
    /// each with its `requeued` event (written first: it records the tier
    /// and class the item leaves). A done item runs again from scratch: no
    /// result, and not its finished operation's id. The ids moved.
    #[allow(clippy::too_many_arguments)]
    fn requeue_chunk(
        &mut self,
        batch: i64,
        sel: &Selection,
        ids: &[i64],
        reset_attempts: bool,
        actor: &str,
        now: Millis,
    ) -> Result<HashSet<i64>>;
    /// Moves up to `limit` retry-tier failures due at `now` back to
    /// pending, each with a `redriven` event of `run` saying `message`.
    /// Their keys.
    fn redrive_chunk(
        &mut self,
        batch: i64,
        run: Option<i64>,
        now: Millis,
        limit: usize,
        message: &str,
    ) -> Result<Vec<String>>;
}
