//! After an answer, both modes: a failure judged (`verdict`) and
//! recorded, a retry begun, an item released, a claim let go (a cancel, a
//! lost lease).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::model::{Claim, EventKind, NewEvent, Outcome, Tier};
use crate::runner::classify::bound_message;
use crate::runner::cycle::Cycle;
use crate::runner::verdict::{self, Attempt, Failed, Policy, Verdict};
use crate::store::{CancelledWhile, Failure, Retrying, StoreError};
use crate::util::time::now_ms;

/// A failed attempt's answer, both modes: judged ([`judge_failure`]) and,
/// unless it runs again in this cycle, recorded in the tier its verdict
/// chose ([`record_failure`]). `Some(wait)`: the caller runs it again
/// after `wait` (one more immediate retry). `None`: it is over, recorded
/// or let go, `over` called first (a slot holding the item lets go of it
/// before it is recorded).
pub(in crate::runner) async fn failed_answer(
    cycle: &Cycle,
    claim: &Claim,
    attempt: Attempt,
    failed: &Failed<'_>,
    cost: Option<f64>,
    over: impl FnOnce(),
) -> Result<Option<Duration>, StoreError> {
    let Some(v) = judge_failure(cycle, claim, attempt, failed, cost).await else {
        over();
        return Ok(None);
    };
    if let Verdict::RetryNow { wait, .. } = v {
        return Ok(Some(wait));
    }
    over();
    record_failure(cycle, claim, attempt, failed, v, cost).await?;
    Ok(None)
}

/// Judges a failed attempt (`verdict::judge`): counts its cost, holds the
/// batch for its `retry_after`, and logs a `retry` event when it runs
/// again in this cycle. The caller then waits and retries, or records the
/// failure ([`record_failure`]). `None`: the claim is no longer ours to
/// retry (a cancel, or another runner holds it: let go, [`let_go`]).
async fn judge_failure(
    cycle: &Cycle,
    claim: &Claim,
    attempt: Attempt,
    failed: &Failed<'_>,
    cost: Option<f64>,
) -> Option<Verdict> {
    cycle.spend(cost).await;
    cycle.answered(Some(failed.class)).await;
    if let Some(asked) = verdict::hold(failed) {
        cycle.hold(claim, asked).await;
    }
    let policy = Policy::of(&cycle.cfg);
    let now = now_ms();
    // `max_cost` reached (this attempt's cost counted above) stops the
    // cycle: no immediate retry, a paid call like any other, starts after
    // it (three ran past the cap, to 240 % of it at one slot).
    let stopping = crate::runner::slot::claim::budget_spent(cycle) || cycle.stopping().is_some();
    let held_until = cycle.gate.held_until();
    let v = verdict::judge(
        failed,
        attempt,
        &policy,
        stopping,
        held_until,
        now,
        fastrand::f64(),
    );
    if let Verdict::RetryNow { wait, after_hold } = v {
        let (kind, text) = v.event(failed, attempt, &policy, now);
        let (class, message, number) = (failed.class, failed.message, attempt.number);
        let event = NewEvent::new(now, &cycle.batch, kind, text)
            .run(cycle.run_id)
            .key(&claim.key)
            .fields(json!({"error_class": class, "message": message, "attempt": number, "wait_ms": wait.as_millis() as u64}));
        // The item says when it runs again, so no view counts it in flight
        // while nothing runs it.
        let at = after_hold.unwrap_or_else(|| now.saturating_add(wait.as_millis() as i64));
        cycle.awaits_retry(claim.item_id, at);
        let (id, token, e) = (claim.item_id, claim.token, event.clone());
        let (class, message, run) = (class.to_string(), message.to_string(), cycle.run_id);
        let stored = cycle
            .writer
            .call(move |s| {
                s.await_retry(
                    &Retrying {
                        item_id: id,
                        token,
                        run_id: run,
                        cost,
                        at,
                        error_class: &class,
                        message: &message,
                        now,
                    },
                    &e,
                )
            })
            .await;
        match stored {
            Ok(true) => cycle.log.emit(&event),
            // No retry to promise: the answer is not ours to act on.
            Ok(false) => {
                let_go(cycle, claim, CancelledWhile::Answered).await;
                return None;
            }
            Err(err) => tracing::warn!("could not record event {}: {err}", event.kind),
        }
    }
    Some(v)
}

/// Starts the next attempt of a claimed item once it passed the gate,
/// counting the retry. `None`: the lease is no longer ours.
pub(in crate::runner) async fn begin_retry(
    cycle: &Cycle,
    claim: &Claim,
) -> Result<Option<u32>, StoreError> {
    let (id, token) = (claim.item_id, claim.token);
    cycle.retry_begins(id);
    let next = cycle
        .writer
        .call(move |s| s.begin_attempt(id, token, now_ms()))
        .await?;
    if next.is_some() {
        cycle.tally.retried.fetch_add(1, Ordering::Relaxed);
        let run = cycle.run_id;
        let _ = cycle.writer.call(move |s| s.add_retried(run, 1)).await;
    }
    Ok(next)
}

/// Records a failed attempt in the tier `verdict` chose (an immediate
/// retry records nothing), with its event.
pub(in crate::runner) async fn record_failure(
    cycle: &Cycle,
    claim: &Claim,
    attempt: Attempt,
    failed: &Failed<'_>,
    verdict: Verdict,
    cost: Option<f64>,
) -> Result<(), StoreError> {
    let Some(tier) = verdict.tier() else {
        return Ok(());
    };
    let now = now_ms();
    let (kind, text) = verdict.event(failed, attempt, &Policy::of(&cycle.cfg), now);
    let (class, message, transient) = (failed.class, failed.message, failed.transient);
    let event = NewEvent::new(now, &cycle.batch, kind, text)
        .run(cycle.run_id)
        .key(&claim.key)
        .fields(json!({"error_class": class, "message": message, "attempt": attempt.number, "tier": tier, "transient": transient}));
    let (c, e, run) = (claim.clone(), event.clone(), cycle.run_id);
    let (class, message) = (class.to_string(), message.to_string());
    let next = verdict.next_attempt_at();
    let accepted = cycle
        .writer
        .call(move |s| {
            s.fail(
                &Failure {
                    item_id: c.item_id,
                    token: c.token,
                    run_id: run,
                    tier,
                    error_class: &class,
                    message: &message,
                    next_attempt_at: next,
                    cost,
                    now,
                },
                &e,
            )
        })
        .await?;
    if accepted {
        let counter = if tier == Tier::Retry {
            &cycle.tally.retry
        } else {
            &cycle.tally.manual
        };
        counter.fetch_add(1, Ordering::Relaxed);
        cycle.log.emit(&event);
    } else {
        let_go(cycle, claim, CancelledWhile::Answered).await;
    }
    Ok(())
}

/// Gives the item back to pending; `cut_short` when its worker was stopped
/// before a verdict (that attempt does not count).
pub(in crate::runner) async fn release(
    cycle: &Cycle,
    claim: &Claim,
    cut_short: bool,
) -> Result<(), StoreError> {
    // Not cut short: its call had not started.
    let was = if cut_short {
        CancelledWhile::Running
    } else {
        CancelledWhile::NotStarted
    };
    release_with(
        cycle,
        claim,
        (cut_short, was),
        "released back to pending (run stopping)".into(),
    )
    .await
}

/// Gives back a first attempt's claim whose call the batch's hold keeps
/// from starting (a retry-after, a budget reached), so that no item is
/// held claimed, and counted in flight by every view, while no call may
/// start; the slot claims again once the hold is over. The attempt never
/// started: it does not count, and `--limit` counts the claim back.
pub(in crate::runner) async fn release_held(
    cycle: &Cycle,
    claim: &Claim,
) -> Result<(), StoreError> {
    cycle.give_back(1);
    let now = now_ms();
    let message = match cycle.gate.held_until() {
        Some(until) => format!(
            "released back to pending: the batch is held until {}, no call starts before",
            crate::util::time::utc_clock(until, now)
        ),
        None => "released back to pending: the batch was held".to_string(),
    };
    release_with(cycle, claim, (true, CancelledWhile::NotStarted), message).await
}

/// `cut_short`: the attempt does not count; `was`: where the claim was,
/// for a cancel asked meanwhile.
async fn release_with(
    cycle: &Cycle,
    claim: &Claim,
    (cut_short, was): (bool, CancelledWhile),
    message: String,
) -> Result<(), StoreError> {
    let event = cycle
        .new_event(EventKind::Released, message)
        .key(&claim.key);
    let (c, e, run) = (claim.clone(), event.clone(), cycle.run_id);
    if cycle
        .writer
        .call(move |s| s.release(c.item_id, c.token, run, cut_short, &e))
        .await?
    {
        cycle.tally.released.fetch_add(1, Ordering::Relaxed);
        cycle.log.emit(&event);
    } else {
        // Refused: a cancel asked meanwhile (it goes where that said), or
        // another runner holds it.
        let_go(cycle, claim, was).await;
    }
    Ok(())
}

/// `claim` is no longer this run's to finish: a cancel asked of it is
/// settled now (it goes where the cancel said), else another runner holds
/// it (`lease-lost`). `was`: where it was when the runner let it go, which
/// both events say as it was (not that a worker was stopped when none
/// ran, nor a retry promised that never comes). Every path of both modes
/// that lets a claim go ends here.
pub(in crate::runner) async fn let_go(cycle: &Cycle, claim: &Claim, was: CancelledWhile) {
    if settle(cycle, claim, was).await {
        return;
    }
    let words = match was {
        CancelledWhile::Answered => {
            "result discarded: another runner took this item over (stale lease token)"
        }
        CancelledWhile::Running => "another runner holds this item now; its worker was stopped",
        CancelledWhile::WaitingToRetry => {
            "another runner holds this item now; it was waiting to retry (no worker ran)"
        }
        CancelledWhile::NotStarted => {
            "another runner holds this item now; its call had not started"
        }
    };
    cycle
        .event(cycle.new_event(EventKind::LeaseLost, words).key(&claim.key))
        .await;
}

/// Counts the cost a worker stopped before its answer had reported (the
/// call was paid all the same) in the run, the item and the budgets, as a
/// failed attempt's would be. (Its tokens go to its pool with the
/// settlement of its place.)
pub(in crate::runner) async fn count_cut_short(cycle: &Cycle, claim: &Claim, cost: Option<f64>) {
    let Some(cost) = cost else {
        return;
    };
    cycle.spend(Some(cost)).await;
    let (item, run) = (claim.item_id, cycle.run_id);
    cycle.writer.send(move |s| s.count_cost(item, run, cost));
}

/// Counts a success the store accepted, and logs it; a refused one lost
/// its lease. (The circuit breaker heard it when the worker answered, in
/// order with the failures: `Cycle::answered`.)
pub(in crate::runner) async fn count_success(
    cycle: &Cycle,
    claim: &Claim,
    accepted: bool,
    outcome: Outcome,
    cost: Option<f64>,
    event: &NewEvent,
) {
    if !accepted {
        let_go(cycle, claim, CancelledWhile::Answered).await;
        return;
    }
    let counter = if outcome == Outcome::Empty {
        &cycle.tally.empty
    } else {
        &cycle.tally.done
    };
    counter.fetch_add(1, Ordering::Relaxed);
    cycle.spend(cost).await;
    cycle.log.emit(event);
}

/// Stores an op id the worker reported, at once: a later attempt gets it
/// back.
pub(in crate::runner) async fn store_op_id(cycle: &Cycle, claim: &Claim, op: String) {
    let event = cycle
        .new_event(
            EventKind::OpId,
            format!("operation id reported: {}", bound_message(&op)),
        )
        .key(&claim.key)
        .fields(json!({"op_id": op}));
    let (id, token, e) = (claim.item_id, claim.token, event.clone());
    if let Ok(true) = cycle
        .writer
        .call(move |s| s.set_op_id(id, token, &op, &e))
        .await
    {
        cycle.log.emit(&event);
    }
}

/// Moves `claim` where the cancel asked of it said, if one was; whether
/// one was. Logged to the log file as the store logged it.
async fn settle(cycle: &Cycle, claim: &Claim, was: CancelledWhile) -> bool {
    let (batch, id, token, run) = (
        cycle.batch.clone(),
        claim.item_id,
        claim.token,
        cycle.run_id,
    );
    match cycle
        .writer
        .call(move |s| s.settle_cancel(&batch, id, token, (run, now_ms()), was))
        .await
    {
        Ok(Some(done)) => {
            let by = done.by.as_deref().unwrap_or("someone");
            let event = cycle
                .new_event(
                    EventKind::Cancelled,
                    format!(
                        "cancelled by {by}; {}; now {}",
                        was.words(),
                        done.to.as_str()
                    ),
                )
                .key(&claim.key);
            cycle.log.emit(&event);
            cycle.tally.cancelled.fetch_add(1, Ordering::Relaxed);
            true
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!("settling the cancel of {}: {e}", claim.key);
            false
        }
    }
}
