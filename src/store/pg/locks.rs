//! The batch lock's seats: PostgreSQL's own statements, which lock the rows
//! they read (the others are written once in `dialect::seats`, the rules
//! in `ops::seats`).
//!
//! # One lock order for a runner's sessions
//!
//! A persistent run on PostgreSQL writes on several sessions at once: its
//! own (the runner's writer: failures, heartbeats, steering, the run's
//! end) and one per slot, a lane (`runner::writer`), whose chained commit
//! claims and completes. Every transaction of these sessions takes the
//! rows they share in this order, so none waits for a row while holding
//! one another wants before it:
//!
//! 1. the run's seat (its `locks` row): the writer's groups lock it first
//!    and exclusively (`seat_first`, `FOR NO KEY UPDATE`, what a
//!    heartbeat's renewal takes anyway), a lane's commit first and shared
//!    (the claim's `held`, or `SEAT_HELD_LOCKED` when it claims nothing);
//!    a lane commits nothing without it (`SeatLost`, written on the
//!    writer's session instead). So the writer's groups and the lanes'
//!    commits never overlap: only lanes run side by side;
//! 2. items: a lane's own claims (`SKIP LOCKED`, never waited for) and its
//!    own leases (no other lane holds them);
//! 3. the counters (statement triggers, one shard per session);
//! 4. the run's row (its counts), last, and nothing after it.

use super::PgTx;
use super::conn::Conn;
use crate::store::Result;
use crate::store::dialect::{SeatsRead, SeatsWrite};

const SEAT_HELD_LOCKED: &str = "SELECT 1 FROM locks WHERE batch_id = $1 AND run_id = $2 FOR SHARE";
/// The seat a runner's writer locks first in each group (1. above).
const SEAT_FIRST: &str =
    "SELECT 1 FROM locks WHERE batch_id = $1 AND run_id = $2 FOR NO KEY UPDATE";
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

/// Locks the seat `(batch id, run)` exclusively (`SEAT_FIRST`), if it is
/// still there: a lost seat leaves nothing to order by.
pub(super) fn seat_first(c: &mut Conn, (batch, run): (i64, i64)) -> Result<()> {
    c.opt(SEAT_FIRST, &[&batch, &run])?;
    Ok(())
}
