//! The heartbeat of a cycle holding a seat: renews the seat and the leases
//! of in-flight items, notices a lost lock or lease, a deleted or replaced
//! store, a pause, the store's retry-after hold, and sweeps the seats of
//! dead runners sharing the batch.

use std::sync::Arc;
use std::time::Duration;

use super::child::KillReason;
use super::cycle::{Cycle, Signal, StopReason};

use crate::store::{Steering, StoreIdentity, Verdict, paused_file};
use crate::util::time::now_ms;

/// Whether the store's location names another store, or none, now. Not
/// knowing (a server that does not answer) is not a change: the next
/// heartbeat asks again.
async fn store_changed(cycle: &Arc<Cycle>) -> bool {
    let c = cycle.clone();
    let verdict =
        tokio::task::spawn_blocking(move || c.identity.as_ref().map(StoreIdentity::check)).await;
    matches!(verdict, Ok(Some(Verdict::Changed)))
}

/// What the store asks of us (`nightshift cancel`, `nightshift stop`, the
/// dashboard, from any host): stop the workers of cancelled items (the
/// slot then moves each where its cancel said); stop the run as a first
/// signal would, or a second with `--now`.
pub(super) fn steer(cycle: &Cycle, steering: &Steering) {
    if !steering.cancels.is_empty() {
        let mut inflight = cycle.inflight.lock().unwrap_or_else(|p| p.into_inner());
        for id in &steering.cancels {
            if let Some(k) = inflight.get_mut(id).and_then(Option::take) {
                k.fire(*id, KillReason::Cancelled);
            }
        }
    }
    if let Some((now, by)) = &steering.stop {
        let by = by.clone().unwrap_or_else(|| "someone".into());
        let signal = if *now {
            Signal::Immediate
        } else {
            Signal::Graceful
        };
        if cycle.request_stop(signal, StopReason::Asked(by.clone())) {
            // As a signal says it (`runner::forward_signals`), once per step.
            let what = if *now {
                "in-flight workers are stopped now"
            } else {
                "no new items; in-flight items get the grace period"
            };
            crate::util::stdio::err_line(&format!(
                "nightshift: stopping (asked by {}): {what}",
                crate::util::sanitize::line(&by)
            ));
        }
        if *now {
            cycle.kill_all(KillReason::Shutdown);
        }
    }
}

/// How often a running cycle looks for a pause (flag or PAUSED file).
const PAUSE_CHECK: Duration = Duration::from_secs(1);

/// Every third of the TTL: check that the store's location still names the
/// store opened (see `store::identity`), renew the lock and our leases, and
/// notice a lost lock or lease. Every second (or more often): notice a
/// pause or the PAUSED file, so a pause stops claiming at once rather than
/// at the next renewal (20 s with the default TTL), and the store's
/// retry-after hold.
pub async fn run(cycle: Arc<Cycle>, token: String, ttl: Duration) {
    let every = (ttl / 3).clamp(Duration::from_millis(100), Duration::from_secs(20));
    let tick = every.min(PAUSE_CHECK);
    let db_path = cycle.writer.call(|s| Ok(s.path().to_path_buf())).await.ok();
    let mut renewed_at = tokio::time::Instant::now();
    // The seat was just taken: the guard times it from now.
    super::child::guard::renewed(cycle.run_id, ttl);
    loop {
        tokio::time::sleep(tick).await;
        let batch = cycle.batch.clone();
        // Its pool's limits and budgets as the config file says them now
        // (a look at the file; read when it changed).
        cycle.follow_config().await;
        if cycle.writer.is_sealed() {
            cycle.store_lost().await;
            return;
        }
        if renewed_at.elapsed() + tick / 2 >= every {
            if store_changed(&cycle).await {
                cycle.store_lost().await;
                return;
            }
            let now = now_ms();
            let until = cycle.lease_until(now);
            let (b, t, run) = (batch.clone(), token.clone(), cycle.run_id);
            // Only items in flight before the renewal can have lost their
            // lease: one claimed while it ran is ours but not in `held`.
            let before = cycle.inflight_ids();
            let renewed = cycle
                .writer
                .call(move |s| {
                    let lock = s.renew_lock(&b, &t, until)?;
                    let held = s.renew_leases(&b, run, until)?;
                    Ok((lock, held))
                })
                .await;
            // A busy store: try again next tick; the TTL has room.
            if let Ok((lock_ok, held)) = renewed {
                renewed_at = tokio::time::Instant::now();
                if !lock_ok {
                    cycle.lock_lost().await;
                    return;
                }
                super::child::guard::renewed(cycle.run_id, ttl);
                // In-flight items whose lease is no longer ours: stop their workers.
                {
                    let mut inflight = cycle.inflight.lock().unwrap_or_else(|p| p.into_inner());
                    for (id, kill) in inflight.iter_mut() {
                        if before.contains(id)
                            && !held.contains(id)
                            && let Some(k) = kill.take()
                        {
                            k.fire(*id, KillReason::LeaseLost);
                        }
                    }
                }
            }
        }
        // Orphans we adopted that exited (see `child::subreaper`).
        let _ = tokio::task::spawn_blocking(|| super::child::subreaper::reap_adopted(false)).await;
        // Runners sharing the batch: take back the work of one that died.
        // Best effort: the next tick tries again.
        // Slots that found nothing claim them.
        if let Ok((back, quarantined)) = super::recover::sweep(
            &cycle.writer,
            &cycle.batch,
            cycle.run_id,
            cycle.cfg.max_attempts,
            &cycle.log,
        )
        .await
        {
            // Counted in this run, which quarantined them (as the store did).
            cycle.tally.count_quarantined(quarantined);
            if back > 0 {
                cycle.idle.work_came();
            }
        }
        // The store's hold too: one lifted by `unpause`, or one another
        // runner of the batch was given.
        let seq = cycle.gate.seq();
        let (run, seat) = (cycle.run_id, token.clone());
        let now = now_ms();
        let spend_keys = cycle.budget_keys(now);
        let read = cycle
            .writer
            .call(move |s| {
                let steering = s.steering(&batch, run, &seat)?;
                let spent = spend_keys.as_ref().map(|k| s.spent(k)).transpose()?;
                Ok((s.pause(&batch)?, s.hold(&batch)?, steering, spent))
            })
            .await;
        let read = match read {
            Ok((pause, hold, steering, spent)) => {
                if let Some(spent) = spent {
                    cycle.budget_sync(Ok(spent), now).await;
                }
                Ok((pause, hold, steering))
            }
            Err(e) => Err(e),
        };
        if let Ok((_, hold, steering)) = &read {
            cycle.gate.sync(seq, hold.as_ref());
            steer(&cycle, steering);
        }
        if let Ok((Some(p), _, _)) = read {
            cycle.request_stop(Signal::Graceful, StopReason::Paused(p.reason));
        } else if let Some(file) = db_path.as_deref().and_then(paused_file) {
            cycle.request_stop(
                Signal::Graceful,
                StopReason::Paused(format!("emergency stop file {} exists", file.display())),
            );
        }
    }
}
