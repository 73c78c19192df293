//! What a cycle inherits once it holds the lock: the runs that died (their
//! workers, their claims) and a rate-limit hold an earlier run was given.

use std::time::Duration;

use super::{EventLog, orphans};
use crate::model::{Holder, NewEvent};
use crate::store::{Store, StoreError};
use crate::util::time::now_ms;

/// Every other open run of the batch lost the lock, so it is dead (or cut
/// off and fenced). Its workers on this host may still run: stop them first
/// (before the run is marked, so a crash right here leaves it findable),
/// then close the runs and take back every claim but `run_id`'s.
pub async fn take_over(
    store: &mut Store,
    batch: &str,
    run_id: i64,
    holder: &Holder,
    max_attempts: u32,
    log: &EventLog,
) -> Result<(), StoreError> {
    let dead_runs: Vec<_> = store
        .open_runs(batch)?
        .into_iter()
        .filter(|r| r.id != run_id)
        .collect();
    let here: Vec<orphans::DeadRun> = dead_runs
        .iter()
        .filter(|r| r.holder.host == holder.host)
        .map(|r| orphans::DeadRun {
            run_id: r.id,
            runner: orphans::runner_id(r.holder.pid, r.holder.pid_start),
        })
        .collect();
    let reap_batch = batch.to_string();
    let reaped = tokio::task::spawn_blocking(move || orphans::reap(&reap_batch, &here))
        .await
        .unwrap_or(0);
    if reaped > 0 {
        let e = NewEvent::new(
            now_ms(),
            batch,
            "orphans-stopped",
            format!("stopped {reaped} worker processes left running by dead runs"),
        )
        .run(run_id);
        store.log_event(&e)?;
        log.emit(&e);
    }
    let now = now_ms();
    let dead: Vec<i64> = dead_runs.iter().map(|r| r.id).collect();
    store.mark_crashed(&dead, now)?;
    let (reclaimed, quarantined) = store.reclaim(batch, run_id, max_attempts, now)?;
    if reclaimed + quarantined > 0 {
        log.emit(
            &NewEvent::new(
                now,
                batch,
                "reclaimed",
                format!("took back {reclaimed} items from dead runs, quarantined {quarantined}"),
            )
            .run(run_id),
        );
    }
    Ok(())
}

/// A rate-limit answer an earlier run got still holds the batch: until
/// when (logged as a `hold` event).
pub fn inherited_hold(
    store: &mut Store,
    batch: &str,
    run_id: i64,
    log: &EventLog,
) -> Result<Option<tokio::time::Instant>, StoreError> {
    let now = now_ms();
    let Some(until) = store.hold_until(batch)?.filter(|t| *t > now) else {
        return Ok(None);
    };
    let wait = Duration::from_millis((until - now).unsigned_abs());
    let e = NewEvent::new(
        now,
        batch,
        "hold",
        format!(
            "rate limited by an earlier run: claiming held for {}",
            crate::duration::format_duration(wait)
        ),
    )
    .run(run_id);
    store.log_event(&e)?;
    log.emit(&e);
    Ok(Some(tokio::time::Instant::now() + wait))
}
