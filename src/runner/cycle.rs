//! The state one cycle's slots share: its settings, the writer, the
//! tally, stop requests, the in-flight table and the gate. Below the slots:
//! it imports nothing from them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::child::KillReason;
use super::child::groups;
use super::classify::Rules;
use super::gate;
use super::log::EventLog;
use super::writer::Writer;
use crate::config::BatchConfig;
use crate::model::waiting::{WaitReason, claim_wait, deferred_wait, hold_end, hold_pool};
use crate::model::{EventKind, Millis, NewEvent, RunCounts};
use crate::util::time::now_ms;

/// What the caller (signal handler, daemon) asks of a running cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Run,
    /// Stop claiming; in-flight items get the grace period.
    Graceful,
    /// Stop claiming and stop in-flight workers now (items go back to pending).
    Immediate,
}

/// Why a cycle stopped before running out of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    Interrupted,
    MaxDuration,
    MaxCost,
    Paused(String),
    LockLost,
    /// The store's file (or database) was deleted or replaced.
    StoreLost,
    /// Someone asked it to stop through the store (`nightshift stop`, the
    /// dashboard), as a first (or, `--now`, a second) signal would.
    Asked(String),
    /// The worker could not be started, as no item's could be (gone, not
    /// executable: `child::cannot_start`): no attempt is spent on it.
    WorkerCannotStart(String),
    /// A write the run needed failed: the store unreachable since `since`
    /// (an outage past what a run waits for), or failing at once.
    StoreFailed {
        since: Option<crate::model::Millis>,
        error: String,
    },
}

impl StopReason {
    /// Its word, as the run keeps it (`model::StopCause`).
    #[must_use]
    pub fn cause(&self) -> crate::model::StopCause {
        use crate::model::StopCause;
        match self {
            StopReason::Interrupted => StopCause::Signal,
            StopReason::MaxDuration => StopCause::MaxDuration,
            StopReason::MaxCost => StopCause::MaxCost,
            StopReason::Paused(_) => StopCause::Paused,
            StopReason::LockLost => StopCause::LockLost,
            StopReason::StoreLost => StopCause::StoreLost,
            StopReason::Asked(_) => StopCause::Stop,
            StopReason::WorkerCannotStart(_) => StopCause::WorkerCannotStart,
            StopReason::StoreFailed { .. } => StopCause::StoreFailed,
        }
    }

    /// What ended a run whose store failed it with `error`: an outage
    /// given up on (`writer::outage`) says since when.
    #[must_use]
    pub fn store_failed(error: &crate::store::StoreError) -> StopReason {
        let since = if error.is_session_lost() {
            super::writer::outage::gave_up_on()
        } else {
            None
        };
        StopReason::StoreFailed {
            since,
            error: crate::util::sanitize::line(&error.to_string()).into_owned(),
        }
    }

    /// The words of `StoreFailed` before its error: the line a run that
    /// ends with the error prints them in.
    #[must_use]
    pub fn store_failed_words(since: Option<crate::model::Millis>) -> String {
        match since {
            Some(at) => format!(
                "the store could not be reached since {}",
                crate::util::time::utc_clock(at, crate::util::time::now_ms())
            ),
            None => "the store failed".to_string(),
        }
    }

    /// How much a reason says: a later stop request with a weightier one
    /// replaces the first.
    fn weight(&self) -> u8 {
        match self {
            StopReason::StoreLost | StopReason::StoreFailed { .. } => 2,
            StopReason::LockLost => 1,
            _ => 0,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Interrupted => f.write_str("interrupted"),
            StopReason::MaxDuration => f.write_str("max_duration reached"),
            StopReason::MaxCost => f.write_str("max_cost reached"),
            StopReason::Paused(why) => write!(f, "paused: {why}"),
            StopReason::LockLost => f.write_str("lost the batch lock to another runner"),
            StopReason::StoreLost => {
                f.write_str("the store was deleted or replaced under this run")
            }
            StopReason::Asked(by) => write!(f, "stopped by {by}"),
            StopReason::WorkerCannotStart(why) => write!(f, "the worker cannot start: {why}"),
            StopReason::StoreFailed { since, error } => {
                write!(f, "{}: {error}", StopReason::store_failed_words(*since))
            }
        }
    }
}

/// Live counts of this run (the store has the same in `runs`).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) done: AtomicI64,
    pub(super) empty: AtomicI64,
    pub(super) retry: AtomicI64,
    pub(super) manual: AtomicI64,
    pub(super) retried: AtomicI64,
    pub(super) released: AtomicI64,
    pub(super) cancelled: AtomicI64,
    pub(super) redriven: AtomicI64,
    /// Cost in millionths, so it can be summed atomically.
    pub(super) cost_micros: AtomicI64,
    /// What the costs left below a millionth (`Carry`).
    pub(super) cost_carry: crate::util::money::Carry,
}

impl Tally {
    /// Dead runs' claims this run quarantined: failures of its own (the
    /// store counted them in its run), so its summary, code and alert say
    /// so.
    pub(super) fn count_quarantined(&self, n: usize) {
        self.manual.fetch_add(n as i64, Ordering::Relaxed);
    }

    pub(super) fn counts(&self, skipped_done: i64) -> RunCounts {
        let get = |a: &AtomicI64| a.load(Ordering::Relaxed);
        RunCounts {
            done: get(&self.done),
            empty: get(&self.empty),
            failed: get(&self.retry) + get(&self.manual),
            retry: get(&self.retry),
            manual: get(&self.manual),
            retried: get(&self.retried),
            skipped_done,
            redriven: get(&self.redriven),
            released: get(&self.released),
            cancelled: get(&self.cancelled),
            cost: crate::util::money::from_micros(get(&self.cost_micros)),
        }
    }

    pub(super) fn add_cost(&self, cost: Option<f64>) {
        if let Some(c) = cost.filter(|c| c.is_finite() && *c > 0.0) {
            let micros = self.cost_carry.micros(c);
            // Saturates rather than wraps to a negative total.
            let _ = self
                .cost_micros
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    Some(t.saturating_add(micros))
                });
        }
    }

    pub(super) fn processed(&self) -> i64 {
        let get = |a: &AtomicI64| a.load(Ordering::Relaxed);
        get(&self.done) + get(&self.empty) + get(&self.retry) + get(&self.manual)
    }
}

/// Item id → the handle that stops its worker (taken once used).
pub(super) type Inflight = HashMap<i64, Option<Killer>>;

/// A cycle's claims by what they do (see [`Cycle::claims_now`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Claims {
    /// Their worker runs (or is about to).
    pub(super) in_flight: i64,
    /// Waiting out a failed attempt's backoff.
    pub(super) retrying: i64,
    /// Waiting for a place in the batch's pool.
    pub(super) pool_waits: i64,
    /// Deferred by the batch's pool while a retry-after holds it: waiting
    /// for the hold ([`Cycle::held_now`]), not for a place.
    pub(super) held: i64,
}

/// The hold every call of a cycle waits for now (see [`Cycle::held_now`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeldNow {
    pub(super) until: Millis,
    /// The pool whose retry-after it is, when the pool's hold ends last.
    pub(super) pool: Option<String>,
    /// A reached budget's, not a retry-after: its window ends last.
    pub(super) budget: bool,
}

/// How an in-flight item's worker is told to stop.
pub(super) enum Killer {
    /// Process mode: the item's own worker.
    Item(oneshot::Sender<KillReason>),
    /// Persistent mode: the slot that sent the item to its worker.
    Slot(mpsc::UnboundedSender<(i64, KillReason)>),
}

impl Killer {
    pub(super) fn fire(self, item_id: i64, reason: KillReason) {
        match self {
            Killer::Item(tx) => {
                let _ = tx.send(reason);
            }
            Killer::Slot(tx) => {
                let _ = tx.send((item_id, reason));
            }
        }
    }
}

/// State shared by the slots of one cycle.
pub(super) struct Cycle {
    pub(super) batch: String,
    pub(super) run_id: i64,
    pub(super) cfg: BatchConfig,
    pub(super) worker: Vec<String>,
    pub(super) work_dir: Option<PathBuf>,
    pub(super) rules: Rules,
    pub(super) writer: Writer,
    pub(super) tally: Tally,
    pub(super) log: EventLog,
    /// Stop requests: `None` while running.
    pub(super) stop_tx: watch::Sender<Option<(Signal, StopReason)>>,
    /// In-flight items and the handle that stops their worker.
    pub(super) inflight: std::sync::Mutex<Inflight>,
    /// Claims waiting out an immediate retry's backoff: when each runs
    /// again, as the store has it (`Item::retry_at`). Until then one is not
    /// in flight, though it may be held in `inflight` (a cancel reaches it).
    pub(super) retry_at: std::sync::Mutex<HashMap<i64, Millis>>,
    /// Every worker call passes it: the retry-after hold, the rate limit.
    pub(super) gate: gate::Gate,
    /// The `[limit.NAME]` pool every call also passes (`pool`).
    pub(super) pool: Option<std::sync::Arc<super::pool::Pool>>,
    /// Settlements on their way to the writer (`pool::Settling`).
    pub(super) settling: super::pool::Settling,
    /// The batch's and its pool's budgets (`budget`).
    pub(super) budgets: Option<super::budget::Budgets>,
    /// The config file the run follows (`follow`).
    pub(super) config_file: Option<super::follow::ConfigFile>,
    pub(super) claims_left: Option<AtomicUsize>,
    pub(super) lease_ttl: Duration,
    /// `NIGHTSHIFT_RUNNER` for our workers (see `orphans`).
    pub(super) runner_id: String,
    /// The worker program found in `PATH`, once.
    pub(super) program: Option<PathBuf>,
    /// A slot may claim its next item with its last success (`slot::claim::may_chain`).
    pub(super) chain: bool,
    /// The store as opened: the heartbeat notices it deleted or replaced.
    pub(super) identity: Option<crate::store::StoreIdentity>,
    /// The run's most recent worker answers for the circuit breaker
    /// (`halt`): `None` a success, `Some` a failure's error class.
    pub(super) answers: std::sync::Mutex<std::collections::VecDeque<Option<String>>>,
    /// The circuit breaker tripped in this run.
    pub(super) halted: std::sync::atomic::AtomicBool,
    /// Slots that found nothing to claim wait here while another works.
    pub(super) idle: std::sync::Arc<super::idle::Idle>,
    /// What the run says once and counts at its end (`notice`).
    pub(super) notices: super::notice::Notices,
}

impl Cycle {
    /// The ids of the items held as in flight now.
    pub(super) fn inflight_ids(&self) -> std::collections::HashSet<i64> {
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// Holds an item as in flight: a stop, a cancel or a lost lease of it
    /// reaches `killer`.
    pub(super) fn track(&self, item_id: i64, killer: Killer) {
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(item_id, Some(killer));
    }

    /// The item is no longer in flight (see [`Cycle::track`]).
    pub(super) fn untrack(&self, item_id: i64) {
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&item_id);
    }

    /// The claim's failed attempt runs again at `at` (as `await_retry`
    /// stores it).
    pub(super) fn awaits_retry(&self, item_id: i64, at: Millis) {
        self.retry_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(item_id, at);
    }

    /// The claim's next attempt begins, or it leaves the cycle: it waits to
    /// retry no more (see [`Cycle::awaits_retry`]).
    pub(super) fn retry_begins(&self, item_id: i64) {
        self.retry_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&item_id);
    }

    /// The cycle's claims by what they do at `now`, by the rule every view
    /// counts a live run's claims with (`claim_wait`): the progress line
    /// said "running" of those waiting out a backoff.
    pub(super) fn claims_now(&self, now: Millis) -> Claims {
        let deferred = self
            .pool
            .as_ref()
            .map(|p| p.deferred_items())
            .unwrap_or_default();
        let retry_at = self.retry_at.lock().unwrap_or_else(|p| p.into_inner());
        let mut held = self.inflight_ids();
        // Past its backoff, a claim the gate holds before its next attempt
        // is in `retry_at` only.
        held.extend(retry_at.keys());
        let pool = self.pool.as_ref().and_then(|p| p.limited_now());
        let (deferred_for, _) = deferred_wait(pool.as_ref(), self.gate.held_until(), now);
        let mut claims = Claims::default();
        for id in held {
            match claim_wait(retry_at.get(&id).copied(), deferred.contains(&id), now) {
                None => claims.in_flight += 1,
                Some(WaitReason::Backoff) => claims.retrying += 1,
                Some(_) if deferred_for == WaitReason::Hold => claims.held += 1,
                Some(_) => claims.pool_waits += 1,
            }
        }
        claims
    }

    /// The hold every call waits for at `now`, by the rule every view
    /// reads a hold with (`hold_end`): the batch's own (or a budget's) as
    /// its gate knows it, its pool's as the pool last answered this run.
    /// The progress line said a pool's hold as claims "waiting for a place".
    pub(super) fn held_now(&self, now: Millis) -> Option<HeldNow> {
        let pool = self.pool.as_ref().and_then(|p| p.limited_now());
        let own = self.gate.held_until();
        let until = hold_end(own, pool.as_ref(), now)?;
        let named = hold_pool(pool.as_ref(), own).map(|p| p.pool.clone());
        Some(HeldNow {
            until,
            budget: named.is_none() && self.gate.budget_until() == Some(until),
            pool: named,
        })
    }

    pub(super) fn stopping(&self) -> Option<(Signal, StopReason)> {
        self.stop_tx.borrow().clone()
    }

    /// Asks the cycle to stop; the first reason wins (except a lost lock
    /// or store, which say more than any other), a harder signal upgrades a
    /// softer one. True if this call changed the request.
    pub(super) fn request_stop(&self, signal: Signal, reason: StopReason) -> bool {
        self.stop_tx.send_if_modified(|cur| match cur {
            None => {
                *cur = Some((signal, reason));
                true
            }
            Some((_, r)) if reason.weight() > r.weight() => {
                *cur = Some((signal, reason));
                true
            }
            Some((Signal::Graceful, r)) if signal == Signal::Immediate => {
                *cur = Some((Signal::Immediate, r.clone()));
                true
            }
            _ => false,
        })
    }

    /// Another runner took the batch over: stop at once. Our in-flight
    /// results would be rejected by their lease tokens anyway.
    pub(super) async fn lock_lost(&self) {
        let first = self.request_stop(Signal::Immediate, StopReason::LockLost);
        self.kill_all(KillReason::LeaseLost);
        if first {
            self.event(self.new_event(
                EventKind::LockLost,
                "another runner took over the batch lock; stopping at once",
            ))
            .await;
        }
    }

    /// The store's location names another store, or none: stop at once,
    /// and write nothing more to the one still open (whatever it now is
    /// to the operator: an unlinked file, a backup's original). What was
    /// in flight stays claimed there, and runs again, with the same keys,
    /// if that store is resumed.
    pub(super) async fn store_lost(&self) {
        self.writer.seal();
        if self.request_stop(Signal::Immediate, StopReason::StoreLost) {
            // Only to the log file: the store takes nothing more.
            self.log.emit(&self.new_event(
                EventKind::StoreLost,
                "the store was deleted or replaced under this run; stopping at once",
            ));
        }
        self.kill_all(KillReason::Shutdown);
    }

    /// Counts a worker's answer (`failure`: its error class) for the
    /// circuit breaker. The first trip pauses the batch with the reason
    /// (which `unpause` clears) and stops claiming, as a pause does.
    pub(super) async fn answered(&self, failure: Option<&str>) {
        let Some(rule) = self.cfg.halt else {
            return;
        };
        let tripped = {
            let mut recent = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            recent.push_back(failure.map(str::to_string));
            while recent.len() > rule.window() {
                recent.pop_front();
            }
            super::halt::trips(rule, &recent)
        };
        let Some(reason) = tripped else {
            return;
        };
        if self.halted.swap(true, Ordering::SeqCst) {
            return;
        }
        let pause = crate::model::Pause {
            reason: reason.clone(),
            by: format!("halt = \"{rule}\" of run {}", self.run_id),
            at: now_ms(),
        };
        let batch = self.batch.clone();
        if let Err(e) = self
            .writer
            .call(move |s| s.pause_batch(&batch, &pause))
            .await
        {
            tracing::warn!("pausing {} for its circuit breaker: {e}", self.batch);
        }
        self.request_stop(Signal::Graceful, StopReason::Paused(reason));
    }

    /// Takes up to `n` claims from the `--limit` budget: how many may be
    /// claimed (all of them without a limit).
    pub(super) fn take_claims(&self, n: usize) -> usize {
        let Some(left) = &self.claims_left else {
            return n;
        };
        let mut taken = 0;
        let _ = left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            taken = left.min(n);
            Some(left - taken)
        });
        taken
    }

    /// Gives back `n` claims taken from the `--limit` budget that no item
    /// came of.
    pub(super) fn give_back(&self, n: usize) {
        if let Some(left) = &self.claims_left
            && n > 0
        {
            left.fetch_add(n, Ordering::SeqCst);
        }
    }

    pub(super) fn lease_until(&self, now: Millis) -> Millis {
        now + self.lease_ttl.as_millis() as i64
    }

    /// Says `message` on stderr as this batch's (a warning the run log
    /// records too, as an event its caller writes).
    pub(super) fn say(&self, message: &str) {
        crate::util::stdio::err_line(&format!(
            "nightshift: {}: {}",
            crate::util::sanitize::line(&self.batch),
            crate::util::sanitize::line(message)
        ));
    }

    /// Writes an event outside any transition (and to the log file).
    pub(super) async fn event(&self, event: NewEvent) {
        let e = event.clone();
        match self.writer.call(move |s| s.log_event(&e)).await {
            Ok(_) => self.log.emit(&event),
            Err(err) => tracing::warn!("could not record event {}: {err}", event.kind),
        }
    }

    pub(super) fn new_event(&self, kind: EventKind, message: impl Into<String>) -> NewEvent {
        NewEvent::new(now_ms(), &self.batch, kind, message).run(self.run_id)
    }

    /// Records, for a later run to stop if we die, the process group of
    /// the worker just spawned for `slot` (see `groups`; `start`: its
    /// start time, if the spawn read it). Deferred, not awaited: the
    /// worker starts at once, and the record rides in the next group (a
    /// slot's completion, most often) instead of a transaction of its own
    /// per item; within `MAX_DEFER` at the latest. A runner killed before
    /// it lands leaves the worker to the environment scan, as it did
    /// between a spawn and a queued write.
    pub(super) fn record_worker(&self, slot: u32, pid: u32, start: Option<u64>) {
        if let Some(group) = groups::of(self.run_id, slot, pid, start) {
            super::child::guard::worker(self.run_id, slot, group.pgid, group.started);
            self.writer.defer(move |s| s.record_worker(&group));
        }
    }

    /// Stops every in-flight worker for `reason`.
    pub(super) fn kill_all(&self, reason: KillReason) {
        // After a lost lock every stop is a lease loss, whoever asks (the
        // grace watch races `lock_lost`): the claims are the taker's to take
        // back, never ours to release as "not started".
        let reason = match (reason, self.stopping()) {
            (KillReason::Shutdown, Some((_, StopReason::LockLost))) => KillReason::LeaseLost,
            _ => reason,
        };
        let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        for (id, kill) in inflight.iter_mut() {
            if let Some(k) = kill.take() {
                k.fire(*id, reason);
            }
        }
    }
}
