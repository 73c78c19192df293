//! The `[limit.NAME]` pool a batch draws from (`limit = "NAME"`), shared
//! with every batch naming it, on every runner of the store.
//!
//! # Design
//!
//! The pool's state is in the store, never in a runner: every rate is a
//! GCRA bucket, one row per pool and dimension holding its theoretical
//! arrival time (`store::ops::pools`); the places in flight are counted
//! in one row per pool and runner, with the time they lapse should the
//! runner die (its latest call's `item_timeout` plus `grace` after it
//! started: no call of it outlives that); a retry-after hold is a row per
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

use std::time::Duration;

use serde_json::{Value, json};

use super::cycle::Cycle;
use super::notice::{Said, Wording};
use super::usage::Tokens;
use crate::config::limits::LimitPool;
use crate::config::{BatchConfig, Config};
use crate::model::waiting::RateLimited;
use crate::model::{Claim, EventKind, Millis};
use crate::store::{
    Admission, AttemptUsage, PoolCall, PoolDim, PoolDimView, PoolHold, PoolItem, PoolSpec,
    PoolView, PoolWait, Store, StoreError,
};
use crate::util::time::{instant_at, now_ms, utc_clock};

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

/// An item whose `estimate_field` holds no token estimate (stored before
/// the field was set, so `add` never checked it): its call reserves
/// `token_estimate` instead, and the run says so once
/// (`IgnoredEstimate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub item: i64,
    pub key: String,
    /// The field's value as JSON text.
    pub value: String,
}

/// The notice of the items whose estimates a run ignored: the first such
/// item at once, how many there were at its end.
pub(super) struct IgnoredEstimate {
    /// The batch's `estimate_field` and `token_estimate`.
    pub field: String,
    pub estimate: Option<u64>,
}

impl IgnoredEstimate {
    pub(super) fn of(cfg: &BatchConfig) -> IgnoredEstimate {
        IgnoredEstimate {
            field: cfg.estimate_field.clone().unwrap_or_default(),
            estimate: cfg.token_estimate,
        }
    }

    /// What `calls` whose items' estimates were ignored reserved.
    fn instead(&self, calls: &str) -> String {
        self.estimate.map_or_else(
            || format!("no token_estimate is set, so {calls} reserved none"),
            |n| format!("{calls} reserved token_estimate ({n}) instead"),
        )
    }
}

impl Wording for IgnoredEstimate {
    type Example = Ignored;
    const KIND: EventKind = EventKind::EstimateIgnored;

    fn first(&self, ignored: &Ignored) -> Said {
        let field = &self.field;
        let value = crate::util::text::cut_chars(&ignored.value, IGNORED_SHOWN);
        let message = format!(
            "item {}: its estimate_field {field:?} is {value}, not a token estimate (a whole \
             number from 0 to {}): {}; said once a run, for the first such item (the run's end \
             counts them when there are more)",
            ignored.key,
            crate::config::fields::MAX_TOKEN_ESTIMATE,
            self.instead("it"),
        );
        Said {
            message,
            fields: json!({
                "field": field,
                "value": value,
                "token_estimate": self.estimate,
            }),
            key: Some(ignored.key.clone()),
        }
    }

    fn count(&self, items: u64, first: &Ignored) -> Said {
        let field = &self.field;
        let message = format!(
            "estimate ignored for {} (first: {}): their estimate_field {field:?} held no token \
             estimate; {}",
            crate::util::noun::count(items, "item"),
            first.key,
            self.instead("each"),
        );
        Said {
            message,
            fields: json!({
                "field": field,
                "items": items,
                "first": first.key,
                "token_estimate": self.estimate,
            }),
            key: None,
        }
    }
}

/// How much of an ignored estimate's value the run log quotes.
const IGNORED_SHOWN: usize = 80;

/// The store's form of a `[limit.NAME]` table.
pub fn spec(pool: &LimitPool) -> PoolSpec {
    PoolSpec {
        name: pool.name.clone(),
        dims: pool
            .limits
            .iter()
            .map(|l| PoolDim {
                name: l.dimension(),
                measure: l.measure,
                count: i64::try_from(l.rate.count).unwrap_or(i64::MAX),
                per_us: i64::try_from(l.rate.per.as_micros()).unwrap_or(i64::MAX),
            })
            .collect(),
        concurrency: pool.concurrency,
    }
}

/// The tokens a call of the batch reserves from its pool when its item
/// names none (`token_estimate`): what the views judge the pool's room
/// by for it. (An item's `estimate_field` may ask for more or less.)
#[must_use]
pub fn call_estimate(cfg: &BatchConfig) -> i64 {
    reserved(cfg.token_estimate)
}

/// The largest call of the batches drawing from `pool`: a pool with no
/// room for it is full for some batch of it, which its views say.
#[must_use]
pub fn largest_call(config: &Config, pool: &str) -> i64 {
    config
        .batches
        .values()
        .filter(|b| b.pool.as_ref().is_some_and(|p| p.name == pool))
        .map(call_estimate)
        .max()
        .unwrap_or(0)
}

/// A rate that has no room for a call reserving `estimate` tokens, in
/// words: `full`, or for a token rate `full for 1200-token calls` (a
/// smaller call may still fit). `num` writes the number as the view does.
pub fn full_words(d: &PoolDimView, estimate: i64, num: impl Fn(i64) -> String) -> String {
    match d.units(estimate) {
        units if units > 1 => format!("full for {}-token calls", num(units)),
        _ => "full".to_string(),
    }
}

/// Tokens reserved for a call asking `n` (none: nothing), within the
/// bound a setting may give.
fn reserved(n: Option<u64>) -> i64 {
    let n = n.unwrap_or(0);
    i64::try_from(n.min(crate::config::fields::MAX_TOKEN_ESTIMATE.unsigned_abs())).unwrap_or(0)
}

/// A pool with no room at `now` for a call reserving `estimate` tokens,
/// as a waiting reason: held, every place in flight taken, or a rate
/// whose bucket cannot take the call (the last of them to open is named:
/// the call waits for every one).
pub fn limited(view: &PoolView, estimate: i64, now: Millis) -> Option<RateLimited> {
    let named = |dimension: &str, next_slot| RateLimited {
        pool: view.name.clone(),
        dimension: dimension.to_string(),
        next_slot,
    };
    if let Some(h) = view.hold.as_ref().filter(|h| h.until > now) {
        return Some(named("hold", Some(h.until)));
    }
    if view
        .concurrency
        .is_some_and(|c| view.in_flight >= i64::from(c))
    {
        return Some(named("concurrency", None));
    }
    view.dims
        .iter()
        .filter_map(|d| d.next_slot(estimate, now).map(|t| (t, d)))
        .max_by_key(|(t, _)| *t)
        .map(|(t, d)| named(&d.dimension, Some(t)))
}

/// What `unpause` (and the dashboard's unpause and run keys) say of a
/// pool hold still on: it is not lifted. A retry-after is the provider's
/// word on the whole account the pool stands for, shared with every batch
/// of the pool; lifting it from one batch would only earn every batch of
/// the pool another 429.
pub fn hold_stays(pool: &str, hold: &PoolHold, now: Millis) -> String {
    format!(
        "its pool {} stays held until {} by a retry-after from {}: the provider's limit for \
         every batch of the pool, not lifted here; it ends by itself",
        crate::util::sanitize::line(pool),
        utc_clock(hold.until, now),
        crate::util::sanitize::line(&hold.batch)
    )
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
    /// ([`Cycle::pool_try`]).
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

impl Cycle {
    /// Asks the pool for the places of `claims`' calls, in order (one
    /// transaction). The tickets of those that may start now, and when to
    /// ask for the rest.
    pub(super) async fn pool_try(
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
    pub(super) async fn admitted(&self, asked: Asked) -> (Vec<Ticket>, Option<PoolWait>) {
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
            let now = now_ms();
            let message = format!(
                "waiting for pool {}: {}, next slot {}",
                pool.name(),
                w.dimension,
                utc_clock(w.until, now)
            );
            let event = self.new_event(EventKind::RateLimit, message).fields(json!({
                "pool": pool.name(),
                "dimension": w.dimension,
                "until": crate::util::time::rfc3339(w.until),
            }));
            self.event(event).await;
        }
        (tickets, admission.wait)
    }

    /// Waits for the pool to give the call of `claim` its place. `Ok(None)`
    /// when the batch has no pool; `Err(None)` when the cycle stops first,
    /// `Err(Some(why))` when the claim is stopped while it waits (`killed`:
    /// a cancel, its lease lost), its call never started. Between asks,
    /// not during one: a place given is never dropped on the floor.
    pub(super) async fn pool_enter(
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
    /// ([`Settling`]), and all of them ride in the writer's next group
    /// (`Writer::defer`), brought by the slots' claims and completions. Nothing to do without a pool
    /// or reported usage. For an attempt that is `done`, its line for the
    /// item is returned, to go with its done mark (`Completion::usage`):
    /// the item's row is written then anyway.
    pub(super) fn pool_settle(
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
    pub(super) async fn hold_pool(&self, claim: &Claim, until: Millis) {
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

/// The settlements a cycle's writer has not reached yet. The first one
/// queues a write; those that arrive before the writer runs it join it,
/// so a group commit settles every call answered since the last one in
/// one write (one pool lock, one savepoint) instead of one each. Order is
/// kept: a settlement is always written before anything queued after it.
#[derive(Default)]
pub struct Settling(std::sync::Arc<std::sync::Mutex<Pending>>);

#[derive(Default)]
struct Pending {
    rows: Vec<AttemptUsage>,
    /// A write that will take `rows` is queued and has not run yet.
    queued: bool,
}

impl Settling {
    /// Adds a settlement; `Some` (the handle the write takes its rows
    /// from) when no queued write will take it and one must be queued.
    fn push(&self, row: AttemptUsage) -> Option<Settling> {
        let mut p = self.0.lock().unwrap_or_else(|p| p.into_inner());
        p.rows.push(row);
        if p.queued {
            return None;
        }
        p.queued = true;
        Some(Settling(self.0.clone()))
    }

    /// The settlements so far, for the write running now; the next one
    /// queues a new write.
    fn take(&self) -> Vec<AttemptUsage> {
        let mut p = self.0.lock().unwrap_or_else(|p| p.into_inner());
        p.queued = false;
        std::mem::take(&mut p.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str) -> AttemptUsage {
        AttemptUsage {
            batch: "b".into(),
            run_id: 1,
            key: key.into(),
            attempt: 1,
            pool: Some("p".into()),
            place: None,
            with_done: false,
            at: 0,
            estimate: 100,
            input_tokens: None,
            output_tokens: None,
        }
    }

    /// One write per group: the first settlement queues it, those that
    /// arrive before it runs join it, and one after it ran queues the next.
    #[test]
    fn settlements_join_the_write_already_queued() {
        let s = Settling::default();
        let write = s.push(row("k1")).expect("the first queues a write");
        assert!(s.push(row("k2")).is_none());
        assert!(s.push(row("k3")).is_none());
        let keys: Vec<String> = write.take().into_iter().map(|r| r.key).collect();
        assert_eq!(keys, ["k1", "k2", "k3"]);
        let next = s.push(row("k4")).expect("after the write ran, a new one");
        assert_eq!(next.take().len(), 1);
        assert!(next.take().is_empty());
    }
}
