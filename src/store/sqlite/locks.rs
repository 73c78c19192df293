//! The batch lock's seats (the rules are in `ops::seats`).

use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteTx;
use crate::model::{Holder, LockInfo, Millis};
use crate::store::Result;
use crate::store::dialect::{SeatsRead, SeatsWrite};

/// Does any batch have a live lock (a runner that may be writing)?
pub(crate) fn any_live(c: &Connection, now: Millis) -> Result<bool> {
    Ok(
        c.prepare_cached("SELECT EXISTS (SELECT 1 FROM locks WHERE expires_at > ?1)")?
            .query_row([now], |r| r.get(0))?,
    )
}

const SEAT_HELD: &str = "SELECT 1 FROM locks WHERE batch_id = ?1 AND run_id = ?2";

/// Does `run_id` hold a seat of the batch lock (see `start_run`)?
pub(crate) fn holds_lock(c: &Connection, batch_id: i64, run_id: i64) -> Result<bool> {
    Ok(c.prepare_cached(SEAT_HELD)?
        .query_row(params![batch_id, run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Every seat of a batch, oldest first, expired ones included.
pub(crate) fn current(c: &Connection, batch_id: i64, name: &str) -> Result<Vec<LockInfo>> {
    let mut st = c.prepare_cached(
        "SELECT token, host, pid, pid_start, run_id, acquired_at, expires_at,
                coalesce(expires_at - ttl_ms, acquired_at) FROM locks
          WHERE batch_id = ?1 ORDER BY acquired_at, token",
    )?;
    let rows = st
        .query_map([batch_id], |r| {
            Ok(LockInfo {
                batch: name.to_string(),
                token: r.get(0)?,
                holder: Holder {
                    host: r.get(1)?,
                    pid: r.get(2)?,
                    pid_start: r.get::<_, Option<i64>>(3)?.map(|s| s as u64),
                },
                run_id: r.get(4)?,
                acquired_at: r.get(5)?,
                expires_at: r.get(6)?,
                renewed_at: r.get(7)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

const SEAT_UPSERT: &str =
    "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at, expires_at, ttl_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8 - ?7)
     ON CONFLICT (batch_id, token) DO UPDATE SET run_id = excluded.run_id,
        acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
        ttl_ms = excluded.ttl_ms";
const SEAT_DELETE: &str = "DELETE FROM locks WHERE batch_id = ?1 AND token = ?2";
const SEAT_RENEW: &str = "UPDATE locks SET expires_at = ?3 WHERE batch_id = ?1 AND token = ?2";
const SEAT_SET_RUN: &str = "UPDATE locks SET run_id = ?3 WHERE batch_id = ?1 AND token = ?2";

impl SeatsRead for SqliteTx<'_> {
    fn seats(&mut self, batch: i64, name: &str) -> Result<Vec<LockInfo>> {
        current(self.conn, batch, name)
    }

    fn any_live_seat(&mut self, now: Millis) -> Result<bool> {
        any_live(self.conn, now)
    }
}

impl SeatsWrite for SqliteTx<'_> {
    /// `BEGIN IMMEDIATE` already excludes every other writer.
    fn seats_locked(&mut self, _batch: i64) -> Result<()> {
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
        self.conn.prepare_cached(SEAT_UPSERT)?.execute(params![
            batch,
            token,
            holder.host,
            holder.pid,
            holder.pid_start.map(|s| s as i64),
            run,
            now,
            expires
        ])?;
        Ok(())
    }

    fn seat_delete(&mut self, batch: i64, token: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(SEAT_DELETE)?
            .execute(params![batch, token])?
            == 1)
    }

    fn seat_renew(&mut self, batch: i64, token: &str, expires: Millis) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(SEAT_RENEW)?
            .execute(params![batch, token, expires])?
            == 1)
    }

    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()> {
        self.conn
            .prepare_cached(SEAT_SET_RUN)?
            .execute(params![batch, token, run])?;
        Ok(())
    }

    fn seat_held_locked(&mut self, batch: i64, run: i64) -> Result<bool> {
        holds_lock(self.conn, batch, run)
    }
}
