//! The gate every worker call passes, right before the worker is given the
//! item: first attempt or immediate retry, process mode or a persistent
//! worker's request. It waits out the batch's retry-after hold, then takes
//! a token of its rate limit. A call that is not made takes no token, so a
//! run with nothing to do ends at once.
//!
//! The hold lives in the store (later runs, other runners and every view
//! see it) and here; the heartbeat brings the store's into the run each
//! tick ([`Gate::sync`]): a hold lifted by `unpause`, or one another runner
//! of the batch was given.

use std::time::Duration;

use serde_json::json;
use tokio::sync::{Mutex, watch};
use tokio::time::Instant;

use super::cycle::Cycle;
use super::pace::Pacer;
use crate::duration::format_duration;
use crate::model::{Claim, EventKind, Hold, Millis};
use crate::store::StoreError;
use crate::util::time::{instant_at, now_ms, rfc3339, utc_clock};

/// The hold as this run knows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Held {
    until: Option<Millis>,
    /// Bumped by every hold this run sets (see [`Gate::sync`]).
    seq: u64,
    /// A budget reached: held until its window ends (`runner::budget`).
    /// The ledger, not the store's hold, says so: [`Gate::sync`] leaves it.
    budget: Option<Millis>,
}

/// Where a call stands at the gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pass {
    /// No token yet.
    #[default]
    None,
    /// The rate-limit token of this instant is reserved for it.
    Ticket(Instant),
}

pub struct Gate {
    held: watch::Sender<Held>,
    pacer: Option<Pacer>,
    /// Under a rate limit, fresh claims take turns: one claimed item at a
    /// time waits for its token, the other slots wait without a claim.
    turn: Mutex<()>,
}

impl Gate {
    pub fn new(pacer: Option<Pacer>, inherited: Option<&Hold>) -> Gate {
        let (held, _) = watch::channel(Held {
            until: inherited.map(|h| h.until),
            seq: 0,
            budget: None,
        });
        Gate {
            held,
            pacer,
            turn: Mutex::new(()),
        }
    }

    /// Until when the hold is still on, if it is.
    pub fn held_until(&self) -> Option<Millis> {
        let h = self.held.borrow();
        let now = now_ms();
        h.until.max(h.budget).filter(|t| *t > now)
    }

    /// Until when a retry-after holds the batch itself (not a budget), if
    /// it does.
    pub fn retry_after_until(&self) -> Option<Millis> {
        self.held.borrow().until.filter(|t| *t > now_ms())
    }

    /// Until when a reached budget holds the batch, if one does.
    pub fn budget_until(&self) -> Option<Millis> {
        self.held.borrow().budget.filter(|t| *t > now_ms())
    }

    /// Holds every call until `until`, the end of the latest reached
    /// budget's window, or no longer (`None`: none is reached, a budget
    /// raised in the config file among the reasons). The budgets' ledger
    /// decides it (`Cycle::budget_check`).
    pub fn hold_for_budget(&self, until: Option<Millis>) {
        self.held.send_if_modified(|h| {
            if h.budget == until {
                return false;
            }
            h.budget = until;
            true
        });
    }

    /// May the call start now? The one rule for every call: never while
    /// held (a token reserved meanwhile is given up: the call takes a new
    /// one after the hold), then only with a rate-limit token whose time
    /// has come (`Pacer::start`). `Err` says when to ask again.
    pub fn admit(&self, pass: &mut Pass) -> Result<(), Instant> {
        if let Some(until) = self.held_until() {
            *pass = Pass::None;
            return Err(instant_at(until));
        }
        let Some(pacer) = &self.pacer else {
            return Ok(());
        };
        let at = match *pass {
            Pass::Ticket(at) => at,
            Pass::None => pacer.reserve(),
        };
        *pass = Pass::Ticket(at);
        pacer.start(at)?;
        *pass = Pass::None;
        Ok(())
    }

    /// Under a rate limit: the token of the call about to be claimed for,
    /// and when it may start.
    fn reserve(&self) -> Option<Instant> {
        self.pacer.as_ref().map(Pacer::reserve)
    }

    /// Holds every call until `until` (never shortens a hold). True if it
    /// is longer than the one on.
    fn extend(&self, until: Millis) -> bool {
        self.held.send_if_modified(|h| {
            h.seq += 1;
            if h.until.is_some_and(|t| t >= until) {
                return false;
            }
            h.until = Some(until);
            true
        })
    }

    /// Marks a change of this run's own: a store read begun before it
    /// must not undo it.
    fn touch(&self) {
        self.held.send_modify(|h| h.seq += 1);
    }

    /// Which of this run's holds the gate has seen (see [`Gate::sync`]).
    pub fn seq(&self) -> u64 {
        self.held.borrow().seq
    }

    /// The store's hold, read after [`Gate::seq`] said `seq`: taken as the
    /// truth unless this run set a hold in between (the read may predate
    /// its write). So a hold lifted by `unpause` is lifted here, and one
    /// another runner was given holds this run too.
    pub fn sync(&self, seq: u64, stored: Option<&Hold>) {
        let until = stored.map(|h| h.until).filter(|t| *t > now_ms());
        self.held.send_if_modified(|h| {
            if h.seq != seq || h.until.filter(|t| *t > now_ms()) == until {
                return false;
            }
            h.until = until;
            true
        });
    }
}

/// How a call fared at the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Passed {
    /// It may start now.
    Go,
    /// The cycle stops first.
    Stopped,
    /// The batch is held (a retry-after, a budget reached) and the caller
    /// asked to hear it: it gives its claim back rather than keep it while
    /// no call may start, and claims again once the hold is over
    /// (`claim_through_gate`).
    Held,
}

impl Cycle {
    /// Waits at the gate until the call may start (see [`Gate::admit`]),
    /// unless the cycle stops first, or, with `give_back`, the batch is
    /// held (a first attempt's claim; a retry waits the hold out, its
    /// immediate retries counted).
    pub(super) async fn pass(&self, pass: &mut Pass, give_back: bool) -> Passed {
        let mut stop = self.stop_tx.subscribe();
        let mut changes = self.gate.held.subscribe();
        loop {
            if self.stopping().is_some() {
                return Passed::Stopped;
            }
            if give_back && self.gate.held_until().is_some() {
                return Passed::Held;
            }
            let Err(at) = self.gate.admit(pass) else {
                return Passed::Go;
            };
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                _ = changes.changed() => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Claims up to `n` items for calls to be made now. A hold is waited
    /// out first, without a claim (and not at all when nothing is pending).
    /// Under a rate limit the slots take turns: the first call's token is
    /// reserved once there is an item to call for, and its time waited for
    /// before this slot claims and the next one takes its turn; the ticket
    /// goes with the claims (the call still starts only through
    /// [`Cycle::pass`]). `None`: the lock is lost.
    pub(super) async fn claim_through_gate(
        &self,
        n: usize,
    ) -> Result<Option<(Vec<Claim>, Pass)>, StoreError> {
        let nothing = Ok(Some((Vec::new(), Pass::None)));
        if self.gate.held_until().is_some() {
            let batch = self.batch.clone();
            if self.writer.call(move |s| s.counts(&batch)).await?.pending == 0 {
                return nothing;
            }
            if !self.wait_out_hold().await {
                return nothing;
            }
        }
        let mut stop = self.stop_tx.subscribe();
        let turn = match &self.gate.pacer {
            Some(_) => tokio::select! {
                turn = self.gate.turn.lock() => Some(turn),
                _ = stop.changed() => return nothing,
            },
            None => None,
        };
        if self.stopping().is_some() {
            return nothing;
        }
        // Paced: the slot waits for its token before it claims, so no item
        // is held claimed (and counted in flight by every view) while its
        // call cannot start; it asks first whether there is anything to
        // claim (the oldest claimable item), so a batch with nothing left
        // ends without a token's wait.
        let mut pass = Pass::None;
        if turn.is_some() {
            let batch = self.batch.clone();
            let oldest = self.writer.call(move |s| s.oldest_pending(&batch)).await?;
            if oldest.is_none() {
                return nothing;
            }
            if let Some(at) = self.gate.reserve() {
                pass = Pass::Ticket(at);
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    _ = stop.changed() => return nothing,
                }
            }
            if self.stopping().is_some() {
                return nothing;
            }
        }
        let (batch, run) = (self.batch.clone(), self.run_id);
        let until = self.lease_until(now_ms());
        let Some(claims) = self
            .writer
            .call(move |s| s.claim(&batch, run, n, until, now_ms()))
            .await?
        else {
            return Ok(None);
        };
        drop(turn);
        Ok(Some((claims, pass)))
    }

    /// Waits while the batch is held. False when the cycle stops first.
    async fn wait_out_hold(&self) -> bool {
        let mut stop = self.stop_tx.subscribe();
        let mut changes = self.gate.held.subscribe();
        while let Some(until) = self.gate.held_until() {
            if self.stopping().is_some() {
                return false;
            }
            tokio::select! {
                () = tokio::time::sleep_until(instant_at(until)) => {}
                _ = changes.changed() => {}
                _ = stop.changed() => {}
            }
        }
        self.stopping().is_none()
    }

    /// A wake-up for a slot that waits at the gate in its own loop
    /// (persistent mode): the hold changed.
    pub(super) fn hold_changes(&self) -> watch::Receiver<Held> {
        self.gate.held.subscribe()
    }

    /// The answer for `claim` asked every call to wait `asked`: holds the
    /// whole batch (every other call would get the same answer), in this
    /// run and in the store, for other runners and later runs, for at most
    /// `max_hold`. Logged as a `hold` event saying so.
    pub(super) async fn hold(&self, claim: &Claim, asked: Duration) {
        let max = self.cfg.max_hold;
        let held = asked.min(max);
        let now = now_ms();
        let until = now.saturating_add(i64::try_from(held.as_millis()).unwrap_or(i64::MAX));
        let longer = self.gate.extend(until);
        self.hold_pool(claim, until).await;
        let (batch, key) = (self.batch.clone(), claim.key.clone());
        let _ = self
            .writer
            .call(move |s| s.set_hold(&batch, until, Some(&key)))
            .await;
        self.gate.touch();
        let clamped = if asked > max {
            format!(
                " (clamped from {} to {} (max_hold))",
                format_duration(asked),
                format_duration(max)
            )
        } else {
            String::new()
        };
        let message = if longer {
            format!(
                "rate limited: every call of the batch held for {} until {}{clamped}",
                format_duration(held),
                utc_clock(until, now)
            )
        } else {
            let on = self.gate.held_until().unwrap_or(until);
            format!(
                "rate limited: asked to hold for {}{clamped}; already held until {}",
                format_duration(held),
                utc_clock(on, now)
            )
        };
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let event = self
            .new_event(EventKind::Hold, message)
            .key(&claim.key)
            .fields(json!({
                "until": rfc3339(until),
                "retry_after_ms": ms(asked),
                "held_ms": ms(held),
                "max_hold_ms": ms(max),
                "clamped": asked > max,
            }));
        self.event(event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold_for(ms: i64) -> Hold {
        Hold {
            until: now_ms() + ms,
            key: Some("k".into()),
            label: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_stops_every_call_and_gives_up_its_ticket() {
        let gate = Gate::new(Some(Pacer::new(1, Duration::from_secs(10))), None);
        let mut first = Pass::None;
        assert_eq!(gate.admit(&mut first), Ok(()));
        assert_eq!(first, Pass::None, "its token is used");
        let mut second = Pass::None;
        let at = gate.admit(&mut second).unwrap_err();
        assert_eq!(second, Pass::Ticket(at), "one token per 10 s, reserved");
        gate.extend(now_ms() + 60_000);
        assert!(gate.admit(&mut second).is_err());
        assert_eq!(second, Pass::None, "the ticket is given up while held");
        // Lifted: the call takes a token after the hold.
        gate.sync(gate.seq(), None);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(gate.admit(&mut second), Ok(()));
    }

    #[test]
    fn sync_takes_the_store_unless_the_run_held_since() {
        let gate = Gate::new(None, Some(&hold_for(60_000)));
        assert!(gate.held_until().is_some());
        // Lifted in the store (`unpause`): lifted here.
        gate.sync(gate.seq(), None);
        assert!(gate.held_until().is_none());
        // A read begun before this run's own hold does not undo it.
        let before = gate.seq();
        gate.extend(now_ms() + 60_000);
        gate.sync(before, None);
        assert!(gate.held_until().is_some());
        // Another runner's longer hold holds this run too.
        let longer = hold_for(120_000);
        gate.sync(gate.seq(), Some(&longer));
        assert_eq!(gate.held_until(), Some(longer.until));
        // A shorter hold never shortens one on.
        assert!(!gate.extend(now_ms() + 1000));
        assert_eq!(gate.held_until(), Some(longer.until));
    }
}
