//! One concurrency slot in persistent mode: one long-lived worker process
//! (see `child::persistent`) answers many items. The slot claims items in batches
//! (up to `MAX_BATCH`, fewer for slow workers), writes their requests ahead
//! (answers come back in order), and records successes in the transaction
//! that also claims the next batch — started once half a batch is answered,
//! so the store works while the worker answers the rest. A success is thus
//! durable before its slot claims anything more, and an item is marked done
//! only after its worker answered. Failures, retries, timeouts, op ids and
//! fencing work as in process mode (`process`); the batches are `pipeline`'s.
//!
//! An answer is recorded only when it is provably in step: it names the
//! oldest request sent (`persistent::match_answer`). When the worker is out
//! of step (an answer without a key or with another item's, a second
//! answer, a line that is not JSON), or dies, or hangs, the request at the
//! head gets the failure (an attempt counted: its answer may be lost or
//! misattributed), the worker is killed and every other request sent to it
//! goes to a fresh worker, its attempt not counted (the head's too, when
//! the worker never took it). A cancel stops the worker only when it is on
//! the item (`ending`): the other requests it holds are not cut short.

mod ending;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::mpsc;

use super::claim::claim_key;
use super::pipeline::{BATCH_TIME, CommitFuture, Success};
use super::record::{
    begin_retry, count_cut_short, judge_failure, let_go, record_failure, store_op_id,
};
use crate::model::{Claim, EventKind, NewEvent, Outcome};
use crate::runner::child::KillReason;
use crate::runner::child::persistent::{
    Line, Persistent, Request, Span, match_answer, match_op_id,
};
use crate::runner::classify::{self, Answer, bound_message};
use crate::runner::cycle::{Cycle, Killer, Signal, StopReason};
use crate::runner::gate::Pass;
use crate::runner::pool::{Ticket, limits_changed, place_given_back};
use crate::runner::verdict::{self, Attempt, Failed, Policy, Verdict};
use crate::store::{CancelledWhile, PoolWait, StoreError};
use crate::util::time::{instant_at, now_ms};

/// How long an answer may wait for its commit (its event's time on):
/// `BATCH_TIME`, a batch's work.
const FLUSH_MS: i64 = BATCH_TIME.as_millis() as i64;

/// A worker that dies, hangs or gets out of step on this many different
/// items in a row before an answer could be recorded is broken: the slot
/// gives up rather than spin (a worker that never sends `key` ends here).
/// (One poison item that kills every worker it meets only fails itself.)
const MAX_FAILED_STARTS: usize = 3;

/// A claimed item on its way through the slot.
pub(super) struct Work {
    pub(super) claim: Claim,
    pub(super) attempt: u32,
    pub(super) op_id: Option<String>,
    /// Op ids reported for it: each is a store write, so a flood is bounded
    /// (as in process mode, `worker::MAX_OP_IDS`).
    pub(super) op_ids: usize,
    pub(super) retries_done: u32,
    /// Where its next request stands at the gate.
    pub(super) pass: Pass,
    /// Its call's place in the batch's pool, once given.
    pub(super) ticket: Option<Ticket>,
    /// Where its request lies in what was written to the current worker.
    pub(super) span: Span,
    /// Cancelled once its request was written to the worker, behind the
    /// item the worker is on: the worker is left to it (stopping it would
    /// cut that other item's call short, to be paid again) and its answer
    /// is not kept.
    pub(super) cancelled: bool,
}

pub(super) struct Slot {
    pub(super) cycle: Arc<Cycle>,
    /// Its place among the cycle's slots, to wait in when it finds nothing.
    place: crate::runner::idle::Place,
    /// Which of the cycle's slots (its worker's record, see `groups`).
    pub(super) index: u32,
    pub(super) worker: Option<Persistent>,
    /// Claimed, not yet sent to the current worker.
    pub(super) queue: VecDeque<Work>,
    /// Sent, waiting for their answers, in order.
    pub(super) sent: VecDeque<Work>,
    /// Failed transiently, retried once their backoff has passed.
    pub(super) retries: Vec<(tokio::time::Instant, Work)>,
    pub(super) successes: Vec<Success>,
    /// A commit (with the next claim) under way while the worker answers
    /// the rest of the batch.
    pub(super) committing: Option<CommitFuture>,
    pub(super) kill_tx: mpsc::UnboundedSender<(i64, KillReason)>,
    pub(super) kill_rx: mpsc::UnboundedReceiver<(i64, KillReason)>,
    /// Since when the oldest sent item has been the worker's to answer.
    pub(super) head_since: Instant,
    /// The current worker answered at least once.
    pub(super) answered: bool,
    /// The key of the current worker's last answer (to name a second one).
    pub(super) last_answered: Option<String>,
    /// Stdout lines of this slot's workers that were not part of the
    /// protocol, and the last of them.
    pub(super) strays: u64,
    /// Every place in flight of the pool was taken, some by this slot:
    /// ask again once no more than this many of its calls are unanswered
    /// (each answer gives a place back), not once per answer.
    pub(super) pool_ask_at: Option<usize>,
    pub(super) last_stray: String,
    /// The items on which workers broke before an answer could be
    /// recorded, since the last recorded answer.
    pub(super) failed_starts: Vec<i64>,
    /// Items to claim next time, and the running mean time per item.
    pub(super) batch: usize,
    pub(super) per_item: Option<Duration>,
}

/// How a batch ended.
enum Ended {
    /// Everything claimed reached an outcome.
    Drained,
    /// The run stops: what was left has been released.
    Stopped,
    /// The worker is broken; the slot gives up.
    GaveUp,
}

/// Claims and processes items until none is left or the cycle stops.
/// `index` numbers it among the cycle's slots (its worker's record).
pub async fn run_slot(cycle: Arc<Cycle>, index: u32) -> Result<(), StoreError> {
    let mut slot = Slot::new(cycle, index);
    let result = slot.run(None).await;
    slot.finish().await;
    result
}

/// `run --key`: the one named item, in a persistent worker.
pub async fn run_key(cycle: Arc<Cycle>, index: u32, key: String) -> Result<(), StoreError> {
    let claim = claim_key(&cycle, key).await?;
    let mut slot = Slot::new(cycle, index);
    let result = slot.run(Some(claim)).await;
    slot.finish().await;
    result
}

impl Slot {
    fn new(cycle: Arc<Cycle>, index: u32) -> Slot {
        let (kill_tx, kill_rx) = mpsc::unbounded_channel();
        Slot {
            place: cycle.idle.place(),
            cycle,
            index,
            worker: None,
            queue: VecDeque::new(),
            sent: VecDeque::new(),
            retries: Vec::new(),
            successes: Vec::new(),
            committing: None,
            kill_tx,
            kill_rx,
            head_since: Instant::now(),
            answered: false,
            last_answered: None,
            strays: 0,
            pool_ask_at: None,
            last_stray: String::new(),
            failed_starts: Vec::new(),
            batch: 1,
            per_item: None,
        }
    }

    /// With `only`, processes that one claim (`--key`) and claims nothing.
    async fn run(&mut self, only: Option<Claim>) -> Result<(), StoreError> {
        let single = only.is_some();
        let mut next: Vec<Claim> = only.into_iter().collect();
        let mut tickets = Vec::new();
        loop {
            let mut pass = Pass::None;
            if next.is_empty() {
                if single {
                    return Ok(());
                }
                let seen = self.place.seen();
                (next, pass) = self.claim().await?;
                if next.is_empty() {
                    // Nothing now; while another slot works, claims may
                    // come back (its worker waits with it).
                    if self.place.wait(seen).await {
                        continue;
                    }
                    return Ok(());
                }
            }
            self.enqueue(
                std::mem::take(&mut next),
                std::mem::take(&mut tickets),
                pass,
            );
            let ended = self.work().await?;
            let chain = matches!(ended, Ended::Drained) && !single;
            (next, tickets) = self.commit(chain).await?;
            if !matches!(ended, Ended::Drained) {
                return Ok(());
            }
        }
    }

    /// Registers an item so a stop or a lost lease reaches this slot.
    pub(super) fn track(&self, claim: &Claim) {
        self.cycle
            .track(claim.item_id, Killer::Slot(self.kill_tx.clone()));
    }

    /// The claim leaves the slot (an outcome, a release, a lost lease).
    pub(super) fn untrack(&self, claim: &Claim) {
        self.cycle.untrack(claim.item_id);
        self.cycle.retry_begins(claim.item_id);
    }

    /// Queues claimed items for the worker; `tickets` are the places in
    /// the pool the first of them were given with their claim, `first` is
    /// where the first one's request stands at the gate.
    pub(super) fn enqueue(&mut self, claims: Vec<Claim>, tickets: Vec<Ticket>, first: Pass) {
        let mut tickets = tickets.into_iter();
        for (i, claim) in claims.into_iter().enumerate() {
            self.track(&claim);
            self.queue.push_back(Work {
                attempt: claim.attempt,
                op_id: claim.op_id.clone(),
                op_ids: 0,
                retries_done: 0,
                pass: if i == 0 { first } else { Pass::None },
                ticket: tickets.next(),
                span: Span::default(),
                cancelled: false,
                claim,
            });
        }
    }

    /// Runs the claimed items to their outcomes.
    async fn work(&mut self) -> Result<Ended, StoreError> {
        let cycle = self.cycle.clone();
        let mut stop = cycle.stop_tx.subscribe();
        let mut holds = cycle.hold_changes();
        let mut places = cycle.pool.as_ref().map(|p| p.places_back());
        let mut limits = cycle.pool.as_ref().map(|p| p.limits());
        loop {
            match cycle.stopping() {
                Some((Signal::Immediate, StopReason::LockLost)) => {
                    self.abandon().await?;
                    return Ok(Ended::Stopped);
                }
                Some((Signal::Immediate, _)) => {
                    self.release_all().await?;
                    return Ok(Ended::Stopped);
                }
                Some((Signal::Graceful, _)) => {
                    // Nothing new starts; what was sent may finish (grace).
                    self.release_waiting().await?;
                    if self.sent.is_empty() {
                        return Ok(Ended::Stopped);
                    }
                }
                _ => self.promote_retries().await?,
            }
            if self.queue.is_empty() && self.sent.is_empty() && self.committing.is_some() {
                self.settle().await?;
                continue;
            }
            if self.queue.is_empty() && self.sent.is_empty() {
                let Some(first) = self.retries.iter().map(|(t, _)| *t).min() else {
                    return Ok(Ended::Drained);
                };
                // Nothing to wait for but backoffs: make the successes
                // durable meanwhile rather than hold them. A cancel or a
                // lost lease of a waiting retry is heard at once.
                self.commit(false).await?;
                tokio::select! {
                    () = tokio::time::sleep_until(first) => {}
                    _ = stop.changed() => {}
                    Some((id, reason)) = self.kill_rx.recv() => {
                        if let Some(ended) = self.killed(id, reason).await? {
                            return Ok(ended);
                        }
                    }
                }
                continue;
            }
            if !self.queue.is_empty() && self.worker.is_none() && !self.start_worker().await? {
                return Ok(Ended::GaveUp);
            }
            // Each request is a call: it has its place in the pool (asked
            // for every queued call at once) and passes the gate before it
            // is written.
            let mut gate_opens = None;
            let mut wait_place = false;
            if let Some(worker) = self.worker.as_mut() {
                while let Some(front) = self.queue.front_mut() {
                    if cycle.pool.is_some() && front.ticket.is_none() {
                        if self.pool_ask_at.is_some_and(|n| self.sent.len() > n) {
                            break;
                        }
                        self.pool_ask_at = None;
                        let claims: Vec<&Claim> = self
                            .queue
                            .iter()
                            .take_while(|w| w.ticket.is_none())
                            .map(|w| &w.claim)
                            .collect();
                        let asked = claims.len();
                        if let Some(p) = places.as_mut() {
                            p.borrow_and_update();
                        }
                        let (tickets, wait) = cycle.pool_try(&claims).await?;
                        let in_flight = self.sent.len() + tickets.len();
                        let full = wait.as_ref().is_some_and(PoolWait::for_place);
                        if full && tickets.len() < asked && in_flight > 0 {
                            self.pool_ask_at = Some(in_flight / 2);
                        }
                        if tickets.is_empty() && self.pool_ask_at.is_some() {
                            break;
                        }
                        if tickets.is_empty() {
                            // Every place taken: asks again when this
                            // runner gives one back, or at the poll for
                            // those of other runners.
                            wait_place = full;
                            let until = wait.map_or(now_ms() + 200, |w| w.until);
                            gate_opens = Some(instant_at(until));
                            break;
                        }
                        for (w, t) in self.queue.iter_mut().zip(tickets) {
                            w.ticket = Some(t);
                        }
                    }
                    let Some(front) = self.queue.front_mut() else {
                        break;
                    };
                    if let Err(at) = cycle.gate.admit(&mut front.pass) {
                        gate_opens = Some(at);
                        break;
                    }
                    let mut w = self.queue.pop_front().expect("the front request");
                    if self.sent.is_empty() {
                        self.head_since = Instant::now();
                    }
                    w.span = worker.send(&Request {
                        key: &w.claim.key,
                        label: &w.claim.label,
                        attempt: w.attempt,
                        op_id: w.op_id.as_deref(),
                        run_id: cycle.run_id,
                        payload: &w.claim.payload,
                    });
                    self.sent.push_back(w);
                }
            }
            // Half the batch answered: commit those and claim the next
            // batch while the worker answers the rest.
            if self.committing.is_none()
                && self.queue.is_empty()
                && !self.successes.is_empty()
                && self.successes.len() >= self.sent.len()
                && cycle.chain
                && cycle.stopping().is_none()
            {
                self.committing = self.begin_commit(true).await;
            }
            // An answer waits for the rest of its batch no longer than a
            // batch should take: not behind a slow call, nor through a
            // queue's wait for the gate or the pool (minutes, for a limit
            // per day), where a crash would pay for it again and every
            // view counted it in flight.
            let flush_at = self
                .successes
                .first()
                .map(|s| instant_at(s.event.at + FLUSH_MS));
            if self.committing.is_none()
                && flush_at.is_some_and(|t| t <= tokio::time::Instant::now())
            {
                self.committing = self.begin_commit(false).await;
            }
            let timeout = self.timeout();
            let Some(worker) = self.worker.as_mut() else {
                continue;
            };
            let deadline = tokio::time::Instant::from_std(self.head_since + timeout);
            let committing = self.committing.as_mut();
            let has_commit = committing.is_some();
            let committed = async {
                match committing {
                    Some(f) => f.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                out = committed, if has_commit => {
                    self.committing = None;
                    let (next, tickets) = self.end_commit(out?).await?;
                    self.enqueue(next, tickets, Pass::None);
                }
                () = tokio::time::sleep_until(gate_opens.unwrap_or(deadline)), if gate_opens.is_some() => {}
                () = tokio::time::sleep_until(flush_at.unwrap_or(deadline)), if !has_commit && flush_at.is_some() => {}
                () = place_given_back(places.as_mut()), if wait_place => {}
                () = limits_changed(limits.as_mut()), if gate_opens.is_some() || wait_place => {}
                _ = holds.changed() => {}
                line = worker.next() => {
                    let gave_up = match line {
                        Ok(Line::OpId { key, op_id }) => self.op_id(&key, op_id).await?,
                        Ok(Line::Answer { key, obj, written }) => {
                            let answer = classify::answer(&obj, written.as_ref(), &cycle.rules);
                            self.answered(&key, answer).await?
                        }
                        Ok(Line::Stray(line)) => {
                            self.stray(line).await;
                            false
                        }
                        Err(answer) => self.broken(answer).await?,
                    };
                    if gave_up {
                        return Ok(Ended::GaveUp);
                    }
                }
                () = tokio::time::sleep_until(deadline), if !self.sent.is_empty() => {
                    let unended = worker.unended();
                    if self.broken(Answer::timed_out(timeout, unended.as_deref())).await? {
                        return Ok(Ended::GaveUp);
                    }
                }
                Some((id, reason)) = self.kill_rx.recv() => {
                    if let Some(ended) = self.killed(id, reason).await? {
                        return Ok(ended);
                    }
                }
                _ = stop.changed() => {}
            }
        }
    }

    /// How long the item at the head may take: `item_timeout`, and the
    /// worker's start-up (`start_timeout`) for the first one a fresh
    /// worker answers.
    fn timeout(&self) -> Duration {
        let cfg = &self.cycle.cfg;
        match cfg.start_timeout.filter(|_| !self.answered) {
            Some(start) => cfg.item_timeout + start,
            None => cfg.item_timeout,
        }
    }

    /// Starts the worker (after a pause if the last ones died at once).
    /// False when the slot gave up.
    async fn start_worker(&mut self) -> Result<bool, StoreError> {
        let cycle = self.cycle.clone();
        if !self.failed_starts.is_empty() {
            let wait =
                Duration::from_millis(250) * 2u32.pow(self.failed_starts.len().min(6) as u32);
            let mut stop = cycle.stop_tx.subscribe();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return Ok(true),
            }
        }
        let clean = |s: &str| s.replace('\0', "\\x00");
        let env = vec![
            ("NIGHTSHIFT_BATCH", clean(&cycle.batch)),
            ("NIGHTSHIFT_RUN_ID", cycle.run_id.to_string()),
            // Lets a later run find this worker if we die (see `orphans`).
            (
                crate::runner::child::orphans::RUNNER_VAR,
                cycle.runner_id.clone(),
            ),
        ];
        match Persistent::start_reporting(
            &cycle.worker,
            cycle.program.as_deref(),
            cycle.work_dir.as_deref(),
            &env,
            &cycle.stderr_reports,
        ) {
            Ok(w) => {
                if let Some(pid) = w.pid() {
                    cycle.record_worker(self.index, pid, None);
                }
                self.worker = Some(w);
                self.answered = false;
                self.last_answered = None;
                Ok(true)
            }
            // No start would do better (gone, not executable): the run
            // stops, and what waits for the worker goes back uncounted.
            Err(e) if crate::runner::child::cannot_start(&e) => {
                let why = crate::runner::child::startable::spawn_error(
                    &cycle.worker[0],
                    cycle.program.as_deref(),
                    cycle.work_dir.as_deref(),
                    &e,
                );
                cycle.request_stop(Signal::Graceful, StopReason::WorkerCannotStart(why));
                Ok(true)
            }
            Err(e) => {
                let answer = Answer::spawn_failed(&cycle.worker[0], &e);
                // Charge it to the first item waiting, as process mode would.
                if let Some(w) = self.queue.pop_front() {
                    self.sent.push_front(w);
                }
                Ok(!self.broken(answer).await?)
            }
        }
    }

    /// The worker broke (died, hung past the timeout, or broke the
    /// protocol): the item at the head gets `answer`, the worker is killed
    /// (with its whole process group) and the other sent items wait for
    /// the next one. A head whose request the worker never took (it closed
    /// its stdin, or exited, before reading it) was never its call: it
    /// waits for the next worker too, its attempt not counted, and the log
    /// says why. Not so for a worker that never answered: its head carries
    /// the failure, so a worker that cannot work fails items visibly (and
    /// three in a row make the slot give up). True when the slot gave up.
    async fn broken(&mut self, answer: Answer) -> Result<bool, StoreError> {
        // Asked before the kill: what it never read is still in its pipe.
        let untaken_from = self
            .worker
            .as_ref()
            .map_or(u64::MAX, Persistent::untaken_from);
        if let Some(mut w) = self.worker.take() {
            w.kill().await;
        }
        let message = match &answer {
            Answer::Failed { message, .. } => message.clone(),
            Answer::Done { .. } => String::new(),
        };
        let cycle = self.cycle.clone();
        let untaken = self.answered
            && self
                .sent
                .front()
                .is_some_and(|h| h.span.start >= untaken_from);
        let head = if untaken { None } else { self.sent.pop_front() };
        if let Some(h) = self.sent.front().filter(|_| untaken) {
            let others = self.sent.len() - 1;
            let event = cycle
                .new_event(
                    EventKind::WorkerRestarted,
                    format!(
                        "{message}; it never took this item's request{}: a fresh worker takes {}, attempts not counted",
                        if others > 0 { format!(" (nor the {others} sent after it)") } else { String::new() },
                        if others > 0 { "them" } else { "it" }
                    ),
                )
                .key(&h.claim.key)
                .fields(json!({"message": message, "requests": others + 1}));
            cycle.event(event).await;
        } else if head.is_none()
            && let Answer::Failed { class, .. } = &answer
            && class == "ProtocolError"
        {
            // No item to carry it: the log does.
            cycle
                .event(cycle.new_event(EventKind::ProtocolError, message.clone()))
                .await;
        }
        if !self.answered
            && let Some(h) = &head
            && !self.failed_starts.contains(&h.claim.item_id)
        {
            self.failed_starts.push(h.claim.item_id);
        }
        self.resend_later().await;
        if let Some(mut head) = head {
            if head.cancelled {
                // Its worker was stopped on it: where the cancel said.
                self.untrack(&head.claim);
                cycle.pool_settle(&head.claim, head.attempt, head.ticket.take(), None, false);
                let_go(&cycle, &head.claim, CancelledWhile::Running).await;
            } else {
                let elapsed = self.head_since.elapsed();
                self.outcome(head, answer, elapsed).await?;
            }
        }
        if self.failed_starts.len() >= MAX_FAILED_STARTS {
            self.give_up(&message).await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The current worker is gone: what was sent to it and not answered
    /// goes to the next one, in order, before what waits; a request
    /// cancelled while the worker held it goes where its cancel said.
    pub(super) async fn resend_later(&mut self) {
        let cycle = self.cycle.clone();
        while let Some(mut w) = self.sent.pop_back() {
            if w.cancelled {
                self.untrack(&w.claim);
                cycle.pool_settle(&w.claim, w.attempt, w.ticket.take(), None, false);
                let_go(&cycle, &w.claim, CancelledWhile::Running).await;
            } else {
                self.queue.push_front(w);
            }
        }
    }

    /// The worker cannot be kept running: the items it failed keep their
    /// failures, the others go back to pending, and the slot stops.
    async fn give_up(&mut self, why: &str) -> Result<(), StoreError> {
        let cycle = self.cycle.clone();
        cycle
            .event(
                cycle
                    .new_event(
                        EventKind::WorkerFailed,
                        format!(
                            "the persistent worker failed on {} items in a row without an answer that could be recorded; this slot stops ({})",
                            self.failed_starts.len(), why
                        ),
                    )
                    .fields(json!({"message": why, "failed_starts": self.failed_starts.len()})),
            )
            .await;
        // Items waiting for a retry already had their (failed) attempt.
        for (_, w) in std::mem::take(&mut self.retries) {
            self.untrack(&w.claim);
            let message = bound_message(why);
            let failed = Failed {
                transient: true,
                class: "WorkerFailed",
                message: &message,
                retry_after: None,
            };
            let a = Attempt {
                number: w.attempt,
                retries_done: w.retries_done,
            };
            let v = verdict::settle(&failed, a, &Policy::of(&cycle.cfg), now_ms());
            record_failure(&cycle, &w.claim, a, &failed, v, None).await?;
        }
        self.release_waiting().await
    }

    /// An answer naming `key`: the oldest sent item's if it names it,
    /// else the worker is out of step. True when the slot gave up.
    async fn answered(&mut self, key: &str, answer: Answer) -> Result<bool, StoreError> {
        let outstanding = self.sent.iter().map(|w| w.claim.key.as_str());
        if let Err(why) = match_answer(key, outstanding, self.last_answered.as_deref()) {
            return self.broken(Answer::out_of_step(&why)).await;
        }
        let head = self.sent.pop_front().expect("a sent item");
        let elapsed = self.head_since.elapsed();
        self.head_since = Instant::now();
        self.answered = true;
        self.last_answered = Some(head.claim.key.clone());
        self.failed_starts.clear();
        self.per_item = Some(match self.per_item {
            None => elapsed,
            Some(avg) => (avg * 7 + elapsed) / 8,
        });
        self.stderr_report().await;
        if head.cancelled {
            self.discard(head, &answer).await;
        } else {
            self.outcome(head, answer, elapsed).await?;
        }
        Ok(false)
    }

    /// The answer of a request cancelled while its worker held it: not
    /// kept, the item goes where its cancel said; the call was made, so
    /// what it reported it cost and used counts.
    async fn discard(&mut self, mut w: Work, answer: &Answer) {
        let cycle = self.cycle.clone();
        self.untrack(&w.claim);
        cycle.pool_settle(&w.claim, w.attempt, w.ticket.take(), answer.usage(), false);
        let cost = match answer {
            Answer::Done { cost, .. } | Answer::Failed { cost, .. } => *cost,
        };
        count_cut_short(&cycle, &w.claim, cost).await;
        let_go(&cycle, &w.claim, CancelledWhile::Answered).await;
    }

    /// An `@nightshift` line on a worker's stderr, said once a run
    /// ([`Cycle::stderr_report`]).
    pub(super) async fn stderr_report(&mut self) {
        self.cycle.stderr_report().await;
    }

    /// A stdout line that is not part of the protocol: ignored, and
    /// counted in the log without flooding it (the first at once, the
    /// total when the slot ends).
    async fn stray(&mut self, line: String) {
        self.strays += 1;
        if self.strays == 1 {
            let cycle = self.cycle.clone();
            let event = cycle
                .new_event(
                    EventKind::StrayOutput,
                    format!(
                        "the persistent worker printed a stdout line that is not part of the protocol (ignored; log to stderr): {line}"
                    ),
                )
                .fields(json!({"count": 1, "line": line}));
            cycle.event(event).await;
        }
        self.last_stray = line;
    }

    /// Acts on an item's answer: a success waits for the batch's commit, a
    /// transient failure is retried after its backoff, any other is
    /// recorded at once.
    async fn outcome(
        &mut self,
        mut w: Work,
        answer: Answer,
        elapsed: Duration,
    ) -> Result<(), StoreError> {
        let cycle = self.cycle.clone();
        let done = matches!(answer, Answer::Done { .. });
        let line = cycle.pool_settle(&w.claim, w.attempt, w.ticket.take(), answer.usage(), done);
        match answer {
            Answer::Done {
                empty,
                result,
                cost,
                usage,
            } => {
                self.untrack(&w.claim);
                let event = NewEvent::new(
                    now_ms(),
                    &cycle.batch,
                    if empty {
                        EventKind::Empty
                    } else {
                        EventKind::Done
                    },
                    if empty { "done, empty result" } else { "done" },
                )
                .run(cycle.run_id)
                .key(&w.claim.key)
                .fields(
                    json!({"attempt": w.attempt, "ms": elapsed.as_millis() as u64, "cost": cost, "usage": usage.map(|u| json!({"input_tokens": u.input, "output_tokens": u.output}))}),
                );
                // Heard now, in order with the failures around it; its
                // done mark waits for the batch's commit.
                cycle.answered(None).await;
                self.successes.push(Success {
                    claim: w.claim,
                    outcome: if empty { Outcome::Empty } else { Outcome::Done },
                    result,
                    cost,
                    event,
                    usage: line,
                });
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
                    number: w.attempt,
                    retries_done: w.retries_done,
                };
                let Some(v) = judge_failure(&cycle, &w.claim, a, &failed, cost).await else {
                    self.untrack(&w.claim);
                    return Ok(());
                };
                if let Verdict::RetryNow { wait, .. } = v {
                    w.retries_done += 1;
                    self.retries.push((tokio::time::Instant::now() + wait, w));
                    return Ok(());
                }
                self.untrack(&w.claim);
                record_failure(&cycle, &w.claim, a, &failed, v, cost).await?;
            }
        }
        Ok(())
    }

    /// Retries whose backoff has passed start their next attempt.
    async fn promote_retries(&mut self) -> Result<(), StoreError> {
        if self.retries.is_empty() {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.retries = wait;
        let cycle = self.cycle.clone();
        for (_, mut w) in ready {
            match begin_retry(&cycle, &w.claim).await? {
                Some(next) => {
                    w.attempt = next;
                    self.queue.push_back(w);
                }
                None => {
                    self.untrack(&w.claim);
                    let_go(&cycle, &w.claim, CancelledWhile::WaitingToRetry).await;
                }
            }
        }
        Ok(())
    }

    /// Stores an op id at once (a later attempt gets it back) on the sent
    /// item it names; naming any other puts the worker out of step. True
    /// when the slot gave up.
    async fn op_id(&mut self, key: &str, op: String) -> Result<bool, StoreError> {
        let outstanding = self.sent.iter().map(|w| w.claim.key.as_str());
        let pos = match match_op_id(key, outstanding, self.last_answered.as_deref()) {
            Ok(pos) => pos,
            Err(why) => return self.broken(Answer::out_of_step(&why)).await,
        };
        let cycle = self.cycle.clone();
        let w = &mut self.sent[pos];
        if w.op_id.as_deref() == Some(op.as_str())
            || w.op_ids >= crate::runner::child::output::MAX_OP_IDS
        {
            return Ok(false);
        }
        w.op_ids += 1;
        w.op_id = Some(op.clone());
        store_op_id(&cycle, &w.claim, op).await;
        Ok(false)
    }
}
