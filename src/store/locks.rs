//! The batch lock: one holder at a time, with an owner token and an expiry
//! renewed by a heartbeat. Released only by its owner; taken over only after
//! expiry, or when the caller has established that the holder is dead.

use rusqlite::{Connection, OptionalExtension, params};

use super::batches::{batch_id, ensure};
use super::{Result, SqliteStore};
use crate::model::{Holder, LockInfo, Millis, NewEvent};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    /// We hold it now; `took_over` names the previous holder if it was stale.
    Acquired { took_over: Option<LockInfo> },
    /// Someone else holds it.
    Held(LockInfo),
}

/// Does any batch have a live lock (a runner that may be writing)?
pub(crate) fn any_live(c: &Connection, now: Millis) -> Result<bool> {
    Ok(
        c.prepare_cached("SELECT EXISTS (SELECT 1 FROM locks WHERE expires_at > ?1)")?
            .query_row([now], |r| r.get(0))?,
    )
}

pub(crate) fn current(c: &Connection, batch_id: i64, name: &str) -> Result<Option<LockInfo>> {
    Ok(c.query_row(
        "SELECT token, host, pid, pid_start, run_id, acquired_at, expires_at FROM locks WHERE batch_id = ?1",
        [batch_id],
        |r| {
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
            })
        },
    )
    .optional()?)
}

impl SqliteStore {
    /// Takes the batch lock if it is free, expired, or held under the token
    /// `steal` (a holder the caller found dead).
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
        self.write(|tx| {
            let id = ensure(tx, batch, now)?;
            let existing = current(tx, id, batch)?;
            if let Some(lock) = &existing {
                let stale = lock.expires_at < now || steal == Some(lock.token.as_str());
                if !stale {
                    return Ok(LockOutcome::Held(lock.clone()));
                }
                let why = if lock.expires_at < now { "expired" } else { "its process is gone" };
                super::events::insert(
                    tx,
                    &NewEvent::new(now, batch, "lock-takeover", format!("took over the lock of {} ({why})", lock.holder))
                        .fields(serde_json::json!({"previous": lock.holder.to_string(), "previous_run": lock.run_id, "why": why})),
                )?;
            }
            tx.execute(
                "INSERT INTO locks (batch_id, token, host, pid, pid_start, run_id, acquired_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (batch_id) DO UPDATE SET token = excluded.token, host = excluded.host,
                    pid = excluded.pid, pid_start = excluded.pid_start, run_id = excluded.run_id,
                    acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
                params![id, token, holder.host, holder.pid, holder.pid_start.map(|s| s as i64), run_id, now, expires_at],
            )?;
            Ok(LockOutcome::Acquired { took_over: existing })
        })
    }

    /// Extends our lock. False if it is no longer ours (taken over).
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

    /// Records the run holding the lock (known only after it starts).
    pub fn set_lock_run(&mut self, batch: &str, token: &str, run_id: i64) -> Result<()> {
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            tx.execute(
                "UPDATE locks SET run_id = ?3 WHERE batch_id = ?1 AND token = ?2",
                params![id, token, run_id],
            )?;
            Ok(())
        })
    }

    /// Releases our lock; never someone else's.
    pub fn release_lock(&mut self, batch: &str, token: &str) -> Result<bool> {
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            Ok(tx.execute(
                "DELETE FROM locks WHERE batch_id = ?1 AND token = ?2",
                params![id, token],
            )? == 1)
        })
    }

    pub fn lock(&self, batch: &str) -> Result<Option<LockInfo>> {
        self.read(|c| current(c, batch_id(c, batch)?, batch))
    }
}
