//! Taking a seat of the batch lock (one of `runners`), stepping down or
//! waiting (`--wait`) while live runners hold them all; a seat whose
//! holder is dead is taken over at once. The heartbeat keeps it.

use std::time::Duration;

use tokio::sync::watch;

use super::RunOptions;
use super::cycle::Signal;
use crate::model::{Holder, LockInfo};
use crate::store::{LockOutcome, Store};
use crate::util::identity;
use crate::util::time::now_ms;

/// A seat of the batch lock this cycle holds.
pub struct Seat {
    /// Fences every write of the run's: a taker's token replaces it.
    pub token: String,
    pub holder: Holder,
    pub ttl: Duration,
    /// The stale holder whose seat this was, if any.
    pub took_over: Option<LockInfo>,
}

/// Who a seat's stop mark names when its own runner stopped for a signal
/// (not `nightshift stop`, which names who asked).
pub const SIGNALLED: &str = "a signal to its runner";

pub enum Acquired {
    /// Ours; names the stale holder we replaced, if any.
    Yes(Option<LockInfo>),
    /// Live runners hold every seat (oldest first).
    No(Vec<LockInfo>),
    /// A stop signal came while waiting (`--wait`).
    Interrupted,
    /// `nightshift stop` (by whom) was asked of the runs this one waited
    /// behind (`--wait`): the batch's runs are to stop, this one too.
    Stopped(String),
}

/// A holder on this host whose process is gone (or whose pid now belongs
/// to another process) is stale at once: after a crash the re-run must
/// resume, not wait out the TTL. Other holders are stale only when their
/// seat lapsed (`store::seat_lapsed`: never while running on this host).
pub fn holder_is_dead(holder: &Holder) -> bool {
    identity::holder_seen(holder) == identity::Seen::Gone
}

pub async fn acquire(
    store: &mut Store,
    opts: &RunOptions,
    token: &str,
    holder: &Holder,
    ttl: Duration,
    signals: &mut watch::Receiver<Signal>,
) -> anyhow::Result<Acquired> {
    // A dead holder's seat is freed with ours taken, free seats or not:
    // kept, its run would hold it, `recover::take_over` (which closes runs
    // without one) would pass over it, and its workers would run on beside
    // ours and its claims stay out until the heartbeat's sweep.
    let mut steal: Vec<String> = store
        .locks(&opts.batch)
        .unwrap_or_default()
        .into_iter()
        .filter(|seat| holder_is_dead(&seat.holder))
        .map(|seat| seat.token)
        .collect();
    let mut said_waiting = false;
    loop {
        let now = now_ms();
        let expires = now + ttl.as_millis() as i64;
        let dead: Vec<&str> = steal.iter().map(String::as_str).collect();
        match store.acquire_lock(
            &opts.batch,
            token,
            holder,
            None,
            expires,
            now,
            &dead,
            opts.config.runners,
        )? {
            LockOutcome::Acquired { took_over } => return Ok(Acquired::Yes(took_over)),
            LockOutcome::Held(seats) => {
                let before = steal.len();
                for seat in &seats {
                    if holder_is_dead(&seat.holder) && !steal.contains(&seat.token) {
                        steal.push(seat.token.clone());
                    }
                }
                if steal.len() > before {
                    continue;
                }
                if !opts.wait {
                    return Ok(Acquired::No(seats));
                }
                if let Some(by) = seats
                    .iter()
                    .filter_map(|s| s.stop_by.as_deref())
                    .find(|by| *by != SIGNALLED)
                {
                    return Ok(Acquired::Stopped(by.to_string()));
                }
                // Said once: a run that waits in silence looks hung.
                if !said_waiting {
                    said_waiting = true;
                    let holders: Vec<String> = seats.iter().map(|s| s.holder.to_string()).collect();
                    crate::util::stdio::err_line(&format!(
                        "nightshift: {}: waiting for the lock held by {} (--wait)",
                        crate::util::sanitize::line(&opts.batch),
                        crate::util::sanitize::line(&holders.join(", "))
                    ));
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            changed = signals.changed() => {
                if changed.is_err() || *signals.borrow() != Signal::Run {
                    return Ok(Acquired::Interrupted);
                }
            }
        }
    }
}
