//! A batch's loop: requests sent through the pool and the gate, half a
//! batch committed while the worker answers the rest, and every answer,
//! deadline, kill and stop heard in one `select!`.

use std::time::{Duration, Instant};

use super::super::pipeline::BATCH_TIME;
use super::{Ended, Slot};
use crate::model::Claim;
use crate::runner::child::persistent::{Line, Request};
use crate::runner::classify::{self, Answer};
use crate::runner::cycle::{Signal, StopReason};
use crate::runner::gate::Pass;
use crate::runner::pool::{limits_changed, place_given_back};
use crate::store::{PoolWait, StoreError};
use crate::util::time::{instant_at, now_ms};

/// How long an answer may wait for its commit (its event's time on):
/// `BATCH_TIME`, a batch's work.
const FLUSH_MS: i64 = BATCH_TIME.as_millis() as i64;

impl Slot {
    /// Runs the claimed items to their outcomes.
    pub(super) async fn work(&mut self) -> Result<Ended, StoreError> {
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
                            // No room: asks again when this runner
                            // gives a place or unused tokens back, or at
                            // the slot named (the poll for another
                            // runner's places).
                            wait_place = wait.as_ref().is_some_and(PoolWait::ends_at_settlement);
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
}
