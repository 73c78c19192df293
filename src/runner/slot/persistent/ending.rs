//! How a persistent slot lets its items go: a stop, a lost lease or a
//! cancel, the end of a run, a lost lock, and the worker's own end.

use std::time::Duration;

use super::super::record::{let_go, release};
use super::{Ended, Slot, Work};
use crate::runner::child::KillReason;
use crate::store::{CancelledWhile, StoreError};

impl Slot {
    /// A stop, a lost lease or a cancel reached one of our items. One not
    /// yet written to the worker is taken back (it never reaches it); the
    /// worker is stopped only when it may be on the item, or for a lost
    /// lease (another runner may be running it): the rest it was sent go
    /// to the next worker. A cancelled request the worker holds behind
    /// another item is left to it, its answer not kept (`Work::cancelled`).
    pub(super) async fn killed(
        &mut self,
        id: i64,
        reason: KillReason,
    ) -> Result<Option<Ended>, StoreError> {
        match reason {
            KillReason::Shutdown => {
                self.release_all().await?;
                Ok(Some(Ended::Stopped))
            }
            KillReason::LeaseLost | KillReason::Cancelled => {
                let cycle = self.cycle.clone();
                let lost = if let Some(pos) = self.sent.iter().position(|w| w.claim.item_id == id) {
                    let span = self.sent[pos].span;
                    if self.worker.as_mut().is_some_and(|w| w.unsend(span)) {
                        for later in self.sent.iter_mut().skip(pos + 1) {
                            later.span = later.span.after_unsent(span);
                        }
                        self.sent
                            .remove(pos)
                            .map(|w| (w, CancelledWhile::NotStarted))
                    } else if pos > 0 && reason == KillReason::Cancelled {
                        self.sent[pos].cancelled = true;
                        None
                    } else {
                        if let Some(mut w) = self.worker.take() {
                            w.kill().await;
                        }
                        let lost = self.sent.remove(pos);
                        self.resend_later().await;
                        lost.map(|w| (w, CancelledWhile::Running))
                    }
                } else if let Some(pos) = self.queue.iter().position(|w| w.claim.item_id == id) {
                    self.queue
                        .remove(pos)
                        .map(|w| (w, CancelledWhile::NotStarted))
                } else if let Some(pos) =
                    self.retries.iter().position(|(_, w)| w.claim.item_id == id)
                {
                    Some((self.retries.remove(pos).1, CancelledWhile::WaitingToRetry))
                } else {
                    None
                };
                if let Some((w, was)) = lost {
                    self.untrack(&w.claim);
                    let_go(&cycle, &w.claim, was).await;
                }
                Ok(None)
            }
        }
    }

    /// The run stops now: the worker is stopped and every item without an
    /// outcome goes back to pending.
    pub(super) async fn release_all(&mut self) -> Result<(), StoreError> {
        self.settle().await?;
        if let Some(mut w) = self.worker.take() {
            w.kill().await;
        }
        self.resend_later().await;
        self.release_waiting().await
    }

    /// The lock is lost: our claims are the taker's to take back (and to
    /// log as taken back from this run), not ours to give back as "not
    /// started" while its worker may have done them. Stops the worker and
    /// lets them go.
    pub(super) async fn abandon(&mut self) -> Result<(), StoreError> {
        self.settle().await?;
        if let Some(mut w) = self.worker.take() {
            w.kill().await;
        }
        let mut left: Vec<Work> = self.sent.drain(..).chain(self.queue.drain(..)).collect();
        left.extend(self.retries.drain(..).map(|(_, w)| w));
        for w in &mut left {
            self.untrack(&w.claim);
            self.cycle
                .pool_settle(&w.claim, w.attempt, w.ticket.take(), None, false);
        }
        Ok(())
    }

    /// Items not started (cut short: their attempt does not count) and
    /// items waiting for a retry (their failed attempt counts) go back to
    /// pending.
    pub(super) async fn release_waiting(&mut self) -> Result<(), StoreError> {
        self.settle().await?;
        let cycle = self.cycle.clone();
        for mut w in std::mem::take(&mut self.queue) {
            self.untrack(&w.claim);
            // Never sent, or sent to a worker that was stopped: its
            // reservation stands, its place in flight is given back.
            cycle.pool_settle(&w.claim, w.attempt, w.ticket.take(), None, false);
            release(&cycle, &w.claim, true).await?;
        }
        for (_, w) in std::mem::take(&mut self.retries) {
            self.untrack(&w.claim);
            release(&cycle, &w.claim, false).await?;
        }
        Ok(())
    }

    /// The slot ends: its worker is stopped (the run's end counts what it
    /// printed that was not read).
    pub(super) async fn finish(&mut self) {
        // A last one, printed after the slot's last answer was read.
        self.stderr_report().await;
        self.stop_worker().await;
    }

    /// Closes the worker's stdin (its cue to exit), then makes sure it and
    /// its process group are gone.
    pub(super) async fn stop_worker(&mut self) {
        if let Some(w) = self.worker.take() {
            w.shutdown(self.cycle.cfg.grace.min(Duration::from_secs(2)))
                .await;
        }
    }
}
