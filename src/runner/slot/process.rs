//! One concurrency slot in process mode: claim an item, run its worker
//! (with immediate retries for transient failures), record the outcome,
//! repeat.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::claim::{budget_spent, claim_key, log_claimed, may_chain};
use super::record::{
    begin_retry, count_cut_short, count_success, failed_answer, let_go, release, release_held,
    store_op_id,
};
use crate::model::{Claim, EventKind, NewEvent, Outcome};
use crate::runner::child::output::{Output, Report};
use crate::runner::child::worker::{self, Job};
use crate::runner::child::{Exit, KillReason, Prepared};
use crate::runner::classify::{Answer, classify, cut_short};
use crate::runner::cycle::{Cycle, Killer, Signal, StopReason};
use crate::runner::gate::{Pass, Passed};
use crate::runner::verdict::{Attempt, Failed};
use crate::store::{AttemptLog, CancelledWhile, Completion, StoreError};
use crate::util::time::now_ms;

/// Claims and processes items until none is left or the cycle stops.
/// `slot` numbers it among the cycle's slots (its worker's record).
pub async fn run_slot(cycle: Arc<Cycle>, slot: u32) -> Result<(), StoreError> {
    // The next item, when it was claimed together with the last success.
    let mut chained: Option<Claim> = None;
    let prepared = Prepared::new();
    let mut place = cycle.idle.place();
    loop {
        if let Some(claim) = chained.take() {
            chained = process(&cycle, slot, &prepared, claim, Pass::None, true).await?;
            continue;
        }
        if cycle.stopping().is_some() || budget_spent(&cycle) {
            return Ok(());
        }
        if cycle.take_claims(1) == 0 {
            return Ok(());
        }
        let seen = place.seen();
        let Some((claims, pass)) = cycle.claim_through_gate(1).await? else {
            cycle.lock_lost().await;
            return Ok(());
        };
        let Some(claim) = claims.into_iter().next() else {
            cycle.give_back(1);
            // Nothing now; while another slot works, claims may come back.
            if place.wait(seen).await {
                continue;
            }
            return Ok(());
        };
        log_claimed(&cycle, &claim);
        chained = process(&cycle, slot, &prepared, claim, pass, true).await?;
    }
}

/// `run --key`: the one named item.
pub async fn run_key(cycle: Arc<Cycle>, slot: u32, key: String) -> Result<(), StoreError> {
    let claim = claim_key(&cycle, key).await?;
    // `chain` is off with --key: nothing else is claimed.
    process(&cycle, slot, &Prepared::new(), claim, Pass::None, false)
        .await
        .map(drop)
}

/// Longest `NIGHTSHIFT_LABEL` passed to a worker, in bytes.
const MAX_ENV_LABEL: usize = 4096;

fn env(
    cycle: &Cycle,
    claim: &Claim,
    attempt: u32,
    op_id: Option<&str>,
) -> Vec<(&'static str, String)> {
    // Environment values cannot hold NUL bytes.
    let clean = |s: &str| s.replace('\0', "\\x00");
    // One environment string may not pass 128 KiB (`E2BIG`: the worker
    // could never start); a label has no limit, so it is cut.
    let mut label = claim.label.as_str();
    if label.len() > MAX_ENV_LABEL {
        let mut end = MAX_ENV_LABEL;
        while !label.is_char_boundary(end) {
            end -= 1;
        }
        label = &label[..end];
    }
    let mut env = vec![
        ("NIGHTSHIFT_BATCH", clean(&cycle.batch)),
        ("NIGHTSHIFT_KEY", clean(&claim.key)),
        ("NIGHTSHIFT_LABEL", clean(label)),
        ("NIGHTSHIFT_ATTEMPT", attempt.to_string()),
        ("NIGHTSHIFT_RUN_ID", cycle.run_id.to_string()),
        // Lets a later run find this worker if we die (see `orphans`).
        (
            crate::runner::child::orphans::RUNNER_VAR,
            cycle.runner_id.clone(),
        ),
    ];
    if let Some(op) = op_id {
        env.push(("NIGHTSHIFT_OP_ID", clean(op)));
    }
    env
}

/// Runs one claimed item to an outcome: done, failed (with tier), released
/// (stop, or a hold with `give_back`: the slot claims again after it), or
/// abandoned (lease lost). Every attempt passes the gate first (`pass`:
/// how far its first one got there when it was claimed). Returns the next
/// item when it was claimed in the same transaction as this one's success
/// (`may_chain`).
async fn process(
    cycle: &Arc<Cycle>,
    slot: u32,
    prepared: &Prepared,
    claim: Claim,
    pass: Pass,
    give_back: bool,
) -> Result<Option<Claim>, StoreError> {
    let id = claim.item_id;
    let next = attempts(cycle, slot, prepared, claim, pass, give_back).await;
    // However it left the slot, the claim waits to retry no more.
    cycle.retry_begins(id);
    next
}

/// The attempts of [`process`].
async fn attempts(
    cycle: &Arc<Cycle>,
    slot: u32,
    prepared: &Prepared,
    claim: Claim,
    mut pass: Pass,
    give_back: bool,
) -> Result<Option<Claim>, StoreError> {
    let cfg = &cycle.cfg;
    let mut attempt = claim.attempt;
    let mut op_id = claim.op_id.clone();
    let mut retries_done = 0;
    // A retry waits for the gate before its attempt begins.
    let mut retrying = false;
    loop {
        // A first attempt is not kept claimed while no call may start: it
        // is given back and claimed again once the hold is over (that
        // attempt never started and does not count).
        let entered = match cycle.pass(&mut pass, give_back && !retrying).await {
            Passed::Go if cycle.pool.is_none() => Ok(None),
            Passed::Go => {
                // Held as in flight while it waits for its place, so a
                // cancel or a lost lease is heard before its call starts.
                let (kill_tx, mut kill_rx) = oneshot::channel();
                cycle.track(claim.item_id, Killer::Item(kill_tx));
                let entered = cycle.pool_enter(&claim, &mut kill_rx).await;
                cycle.untrack(claim.item_id);
                entered
            }
            Passed::Held => return release_held(cycle, &claim).await.map(|()| None),
            Passed::Stopped => Err(None),
        };
        let ticket = match entered {
            // A budget reached (or a hold given) while the call waited for
            // its place: it must not start now. The place goes back, and
            // the gate is passed again (a first attempt gives its claim
            // back; a retry waits the hold out).
            Ok(Some(ticket)) if cycle.gate.held_until().is_some() => {
                cycle.pool_settle(&claim, attempt, Some(ticket), None, false);
                continue;
            }
            Ok(ticket) => ticket,
            Err(Some(KillReason::Cancelled | KillReason::LeaseLost)) => {
                let_go(cycle, &claim, CancelledWhile::NotStarted).await;
                return Ok(None);
            }
            Err(_) => {
                return match cycle.stopping() {
                    // The taker takes it back (see `persistent::Slot::abandon`).
                    Some((_, StopReason::LockLost)) => Ok(None),
                    // The claimed attempt never started: it does not count
                    // (a failed one before a retry does).
                    _ => release(cycle, &claim, !retrying).await.map(|()| None),
                };
            }
        };
        if std::mem::take(&mut retrying) {
            match begin_retry(cycle, &claim).await? {
                Some(next) => attempt = next,
                None => {
                    cycle.pool_settle(&claim, attempt, ticket, None, false);
                    let_go(cycle, &claim, CancelledWhile::WaitingToRetry).await;
                    return Ok(None);
                }
            }
        }
        let (kill_tx, kill_rx) = oneshot::channel();
        cycle.track(claim.item_id, Killer::Item(kill_tx));
        // A stop that came while we were claiming applies to us too.
        if matches!(cycle.stopping(), Some((Signal::Immediate, _))) {
            cycle.kill_all(KillReason::Shutdown);
        }
        let (report_tx, report_rx) = mpsc::unbounded_channel();
        let started = Instant::now();
        let job = Job {
            argv: &cycle.worker,
            program: cycle.program.as_deref(),
            dir: cycle.work_dir.as_deref(),
            env: env(cycle, &claim, attempt, op_id.as_deref()),
            prepared,
            payload: &claim.payload,
            timeout: cfg.item_timeout,
            kill_grace: cfg.grace.min(std::time::Duration::from_secs(5)),
            spawned: Some(Box::new(|pid, start| {
                cycle.record_worker(slot, pid, start);
            })),
        };
        // The op ids are stored as they come, beside the worker, in this
        // task (ends once the worker's stderr is read).
        let (result, latest) = tokio::join!(
            worker::run(job, report_tx, kill_rx),
            forward_op_ids(cycle, &claim, report_rx)
        );
        cycle.untrack(claim.item_id);
        if let Some(latest) = latest {
            op_id = Some(latest);
        }
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let output = match result {
            Ok(output) => output,
            Err(worker::Killed { reason, output }) => {
                // Stopped before an answer: its reservation stands, but for
                // what it reported it used; what it reported it cost counts.
                keep_words(cycle, &claim, attempt, &output);
                cycle.unread_markers(&claim.key, &output.unread).await;
                let (cost, usage) = cut_short(&output);
                cycle.pool_settle(&claim, attempt, ticket, usage, false);
                count_cut_short(cycle, &claim, cost).await;
                match reason {
                    KillReason::LeaseLost | KillReason::Cancelled => {
                        let_go(cycle, &claim, CancelledWhile::Running).await;
                    }
                    KillReason::Shutdown => {
                        return release(cycle, &claim, true).await.map(|()| None);
                    }
                }
                return Ok(None);
            }
        };
        // Every item would fail the same way, each spending an attempt: the
        // run stops, and this one's attempt, which never began, is not
        // counted.
        if let Exit::CannotStart(why) = &output.exit {
            cycle.pool_settle(&claim, attempt, ticket, None, false);
            cycle.request_stop(Signal::Graceful, StopReason::WorkerCannotStart(why.clone()));
            return release(cycle, &claim, true).await.map(|()| None);
        }
        keep_words(cycle, &claim, attempt, &output);
        cycle.unread_markers(&claim.key, &output.unread).await;
        let answer = classify(&output, &cycle.rules);
        let done = matches!(answer, Answer::Done { .. });
        let line = cycle.pool_settle(&claim, attempt, ticket, answer.usage(), done);
        match answer {
            Answer::Done {
                empty,
                result,
                cost,
                usage,
            } => {
                let event = NewEvent::new(
                    now_ms(),
                    &cycle.batch,
                    if empty {
                        EventKind::Empty
                    } else {
                        EventKind::Done
                    },
                    if empty {
                        "done, empty result".to_string()
                    } else {
                        "done".to_string()
                    },
                )
                .run(cycle.run_id)
                .key(&claim.key)
                .fields(json!({"attempt": attempt, "ms": elapsed_ms, "cost": cost, "usage": usage.map(|u| json!({"input_tokens": u.input, "output_tokens": u.output}))}));
                let outcome = if empty { Outcome::Empty } else { Outcome::Done };
                cycle.answered(None).await;
                let (c, e) = (claim.clone(), event.clone());
                let (run, batch) = (cycle.run_id, cycle.batch.clone());
                let version = cycle.cfg.version.clone();
                let chain = may_chain(cycle);
                let until = cycle.lease_until(now_ms());
                let (accepted, next) = cycle
                    .writer
                    .call(move |s| {
                        // One transaction for the success and the next claim.
                        s.group(|s| {
                            let accepted = s.complete(
                                &Completion {
                                    item_id: c.item_id,
                                    token: c.token,
                                    run_id: run,
                                    outcome,
                                    result: result.as_deref(),
                                    cost,
                                    version: version.as_deref(),
                                    usage: line.as_deref(),
                                    now: now_ms(),
                                },
                                &e,
                            )?;
                            let next = (chain && accepted)
                                .then(|| s.claim(&batch, run, 1, until, now_ms()));
                            Ok((accepted, next))
                        })?
                    })
                    .await?;
                let next = match next {
                    None => {
                        if chain {
                            cycle.give_back(1);
                        }
                        None
                    }
                    Some(Err(e)) => return Err(e),
                    Some(Ok(None)) => {
                        cycle.lock_lost().await;
                        None
                    }
                    Some(Ok(Some(claims))) => {
                        let next = claims.into_iter().next();
                        if next.is_none() {
                            cycle.give_back(1);
                        }
                        next
                    }
                };
                if let Some(n) = &next {
                    log_claimed(cycle, n);
                }
                count_success(cycle, &claim, accepted, outcome, cost, &event).await;
                return Ok(next);
            }
            Answer::Failed {
                transient,
                class,
                message,
                retry_after,
                cost,
                ..
            } => {
                let failed = Failed {
                    transient,
                    class: &class,
                    message: &message,
                    retry_after,
                };
                let a = Attempt {
                    number: attempt,
                    retries_done,
                };
                let Some(wait) = failed_answer(cycle, &claim, a, &failed, cost, || {}).await?
                else {
                    return Ok(None);
                };
                retries_done += 1;
                match backoff(cycle, &claim, wait).await {
                    None => {}
                    Some(KillReason::Cancelled | KillReason::LeaseLost) => {
                        let_go(cycle, &claim, CancelledWhile::WaitingToRetry).await;
                        return Ok(None);
                    }
                    // The failed attempt had its verdict: it counts.
                    Some(KillReason::Shutdown) => {
                        return release(cycle, &claim, false).await.map(|()| None);
                    }
                }
                if cycle.stopping().is_some() {
                    return release(cycle, &claim, false).await.map(|()| None);
                }
                retrying = true;
            }
        }
    }
}

/// Waits out an immediate retry's backoff with the item held as in
/// flight, so what would stop its worker (a cancel, the lease lost, a
/// stop) ends the wait at once rather than when the backoff is over.
/// `None`: the backoff passed.
async fn backoff(cycle: &Cycle, claim: &Claim, wait: std::time::Duration) -> Option<KillReason> {
    let (kill_tx, kill_rx) = oneshot::channel();
    cycle.track(claim.item_id, Killer::Item(kill_tx));
    let mut stop = cycle.stop_tx.subscribe();
    let ended = tokio::select! {
        () = tokio::time::sleep(wait) => None,
        _ = stop.changed() => Some(KillReason::Shutdown),
        reason = kill_rx => reason.ok(),
    };
    cycle.untrack(claim.item_id);
    ended
}

/// Keeps what the attempt printed on stderr (its tail), queued to commit
/// with the store's next group, before its outcome is written.
fn keep_words(cycle: &Cycle, claim: &Claim, attempt: u32, output: &Output) {
    let Some(words) = output.stderr_tail.clone() else {
        return;
    };
    let log = AttemptLog {
        attempt,
        run_id: Some(cycle.run_id),
        at: now_ms(),
        stderr: words.text,
        cut: words.cut,
    };
    let item = claim.item_id;
    cycle.writer.send(move |s| s.record_attempt_log(item, &log));
}

/// Stores each op id the worker reports, at once. Returns the latest.
async fn forward_op_ids(
    cycle: &Cycle,
    claim: &Claim,
    mut rx: mpsc::UnboundedReceiver<Report>,
) -> Option<String> {
    let mut latest = None;
    while let Some(Report::OpId(op)) = rx.recv().await {
        store_op_id(cycle, claim, op.clone()).await;
        latest = Some(op);
    }
    latest
}
