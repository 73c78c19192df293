//! Statements for steering a live batch: a cancel asked of an item, a stop
//! asked of a seat's holder.

use crate::model::Millis;
use crate::store::Result;

/// A cancel asked of a claimed item, as stored.
#[derive(Debug, Clone)]
pub(crate) struct CancelAsk {
    pub(crate) key: String,
    pub(crate) to: String,
    pub(crate) by: Option<String>,
    pub(crate) reason: Option<String>,
}

pub(crate) trait SteerRead {
    /// The stop asked of the seat `token` (`graceful` or `now`) and who asked.
    fn seat_stop(&mut self, batch: i64, token: &str) -> Result<Option<(String, Option<String>)>>;
    /// Ids of the items `run` holds that were asked to be cancelled.
    fn run_cancels(&mut self, batch: i64, run: i64) -> Result<Vec<i64>>;
}

pub(crate) trait SteerWrite {
    /// Asks the holder of seat `token` to stop (`now`: at once; a graceful
    /// ask never weakens an earlier `now`); whether the seat was there.
    fn seat_ask_stop(&mut self, batch: i64, token: &str, now: bool, by: &str) -> Result<bool>;
    /// Asks the runner holding `item` to cancel it; whether it is claimed.
    fn item_ask_cancel(&mut self, item: i64, to: &str, by: &str, reason: &str) -> Result<bool>;
    /// The cancel asked of `item` while still claimed under `token`,
    /// locking its row until commit.
    fn item_cancel_ask_locked(&mut self, item: i64, token: i64) -> Result<Option<CancelAsk>>;
    /// Moves `item` to pending, out of any claim, tier or cancel; with
    /// `uncount`, its attempt in progress is not counted.
    fn item_cancel_to_pending(&mut self, item: i64, uncount: bool, now: Millis) -> Result<()>;
    /// Moves `item` to the `manual` tier as `Cancelled` with `message`, out
    /// of any claim or cancel.
    fn item_cancel_to_manual(&mut self, item: i64, message: &str, now: Millis) -> Result<()>;
    /// Forgets the cancel asked of `item` (its runner died before honouring
    /// it: the claim is taken back like any other).
    fn item_drop_cancel(&mut self, item: i64) -> Result<()>;
    /// Appends `item`'s dead letter in the `manual` tier as `Cancelled`.
    fn item_cancel_dead_letter(
        &mut self,
        item: i64,
        message: &str,
        run: Option<i64>,
        now: Millis,
    ) -> Result<()>;
}
