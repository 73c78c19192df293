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

mod answers;
mod ending;
mod work;
mod worker;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::claim::claim_key;
use super::pipeline::{CommitFuture, Success};
use crate::model::Claim;
use crate::runner::child::KillReason;
use crate::runner::child::persistent::{Persistent, Span};
use crate::runner::cycle::{Cycle, Killer};
use crate::runner::gate::Pass;
use crate::runner::pool::Ticket;
use crate::store::StoreError;

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
    /// Every place in flight of the pool was taken, some by this slot:
    /// ask again once no more than this many of its calls are unanswered
    /// (each answer gives a place back), not once per answer.
    pub(super) pool_ask_at: Option<usize>,
    /// The items on which workers broke before an answer could be
    /// recorded, since the last recorded answer.
    pub(super) failed_starts: Vec<i64>,
    /// Items to claim next time, and the running mean time per item.
    pub(super) batch: usize,
    pub(super) per_item: Option<Duration>,
}

/// A claim leaves its slot: no longer in flight nor waiting to retry.
pub(super) fn untrack(cycle: &Cycle, claim: &Claim) {
    cycle.untrack(claim.item_id);
    cycle.retry_begins(claim.item_id);
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
            pool_ask_at: None,
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
        untrack(&self.cycle, claim);
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
}
