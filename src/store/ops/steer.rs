//! Steering a live batch through the store, so a runner on any host hears
//! it within a heartbeat: a cancel asked of an item, a stop asked of the
//! runners of a batch.
//!
//! The crash-safety rule: while a cancel is asked of a claimed item, no
//! outcome of its attempt is written. The done mark (`sqlite/hot/claim.rs`,
//! `pg/hot.rs`), a failure, a release and a further attempt all check
//! `cancel_to IS NULL` in the statement that writes them, so a success
//! racing the cancel is refused; the runner then settles the cancel
//! ([`Store::settle_cancel`]) instead.

use super::items::missing;
use super::liveness::{holds_live_seat, seat};
use crate::model::waiting::{claim_wait, claim_wait_said};
use crate::model::{EventKind, Millis, NewEvent, Seat, Status, state_word};
use crate::store::api::{
    CancelOutcome, CancelSettled, CancelTo, CancelledWhile, Steering, StopAsked,
};
use crate::store::dialect::Write;
use crate::store::{Refusal, Result, Store};

/// The message a cancelled item keeps in the `manual` tier.
fn manual_message(by: &str, reason: &str) -> String {
    format!("cancelled by {by}: {reason}")
}

/// Where the attempt a claim counted was when the claim was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// Its call never started.
    NotStarted,
    /// Its call was stopped before an answer.
    CutShort,
    /// Its call ran to its end, or the item was not claimed.
    Ran,
}

impl Counted {
    fn of(was: CancelledWhile) -> Counted {
        match was {
            CancelledWhile::NotStarted => Counted::NotStarted,
            CancelledWhile::Running => Counted::CutShort,
            CancelledWhile::WaitingToRetry | CancelledWhile::Answered => Counted::Ran,
        }
    }

    /// Whether a cancel to `to` gives the counted attempt back. An attempt
    /// counts when its call starts, so one that never started is given
    /// back wherever the item goes; one cut short is given back when the
    /// item goes back to pending (as a stop's release gives it back), and
    /// stays counted in `manual`, where the count says the calls made.
    /// The store keeps a retry's attempt, counted only when it begins
    /// (`attempts_given_back!`).
    fn given_back(self, to: CancelTo) -> bool {
        match self {
            Counted::NotStarted => true,
            Counted::CutShort => to == CancelTo::Pending,
            Counted::Ran => false,
        }
    }
}

/// Moves a not-running item to `to`; false if it is there already.
#[allow(clippy::too_many_arguments)]
fn move_to(
    tx: &mut dyn Write,
    item: i64,
    to: CancelTo,
    at_word: &str,
    counted: Counted,
    message: &str,
    run: Option<i64>,
    now: Millis,
) -> Result<bool> {
    let give_back = counted.given_back(to);
    match to {
        CancelTo::Pending if at_word == "pending" => Ok(false),
        CancelTo::Manual if at_word == "failed/manual" => Ok(false),
        CancelTo::Pending => tx
            .item_cancel_to_pending(item, give_back, now)
            .map(|()| true),
        CancelTo::Manual => {
            tx.item_cancel_to_manual(item, message, give_back, now)?;
            tx.item_cancel_dead_letter(item, message, run, now)?;
            Ok(true)
        }
    }
}

impl Store {
    /// Cancels one item. In flight: asks the run holding it to stop its
    /// worker and move it to `to` (its runner does, within a heartbeat).
    /// Claimed by a run whose runner is dead: moved at once.
    /// Pending or failed: moves it at once (nothing if it is there
    /// already). Done: refused. An unknown key: `UnknownKey`.
    pub fn cancel_item(
        &mut self,
        batch: &str,
        key: &str,
        to: CancelTo,
        actor: &str,
        reason: &str,
        now: Millis,
    ) -> Result<CancelOutcome> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let Some(status) = tx.item_status_locked(b, key)? else {
                return Err(missing(tx, b, batch, key));
            };
            let Some(item) = tx.item_by_key(b, key)? else {
                return Err(missing(tx, b, batch, key));
            };
            let fields =
                serde_json::json!({"to": to.as_str(), "reason": reason, "attempt": item.attempts});
            let event = |kind, message: String, run: Option<i64>| {
                let mut e = NewEvent::new(now, batch, kind, message)
                    .key(key)
                    .actor(actor)
                    .fields(fields.clone());
                e.run_id = run;
                e
            };
            // A claim whose run holds no live seat (its runner crashed here,
            // or went silent elsewhere past its expiry) has nobody to hear
            // the ask: it is moved at once, as the next run would take it.
            let orphaned = status == Status::Claimed
                && !holds_live_seat(&tx.seats(b, batch)?, item.lease_run, now);
            match status {
                Status::Done => Err(Refusal::CancelDone { key: key.into() }.into()),
                Status::Claimed if orphaned => {
                    let run = item.lease_run;
                    let msg = manual_message(actor, reason);
                    // Its runner is gone: a call it waited for its pool
                    // for never started; any other was cut short.
                    let counted = if item.pool_wait_since.is_some() {
                        Counted::NotStarted
                    } else {
                        Counted::CutShort
                    };
                    move_to(tx, item.id, to, "claimed", counted, &msg, run, now)?;
                    let of = run.map_or_else(String::new, |r| format!(" by run {r}"));
                    let message = format!(
                        "cancelled by {actor}: {reason}; it was claimed{of}, whose runner is gone; now {}",
                        to.as_str()
                    );
                    tx.event_insert(&event(EventKind::Cancelled, message, run))?;
                    Ok(CancelOutcome::Orphaned { run_id: run })
                }
                Status::Claimed => {
                    tx.item_ask_cancel(item.id, to.as_str(), actor, reason)?;
                    let run = item.lease_run;
                    let waiting = claim_wait(item.retry_at, item.pool_wait_since.is_some(), now);
                    let holder = run.map_or_else(String::new, |r| format!(" (run {r})"));
                    let stops = match waiting {
                        None => "stops its worker".to_string(),
                        Some(w) => format!("drops it (not started: {})", claim_wait_said(w)),
                    };
                    let message = format!(
                        "cancel asked by {actor}: {reason}; the runner holding it{holder} {stops} and moves it to {}",
                        to.as_str()
                    );
                    tx.event_insert(&event(EventKind::CancelAsked, message, run))?;
                    Ok(CancelOutcome::Asked { run_id: run, waiting })
                }
                Status::Pending | Status::Failed => {
                    let at = state_word(item.status, item.tier, item.outcome);
                    let msg = manual_message(actor, reason);
                    if !move_to(tx, item.id, to, &at, Counted::Ran, &msg, None, now)? {
                        return Ok(CancelOutcome::Already { at });
                    }
                    let message = format!(
                        "cancelled by {actor}: {reason}; it was {at}, not running; now {}",
                        to.as_str()
                    );
                    tx.event_insert(&event(EventKind::Cancelled, message, None))?;
                    Ok(CancelOutcome::Moved { from: at })
                }
            }
        })
    }

    /// The runner holding `item_id` under `token` stopped its worker (or
    /// had a write refused) for a cancel: moves it where the cancel asked,
    /// with its `cancelled` event. `None` if no cancel is asked of that
    /// claim (its lease was lost instead).
    pub fn settle_cancel(
        &mut self,
        batch: &str,
        item_id: i64,
        token: i64,
        (run_id, now): (i64, Millis),
        was: CancelledWhile,
    ) -> Result<Option<CancelSettled>> {
        self.write_tx(|tx| {
            let Some(ask) = tx.item_cancel_ask_locked(item_id, token)? else {
                return Ok(None);
            };
            let to = if ask.to == "pending" {
                CancelTo::Pending
            } else {
                CancelTo::Manual
            };
            let by = ask.by.clone().unwrap_or_else(|| "someone".into());
            let reason = ask.reason.clone().unwrap_or_default();
            move_to(
                tx,
                item_id,
                to,
                "claimed",
                Counted::of(was),
                &manual_message(&by, &reason),
                Some(run_id),
                now,
            )?;
            tx.run_count_cancelled(run_id)?;
            let message = format!(
                "cancelled by {by}: {reason}; {}; now {}",
                was.words(),
                to.as_str()
            );
            tx.event_insert(
                &NewEvent::new(now, batch, EventKind::Cancelled, message)
                    .run(run_id)
                    .key(&ask.key)
                    .actor(&by)
                    .fields(serde_json::json!({"to": to.as_str(), "reason": reason})),
            )?;
            Ok(Some(CancelSettled {
                key: ask.key,
                to,
                by: ask.by,
            }))
        })
    }

    /// Asks every live runner of `batch` to stop (gracefully, or with
    /// `now` at once), through their seats; the seats asked (none: no
    /// runner holds the batch).
    pub fn ask_stop(
        &mut self,
        batch: &str,
        now_flag: bool,
        actor: &str,
        now: Millis,
    ) -> Result<Vec<StopAsked>> {
        self.write_tx(|tx| {
            // A batch the store has not seen (the config names it; nothing
            // added, never run) has no runner to ask.
            let Some(b) = tx.batch_seen(batch)? else {
                return Ok(Vec::new());
            };
            let mut asked = Vec::new();
            // Not a runner crashed here (dead at once, whatever its seat's
            // expiry says, as every view says). A silent one is asked: it
            // may come back (a frozen host, a partition), and then stops;
            // a run that takes its seat over first takes the ask with it.
            for lock in tx.seats(b, batch)? {
                let silent_since = match seat(&lock, now) {
                    Seat::Crashed => continue,
                    Seat::Live => None,
                    Seat::Silent { since } => Some(since),
                };
                if tx.seat_ask_stop(b, &lock.token, now_flag, actor)? {
                    asked.push(StopAsked {
                        seat: lock,
                        silent_since,
                    });
                }
            }
            if !asked.is_empty() {
                let who: Vec<String> = asked.iter().map(|a| a.said(now)).collect();
                let how = if now_flag { "at once" } else { "gracefully" };
                let message = format!("stop ({how}) asked by {actor} of {}", who.join(", "));
                let runners: Vec<String> =
                    asked.iter().map(|a| a.seat.holder.to_string()).collect();
                tx.event_insert(
                    &NewEvent::new(now, batch, EventKind::StopAsked, message)
                        .actor(actor)
                        .fields(serde_json::json!({"now": now_flag, "runners": runners})),
                )?;
            }
            Ok(asked)
        })
    }

    /// Marks our own seat `token` stopping, as [`Store::ask_stop`] marks
    /// another's: a runner stopping for a signal claims nothing more, and
    /// every view says so (not that its runner takes what is pending).
    /// Whether the seat was there.
    pub fn mark_stopping(
        &mut self,
        batch: &str,
        token: &str,
        now_flag: bool,
        by: &str,
    ) -> Result<bool> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.seat_ask_stop(b, token, now_flag, by)
        })
    }

    /// What is asked of the cycle holding seat `token` as run `run_id`.
    pub fn steering(&self, batch: &str, run_id: i64, token: &str) -> Result<Steering> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let stop = tx.seat_stop(b, token)?.map(|(how, by)| (how == "now", by));
            Ok(Steering {
                stop,
                cancels: tx.run_cancels(b, run_id)?,
            })
        })
    }
}
