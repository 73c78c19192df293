//! The batch lock: a number of seats (the batch's `runners`), each with an
//! owner token and an expiry renewed by a heartbeat. Expiries are on the
//! database's clock (see `conn`), so hosts with skewed clocks agree on when
//! a seat expired. Claims need a seat (`items::holds_lock`).

use super::batches::{batch_id, ensure};
use super::conn::Conn;
use super::{PgStore, PgTx};
use crate::model::{Holder, LockInfo, Millis};
use crate::store::Result;
use crate::store::api::LockOutcome;
use crate::store::dialect::SeatsWrite;
use crate::store::shared;

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

/// Frees the seats that expired (or whose token is in `dead`), among those
/// in `only` if given, logging a `lock-takeover` event for each. The
/// caller holds the batch row locked. Returns them.
fn free_stale(
    c: &mut Conn,
    id: i64,
    batch: &str,
    now: Millis,
    dead: &[&str],
    only: Option<&[&str]>,
) -> Result<Vec<LockInfo>> {
    let stale = shared::stale_seats(current(c, id, batch)?, now, dead, only);
    for lock in &stale {
        super::events::insert(c, &shared::takeover_event(batch, lock, now))?;
        c.x(
            "DELETE FROM locks WHERE batch_id = $1 AND token = $2",
            &[&id, &lock.token],
        )?;
    }
    Ok(stale)
}

impl PgStore {
    /// Takes a seat of the batch lock if one of the `seats` is free,
    /// expired, or held under a token in `steal`. Acquirers of one batch
    /// queue on its row, so two hosts cannot both take the last seat.
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
        self.write(|c| {
            let id = ensure(c, batch, now)?;
            c.x(
                "SELECT 1 FROM batches WHERE id = $1 FOR NO KEY UPDATE",
                &[&id],
            )?;
            let live = shared::live_seats(current(c, id, batch)?, now, steal);
            if live.len() >= seats.max(1) as usize {
                return Ok(LockOutcome::Held(live));
            }
            let took_over = free_stale(c, id, batch, now, steal, None)?
                .into_iter()
                .next();
            let (at, until) = (c.tin(now), c.tin(expires_at));
            let pid = i64::from(holder.pid);
            let pid_start = holder.pid_start.map(|s| s as i64);
            c.x(
                "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at,
                                    expires_at, ttl_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8::int8 - $7::int8)
                 ON CONFLICT (batch_id, token) DO UPDATE SET run_id = excluded.run_id,
                    acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
                    ttl_ms = excluded.ttl_ms",
                &[
                    &id,
                    &token,
                    &holder.host,
                    &pid,
                    &pid_start,
                    &run_id,
                    &at,
                    &until,
                ],
            )?;
            Ok(LockOutcome::Acquired { took_over })
        })
    }

    /// Frees those of the seats `tokens` that expired or are in `dead`
    /// (see `SqliteStore::free_stale_locks`). Returns the seats freed.
    pub fn free_stale_locks(
        &mut self,
        batch: &str,
        now: Millis,
        tokens: &[&str],
        dead: &[&str],
    ) -> Result<Vec<LockInfo>> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            c.x(
                "SELECT 1 FROM batches WHERE id = $1 FOR NO KEY UPDATE",
                &[&id],
            )?;
            free_stale(c, id, batch, now, dead, Some(tokens))
        })
    }

    /// Extends our seat. False if it is no longer ours (taken over).
    pub fn renew_lock(&mut self, batch: &str, token: &str, expires_at: Millis) -> Result<bool> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            let until = c.tin(expires_at);
            Ok(c.x(
                "UPDATE locks SET expires_at = $3 WHERE batch_id = $1 AND token = $2",
                &[&id, &token, &until],
            )? == 1)
        })
    }

    /// Releases our seat; never someone else's.
    pub fn release_lock(&mut self, batch: &str, token: &str) -> Result<bool> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            Ok(c.x(
                "DELETE FROM locks WHERE batch_id = $1 AND token = $2",
                &[&id, &token],
            )? == 1)
        })
    }

    /// The seats of the batch lock, oldest first (expired ones included).
    pub fn locks(&self, batch: &str) -> Result<Vec<LockInfo>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            current(c, id, batch)
        })
    }
}

const SEAT_SET_RUN: &str = "UPDATE locks SET run_id = $3 WHERE batch_id = $1 AND token = $2";

impl SeatsWrite for PgTx<'_> {
    fn seat_set_run(&mut self, batch: i64, token: &str, run: i64) -> Result<()> {
        self.c.x(SEAT_SET_RUN, &[&batch, &token, &run])?;
        Ok(())
    }
}
