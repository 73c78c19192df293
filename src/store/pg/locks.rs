//! The batch lock's seats (the rules are in `ops::seats`). Expiries are
//! stored on the database's clock (see `conn`).

use super::PgTx;
use super::conn::Conn;
use crate::model::{Holder, LockInfo, Millis};
use crate::store::Result;
use crate::store::dialect::{SeatsRead, SeatsWrite};

/// Every seat of a batch, oldest first, expired ones included.
pub(crate) fn current(c: &mut Conn, id: i64, name: &str) -> Result<Vec<LockInfo>> {
    let rows = c.q(
        "SELECT token, host, pid, pid_start, run_id, acquired_at, expires_at,
                coalesce(expires_at - ttl_ms, acquired_at)
           FROM locks WHERE batch_id = $1 ORDER BY acquired_at, token",
        &[&id],
    )?;
    Ok(rows
        .iter()
        .map(|r| LockInfo {
            batch: name.to_string(),
            token: r.get(0),
            holder: Holder {
                host: r.get(1),
                pid: r.get::<_, i64>(2) as u32,
                pid_start: r.get::<_, Option<i64>>(3).map(|s| s as u64),
            },
            run_id: r.get(4),
            acquired_at: c.tout(r.get(5)),
            expires_at: c.tout(r.get(6)),
            renewed_at: c.tout(r.get(7)),
        })
        .collect())
}

// Twins of sqlite/locks.rs, kept: one statement per dialect (placeholders, `FOR SHARE`, the clock offset).
const ANY_LIVE_SEAT: &str = "SELECT EXISTS (SELECT 1 FROM locks WHERE expires_at > $1)";
const SEAT_HELD_LOCKED: &str = "SELECT 1 FROM locks WHERE batch_id = $1 AND run_id = $2 FOR SHARE";
const SEATS_LOCKED: &str = "SELECT 1 FROM batches WHERE id = $1 FOR NO KEY UPDATE";
const SEAT_UPSERT: &str =
    "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at, expires_at, ttl_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8::int8 - $7::int8)
     ON CONFLICT (batch_id, token) DO UPDATE SET run_id = excluded.run_id,
        acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
        ttl_ms = excluded.ttl_ms";
const SEAT_DELETE: &str = "DELETE FROM locks WHERE batch_id = $1 AND token = $2";
const SEAT_RENEW: &str = "UPDATE locks SET expires_at = $3 WHERE batch_id = $1 AND token = $2";
const SEAT_SET_RUN: &str = "UPDATE locks SET run_id = $3 WHERE batch_id = $1 AND token = $2";

impl SeatsRead for PgTx<'_> {
    fn seats(&mut self, batch: i64, name: &str) -> Result<Vec<LockInfo>> {
        current(self.c, batch, name)
    }

    fn any_live_seat(&mut self, now: Millis) -> Result<bool> {
        let at = self.c.tin(now);
        Ok(self.c.one(ANY_LIVE_SEAT, &[&at])?.get(0))
    }
}

impl SeatsWrite for PgTx<'_> {
    fn seats_locked(&mut self, batch: i64) -> Result<()> {
        self.c.x(SEATS_LOCKED, &[&batch])?;
        Ok(())
    }

    fn seat_upsert(
        &mut self,
        batch: i64,
        token: &str,
        holder: &Holder,
        run: Option<i64>,
        now: Millis,
        expires: Millis,
    ) -> Result<()> {
        let (at, until) = (self.c.tin(now), self.c.tin(expires));
        let pid = i64::from(holder.pid);
        let pid_start = holder.pid_start.map(|s| s as i64);
        self.c.x(
            SEAT_UPSERT,
            &[
                &batch,
                &token,
                &holder.host,
                &pid,
                &pid_start,
                &run,
                &at,
                &until,
            ],
        )?;
        Ok(())
    }

    fn seat_delete(&mut self, batch: i64, token: &str) -> Result<bool> {
        Ok(self.c.x(SEAT_DELETE, &[&batch, &token])? == 1)
    }

    fn seat_renew(&mut self, batch: i64, token: &str, expires: Millis) -> Result<bool> {
        let until = self.c.tin(expires);
        Ok(self.c.x(SEAT_RENEW, &[&batch, &token, &until])? == 1)
    }

    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()> {
        self.c.x(SEAT_SET_RUN, &[&batch, &token, &run])?;
        Ok(())
    }

    fn seat_held_locked(&mut self, batch: i64, run: i64) -> Result<bool> {
        Ok(self.c.opt(SEAT_HELD_LOCKED, &[&batch, &run])?.is_some())
    }
}
