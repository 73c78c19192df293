//! The run log: structured events, also used for operator actions.

use crate::model::{Event, Millis, NewEvent};
use crate::store::api::EventFilter;
use crate::store::{Result, Store};

/// How many events a filter without a limit returns.
const DEFAULT_LIMIT: usize = 200;

impl Store {
    /// Appends one event on its own (for events outside a transition).
    pub fn log_event(&mut self, e: &NewEvent) -> Result<i64> {
        self.write_tx(|tx| tx.event_insert(e))
    }

    /// Events matching `filter`: the newest `limit`, returned oldest first;
    /// with `after_id`, the oldest `limit` after it (for following).
    pub fn events(&self, filter: &EventFilter) -> Result<Vec<Event>> {
        self.read_tx(|tx| {
            let batch = match &filter.batch {
                Some(name) => Some(tx.batch_id(name)?),
                None => None,
            };
            // A count past SQL's integers (`log -n 9223372036854775808`)
            // asks for every event: as many as SQL can name.
            let limit = if filter.limit == 0 {
                DEFAULT_LIMIT
            } else {
                filter.limit.min(i64::MAX as usize)
            };
            let mut page = tx.events_page(batch, filter, limit)?;
            if filter.after_id.is_none() {
                page.reverse();
            }
            Ok(page)
        })
    }

    /// Event counts by kind since `since` (the "since you last looked"
    /// summary): `(batch name or "", kind, count)`.
    pub fn event_kinds_since(&self, since: Millis) -> Result<Vec<(String, String, i64)>> {
        self.read_tx(|tx| tx.event_kinds_since(since))
    }
}
