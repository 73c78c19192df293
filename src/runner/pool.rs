//! The `[limit.NAME]` pool a batch draws from (`limit = "NAME"`), shared
//! with every batch naming it, on every runner of the store.
//!
//! # Design
//!
//! The pool's state is in the store, never in a runner: every rate is a
//! GCRA bucket, one row per pool and dimension holding its theoretical
//! arrival time (`store::ops::pools`); the places in flight are counted
//! in one row per pool and runner (keyed by its host and process,
//! `store::place_key`), with the time they lapse should the runner die
//! (its latest call's `item_timeout` plus `grace` after it started: no
//! call of it outlives that). A runner gone (its seats lapsed, its guard
//! having stopped its workers; or its process seen dead on this host) has
//! no call in flight: the next call short of a place takes its places at
//! once, and the views say them as its, not in flight; a runner with a
//! live seat keeps its places. A retry-after hold is a row per
//! pool. A call asks for its place after the batch's own gate
//! (hold, `rate_limit`): one write transaction that locks the pool's row,
//! so runners on any host sharing the store take turns, and draws its
//! reservation at once (one request per `requests` rate; `token_estimate`,
//! or the payload's `estimate_field`, per token rate). When the worker
//! answers, the attempt's usage is settled: the bucket is moved by what it
//! drew beyond (or short of) its reservation, the estimate standing when
//! it reported nothing, and its place in flight given back (its runner's
//! count less one). Usage is kept in sums, not a row per attempt: a line
//! on the item's own row (what `show` lists), one row per run, one per
//! pool and minute (the calls and tokens the views count against each
//! limit, per minute and today).
//!
//! Bookkeeping stays cheap: a slot with several calls ready (persistent
//! mode) asks for all their places in one transaction, the one that
//! claimed them when the claim was chained to a commit
//! (`Pool::admit_claimed`); a slot waiting for a place, or for tokens,
//! that this runner gives back asks again at once (`places_back`: a call
//! that used fewer tokens than it reserved returns the rest to the
//! bucket, and the slot its wait was given counted them); settlements go to
//! the writer without waiting, every one the writer has not reached yet in
//! one write that rides in its next group commit, with no transaction of
//! its own (`Settling`, `Writer::defer`); a call that
//! must wait sleeps until the slot the store named (or, for a place in
//! flight another runner will give back, a short poll), never spinning.
//!
//! # Layout
//!
//! Here the [`Pool`] a runner keeps; a cycle's calls through it (ask,
//! wait, settle, hold) in `calls`, the settlements on their way to the
//! writer in `settling`; the pool as every view judges it, runner or not,
//! in `views`; the notice of estimates ignored in `ignored`.

mod calls;
mod ignored;
mod settling;
mod views;

use std::time::Duration;

use serde_json::Value;

use crate::config::{BatchConfig, Config};
use crate::model::waiting::RateLimited;
use crate::model::{Claim, Millis};
use crate::store::{Admission, PoolCall, PoolItem, PoolSpec, PoolWait, Store};
use crate::util::time::now_ms;

pub use ignored::Ignored;
pub(super) use ignored::IgnoredEstimate;
pub use settling::Settling;
use views::reserved;
pub use views::{call_estimate, full_words, hold_stays, largest_call, limited, spec};

/// The batch's pool as its runner knows it.
pub struct Pool {
    /// Its limits, as the config file says them now (`follow`): a call
    /// waiting for its place asks again when they change.
    spec: tokio::sync::watch::Sender<PoolSpec>,
    estimate: Option<u64>,
    field: Option<String>,
    /// The items whose estimates the run ignored (an item counts once,
    /// however often its calls ask the pool: a retry, a deferred call).
    ignored: std::sync::Mutex<std::collections::HashSet<i64>>,
    /// How long a place in flight is kept without its settlement.
    place_ttl: Duration,
    runner: String,
    /// The claims (item id, lease token) whose calls the pool deferred and
    /// has not admitted since: their items are marked waiting for their
    /// places in the store (`PoolItem::deferred`).
    deferred: std::sync::Mutex<std::collections::HashSet<(i64, i64)>>,
    /// The last wait the pool gave (for the waiting reason and its event).
    waiting: std::sync::Mutex<Option<PoolWait>>,
    /// Counts the settlements of this runner that gave room back (a place
    /// in flight, or tokens reserved and not used): a slot waiting for one
    /// asks again at once rather than at its next poll or the slot the
    /// reservations named (the settlement rides first in the group of
    /// that ask, so the store has the room back when it answers).
    back: tokio::sync::watch::Sender<u64>,
}

/// Resolves when the pool's limits change (never without a pool).
pub(super) async fn limits_changed(limits: Option<&mut tokio::sync::watch::Receiver<PoolSpec>>) {
    if let Some(l) = limits
        && l.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// A call's place in the pool, given back when it is settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub estimate: i64,
}

/// The calls a slot asked places for, and the pool's answer.
pub struct Asked {
    calls: Vec<PoolCall>,
    admission: Admission,
    /// The calls whose items' estimates were not ones.
    ignored: Vec<Ignored>,
}

impl Pool {
    pub fn of(cfg: &BatchConfig, runner: &str) -> Option<Pool> {
        let pool = cfg.pool.as_ref()?;
        Some(Pool {
            spec: tokio::sync::watch::Sender::new(spec(pool)),
            estimate: cfg.token_estimate,
            field: cfg.estimate_field.clone(),
            ignored: std::sync::Mutex::default(),
            place_ttl: cfg.item_timeout + cfg.grace + Duration::from_secs(5),
            runner: runner.to_string(),
            deferred: std::sync::Mutex::default(),
            waiting: std::sync::Mutex::new(None),
            back: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Its limits now.
    pub fn spec(&self) -> PoolSpec {
        self.spec.borrow().clone()
    }

    /// Its name (the `[limit.NAME]`), which no reading of the file changes.
    pub fn name(&self) -> String {
        self.spec.borrow().name.clone()
    }

    /// Whether it bounds the calls in flight (`concurrency`): a call then
    /// holds a place until it is settled.
    pub fn bounds_places(&self) -> bool {
        self.spec.borrow().concurrency.is_some()
    }

    /// What wakes a slot waiting for its place when the limits change.
    pub(super) fn limits(&self) -> tokio::sync::watch::Receiver<PoolSpec> {
        self.spec.subscribe()
    }

    /// Takes the pool's limits as the config file says them now
    /// (`runner::follow`): a limit raised (or lowered) while the run lives
    /// applies to the calls waiting now, as every view reads it from the
    /// file, not at the next run. A file that no longer has the pool keeps
    /// the limits known. What changed, if anything.
    pub(super) fn follow(&self, config: &Config) -> Option<PoolSpec> {
        let fresh = spec(config.limits.get(&self.name())?);
        self.spec
            .send_if_modified(|s| {
                let changed = *s != fresh;
                *s = fresh.clone();
                changed
            })
            .then_some(fresh)
    }

    /// What wakes a slot waiting for a place in flight this runner gives
    /// back.
    pub(super) fn places_back(&self) -> tokio::sync::watch::Receiver<u64> {
        self.back.subscribe()
    }

    /// The tokens reserved for a call of this payload: its
    /// `estimate_field` when that is an estimate (`key::estimate_in`: `add`
    /// refuses a line whose field is not), else `token_estimate`, else
    /// none; with the field's value (JSON text) when it is there and no
    /// estimate, so ignored (an item stored before the field was set).
    pub fn estimate(&self, payload: &str) -> (i64, Option<String>) {
        let Some(value) = self
            .field
            .as_deref()
            .and_then(|f| serde_json::from_str::<Value>(payload).ok()?.get(f).cloned())
        else {
            return (reserved(self.estimate), None);
        };
        match crate::key::estimate_in(&value) {
            Some(n) => (reserved(Some(n)), None),
            None => (reserved(self.estimate), Some(value.to_string())),
        }
    }

    /// The calls of `claims`, each saying whether the pool deferred it
    /// before (its item marked waiting for its place), and those whose
    /// estimates were ignored.
    fn calls<'a>(
        &self,
        claims: impl IntoIterator<Item = &'a Claim>,
        now: Millis,
    ) -> (Vec<PoolCall>, Vec<Ignored>) {
        let ttl = i64::try_from(self.place_ttl.as_millis()).unwrap_or(i64::MAX);
        let deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        let mut ignored = Vec::new();
        let calls = claims
            .into_iter()
            .map(|c| {
                let (estimate, bad) = self.estimate(&c.payload);
                if let Some(value) = bad {
                    ignored.push(Ignored {
                        item: c.item_id,
                        key: c.key.clone(),
                        value,
                    });
                }
                PoolCall {
                    runner: self.runner.clone(),
                    estimate,
                    until: now.saturating_add(ttl),
                    item: Some(PoolItem {
                        id: c.item_id,
                        token: c.token,
                        deferred: deferred.contains(&(c.item_id, c.token)),
                    }),
                }
            })
            .collect();
        (calls, ignored)
    }

    /// Those of `ignored` whose items the run had not ignored before.
    fn newly_ignored(&self, ignored: Vec<Ignored>) -> Vec<Ignored> {
        let mut items = self.ignored.lock().unwrap_or_else(|p| p.into_inner());
        ignored
            .into_iter()
            .filter(|i| items.insert(i.item))
            .collect()
    }

    /// The items whose calls the pool defers now (marked waiting for
    /// their places).
    pub(super) fn deferred_items(&self) -> std::collections::HashSet<i64> {
        let deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        deferred.iter().map(|(id, _)| *id).collect()
    }

    /// Remembers which of `calls` the pool deferred (their items now
    /// marked waiting) and forgets those it admitted (unmarked).
    fn deferred_by(&self, calls: &[PoolCall], admission: &Admission) {
        let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        for (i, c) in calls.iter().enumerate() {
            if let Some(it) = c.item {
                if i < admission.admitted {
                    deferred.remove(&(it.id, it.token));
                } else {
                    deferred.insert((it.id, it.token));
                }
            }
        }
    }

    /// Asks for the places of calls just claimed, in the transaction that
    /// claimed them (`s` is in the writer's group), so that a slot's
    /// admission costs no transaction of its own. `None` when the store
    /// refused: the slot asks again before it sends them
    /// ([`Cycle::pool_try`](crate::runner::cycle::Cycle::pool_try)).
    pub(super) fn admit_claimed(&self, s: &mut Store, claims: &[Claim]) -> Option<Asked> {
        if claims.is_empty() {
            return None;
        }
        let now = now_ms();
        let (calls, ignored) = self.calls(claims, now);
        match s.pool_admit(&self.spec(), &calls, now) {
            Ok(admission) => {
                self.deferred_by(&calls, &admission);
                Some(Asked {
                    calls,
                    admission,
                    ignored,
                })
            }
            Err(e) => {
                tracing::warn!("asking pool for places with a claim: {e}");
                None
            }
        }
    }

    /// The pool's last answer as the views judge a pool with no room
    /// (`views::limited`): held by a retry-after, a rate, its places; `None`
    /// once it admitted a call.
    pub(super) fn limited_now(&self) -> Option<RateLimited> {
        let known = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        known.as_ref().map(|w| RateLimited {
            pool: self.name(),
            dimension: w.dimension.clone(),
            next_slot: Some(w.until),
        })
    }

    /// Remembers a wait; true when it is news (another dimension, or a
    /// later slot than a second past the one known).
    fn note(&self, wait: Option<&PoolWait>) -> bool {
        let mut known = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let news = match (known.as_ref(), wait) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(k), Some(w)) => {
                k.dimension != w.dimension || w.until > k.until + 1000 || k.until < now_ms()
            }
        };
        *known = wait.cloned();
        news
    }
}

/// Resolves when this runner gives back a place in flight (never without
/// a pool, or once the pool is gone).
pub(super) async fn place_given_back(back: Option<&mut tokio::sync::watch::Receiver<u64>>) {
    if let Some(b) = back
        && b.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}
