//! Taking the batch lock, and the heartbeat that keeps it (and the leases
//! of in-flight items) alive while the run lives.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::worker::KillReason;
use super::{Cycle, RunOptions, Signal, StopReason, paused_file};
use crate::model::{Holder, LockInfo};
use crate::store::{LockOutcome, Store};
use crate::util::identity;
use crate::util::time::now_ms;

pub enum Acquired {
    /// Ours; names the stale holder we replaced, if any.
    Yes(Option<LockInfo>),
    /// A live runner holds it.
    No(LockInfo),
    /// A stop signal came while waiting (`--wait`).
    Interrupted,
}

/// A holder on this host whose process is gone (or whose pid now belongs
/// to another process) is stale at once: after a crash the re-run must
/// resume, not wait out the TTL. Holders on other hosts are stale only
/// when their lock expired.
pub fn holder_is_dead(holder: &Holder) -> bool {
    holder.host == identity::host() && !identity::process_alive(holder.pid, holder.pid_start)
}

pub async fn acquire(
    store: &mut Store,
    opts: &RunOptions,
    token: &str,
    holder: &Holder,
    ttl: Duration,
    signals: &mut watch::Receiver<Signal>,
) -> anyhow::Result<Acquired> {
    let mut steal: Option<String> = None;
    loop {
        let now = now_ms();
        let expires = now + ttl.as_millis() as i64;
        match store.acquire_lock(
            &opts.batch,
            token,
            holder,
            None,
            expires,
            now,
            steal.as_deref(),
        )? {
            LockOutcome::Acquired { took_over } => return Ok(Acquired::Yes(took_over)),
            LockOutcome::Held(info) => {
                if holder_is_dead(&info.holder) && steal.as_deref() != Some(info.token.as_str()) {
                    steal = Some(info.token.clone());
                    continue;
                }
                if !opts.wait {
                    return Ok(Acquired::No(info));
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

/// Every third of the TTL: renew the lock and our leases, and notice a lost
/// lock or lease, a pause, or the PAUSED file.
pub async fn heartbeat(cycle: Arc<Cycle>, token: String, ttl: Duration) {
    let every = (ttl / 3).clamp(Duration::from_millis(100), Duration::from_secs(20));
    let db_path = cycle.db.call(|s| Ok(s.path().to_path_buf())).await.ok();
    loop {
        tokio::time::sleep(every).await;
        let now = now_ms();
        let until = cycle.lease_until(now);
        let (batch, t, run) = (cycle.batch.clone(), token.clone(), cycle.run_id);
        let renewed = cycle
            .db
            .call(move |s| {
                let lock = s.renew_lock(&batch, &t, until)?;
                let held = s.renew_leases(&batch, run, until)?;
                let pause = s.pause(&batch)?;
                Ok((lock, held, pause))
            })
            .await;
        let Ok((lock_ok, held, pause)) = renewed else {
            continue; // A busy store: try again next beat; the TTL has room.
        };
        if !lock_ok {
            cycle.lock_lost().await;
            return;
        }
        // In-flight items whose lease is no longer ours: stop their workers.
        {
            let mut inflight = cycle.inflight.lock().unwrap_or_else(|p| p.into_inner());
            for (id, kill) in inflight.iter_mut() {
                if !held.contains(id)
                    && let Some(k) = kill.take()
                {
                    let _ = k.send(KillReason::LeaseLost);
                }
            }
        }
        if let Some(p) = pause {
            cycle.request_stop(Signal::Graceful, StopReason::Paused(p.reason));
        } else if let Some(file) = db_path.as_deref().and_then(paused_file) {
            cycle.request_stop(
                Signal::Graceful,
                StopReason::Paused(format!("emergency stop file {} exists", file.display())),
            );
        }
    }
}
