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
