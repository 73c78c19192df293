//! The batch lock: one holder at a time, with an owner token and an expiry
//! renewed by a heartbeat. Expiries are on the database's clock (see
//! `conn`), so hosts with skewed clocks agree on when a lock expired.

use super::PgStore;
use super::batches::{batch_id, ensure};
use super::conn::Conn;
use crate::model::{Holder, LockInfo, Millis, NewEvent};
use crate::store::{LockOutcome, Result};

pub(crate) fn current(c: &mut Conn, id: i64, name: &str) -> Result<Option<LockInfo>> {
    let row = c.opt(
        "SELECT token, host, pid, pid_start, run_id, acquired_at, expires_at
           FROM locks WHERE batch_id = $1",
        &[&id],
    )?;
    Ok(row.map(|r| LockInfo {
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
    }))
}

impl PgStore {
    /// Takes the batch lock if it is free, expired, or held under the token
    /// `steal`. Acquirers of one batch queue on its row, so two hosts
    /// cannot both find the lock free.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_lock(
        &mut self,
        batch: &str,
        token: &str,
        holder: &Holder,
        run_id: Option<i64>,
        expires_at: Millis,
        now: Millis,
        steal: Option<&str>,
    ) -> Result<LockOutcome> {
        self.write(|c| {
            let id = ensure(c, batch, now)?;
            c.x(
                "SELECT 1 FROM batches WHERE id = $1 FOR NO KEY UPDATE",
                &[&id],
            )?;
            let existing = current(c, id, batch)?;
            if let Some(lock) = &existing {
                let expired = lock.expires_at < now;
                if !expired && steal != Some(lock.token.as_str()) {
                    return Ok(LockOutcome::Held(lock.clone()));
                }
                let why = if expired {
                    "expired"
                } else {
                    "its process is gone"
                };
                super::events::insert(
                    c,
                    &NewEvent::new(
                        now,
                        batch,
                        "lock-takeover",
                        format!("took over the lock of {} ({why})", lock.holder),
                    )
                    .fields(serde_json::json!({
                        "previous": lock.holder.to_string(),
                        "previous_run": lock.run_id,
                        "why": why
                    })),
                )?;
            }
            let (at, until) = (c.tin(now), c.tin(expires_at));
            let pid = i64::from(holder.pid);
            let pid_start = holder.pid_start.map(|s| s as i64);
            c.x(
                "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at,
                                    expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (batch_id) DO UPDATE SET token = excluded.token,
                    host = excluded.host, pid = excluded.pid, pid_start = excluded.pid_start,
                    run_id = excluded.run_id, acquired_at = excluded.acquired_at,
                    expires_at = excluded.expires_at",
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
            Ok(LockOutcome::Acquired {
                took_over: existing.clone(),
            })
        })
    }

    /// Extends our lock. False if it is no longer ours (taken over).
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

    /// Records the run holding the lock (known only after it starts).
    pub fn set_lock_run(&mut self, batch: &str, token: &str, run_id: i64) -> Result<()> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            c.x(
                "UPDATE locks SET run_id = $3 WHERE batch_id = $1 AND token = $2",
                &[&id, &token, &run_id],
            )?;
            Ok(())
        })
    }

    /// Releases our lock; never someone else's.
    pub fn release_lock(&mut self, batch: &str, token: &str) -> Result<bool> {
        self.write(|c| {
            let id = batch_id(c, batch)?;
            Ok(c.x(
                "DELETE FROM locks WHERE batch_id = $1 AND token = $2",
                &[&id, &token],
            )? == 1)
        })
    }

    pub fn lock(&self, batch: &str) -> Result<Option<LockInfo>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            current(c, id, batch)
        })
    }
}
