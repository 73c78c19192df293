//! Statements on the run log.

use crate::model::NewEvent;
use crate::store::Result;

pub(crate) trait EventsWrite {
    /// Appends one event (tied to its item when it names a key); its id.
    fn event_insert(&mut self, event: &NewEvent) -> Result<i64>;
}
