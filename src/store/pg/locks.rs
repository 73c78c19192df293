//! The batch lock's seats: PostgreSQL's own statements, which lock the rows
//! they read (the others are written once in `dialect::seats`, the rules
//! in `ops::seats`).

use super::PgTx;
use crate::store::Result;
use crate::store::dialect::{SeatsRead, SeatsWrite};

const SEAT_HELD_LOCKED: &str = "SELECT 1 FROM locks WHERE batch_id = $1 AND run_id = $2 FOR SHARE";
const SEATS_LOCKED: &str = "SELECT 1 FROM batches WHERE id = $1 FOR NO KEY UPDATE";

impl SeatsRead for PgTx<'_> {}

impl SeatsWrite for PgTx<'_> {
    fn seats_locked(&mut self, batch: i64) -> Result<()> {
        self.c.x(SEATS_LOCKED, &[&batch])?;
        Ok(())
    }

    fn seat_held_locked(&mut self, batch: i64, run: i64) -> Result<bool> {
        Ok(self.c.opt(SEAT_HELD_LOCKED, &[&batch, &run])?.is_some())
    }
}
