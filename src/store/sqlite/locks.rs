//! The batch lock: a number of seats (the batch's `runners`, 1 unless
//! runners on several hosts share its queue), each with an owner token and
//! an expiry renewed by a heartbeat. A seat is released only by its owner;
//! taken over only after expiry, or when the caller has established that
//! the holder is dead. Claims need a seat (`items::holds_lock`), so a
//! runner cut off past its TTL stops claiming once its seat is taken.

use rusqlite::{Connection, params};

use super::SqliteStore;
use super::SqliteTx;
use super::batches::{batch_id, ensure};
use crate::model::{Holder, LockInfo, Millis};
use crate::store::Result;
use crate::store::api::LockOutcome;
use crate::store::dialect::SeatsWrite;

/// Does any batch have a live lock (a runner that may be writing)?
pub(crate) fn any_live(c: &Connection, now: Millis) -> Result<bool> {
    Ok(
        c.prepare_cached("SELECT EXISTS (SELECT 1 FROM locks WHERE expires_at > ?1)")?
            .query_row([now], |r| r.get(0))?,
    )
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

/// Frees the seats that expired (or whose token is in `dead`), among those
/// in `only` if given, logging a `lock-takeover` event for each. Returns
/// them.
fn free_stale(
    tx: &Connection,
    id: i64,
    batch: &str,
    now: Millis,
    dead: &[&str],
    only: Option<&[&str]>,
) -> Result<Vec<LockInfo>> {
    let stale = crate::store::shared::stale_seats(current(tx, id, batch)?, now, dead, only);
    for lock in &stale {
        super::events::insert(tx, &crate::store::shared::takeover_event(batch, lock, now))?;
        tx.prepare_cached("DELETE FROM locks WHERE batch_id = ?1 AND token = ?2")?
            .execute(params![id, lock.token])?;
    }
    Ok(stale)
}

impl SqliteStore {
    /// Takes a seat of the batch lock if one of the `seats` is free,
    /// expired, or held under a token in `steal` (holders the caller found
    /// dead). Stale seats are freed only when we take one.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_lock(
        &mut self,
        batch: &str,
        token: &str,
        holder: &Holder,
        run_id: Option<i64>,
        expires_at: Millis,
        now: Millis,
        steal: &[&str],
        seats: u32,
    ) -> Result<LockOutcome> {
        self.write(|tx| {
            let id = ensure(tx, batch, now)?;
            let live = crate::store::shared::live_seats(current(tx, id, batch)?, now, steal);
            if live.len() >= seats.max(1) as usize {
                return Ok(LockOutcome::Held(live));
            }
            let took_over = free_stale(tx, id, batch, now, steal, None)?.into_iter().next();
            tx.execute(
                "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at, expires_at,
                                    ttl_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8 - ?7)
                 ON CONFLICT (batch_id, token) DO UPDATE SET run_id = excluded.run_id,
                    acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
                    ttl_ms = excluded.ttl_ms",
                params![id, token, holder.host, holder.pid, holder.pid_start.map(|s| s as i64), run_id, now, expires_at],
            )?;
            Ok(LockOutcome::Acquired { took_over })
        })
    }

    /// Frees those of the seats `tokens` that expired (runners cut off or
    /// gone, on any host) or are in `dead` (holders the caller found dead),
    /// so their runs can be closed and their claims taken back while the
    /// caller keeps running. Returns the seats freed.
    pub fn free_stale_locks(
        &mut self,
        batch: &str,
        now: Millis,
        tokens: &[&str],
        dead: &[&str],
    ) -> Result<Vec<LockInfo>> {
        self.write(|tx| free_stale(tx, batch_id(tx, batch)?, batch, now, dead, Some(tokens)))
    }

    /// Extends our seat. False if it is no longer ours (taken over).
    pub fn renew_lock(&mut self, batch: &str, token: &str, expires_at: Millis) -> Result<bool> {
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            let n = tx.execute(
                "UPDATE locks SET expires_at = ?3 WHERE batch_id = ?1 AND token = ?2",
                params![id, token, expires_at],
            )?;
            Ok(n == 1)
        })
    }

    /// Releases our seat; never someone else's.
    pub fn release_lock(&mut self, batch: &str, token: &str) -> Result<bool> {
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            Ok(tx.execute(
                "DELETE FROM locks WHERE batch_id = ?1 AND token = ?2",
                params![id, token],
            )? == 1)
        })
    }

    /// The seats of the batch lock, oldest first (expired ones included).
    pub fn locks(&self, batch: &str) -> Result<Vec<LockInfo>> {
        self.read(|c| current(c, batch_id(c, batch)?, batch))
    }
}

const SEAT_SET_RUN: &str = "UPDATE locks SET run_id = ?3 WHERE batch_id = ?1 AND token = ?2";

impl SeatsWrite for SqliteTx<'_> {
    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()> {
        self.conn
            .prepare_cached(SEAT_SET_RUN)?
            .execute(params![batch, token, run])?;
        Ok(())
    }
}
