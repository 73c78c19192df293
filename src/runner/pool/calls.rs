//! A cycle's calls through its pool: asking places for them (alone or
//! with their claim), waiting for one, settling each attempt, and holding
//! the pool on a retry-after.

use serde_json::json;

use super::{Asked, Ticket, limits_changed, place_given_back};
use crate::model::waiting::{POOL_HOLD, held_words};
use crate::model::{Claim, EventKind, Millis, NewEvent};
use crate::runner::cycle::Cycle;
use crate::runner::usage::Tokens;
use crate::store::{AttemptUsage, PoolHold, PoolWait, StoreError};
use crate::util::time::{instant_at, now_ms, rfc3339, utc_clock};

impl Cycle {
    /// Asks the pool for the places of `claims`' calls, in order (one
    /// transaction). The tickets of those that may start now, and when to
    /// ask for the rest.
    pub(in crate::runner) async fn pool_try(
        &self,
        claims: &[&Claim],
    ) -> Result<(Vec<Ticket>, Option<PoolWait>), StoreError> {
        let Some(pool) = &self.pool else {
            return Ok((Vec::new(), None));
        };
        let now = now_ms();
        let (calls, ignored) = pool.calls(claims.iter().copied(), now);
        let spec = pool.spec();
        let asked = calls.clone();
        let admission = self
            .writer
            .call(move |s| s.pool_admit(&spec, &asked, now_ms()))
            .await?;
        pool.deferred_by(&calls, &admission);
        Ok(self
            .admitted(Asked {
                calls,
                admission,
                ignored,
            })
            .await)
    }

    /// The tickets of the calls an admission let start, and when to ask
    /// for the rest; a wait that is news is logged as an event.
    pub(in crate::runner) async fn admitted(
        &self,
        asked: Asked,
    ) -> (Vec<Ticket>, Option<PoolWait>) {
        let Some(pool) = &self.pool else {
            return (Vec::new(), None);
        };
        let Asked {
            calls,
            admission,
            ignored,
        } = asked;
        for ignored in pool.newly_ignored(ignored) {
            self.notice(&self.notices.estimates, ignored).await;
        }
        let tickets = calls
            .into_iter()
            .take(admission.admitted)
            .map(|c| Ticket {
                estimate: c.estimate,
            })
            .collect();
        if pool.note(admission.wait.as_ref())
            && let Some(w) = &admission.wait
        {
            let event = if w.dimension != POOL_HOLD {
                let message = format!(
                    "waiting for pool {}: {}, next slot {}",
                    pool.name(),
                    w.dimension,
                    utc_clock(w.until, now_ms())
                );
                Some(self.new_event(EventKind::RateLimit, message).fields(json!({
                    "pool": pool.name(),
                    "dimension": w.dimension,
                    "until": rfc3339(w.until),
                })))
            } else if self
                .gate
                .retry_after_until()
                .is_some_and(|own| own >= w.until)
            {
                // The batch's own hold, logged when it was set, says it
                // already: the same answer held both, most often.
                None
            } else {
                Some(self.pool_hold_event(&pool.name(), w.until).await)
            };
            if let Some(event) = event {
                self.event(event).await;
            }
        }
        (tickets, admission.wait)
    }

    /// The `hold` event of a pool held by a retry-after until `until`: a
    /// hold of every call of the batch, in the words `status` says it with
    /// (`held_words`), and whose answer asked for it (the pool's hold
    /// names it: another batch's item, as `status`'s pool line says). It
    /// was a `rate-limit` event, as if the pool were short of room.
    async fn pool_hold_event(&self, name: &str, until: Millis) -> NewEvent {
        let now = now_ms();
        let asked = {
            let name = name.to_string();
            self.writer.call(move |s| s.pool_hold(&name, now)).await
        };
        let asked = asked.ok().flatten();
        let from = asked.as_ref().map(|h| match h.source() {
            Some(item) => format!("{item} of {}", h.batch),
            None => h.batch.clone(),
        });
        let mut message = format!(
            "rate limited: every call of the batch {}",
            held_words(Some(until), Some(name), now)
        );
        if let Some(from) = &from {
            message.push_str(&format!(", asked by {from}"));
        }
        self.new_event(EventKind::Hold, message).fields(json!({
            "pool": name,
            "until": rfc3339(until),
            "from_batch": asked.as_ref().map(|h| &h.batch),
            "from_key": asked.as_ref().and_then(|h| h.key.as_ref()),
        }))
    }

    /// Waits for the pool to give the call of `claim` its place. `Ok(None)`
    /// when the batch has no pool; `Err(None)` when the cycle stops first,
    /// `Err(Some(why))` when the claim is stopped while it waits (`killed`:
    /// a cancel, its lease lost), its call never started. Between asks,
    /// not during one: a place given is never dropped on the floor.
    pub(in crate::runner) async fn pool_enter(
        &self,
        claim: &Claim,
        killed: &mut tokio::sync::oneshot::Receiver<crate::runner::child::KillReason>,
    ) -> Result<Option<Ticket>, Option<crate::runner::child::KillReason>> {
        if self.pool.is_none() {
            return Ok(None);
        }
        let mut stop = self.stop_tx.subscribe();
        let mut back = self.pool.as_ref().map(|p| p.places_back());
        let mut limits = self.pool.as_ref().map(|p| p.limits());
        loop {
            if self.stopping().is_some() {
                return Err(None);
            }
            if let Some(b) = back.as_mut() {
                b.borrow_and_update();
            }
            let mut for_room = false;
            let wait = match self.pool_try(&[claim]).await {
                Ok((mut tickets, wait)) => match tickets.pop() {
                    Some(t) => return Ok(Some(t)),
                    None => {
                        for_room = wait.as_ref().is_some_and(PoolWait::ends_at_settlement);
                        wait.map_or(now_ms() + 200, |w| w.until)
                    }
                },
                // A store that cannot be reached now: ask again shortly
                // (the heartbeat notices a store that is gone).
                Err(e) => {
                    tracing::warn!("asking pool for a place: {e}");
                    now_ms() + 1000
                }
            };
            tokio::select! {
                () = tokio::time::sleep_until(instant_at(wait)) => {}
                () = place_given_back(back.as_mut()), if for_room => {}
                () = limits_changed(limits.as_mut()) => {}
                _ = stop.changed() => {}
                reason = &mut *killed => return Err(reason.ok()),
            }
        }
    }

    /// Settles an attempt: its usage recorded (per attempt, run and pool)
    /// and, with a ticket, its reservation moved to what it drew and its
    /// place given back. Without waiting, and without a transaction of its
    /// own: the settlement joins the ones the writer has not reached yet
    /// ([`Settling`](super::Settling)), and all of them ride in the writer's next group
    /// (`Writer::defer`), brought by the slots' claims and completions. Nothing to do without a pool
    /// or reported usage. For an attempt that is `done`, its line for the
    /// item is returned, to go with its done mark (`Completion::usage`):
    /// the item's row is written then anyway.
    pub(in crate::runner) fn pool_settle(
        &self,
        claim: &Claim,
        attempt: u32,
        ticket: Option<Ticket>,
        usage: Option<Tokens>,
        done: bool,
    ) -> Option<String> {
        // Nothing to record: no usage and no call of a pool (every pool's
        // call counts in its calls per minute and today).
        if usage.is_none() && ticket.is_none() {
            return None;
        }
        let placed = self.pool.as_ref().is_some_and(|p| p.bounds_places());
        let row = AttemptUsage {
            batch: self.batch.clone(),
            run_id: self.run_id,
            key: claim.key.clone(),
            attempt: i64::from(attempt),
            pool: self.pool.as_ref().map(|p| p.name()),
            place: self
                .pool
                .as_ref()
                .filter(|_| placed && ticket.is_some())
                .map(|p| p.runner.clone()),
            at: now_ms(),
            estimate: ticket.as_ref().map_or(0, |t| t.estimate),
            input_tokens: usage.and_then(|u| u.input),
            output_tokens: usage.and_then(|u| u.output),
            with_done: done,
        };
        let line = if done { row.line() } else { None };
        // A place in flight back, or the tokens of a reservation the call
        // did not use (its usage settles it).
        let gives_room = ticket.is_some() && (placed || usage.is_some());
        if let Some(batch) = self.settling.push(row) {
            let spec = self.pool.as_ref().map(|p| p.spec());
            self.writer.defer(move |s| {
                let rows = batch.take();
                s.settle_usage(spec.as_ref(), &rows)
            });
        }
        if gives_room {
            self.room_given_back();
        }
        line
    }

    /// Wakes the slots waiting for a place in flight or for tokens: a
    /// settlement gave room back.
    fn room_given_back(&self) {
        if let Some(p) = &self.pool {
            p.back.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// A retry-after answer holds every batch of the pool until `until`
    /// (never shortens a hold).
    pub(in crate::runner) async fn hold_pool(&self, claim: &Claim, until: Millis) {
        let Some(pool) = &self.pool else {
            return;
        };
        let (name, hold) = (
            pool.name(),
            PoolHold {
                until,
                batch: self.batch.clone(),
                key: Some(claim.key.clone()),
                // Read with the hold while the item is kept.
                label: None,
            },
        );
        let _ = self
            .writer
            .call(move |s| s.set_pool_hold(&name, &hold))
            .await;
    }
}
