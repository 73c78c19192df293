//! The batch lock: a number of seats (the batch's `runners`, 1 unless
//! runners on several hosts share its queue), each with an owner token and
//! an expiry renewed by a heartbeat. A seat is released only by its owner;
//! taken over only after expiry, or when the caller has established that
//! the holder is dead. Claims need a seat, so a runner cut off past its
//! TTL stops claiming once its seat is taken. Expiries are compared on the
//! caller's clock; PostgreSQL stores them on the database's (see
//! `pg::conn`), so hosts with skewed clocks agree on when a seat expired.

use super::liveness::lapsed;
use crate::model::{EventKind, Holder, LockInfo, Millis, NewEvent};
use crate::store::api::LockOutcome;
use crate::store::dialect::Write;
use crate::store::{Result, Store};

impl Store {
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
        self.write_tx(|tx| {
            let b = tx.batch_ensure(batch, now)?;
            tx.seats_locked(b)?;
            let live = live_seats(tx.seats(b, batch)?, now, steal);
            if live.len() >= seats.max(1) as usize {
                return Ok(LockOutcome::Held(live));
            }
            let took_over = free_stale(tx, b, batch, now, steal, None)?
                .into_iter()
                .next();
            tx.seat_upsert(b, token, holder, run_id, now, expires_at)?;
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
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.seats_locked(b)?;
            free_stale(tx, b, batch, now, dead, Some(tokens))
        })
    }

    /// Extends our seat. False if it is no longer ours (taken over).
    pub fn renew_lock(&mut self, batch: &str, token: &str, expires_at: Millis) -> Result<bool> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.seat_renew(b, token, expires_at)
        })
    }

    /// Whether `run` holds a seat of the batch, the seat kept share-locked
    /// to the end of the group this is in (a lane's commit that claims
    /// nothing: see the lock order in `pg::locks`).
    pub fn hold_seat(&mut self, batch: &str, run: i64) -> Result<bool> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.seat_held_locked(b, run)
        })
    }

    /// Releases our seat; never someone else's.
    pub fn release_lock(&mut self, batch: &str, token: &str) -> Result<bool> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.seat_delete(b, token)
        })
    }

    /// The seats of the batch lock, oldest first (expired ones included).
    pub fn locks(&self, batch: &str) -> Result<Vec<LockInfo>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.seats(b, batch)
        })
    }
}

/// Frees the seats that expired (or whose token is in `dead`), among those
/// in `only` if given, logging a `lock-takeover` event for each. The
/// caller holds the seats locked. Returns them.
fn free_stale(
    tx: &mut dyn Write,
    b: i64,
    batch: &str,
    now: Millis,
    dead: &[&str],
    only: Option<&[&str]>,
) -> Result<Vec<LockInfo>> {
    let stale = stale_seats(tx.seats(b, batch)?, now, dead, only);
    for lock in &stale {
        tx.event_insert(&takeover_event(batch, lock, now))?;
        tx.seat_delete(b, &lock.token)?;
    }
    Ok(stale)
}

/// The seats that lapsed or are held under a token in `dead`, among those
/// in `only` if given.
fn stale_seats(
    seats: Vec<LockInfo>,
    now: Millis,
    dead: &[&str],
    only: Option<&[&str]>,
) -> Vec<LockInfo> {
    seats
        .into_iter()
        .filter(|l| lapsed(l, now) || dead.contains(&l.token.as_str()))
        .filter(|l| only.is_none_or(|o| o.contains(&l.token.as_str())))
        .collect()
}

/// The seats still live for an acquirer: not lapsed, not found dead.
fn live_seats(seats: Vec<LockInfo>, now: Millis, steal: &[&str]) -> Vec<LockInfo> {
    seats
        .into_iter()
        .filter(|l| !lapsed(l, now) && !steal.contains(&l.token.as_str()))
        .collect()
}

/// The `lock-takeover` event for freeing a stale seat.
fn takeover_event(batch: &str, lock: &LockInfo, now: Millis) -> NewEvent {
    let why = if lock.expires_at < now {
        "expired"
    } else {
        "its process is gone"
    };
    NewEvent::new(
        now,
        batch,
        EventKind::LockTakeover,
        format!("took over the lock of {} ({why})", lock.holder),
    )
    .fields(serde_json::json!({
        "previous": lock.holder.to_string(),
        "previous_run": lock.run_id,
        "why": why
    }))
}
