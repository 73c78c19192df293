//! Statements on the run log.

use crate::model::{Event, Millis, NewEvent};
use crate::store::Result;
use crate::store::api::EventFilter;

pub(crate) trait EventsRead {
    /// At most `limit` events matching `filter` (its batch given as `batch`,
    /// its `limit` ignored), with their batch's name and their item's label:
    /// newest first, or with `after_id` the oldest after it first.
    fn events_page(
        &mut self,
        batch: Option<i64>,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<Vec<Event>>;
    /// `(batch name or "", kind, count)` of the events after `since`, in order.
    fn event_kinds_since(&mut self, since: Millis) -> Result<Vec<(String, String, i64)>>;
}

pub(crate) trait EventsWrite {
    /// Appends one event (tied to its item when it names a key); its id.
    fn event_insert(&mut self, event: &NewEvent) -> Result<i64>;
}

/// The kinds a store writes once per item on the success path (the claim,
/// the done mark): nearly every event of a busy store. They are left out of
/// the kind index (`events_by_rare_kind`, SQLite schema 16, PostgreSQL 17),
/// which saved an index entry per such event (about 5 % of the runner's
/// instructions in persistent mode). A read of these kinds walks the events
/// by id, where they are dense; a read of other kinds only says so with
/// [`RARE_KINDS_ONLY`], the index's own condition, for the planner to use
/// it. The same list, as SQL, is written in those migrations.
pub(crate) const DENSE_KINDS: [crate::model::EventKind; 3] = [
    crate::model::EventKind::Claimed,
    crate::model::EventKind::Done,
    crate::model::EventKind::Empty,
];

/// The kind index's condition, added to a read whose kinds are all outside
/// [`DENSE_KINDS`] (see [`rare_kinds_only`]).
pub(crate) const RARE_KINDS_ONLY: &str =
    " AND e.kind <> 'claimed' AND e.kind <> 'done' AND e.kind <> 'empty'";

/// What a read of `kinds` adds to its conditions for the kind index:
/// [`RARE_KINDS_ONLY`] when some are asked and none is dense, else nothing
/// (a read of every kind, or of a dense one, walks the events by id).
pub(crate) fn rare_kinds_only<S: AsRef<str>>(kinds: &[S]) -> &'static str {
    let rare = !kinds.is_empty()
        && kinds
            .iter()
            .all(|k| DENSE_KINDS.iter().all(|d| d.as_str() != k.as_ref()));
    if rare { RARE_KINDS_ONLY } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_names_every_dense_kind() {
        let listed: String = DENSE_KINDS
            .iter()
            .map(|k| format!(" AND e.kind <> '{}'", k.as_str()))
            .collect();
        assert_eq!(RARE_KINDS_ONLY, listed);
        assert_eq!(rare_kinds_only(&["fire", "lock-takeover"]), RARE_KINDS_ONLY);
        assert_eq!(rare_kinds_only(&["fire", "done"]), "");
        assert_eq!(rare_kinds_only::<&str>(&[]), "");
    }
}
