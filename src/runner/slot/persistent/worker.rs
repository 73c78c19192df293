//! The slot's worker: started (with a pause after failed starts), and
//! what happens when it breaks: the head gets the failure, the rest go
//! to a fresh worker, and three failed starts in a row give up.

use std::time::Duration;

use serde_json::json;

use super::super::record::{let_go, record_failure};
use super::Slot;
use crate::model::EventKind;
use crate::runner::child::persistent::Persistent;
use crate::runner::classify::{Answer, bound_message};
use crate::runner::cycle::{Signal, StopReason};
use crate::runner::verdict::{self, Attempt, Failed, Policy};
use crate::store::{CancelledWhile, StoreError};
use crate::util::time::now_ms;

/// A worker that dies, hangs or gets out of step on this many different
/// items in a row before an answer could be recorded is broken: the slot
/// gives up rather than spin (a worker that never sends `key` ends here).
/// (One poison item that kills every worker it meets only fails itself.)
const MAX_FAILED_STARTS: usize = 3;

impl Slot {
    /// Starts the worker (after a pause if the last ones died at once).
    /// False when the slot gave up.
    pub(super) async fn start_worker(&mut self) -> Result<bool, StoreError> {
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
            &cycle.notices.stderr_reports(),
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
    pub(super) async fn broken(&mut self, answer: Answer) -> Result<bool, StoreError> {
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
}
