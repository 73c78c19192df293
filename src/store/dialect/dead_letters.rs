//! Statements on dead letters and their rollups.

use crate::model::{DeadLetter, DlqGroup, Millis, Tier};
use crate::store::Result;
use crate::store::api::Failure;

pub(crate) trait DeadLettersRead {
    /// A batch's dead letters since `since` (all when `None`), of `class`
    /// when given, oldest first.
    fn dead_letters_since(
        &mut self,
        batch: i64,
        since: Option<Millis>,
        class: Option<&str>,
    ) -> Result<Vec<DeadLetter>>;
    /// Every dead letter of one item, newest first.
    fn dead_letters_of_item(&mut self, item: i64) -> Result<Vec<DeadLetter>>;
    /// `(class, in (now - window, now], in the window before)`, read from the
    /// dead letters themselves.
    fn dlq_window_counts(
        &mut self,
        batch: i64,
        now: Millis,
        window: Millis,
    ) -> Result<Vec<(String, i64, i64)>>;
    /// Per class from the hourly rollups: the last `hours` up to the hour of
    /// `now`, the `hours` before, and all time (the `_now` counts zero).
    fn dlq_hourly(&mut self, batch: i64, now: Millis, hours: i64) -> Result<Vec<DlqGroup>>;
    /// `(class, tier, n)` of the failed items now, each pair once, `n > 0`.
    fn failed_classes(&mut self, batch: i64) -> Result<Vec<(String, Tier, i64)>>;
}

pub(crate) trait DeadLettersWrite {
    /// The dead letter of `f`, copied from its item row (which `item_fail`
    /// just wrote).
    fn dead_letter_insert(&mut self, f: &Failure<'_>) -> Result<()>;
}
