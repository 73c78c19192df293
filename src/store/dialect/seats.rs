//! Statements on the lock's seats.

use super::sql::{self, Arg, Row, Sql};
use crate::model::{Holder, LockInfo, Millis};
use crate::store::Result;

const SEATS: &str = "SELECT token, host, pid, pid_start, run_id, acquired_at, expires_at,
        coalesce(expires_at - ttl_ms, acquired_at), CASE WHEN stop IS NULL THEN NULL ELSE stop_by END
   FROM locks WHERE batch_id = ?1 ORDER BY acquired_at, token";
const ALL_SEATS: &str = "SELECT l.token, l.host, l.pid, l.pid_start, l.run_id, l.acquired_at,
        l.expires_at, coalesce(l.expires_at - l.ttl_ms, l.acquired_at),
        CASE WHEN l.stop IS NULL THEN NULL ELSE l.stop_by END, b.name
   FROM locks l JOIN batches b ON b.id = l.batch_id ORDER BY b.name, l.acquired_at, l.token";
pub(crate) const ANY_LIVE_SEAT: &str = "SELECT EXISTS (SELECT 1 FROM locks WHERE expires_at > ?1)";
const SEAT_UPSERT: &str =
    "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at, expires_at, ttl_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, CAST(?8 AS BIGINT) - CAST(?7 AS BIGINT))
     ON CONFLICT (batch_id, token) DO UPDATE SET run_id = excluded.run_id,
        acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
        ttl_ms = excluded.ttl_ms";
const SEAT_DELETE: &str = "DELETE FROM locks WHERE batch_id = ?1 AND token = ?2";
const SEAT_RENEW: &str = "UPDATE locks SET expires_at = ?3 WHERE batch_id = ?1 AND token = ?2";
const SEAT_SET_RUN: &str = "UPDATE locks SET run_id = ?3 WHERE batch_id = ?1 AND token = ?2";
const SEAT_DELETE_OF_RUN: &str = "DELETE FROM locks WHERE run_id = ?1";

pub(crate) trait SeatsRead: Sql {
    /// Every seat of a batch (named `name` in them), oldest first,
    /// expired ones included.
    fn seats(&mut self, batch: i64, name: &str) -> Result<Vec<LockInfo>> {
        sql::all(self, SEATS, &[Arg::Int(batch)], |r| {
            Ok(LockInfo {
                batch: name.to_string(),
                token: r.text(0)?,
                holder: holder_at(r, 1)?,
                run_id: r.opt_int(4)?,
                acquired_at: r.time(5)?,
                expires_at: r.time(6)?,
                renewed_at: r.time(7)?,
                stop_by: r.opt_text(8)?,
            })
        })
    }

    /// Every seat of every batch, expired ones included: whose places in
    /// a pool are a live runner's (`store::ops::pools`).
    fn all_seats(&mut self) -> Result<Vec<LockInfo>> {
        sql::all(self, ALL_SEATS, &[], |r| {
            Ok(LockInfo {
                batch: r.text(9)?,
                token: r.text(0)?,
                holder: holder_at(r, 1)?,
                run_id: r.opt_int(4)?,
                acquired_at: r.time(5)?,
                expires_at: r.time(6)?,
                renewed_at: r.time(7)?,
                stop_by: r.opt_text(8)?,
            })
        })
    }

    /// Does any batch have a seat not expired at `now` (a runner that may
    /// be writing)?
    fn any_live_seat(&mut self, now: Millis) -> Result<bool> {
        sql::one(self, ANY_LIVE_SEAT, &[Arg::Time(now)], |r| r.bool(0))
    }
}

pub(crate) trait SeatsWrite: Sql {
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
    ) -> Result<()> {
        let args = [
            Arg::Int(batch),
            Arg::Text(token),
            Arg::Text(&holder.host),
            Arg::Int(i64::from(holder.pid)),
            Arg::OptInt(holder.pid_start.map(|s| s as i64)),
            Arg::OptInt(run),
            Arg::Time(now),
            Arg::Time(expires),
        ];
        self.exec(SEAT_UPSERT, &args)?;
        Ok(())
    }

    /// Frees the seat; whether there was one.
    fn seat_delete(&mut self, batch: i64, token: &str) -> Result<bool> {
        Ok(self.exec(SEAT_DELETE, &[Arg::Int(batch), Arg::Text(token)])? == 1)
    }

    /// Frees the seat `run` holds, if any (its run has ended).
    fn seat_delete_of_run(&mut self, run: i64) -> Result<()> {
        self.exec(SEAT_DELETE_OF_RUN, &[Arg::Int(run)])?;
        Ok(())
    }

    /// Extends the seat; whether there was one.
    fn seat_renew(&mut self, batch: i64, token: &str, expires: Millis) -> Result<bool> {
        let args = [Arg::Int(batch), Arg::Text(token), Arg::Time(expires)];
        Ok(self.exec(SEAT_RENEW, &args)? == 1)
    }

    /// Names `run` as the run of the seat held under `token`.
    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()> {
        self.exec(
            SEAT_SET_RUN,
            &[Arg::Int(batch), Arg::Text(token), Arg::Int(run)],
        )?;
        Ok(())
    }

    /// Does `run` hold a seat of the batch? The seat stays share-locked
    /// until commit (PostgreSQL `FOR SHARE`), so a takeover waits for this
    /// transaction, and one after a takeover sees the new holder.
    fn seat_held_locked(&mut self, batch: i64, run: i64) -> Result<bool>;
}

/// A holder stored as three columns from `at`: host, pid and the pid's
/// start time (seats and runs store it alike).
pub(super) fn holder_at(r: &dyn Row, at: usize) -> Result<Holder> {
    Ok(Holder {
        host: r.text(at)?,
        pid: r.int(at + 1)? as u32,
        pid_start: r.opt_int(at + 2)?.map(|s| s as u64),
    })
}
