//! Statements on the lock's seats.

use crate::store::Result;

pub(crate) trait SeatsWrite {
    /// Names `run` as the run of the seat held under `token`.
    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()>;
}
