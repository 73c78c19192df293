//! Statements on the lock's seats.

use crate::model::{Holder, LockInfo, Millis};
use crate::store::Result;

pub(crate) trait SeatsRead {
    /// Every seat of a batch (named `name` in them), oldest first,
    /// expired ones included.
    fn seats(&mut self, batch: i64, name: &str) -> Result<Vec<LockInfo>>;
    /// Does any batch have a seat not expired at `now` (a runner that may
    /// be writing)?
    fn any_live_seat(&mut self, now: Millis) -> Result<bool>;
}

pub(crate) trait SeatsWrite {
    /// Locks the batch's row against other seat changes until commit
    /// (PostgreSQL `FOR NO KEY UPDATE`): acquirers of one batch queue on
    /// it, so two hosts cannot both take the last seat.
    fn seats_locked(&mut self, batch: i64) -> Result<()>;
    /// Takes the seat `token` (or renews its acquisition), expiring at
    /// `expires`; its TTL is kept as `expires - now`.
    #[allow(clippy::too_many_arguments)]
    fn seat_upsert(
        &mut self,
        batch: i64,
        token: &str,
        holder: &Holder,
        run: Option<i64>,
        now: Millis,
        expires: Millis,
    ) -> Result<()>;
    /// Frees the seat; whether there was one.
    fn seat_delete(&mut self, batch: i64, token: &str) -> Result<bool>;
    /// Extends the seat; whether there was one.
    fn seat_renew(&mut self, batch: i64, token: &str, expires: Millis) -> Result<bool>;
    /// Names `run` as the run of the seat held under `token`.
    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()>;
    /// Does `run` hold a seat of the batch? The seat stays share-locked
    /// until commit (PostgreSQL `FOR SHARE`), so a takeover waits for this
    /// transaction, and one after a takeover sees the new holder.
    fn seat_held_locked(&mut self, batch: i64, run: i64) -> Result<bool>;
}
