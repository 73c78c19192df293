//! What a cycle inherits once it holds the lock: the runs that died (their
//! workers, their claims) and a rate-limit hold an earlier run was given.

use std::time::Duration;

use super::EventLog;
use super::child::{groups, orphans};
use super::writer::Writer;
use crate::model::{EventKind, Hold, Holder, NewEvent, WorkerGroup};
use crate::store::{OpenRun, Store, StoreError};
use crate::util::identity;
use crate::util::time::now_ms;

/// Every other open run of the batch that holds no seat of the lock is
/// dead (or cut off and fenced). Its workers on this host may still run:
/// stop them first, by their recorded process groups and by their
/// environment (before the run is marked, so a crash right here leaves it
/// findable), then close the runs and take back their claims.
pub async fn take_over(
    store: &mut Store,
    batch: &str,
    run_id: i64,
    holder: &Holder,
    max_attempts: u32,
    log: &EventLog,
) -> Result<usize, StoreError> {
    let dead = store.unseated_runs(batch, run_id)?;
    let groups = store.worker_groups(&ids(&dead))?;
    let reaped = reap_here(batch, &dead, groups, &holder.host).await;
    let (_, quarantined) = close_dead(store, batch, run_id, &dead, reaped, max_attempts, log)?;
    store.forget_pool_places(&runners_here(&dead, &holder.host))?;
    Ok(quarantined)
}

/// While a cycle runs: frees the seats of runners sharing the batch whose
/// lock expired (gone or cut off, on any host) or whose process on this
/// host is gone, then does what
/// `take_over` does for their runs. A no-op unless a seat expired. How
/// many claims it took back to pending, and how many it quarantined.
pub async fn sweep(
    writer: &Writer,
    batch: &str,
    run_id: i64,
    max_attempts: u32,
    log: &EventLog,
) -> Result<(usize, usize), StoreError> {
    // Read first: a write (and the store's write lock) only when a seat
    // looks stale. Our own seat is never freed here: a renewal that failed
    // only for a busy store is retried by the heartbeat.
    let b = batch.to_string();
    let seats = writer.call(move |s| s.locks(&b)).await?;
    let now = now_ms();
    let (mut stale, mut dead) = (Vec::new(), Vec::new());
    for seat in seats.into_iter().filter(|l| l.run_id != Some(run_id)) {
        if super::seat::holder_is_dead(&seat.holder) {
            dead.push(seat.token.clone());
            stale.push(seat.token);
        } else if crate::store::seat_lapsed(&seat, now) {
            stale.push(seat.token);
        }
    }
    if stale.is_empty() {
        return Ok((0, 0));
    }
    let b = batch.to_string();
    let freed = writer
        .call(move |s| {
            let stale: Vec<&str> = stale.iter().map(String::as_str).collect();
            let dead: Vec<&str> = dead.iter().map(String::as_str).collect();
            s.free_stale_locks(&b, now_ms(), &stale, &dead)
        })
        .await?;
    if freed.is_empty() {
        return Ok((0, 0));
    }
    let b = batch.to_string();
    let (dead, groups) = writer
        .call(move |s| {
            let dead = s.unseated_runs(&b, run_id)?;
            let groups = s.worker_groups(&ids(&dead))?;
            Ok((dead, groups))
        })
        .await?;
    let host = identity::host();
    let reaped = reap_here(batch, &dead, groups, &host).await;
    let (b, log) = (batch.to_string(), log.clone());
    writer
        .call(move |s| {
            let back = close_dead(s, &b, run_id, &dead, reaped, max_attempts, &log)?;
            s.forget_pool_places(&runners_here(&dead, &host))?;
            Ok(back)
        })
        .await
}

fn ids(runs: &[OpenRun]) -> Vec<i64> {
    runs.iter().map(|r| r.id).collect()
}

/// The pool place keys of the dead runs on this host: their workers are
/// stopped ([`reap_here`]), so their places in flight are free. A dead
/// run's places on another host are free once it is judged gone
/// (`store::ops::pools`: its seats lapsed, its guard stopped its workers).
fn runners_here(dead: &[OpenRun], host: &str) -> Vec<String> {
    dead.iter()
        .filter(|r| r.holder.host == host)
        .map(|r| crate::store::place_key(&r.holder))
        .collect()
}

/// Stops the workers the dead runs left on this host: their recorded
/// process groups (`groups` keeps to this host and boot), then whatever
/// their environment still names; how many processes.
async fn reap_here(batch: &str, dead: &[OpenRun], recorded: Vec<WorkerGroup>, host: &str) -> usize {
    let here: Vec<orphans::DeadRun> = dead
        .iter()
        .filter(|r| r.holder.host == host)
        .map(|r| orphans::DeadRun {
            run_id: r.id,
            runner: orphans::runner_id(r.holder.pid, r.holder.pid_start),
        })
        .collect();
    if here.is_empty() && recorded.is_empty() {
        return 0;
    }
    let reap_batch = batch.to_string();
    tokio::task::spawn_blocking(move || groups::stop(&recorded) + orphans::reap(&reap_batch, &here))
        .await
        .unwrap_or(0)
}

/// Marks the dead runs crashed and takes back every claim without a seat;
/// how many went back to pending, and how many were quarantined.
fn close_dead(
    store: &mut Store,
    batch: &str,
    run_id: i64,
    dead: &[OpenRun],
    reaped: usize,
    max_attempts: u32,
    log: &EventLog,
) -> Result<(usize, usize), StoreError> {
    if reaped > 0 {
        let e = NewEvent::new(
            now_ms(),
            batch,
            EventKind::OrphansStopped,
            format!(
                "stopped {} left running by the workers of dead runs",
                orphans::processes(reaped)
            ),
        )
        .run(run_id);
        store.log_event(&e)?;
        log.emit(&e);
    }
    let now = now_ms();
    let ids = ids(dead);
    store.mark_crashed(&ids, now)?;
    // Their groups are stopped: only a run still running keeps its record.
    store.forget_workers(&ids)?;
    let (reclaimed, quarantined) = store.reclaim(batch, run_id, max_attempts, now)?;
    if reclaimed + quarantined > 0 {
        log.emit(
            &NewEvent::new(
                now,
                batch,
                EventKind::Reclaimed,
                format!("took back {reclaimed} items from dead runs, quarantined {quarantined}"),
            )
            .run(run_id),
        );
    }
    Ok((reclaimed, quarantined))
}

/// A retry-after hold an earlier run (or another runner) was given still
/// holds the batch: which (logged as a `hold` event).
pub fn inherited_hold(
    store: &mut Store,
    batch: &str,
    run_id: i64,
    log: &EventLog,
) -> Result<Option<Hold>, StoreError> {
    let now = now_ms();
    let Some(hold) = store.hold(batch)?.filter(|h| h.active(now)) else {
        return Ok(None);
    };
    let wait = Duration::from_millis((hold.until - now).unsigned_abs());
    let mut e = NewEvent::new(
        now,
        batch,
        EventKind::Hold,
        format!(
            "rate limited before this run: every call {} ({} left)",
            hold.describe(now),
            crate::duration::format_duration(wait)
        ),
    )
    .run(run_id)
    .fields(serde_json::json!({"until": crate::util::time::rfc3339(hold.until)}));
    if let Some(key) = &hold.key {
        e = e.key(key);
    }
    store.log_event(&e)?;
    log.emit(&e);
    Ok(Some(hold))
}
