//! What a batch still holds that no run is working on, and why: a list of
//! (reason, items, until). One decision for the run summary ("what the
//! batch still holds") and the dry run ("why it would run nothing"); the
//! per-item waiting reasons of SPEC §11 are its finer grain.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::{Counts, Millis};
use crate::util::time::{moment, utc_clock};

/// Why items wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitReason {
    /// Failed for a human (the `manual` tier): only a requeue runs them.
    Quarantined,
    /// In the `retry` tier, their next attempt not due yet; or pending
    /// with a not-before time still ahead.
    NotDue,
    /// In the `retry` tier (or pending with a not-before time) and due:
    /// the next run redrives them.
    Due,
    /// The `PAUSED` file beside the store stops every batch.
    EmergencyStop,
    /// The batch is paused.
    Paused,
    /// Another runner holds every seat of the batch lock.
    LockHeld,
    /// A `retry_after_s` answer holds claiming back.
    Hold,
    /// A budget of the batch or its pool is spent: nothing starts until
    /// its window ends.
    Budget,
    /// The batch's limit pool has no room now ([`RateLimited`] says which
    /// pool, which dimension and the next slot).
    RateLimit,
    /// Claimed by a live run, their calls deferred by the batch's limit
    /// pool: waiting for a place, not in flight.
    PoolPlace,
    /// Claimed by a live run, their attempt failed: waiting to run again
    /// in this cycle (after a backoff, or the batch's hold), not in flight.
    Backoff,
    /// In flight in another run.
    InFlight,
    /// Could run, but this run did not take them (`--limit`, a stop).
    Pending,
    /// Could run, but nothing is running and no schedule fires.
    NoRunner,
    /// Could run: the schedule's next fire (a live daemon) runs them.
    NextFire,
}
str_enum!(WaitReason {
    Quarantined => "quarantined",
    NotDue => "not-due",
    Due => "due",
    EmergencyStop => "emergency-stop",
    Paused => "paused",
    LockHeld => "lock-held",
    Hold => "hold",
    Budget => "budget",
    RateLimit => "rate-limit",
    PoolPlace => "pool-place",
    Backoff => "backoff",
    InFlight => "in-flight",
    Pending => "pending",
    NoRunner => "no-runner",
    NextFire => "next-fire",
});

/// Items waiting for one reason, until a known time if there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    pub reason: WaitReason,
    pub items: i64,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub until: Option<Millis>,
    /// For [`WaitReason::RateLimit`]: the pool and its dimension.
    pub pool: Option<RateLimited>,
    /// For [`WaitReason::NotDue`] and [`WaitReason::Due`]: how many of
    /// the items are pending ones with a not-before time (the rest are in
    /// the retry tier).
    pub not_before: i64,
    /// For [`WaitReason::LockHeld`]: the batch's own `rate_limit` (`4/min`),
    /// which the runner holding the lock keeps its calls to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced: Option<String>,
    /// For [`WaitReason::LockHeld`]: every runner holding the lock is
    /// stopping (a signal, `nightshift stop`): it takes none of them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopping: bool,
    /// For [`WaitReason::InFlight`] in a run's own words (its summary, its
    /// dry run): in another run than this one. Views that are no run
    /// (`status`, the dashboard) say only "in flight".
    #[serde(skip)]
    pub another_run: bool,
    /// For [`WaitReason::RateLimit`]: every item is pending (none is a due
    /// retry or a claim a run takes back from a dead one).
    #[serde(skip)]
    pub only_pending: bool,
    /// For a wait with an end ([`WaitReason::RateLimit`], `Hold`,
    /// `Budget`) seen with no run in question: no runner is live and no
    /// schedule fires, so nothing moves at that end either.
    #[serde(skip)]
    pub no_runner: bool,
}

impl Waiting {
    /// `items` waiting for `reason` until `until`, with what the holding
    /// says of every such wait (its pool, its pace, whether a runner takes
    /// them at its end); the counts of a kind (`not_before`) and the
    /// view's own flags are the caller's.
    pub fn of(h: &Holding, reason: WaitReason, items: i64, until: Option<Millis>) -> Waiting {
        Waiting {
            reason,
            items,
            until,
            pool: pool_of(h, reason),
            not_before: 0,
            paced: paced_of(h, reason),
            stopping: reason == WaitReason::LockHeld && h.lock_stopping,
            another_run: false,
            only_pending: false,
            no_runner: no_runner(h, reason),
        }
    }
}

/// A limit pool with no room: which, for what (`tokens/min`, `requests/day`,
/// `concurrency`, `hold`), and when its next slot is (the `until`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RateLimited {
    pub pool: String,
    pub dimension: String,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub next_slot: Option<Millis>,
}

/// The dimension of a pool held by a retry-after answer.
pub const POOL_HOLD: &str = "hold";

impl RateLimited {
    /// A pool held by a retry-after answer, not a full rate or every place
    /// taken: what waits for it waits for a hold ([`WaitReason::Hold`]),
    /// as for a batch's own, in every view.
    #[must_use]
    pub fn is_hold(&self) -> bool {
        self.dimension == POOL_HOLD
    }
}

/// What waits for a time: the `retry` tier, and pending items with a
/// not-before time (`add`/`requeue --not-before`); due now (a run redrives
/// them) or later.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryTier {
    pub due: i64,
    pub later: i64,
    /// The earliest next attempt of those later.
    pub next_at: Option<Millis>,
    /// Of `due`, the pending ones with a not-before time (counted in
    /// `Counts::pending` too).
    pub pending_due: i64,
    /// Of `later`, the pending ones.
    pub pending_later: i64,
}

/// Claimed items whose failed attempt runs again in this cycle, later than
/// the read (`Item::retry_at`): how many, and the earliest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryWaits {
    pub items: i64,
    pub next: Option<Millis>,
}

/// A batch as far as waiting goes, read from the store at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Holding {
    pub counts: Counts,
    pub retry: RetryTier,
    pub emergency_stop: bool,
    pub paused: bool,
    /// Another runner holds every seat of the lock.
    pub lock_held: bool,
    /// ... and each of them is stopping: it claims nothing more.
    pub lock_stopping: bool,
    pub hold_until: Option<Millis>,
    /// A budget reached: its window's end (`runner::budget::held_until`).
    pub budget_until: Option<Millis>,
    /// The batch's limit pool, while it has no room.
    pub rate_limit: Option<RateLimited>,
    /// The batch's limit pool, by name, if it has one.
    pub pool: Option<String>,
    /// The batch's own `rate_limit` as written (`4/min`), if it has one.
    pub paced: Option<String>,
    /// Of the claimed items, those whose calls their pool deferred
    /// (`Item::pool_wait_since`): waiting for a place, not in flight.
    pub pool_waits: i64,
    /// Of the claimed items, those waiting to retry (`Item::retry_at`).
    pub retry_waits: RetryWaits,
    /// Of the claimed items, while a runner holds the lock, those of runs
    /// that hold no live seat (crashed, silent or seatless): no worker runs
    /// them, a run takes them back (`Runners::orphaned`). Not in flight.
    pub orphaned: i64,
    /// Of the items a run could take, how many the run in question takes
    /// (a dry run's list; none after a run ended).
    pub taken: i64,
    /// Seen with no run in question (`status`, `show`): what would start
    /// a run for what could run. `None`: a run's own view.
    pub idle: Option<Idle>,
}

/// With no run in question, what starts the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Nothing: no runner is live and no live daemon fires a schedule.
    NoRunner,
    /// A live daemon fires the batch's schedule at this time.
    NextFire(Millis),
}

impl Idle {
    /// From the schedule's next fire, if a live daemon fires it.
    #[must_use]
    pub fn from_fire(next_live_fire: Option<Millis>) -> Idle {
        next_live_fire.map_or(Idle::NoRunner, Idle::NextFire)
    }
}

/// Every stop on what the batch could run: the emergency stop, the
/// pause, a budget and a retry-after hold, a pool with no room, in that
/// order, but of a budget and a hold both on, the one that ends later
/// first (nothing starts before it). Each is a reason an item will not run
/// now, so a view of one item names them all; the batch's counts take the
/// first.
fn stops(h: &Holding, now: Millis) -> Vec<(WaitReason, Option<Millis>)> {
    let mut out = Vec::new();
    if h.emergency_stop {
        out.push((WaitReason::EmergencyStop, None));
    }
    if h.paused {
        out.push((WaitReason::Paused, None));
    }
    let budget = h.budget_until.filter(|t| *t > now);
    let hold = held_until(h, now);
    match (budget, hold) {
        (Some(b), Some(t)) if t > b => {
            out.push((WaitReason::Hold, Some(t)));
            out.push((WaitReason::Budget, Some(b)));
        }
        _ => {
            out.extend(budget.map(|b| (WaitReason::Budget, Some(b))));
            out.extend(hold.map(|t| (WaitReason::Hold, Some(t))));
        }
    }
    if let Some(r) = rate_of(h) {
        out.push((WaitReason::RateLimit, r.next_slot));
    }
    out
}

/// The one rule of a retry-after hold: the batch's own (`own`) or its
/// pool's (`pool`, while a retry-after holds it), whichever ends later,
/// while on at `now`. The views read both from the store, a live run from
/// its gate and its pool's last answer.
#[must_use]
pub fn hold_end(own: Option<Millis>, pool: Option<&RateLimited>, now: Millis) -> Option<Millis> {
    let pool = pool.filter(|r| r.is_hold()).and_then(|r| r.next_slot);
    own.max(pool).filter(|t| *t > now)
}

/// The pool a hold is said of: `pool`, while a retry-after holds it and
/// its hold is the one of [`hold_end`] that ends last (else the batch's
/// own is said).
#[must_use]
pub fn hold_pool(pool: Option<&RateLimited>, own: Option<Millis>) -> Option<&RateLimited> {
    pool.filter(|p| p.is_hold() && p.next_slot >= own)
}

/// What a live run's claim its pool defers waits for (a [`claim_wait`]
/// of `PoolPlace`): the pool's retry-after hold while one is on, until
/// the hold ends ([`hold_end`]: the batch's own may end later); else a
/// place, until the pool's next slot where known.
#[must_use]
pub fn deferred_wait(
    pool: Option<&RateLimited>,
    own: Option<Millis>,
    now: Millis,
) -> (WaitReason, Option<Millis>) {
    match pool.filter(|p| p.is_hold()).and(hold_end(own, pool, now)) {
        Some(until) => (WaitReason::Hold, Some(until)),
        None => (WaitReason::PoolPlace, pool.and_then(|p| p.next_slot)),
    }
}

/// A retry-after hold in words, the same in every view and in a run's
/// own: `held until 07:16:00Z (retry-after for pool openai)`, naming the
/// pool when it is its hold ([`hold_pool`]). Not made inert.
#[must_use]
pub fn held_words(until: Option<Millis>, pool: Option<&str>, now: Millis) -> String {
    let until = until.map_or("?".into(), |t| utc_clock(t, now));
    match pool {
        Some(pool) => format!("held until {until} (retry-after for pool {pool})"),
        None => format!("held until {until} (retry-after)"),
    }
}

/// [`hold_end`] of the batch as the store holds it.
fn held_until(h: &Holding, now: Millis) -> Option<Millis> {
    hold_end(h.hold_until, h.rate_limit.as_ref(), now)
}

/// The batch's pool, while a rate or its places leave it no room (a hold
/// is a hold: [`held_until`]).
fn rate_of(h: &Holding) -> Option<&RateLimited> {
    h.rate_limit.as_ref().filter(|r| !r.is_hold())
}

/// What stops the items a run could take, if anything: the first of its
/// [`stops`], else a runner holding every seat; with no run in question,
/// what would start one. A hold comes before the runner: the live runner
/// waits for it too, so "the runner that holds the lock" would hide what
/// everything waits for, and until when.
fn blocked(h: &Holding, now: Millis) -> Option<(WaitReason, Option<Millis>)> {
    stops(h, now).into_iter().next().or_else(|| unstopped(h))
}

/// What [`blocked`] says when none of the [`stops`] applies: a runner
/// holding every seat, or what would start one.
fn unstopped(h: &Holding) -> Option<(WaitReason, Option<Millis>)> {
    if h.lock_held {
        Some((WaitReason::LockHeld, None))
    } else {
        match h.idle {
            Some(Idle::NoRunner) => Some((WaitReason::NoRunner, None)),
            Some(Idle::NextFire(t)) => Some((WaitReason::NextFire, Some(t))),
            None => None,
        }
    }
}

/// An item as far as its waiting goes.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    pub status: super::Status,
    pub tier: Option<super::Tier>,
    pub next_attempt_at: Option<Millis>,
    /// Claimed, its call deferred by its pool (`Item::pool_wait_since`).
    pub pool_wait_since: Option<Millis>,
    /// Claimed, its failed attempt runs again then (`Item::retry_at`).
    pub retry_at: Option<Millis>,
    /// Claimed by a run that holds no live seat: counted in
    /// `Holding::orphaned`, taken back by a run.
    pub orphaned: bool,
}

impl Waits {
    /// `item` as its batch `info` holds it.
    #[must_use]
    pub fn of(item: &super::Item, info: &super::BatchInfo) -> Waits {
        Waits {
            status: item.status,
            tier: item.tier,
            next_attempt_at: item.next_attempt_at,
            pool_wait_since: item.pool_wait_since,
            retry_at: item.retry_at,
            orphaned: item.status == super::Status::Claimed && !info.claim_is_live(item.lease_run),
        }
    }
}

/// What a live run's claim waits for, if not its worker: its failed
/// attempt's backoff (`retry_at`, later than `now`), or a place in its
/// pool (`pool_waiting`). `None`: in flight. The one rule: the views read
/// it from the store, the runner's progress line from what it holds.
#[must_use]
pub fn claim_wait(retry_at: Option<Millis>, pool_waiting: bool, now: Millis) -> Option<WaitReason> {
    if retry_at.is_some_and(|t| t > now) {
        Some(WaitReason::Backoff)
    } else {
        pool_waiting.then_some(WaitReason::PoolPlace)
    }
}

/// How a run's progress line names a claim's wait ([`claim_wait`], and
/// [`deferred_wait`] for one its pool defers): `held` says only the
/// count, the line says the hold itself ([`held_words`]).
#[must_use]
pub fn claim_wait_said(wait: WaitReason) -> &'static str {
    match wait {
        WaitReason::Backoff => "waiting to retry",
        WaitReason::Hold => "held",
        _ => "waiting for a place in its pool",
    }
}

/// Every reason an item waits, with no run in question (`show`, `items`,
/// the dashboard's item detail), each with until when where known; the
/// first is the reason [`waiting`] counts it under. Empty: finished, or
/// being worked.
pub fn item_reasons(h: &Holding, item: Waits, now: Millis) -> Vec<(WaitReason, Option<Millis>)> {
    use super::{Status, Tier};
    match (item.status, item.tier) {
        (Status::Done, _) => Vec::new(),
        (Status::Failed, Some(Tier::Manual)) => vec![(WaitReason::Quarantined, None)],
        // Not due yet, and whatever stops the batch when it is.
        (Status::Failed | Status::Pending, _) if item.next_attempt_at.is_some_and(|t| t > now) => {
            let mut out = vec![(WaitReason::NotDue, item.next_attempt_at)];
            out.extend(stops(h, now));
            out
        }
        // A live holder's claim is being worked, or waits to retry, or
        // for its pool (its hold, as every item does, or a place).
        (Status::Claimed, _) if h.lock_held && !item.orphaned => {
            match claim_wait(item.retry_at, item.pool_wait_since.is_some(), now) {
                None => Vec::new(),
                Some(WaitReason::Backoff) => vec![(WaitReason::Backoff, item.retry_at)],
                Some(_) => vec![deferred_wait(h.rate_limit.as_ref(), h.hold_until, now)],
            }
        }
        _ => {
            let stops = stops(h, now);
            if stops.is_empty() {
                vec![unstopped(h).unwrap_or((WaitReason::Pending, None))]
            } else {
                stops
            }
        }
    }
}

/// [`item_reasons`] as the views list them: one entry of one item each,
/// with what the holding says of it (its pool, whether a runner takes it
/// at its end).
pub fn item_waits(h: &Holding, item: Waits, now: Millis) -> Vec<Waiting> {
    let pending = item.status == super::Status::Pending;
    item_reasons(h, item, now)
        .into_iter()
        .map(|(reason, until)| Waiting {
            not_before: i64::from(reason == WaitReason::NotDue && pending),
            only_pending: pending,
            ..Waiting::of(h, reason, 1, until)
        })
        .collect()
}

/// Everything the batch holds that is not finished and not being run,
/// by reason: quarantined first (a human must act), then the retry tier,
/// then what could run and why it does not.
pub fn waiting(h: &Holding, now: Millis) -> Vec<Waiting> {
    let c = &h.counts;
    // Claims need the lock: with no live holder, a run takes them back.
    // A live holder's claims are in flight but for those waiting to
    // retry and those its pool defers; other runs' claims are taken back.
    let (in_flight, reclaim) = if h.lock_held {
        let orphaned = h.orphaned.clamp(0, c.claimed);
        (c.claimed - orphaned, orphaned)
    } else {
        (0, c.claimed)
    };
    let backoffs = h.retry_waits.items.clamp(0, in_flight);
    let pool_waits = h.pool_waits.clamp(0, in_flight - backoffs);
    let in_flight = in_flight - backoffs - pool_waits;
    // What a run could take, in the order it takes them: due retries
    // (redriven first), claims to take back, pending items.
    let mut taken = h.taken.max(0);
    let mut take = |n: i64| {
        let t = n.min(taken);
        taken -= t;
        n - t
    };
    let due = take(h.retry.due);
    let reclaims = take(reclaim);
    let rest = reclaims + take(c.pending - h.retry.pending_due - h.retry.pending_later);
    let mut out: Vec<Waiting> = Vec::new();
    let mut push = |reason, items: i64, until| {
        // One entry a reason: claims deferred by a held pool join the
        // items the hold stops.
        if let Some(w) = out.iter_mut().find(|w| w.reason == reason) {
            w.items += items.max(0);
        } else if items > 0 {
            let not_before = match reason {
                WaitReason::NotDue => h.retry.pending_later,
                WaitReason::Due => h.retry.pending_due.min(items),
                _ => 0,
            };
            out.push(Waiting {
                not_before,
                another_run: reason == WaitReason::InFlight && h.idle.is_none(),
                only_pending: due + reclaims == 0,
                ..Waiting::of(h, reason, items, until)
            });
        }
    };
    push(WaitReason::Quarantined, c.manual, None);
    push(WaitReason::NotDue, h.retry.later, h.retry.next_at);
    match blocked(h, now) {
        Some((reason, until)) => push(reason, due + rest, until),
        None => {
            push(WaitReason::Due, due, None);
            push(WaitReason::Pending, rest, None);
        }
    }
    push(WaitReason::Backoff, backoffs, h.retry_waits.next);
    // Claims their pool defers while a retry-after holds it wait for the
    // hold, as the items it stops do.
    let (reason, until) = deferred_wait(h.rate_limit.as_ref(), h.hold_until, now);
    push(reason, pool_waits, until);
    push(WaitReason::InFlight, in_flight, None);
    out
}

/// Whether items waiting for `reason`, a wait with an end, have no run to
/// take them at that end: no runner is live and no schedule fires, and a
/// run started now would take them (its words say "`nightshift run`
/// starts one"). Not while the batch is paused or the emergency stop is
/// on: such a run steps down, and the pause is said as its own reason.
fn no_runner(h: &Holding, reason: WaitReason) -> bool {
    matches!(
        reason,
        WaitReason::RateLimit | WaitReason::Hold | WaitReason::Budget | WaitReason::NotDue
    ) && !h.lock_held
        && !h.paused
        && !h.emergency_stop
        && h.idle == Some(Idle::NoRunner)
}

/// The pool items waiting for `reason` wait for, if any.
fn pool_of(h: &Holding, reason: WaitReason) -> Option<RateLimited> {
    match reason {
        WaitReason::RateLimit => rate_of(h).cloned(),
        WaitReason::PoolPlace => Some(pool_place(h)),
        // The pool's hold, when it is the one that ends last.
        WaitReason::Hold => hold_pool(h.rate_limit.as_ref(), h.hold_until).cloned(),
        _ => None,
    }
}

/// The rate limit items waiting for `reason` are paced by, if any: a live
/// runner holds the lock and spaces its calls by it.
fn paced_of(h: &Holding, reason: WaitReason) -> Option<String> {
    (reason == WaitReason::LockHeld)
        .then(|| h.paced.clone())
        .flatten()
}

/// The pool claimed items wait for a place in: the batch's, and why it
/// has no room when the views know (its dimension; empty when they do
/// not, as when a place this runner holds is given back at once).
fn pool_place(h: &Holding) -> RateLimited {
    h.rate_limit.clone().unwrap_or_else(|| RateLimited {
        pool: h.pool.clone().unwrap_or_else(|| "?".into()),
        dimension: String::new(),
        next_slot: None,
    })
}

/// The list for `--json`: `[{"reason": "not-due", "items": 2, "until":
/// "2026-01-01T07:16:00Z"}]`; `status --json` names the number `count`.
pub fn to_json(list: &[Waiting]) -> serde_json::Value {
    json_named(list, "items")
}

/// `status --json`'s list: `[{"reason": "paused", "count": 12, "until": null}]`.
pub fn to_status_json(list: &[Waiting]) -> serde_json::Value {
    json_named(list, "count")
}

fn json_named(list: &[Waiting], number: &str) -> serde_json::Value {
    list.iter()
        .map(|w| {
            let mut o = serde_json::Map::new();
            o.insert("reason".into(), serde_json::json!(w.reason));
            o.insert(number.into(), w.items.into());
            o.insert(
                "until".into(),
                serde_json::json!(w.until.map(crate::util::time::rfc3339)),
            );
            if let Some(p) = &w.pool {
                o.insert("pool".into(), p.pool.clone().into());
                if !p.dimension.is_empty() {
                    o.insert("dimension".into(), p.dimension.clone().into());
                }
            }
            if w.not_before > 0 {
                o.insert("not_before".into(), w.not_before.into());
            }
            if let Some(rate) = &w.paced {
                o.insert("rate_limit".into(), rate.clone().into());
            }
            if w.stopping {
                o.insert("stopping".into(), true.into());
            }
            if w.no_runner {
                o.insert("no_runner".into(), true.into());
            }
            serde_json::Value::Object(o)
        })
        .collect()
}

/// `2 quarantined await a human; 2 in the retry tier, next at 07:16:00Z`.
pub fn describe(list: &[Waiting], now: Millis) -> String {
    said(list, now, |k| k.to_string())
}

/// [`describe`] with counts grouped by thousands (`1,487 wait …`), as
/// the dashboard writes every count beside it.
pub fn describe_grouped(list: &[Waiting], now: Millis) -> String {
    said(list, now, crate::util::text::grouped)
}

fn said(list: &[Waiting], now: Millis, count: fn(i64) -> String) -> String {
    list.iter()
        .map(|w| Said(w, now, count).to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A reason in words: the wait, its time, and its counts as `count`
/// writes them.
struct Said<'a>(&'a Waiting, Millis, fn(i64) -> String);

impl fmt::Display for Said<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reason(f)?;
        if self.0.no_runner {
            f.write_str(", and no runner is live (`nightshift run` starts one)")?;
        }
        Ok(())
    }
}

impl Said<'_> {
    fn reason(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Said(w, now, count) = *self;
        let items = w.items;
        let n = count(items);
        let one = items == 1;
        // To the second, as `items` and `show` say the same time (it was
        // rounded up to the minute here alone).
        let at = |t: Option<Millis>| t.map_or("?".into(), |t| utc_clock(t, now));
        match w.reason {
            WaitReason::Quarantined => {
                write!(
                    f,
                    "{n} quarantined {}",
                    if one {
                        "awaits a human"
                    } else {
                        "await a human"
                    }
                )
            }
            WaitReason::NotDue => match w.not_before {
                0 => write!(f, "{n} in the retry tier, next at {}", at(w.until)),
                // A not-before time to the second, as it was given.
                k if k == items && one => write!(
                    f,
                    "1 pending, not before {}",
                    w.until.map_or("?".into(), |t| utc_clock(t, now))
                ),
                k if k == items => write!(
                    f,
                    "{n} pending, not before a time, next at {}",
                    w.until.map_or("?".into(), |t| utc_clock(t, now))
                ),
                k => write!(
                    f,
                    "{n} not due yet ({} in the retry tier, {} pending with a not-before time), next at {}",
                    count(items - k),
                    count(k),
                    at(w.until)
                ),
            },
            WaitReason::Due if w.not_before == 0 => write!(f, "{n} in the retry tier, due now"),
            WaitReason::Due => write!(f, "{n} due now (the next run takes them)"),
            WaitReason::EmergencyStop => {
                write!(
                    f,
                    "{n} {}: the emergency-stop file PAUSED exists",
                    waits(one)
                )
            }
            WaitReason::Paused => write!(f, "{n} {}: the batch is paused", waits(one)),
            WaitReason::LockHeld if w.stopping => write!(
                f,
                "{n} {}: the runner that holds the lock is stopping and takes no more (a run after it takes them)",
                waits(one)
            ),
            WaitReason::LockHeld => {
                write!(f, "{n} {} for the runner that holds the lock", waits(one))?;
                match &w.paced {
                    Some(rate) => write!(f, ", paced at {rate} (rate_limit)"),
                    None => Ok(()),
                }
            }
            // A hold's end to the second, as in every view of it.
            WaitReason::Hold => write!(
                f,
                "{n} {}",
                held_words(w.until, w.pool.as_ref().map(|p| p.pool.as_str()), now)
            ),
            // A reset on the minute (a day's 00:00Z) as the clock says it,
            // a short window's to the second.
            WaitReason::Budget => write!(
                f,
                "{n} {}: budget reached, resets {}",
                waits(one),
                w.until.map_or("?".into(), |t| moment(t, now))
            ),
            WaitReason::RateLimit => {
                let (pool, dim) = w
                    .pool
                    .as_ref()
                    .map_or(("?", "?"), |p| (p.pool.as_str(), p.dimension.as_str()));
                // A due retry or a dead run's claim is no pending item.
                if w.only_pending {
                    write!(f, "{n} pending: waiting for pool {pool}, {dim}")?;
                } else {
                    write!(f, "{n} {} for pool {pool}, {dim}", waits(one))?;
                }
                match w.until {
                    Some(t) => write!(f, ", next slot {}", utc_clock(t, now)),
                    None => Ok(()),
                }
            }
            WaitReason::PoolPlace => {
                let pool = w.pool.as_ref().map_or("?", |p| p.pool.as_str());
                write!(f, "{n} claimed, waiting for a place in pool {pool}")?;
                match (w.pool.as_ref().map(|p| p.dimension.as_str()), w.until) {
                    (Some(dim), Some(t)) if !dim.is_empty() => {
                        write!(f, " ({dim}, next slot {})", utc_clock(t, now))
                    }
                    _ => Ok(()),
                }
            }
            // To the second: a backoff is seconds long.
            WaitReason::Backoff => write!(
                f,
                "{n} claimed, waiting to retry after a failed attempt, {} at {}",
                if one { "the next" } else { "the first" },
                w.until.map_or("?".into(), |t| utc_clock(t, now))
            ),
            WaitReason::InFlight if w.another_run => write!(f, "{n} in flight in another run"),
            WaitReason::InFlight => write!(f, "{n} in flight"),
            WaitReason::Pending => write!(f, "{n} pending, not run"),
            WaitReason::NoRunner => write!(
                f,
                "{n} {} for a run: no runner is live and no schedule fires (`nightshift run` starts one)",
                waits(one)
            ),
            // The fire time itself: a minute past it was said before.
            WaitReason::NextFire => {
                write!(
                    f,
                    "{n} {} for the schedule's next fire at {}",
                    waits(one),
                    w.until.map_or("?".into(), |t| moment(t, now))
                )
            }
        }
    }
}

fn waits(one: bool) -> &'static str {
    if one { "waits" } else { "wait" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_767_250_000_000; // 2026-01-01T06:46:40Z
    const LATER: Millis = 1_767_251_760_000; // 07:16:00Z

    /// The first of an item's reasons: the one it is counted under.
    fn item_reason(h: &Holding, item: Waits, now: Millis) -> Option<(WaitReason, Option<Millis>)> {
        item_reasons(h, item, now).into_iter().next()
    }

    /// A paused item whose pool is held too, or whose budget is spent:
    /// every stop is named, each with until when, not only "paused"; the
    /// batch counts it once, under the first.
    #[test]
    fn an_item_names_every_stop_that_applies() {
        let pending = Waits {
            status: crate::model::Status::Pending,
            tier: None,
            next_attempt_at: None,
            pool_wait_since: None,
            retry_at: None,
            orphaned: false,
        };
        let held = RateLimited {
            pool: "openai".into(),
            dimension: "hold".into(),
            next_slot: Some(LATER),
        };
        let h = Holding {
            counts: counts(1, 0, 0, 0),
            paused: true,
            budget_until: Some(LATER + 60_000),
            rate_limit: Some(held.clone()),
            idle: Some(Idle::NoRunner),
            ..Holding::default()
        };
        assert_eq!(
            item_reasons(&h, pending, NOW),
            vec![
                (WaitReason::Paused, None),
                (WaitReason::Budget, Some(LATER + 60_000)),
                // The pool's retry-after is a hold, as the batch's own.
                (WaitReason::Hold, Some(LATER)),
            ]
        );
        assert_eq!(
            waiting(&h, NOW)
                .iter()
                .map(|w| (w.reason, w.items))
                .collect::<Vec<_>>(),
            vec![(WaitReason::Paused, 1)]
        );
        // Not due yet, in a paused batch: both.
        let later = Waits {
            next_attempt_at: Some(LATER),
            ..pending
        };
        let paused = Holding {
            paused: true,
            ..Holding::default()
        };
        assert_eq!(
            item_reasons(&paused, later, NOW),
            vec![
                (WaitReason::NotDue, Some(LATER)),
                (WaitReason::Paused, None)
            ]
        );
        // A hold that ends after the budget: the hold first, as counted.
        let both = Holding {
            counts: counts(1, 0, 0, 0),
            hold_until: Some(LATER + 120_000),
            budget_until: Some(LATER),
            ..Holding::default()
        };
        assert_eq!(
            item_reasons(&both, pending, NOW),
            vec![
                (WaitReason::Hold, Some(LATER + 120_000)),
                (WaitReason::Budget, Some(LATER)),
            ]
        );
        assert_eq!(waiting(&both, NOW)[0].reason, WaitReason::Hold);
        // Nothing stops it: the one reason it waits for, as before.
        assert_eq!(
            item_reasons(
                &Holding {
                    idle: Some(Idle::NoRunner),
                    ..Holding::default()
                },
                pending,
                NOW
            ),
            vec![(WaitReason::NoRunner, None)]
        );
    }

    /// A pool held by a retry-after: its pending items and the claims it
    /// defers wait for a hold, one count naming the pool, as the batch's
    /// own hold (they were counted under `rate-limit` and `pool-place`).
    #[test]
    fn a_pool_hold_is_a_hold() {
        let h = Holding {
            counts: counts(3, 2, 0, 0),
            lock_held: true,
            rate_limit: Some(RateLimited {
                pool: "openai".into(),
                dimension: POOL_HOLD.into(),
                next_slot: Some(LATER),
            }),
            pool: Some("openai".into()),
            pool_waits: 1,
            ..Holding::default()
        };
        let w = waiting(&h, NOW);
        assert_eq!(
            w.iter()
                .map(|w| (w.reason, w.items, w.until))
                .collect::<Vec<_>>(),
            [
                (WaitReason::Hold, 4, Some(LATER)),
                (WaitReason::InFlight, 1, None)
            ]
        );
        assert_eq!(
            describe(&w, NOW),
            "4 held until 07:16:00Z (retry-after for pool openai); 1 in flight in another run"
        );
        assert_eq!(to_status_json(&w)[0]["pool"], "openai");
        let deferred = Waits {
            status: crate::model::Status::Claimed,
            tier: None,
            next_attempt_at: None,
            pool_wait_since: Some(NOW),
            retry_at: None,
            orphaned: false,
        };
        assert_eq!(
            item_reason(&h, deferred, NOW),
            Some((WaitReason::Hold, Some(LATER)))
        );
        // The batch's own hold ends later: that one, not the pool, is said.
        let own = Holding {
            hold_until: Some(LATER + 60_000),
            ..h
        };
        let w = waiting(&own, NOW);
        assert_eq!(
            (w[0].reason, w[0].until),
            (WaitReason::Hold, Some(LATER + 60_000))
        );
        assert_eq!(w[0].pool, None);
    }

    fn counts(pending: i64, claimed: i64, retry: i64, manual: i64) -> Counts {
        Counts {
            pending,
            claimed,
            retry,
            manual,
            done: 36,
            ..Counts::default()
        }
    }

    /// Pending items with a not-before time are not due (and not counted
    /// again as pending); said apart from the retry tier, to the second.
    #[test]
    fn not_before_items_are_not_due_until_their_time() {
        let h = Holding {
            counts: counts(5, 0, 0, 0),
            retry: RetryTier {
                due: 1,
                later: 2,
                next_at: Some(LATER),
                pending_due: 1,
                pending_later: 2,
            },
            idle: Some(Idle::NoRunner),
            ..Holding::default()
        };
        let w = waiting(&h, NOW);
        assert_eq!(
            w.iter().map(|w| (w.reason, w.items)).collect::<Vec<_>>(),
            [(WaitReason::NotDue, 2), (WaitReason::NoRunner, 3)]
        );
        assert_eq!(
            describe(&w[..1], NOW),
            "2 pending, not before a time, next at 07:16:00Z, and no runner is live \
             (`nightshift run` starts one)"
        );
        // The wording of the wait itself, with a runner live.
        let one = Waiting {
            items: 1,
            not_before: 1,
            no_runner: false,
            ..w[0].clone()
        };
        assert_eq!(describe(&[one], NOW), "1 pending, not before 07:16:00Z");
        let mixed = Waiting {
            items: 3,
            no_runner: false,
            ..w[0].clone()
        };
        assert_eq!(
            describe(std::slice::from_ref(&mixed), NOW),
            "3 not due yet (1 in the retry tier, 2 pending with a not-before time), next at 07:16:00Z"
        );
        // Said to the second, as `items` and `show` say it (rounded up to
        // the minute, it was `07:17Z` here and `07:16:42Z` there).
        let retry = Waiting {
            not_before: 0,
            until: Some(LATER + 42_000),
            ..mixed
        };
        assert_eq!(
            describe(&[retry], NOW),
            "3 in the retry tier, next at 07:16:42Z"
        );
        assert_eq!(to_status_json(&w[..1])[0]["not_before"], 2);
        let item = Waits {
            status: crate::model::Status::Pending,
            tier: None,
            next_attempt_at: Some(LATER),
            pool_wait_since: None,
            retry_at: None,
            orphaned: false,
        };
        assert_eq!(
            item_reason(&h, item, NOW),
            Some((WaitReason::NotDue, Some(LATER)))
        );
        assert_eq!(
            item_reason(&h, item, LATER).map(|r| r.0),
            Some(WaitReason::NoRunner)
        );
    }

    #[test]
    fn after_a_run_the_quarantined_and_the_retry_tier_are_said() {
        let h = Holding {
            counts: counts(0, 0, 2, 2),
            retry: RetryTier {
                due: 0,
                later: 2,
                next_at: Some(LATER),
                ..RetryTier::default()
            },
            ..Holding::default()
        };
        let w = waiting(&h, NOW);
        assert_eq!(
            describe(&w, NOW),
            "2 quarantined await a human; 2 in the retry tier, next at 07:16:00Z"
        );
        assert_eq!(w[1].until, Some(LATER));
    }

    #[test]
    fn a_finished_batch_holds_nothing() {
        assert!(waiting(&Holding::default(), NOW).is_empty());
        let h = Holding {
            counts: counts(0, 0, 0, 0),
            ..Holding::default()
        };
        assert_eq!(describe(&waiting(&h, NOW), NOW), "");
    }

    /// The dashboard groups every count by thousands, the waiting line's
    /// too; the CLI's tables and lines do not.
    #[test]
    fn the_dashboard_words_group_counts_by_thousands() {
        let h = Holding {
            counts: counts(1_487, 0, 2_500, 1_000),
            retry: RetryTier {
                later: 2_500,
                next_at: Some(LATER),
                pending_later: 1_200,
                ..RetryTier::default()
            },
            lock_held: true,
            ..Holding::default()
        };
        let list = waiting(&h, NOW);
        assert_eq!(
            describe_grouped(&list, NOW),
            "1,000 quarantined await a human; 2,500 not due yet (1,300 in the retry tier, \
             1,200 pending with a not-before time), next at 07:16:00Z; \
             287 wait for the runner that holds the lock"
        );
        assert!(
            describe(&list, NOW)
                .starts_with("1000 quarantined await a human; 2500 not due yet (1300 ")
        );
    }

    #[test]
    fn a_wait_with_an_end_says_when_no_runner_takes_them_then() {
        let h = |idle, lock_held| Holding {
            counts: counts(4, 0, 0, 0),
            budget_until: Some(LATER),
            lock_held,
            idle,
            ..Holding::default()
        };
        let said = |h: &Holding| describe(&waiting(h, NOW), NOW);
        assert_eq!(
            said(&h(Some(Idle::NoRunner), false)),
            "4 wait: budget reached, resets 07:16Z, and no runner is live (`nightshift run` starts one)"
        );
        assert_eq!(
            to_status_json(&waiting(&h(Some(Idle::NoRunner), false), NOW))[0]["no_runner"],
            true
        );
        // The retry tier's next attempt, or a not-before time, likewise:
        // nothing takes them then.
        let retry = Holding {
            counts: counts(0, 0, 0, 0),
            retry: RetryTier {
                later: 2,
                next_at: Some(LATER),
                ..RetryTier::default()
            },
            idle: Some(Idle::NoRunner),
            ..Holding::default()
        };
        assert_eq!(
            said(&retry),
            "2 in the retry tier, next at 07:16:00Z, and no runner is live (`nightshift run` starts one)"
        );
        // A live runner, a schedule that fires, or a run's own view: the
        // wait alone.
        for holding in [
            h(Some(Idle::NoRunner), true),
            h(Some(Idle::NextFire(LATER)), false),
            h(None, false),
        ] {
            assert_eq!(
                said(&holding),
                "4 wait: budget reached, resets 07:16Z",
                "{holding:?}"
            );
        }
    }

    #[test]
    fn what_could_run_says_what_stops_it() {
        let base = Holding {
            counts: counts(5, 1, 0, 1),
            retry: RetryTier {
                due: 2,
                ..RetryTier::default()
            },
            ..Holding::default()
        };
        let said = |h: &Holding| describe(&waiting(h, NOW), NOW);
        // Due retries, a dead run's claim and pending items: 8; a dry run
        // with --limit 3 takes the 2 due retries and the claim.
        let limited = Holding {
            taken: 3,
            ..base.clone()
        };
        assert_eq!(
            said(&limited),
            "1 quarantined awaits a human; 5 pending, not run"
        );
        // Taken in order: the due retries first.
        let one = Holding {
            taken: 1,
            ..base.clone()
        };
        assert_eq!(
            said(&one),
            "1 quarantined awaits a human; 1 in the retry tier, due now; 6 pending, not run"
        );
        let paused = Holding {
            paused: true,
            ..base.clone()
        };
        assert_eq!(
            said(&paused),
            "1 quarantined awaits a human; 8 wait: the batch is paused"
        );
        let stop = Holding {
            emergency_stop: true,
            paused: true,
            ..base.clone()
        };
        assert!(
            said(&stop).ends_with("8 wait: the emergency-stop file PAUSED exists"),
            "{}",
            said(&stop)
        );
        // A live holder keeps its claim: in flight, not ours to take.
        let held = Holding {
            lock_held: true,
            ..base.clone()
        };
        assert_eq!(
            said(&held),
            "1 quarantined awaits a human; 7 wait for the runner that holds the lock; 1 in flight in another run"
        );
        // Seen by no run (`status`, the dashboard): in flight, not "in
        // another run" (another than what?).
        let seen = Holding {
            idle: Some(Idle::NoRunner),
            ..held.clone()
        };
        assert_eq!(
            said(&seen),
            "1 quarantined awaits a human; 7 wait for the runner that holds the lock; 1 in flight"
        );
        // Paced by the batch's own rate limit: the runner spaces its calls,
        // and the line says by what (`--json`: `rate_limit`).
        let paced = Holding {
            paced: Some("4/min".into()),
            ..held.clone()
        };
        assert_eq!(
            said(&paced),
            "1 quarantined awaits a human; 7 wait for the runner that holds the lock, paced at 4/min (rate_limit); 1 in flight in another run"
        );
        assert_eq!(to_json(&waiting(&paced, NOW))[1]["rate_limit"], "4/min");
        // Its runner stopping (a signal, `nightshift stop`): it takes none
        // of them, whatever pace it kept.
        let stopping = Holding {
            lock_stopping: true,
            ..paced.clone()
        };
        assert_eq!(
            said(&stopping),
            "1 quarantined awaits a human; 7 wait: the runner that holds the lock is stopping and takes no more (a run after it takes them); 1 in flight in another run"
        );
        assert_eq!(to_json(&waiting(&stopping, NOW))[1]["stopping"], true);
        // With no runner, the rate limit is not what they wait for.
        let idle = Holding {
            paced: Some("4/min".into()),
            ..base.clone()
        };
        assert!(!said(&idle).contains("paced"), "{}", said(&idle));
        // Its claim's call deferred by its pool: waiting, not in flight.
        let deferred = Holding {
            pool: Some("openai".into()),
            pool_waits: 1,
            ..held.clone()
        };
        assert_eq!(
            said(&deferred),
            "1 quarantined awaits a human; 7 wait for the runner that holds the lock; 1 claimed, waiting for a place in pool openai"
        );
        let json = to_status_json(&waiting(&deferred, NOW));
        assert_eq!(json[2]["reason"], "pool-place");
        assert_eq!(json[2]["pool"], "openai");
        let claim = Waits {
            status: crate::model::Status::Claimed,
            tier: None,
            next_attempt_at: None,
            pool_wait_since: Some(NOW),
            retry_at: None,
            orphaned: false,
        };
        assert_eq!(
            item_reason(&deferred, claim, NOW),
            Some((WaitReason::PoolPlace, None))
        );
        // A dead run's claim beside the live holder: not in flight, a
        // run takes it back (here the holder, which waits on nothing).
        let orphan = Holding {
            orphaned: 1,
            ..held.clone()
        };
        assert_eq!(
            said(&orphan),
            "1 quarantined awaits a human; 8 wait for the runner that holds the lock"
        );
        // Its attempt failed and runs again later (a backoff): waiting to
        // retry, until then, not in flight; once the time came it is
        // worked again (at the gate), so in flight as before.
        let backoff = Holding {
            retry_waits: RetryWaits {
                items: 1,
                next: Some(LATER),
            },
            ..held.clone()
        };
        assert_eq!(
            said(&backoff),
            "1 quarantined awaits a human; 7 wait for the runner that holds the lock; 1 claimed, waiting to retry after a failed attempt, the next at 07:16:00Z"
        );
        let json = to_status_json(&waiting(&backoff, NOW));
        assert_eq!(
            (&json[2]["reason"], &json[2]["until"]),
            (&"backoff".into(), &"2026-01-01T07:16:00Z".into())
        );
        let retrying = Waits {
            retry_at: Some(LATER),
            pool_wait_since: None,
            ..claim
        };
        assert_eq!(
            item_reason(&backoff, retrying, NOW),
            Some((WaitReason::Backoff, Some(LATER)))
        );
        assert_eq!(item_reason(&backoff, retrying, LATER), None);
        let hold = Holding {
            hold_until: Some(LATER),
            ..base.clone()
        };
        assert!(
            said(&hold).ends_with("8 held until 07:16:00Z (retry-after)"),
            "{}",
            said(&hold)
        );
        let pool = Holding {
            rate_limit: Some(RateLimited {
                pool: "openai".into(),
                dimension: "tokens/min".into(),
                next_slot: Some(LATER),
            }),
            ..base.clone()
        };
        // Due retries and a dead run's claim among them: not all pending.
        assert!(
            said(&pool).ends_with("8 wait for pool openai, tokens/min, next slot 07:16:00Z"),
            "{}",
            said(&pool)
        );
        let only_pending = Holding {
            counts: counts(5, 0, 0, 0),
            retry: RetryTier::default(),
            ..pool.clone()
        };
        assert_eq!(
            said(&only_pending),
            "5 pending: waiting for pool openai, tokens/min, next slot 07:16:00Z"
        );
        let budget = Holding {
            budget_until: Some(LATER),
            ..base.clone()
        };
        assert!(
            said(&budget).ends_with("8 wait: budget reached, resets 07:16Z"),
            "{}",
            said(&budget)
        );
        // A live holder waits for a hold, a budget or the pool too: that
        // is what its pending items wait for (its claims stay in flight).
        for (h, says) in [
            (&hold, "7 held until 07:16:00Z (retry-after)"),
            (&budget, "7 wait: budget reached, resets 07:16Z"),
            (
                &pool,
                "7 wait for pool openai, tokens/min, next slot 07:16:00Z",
            ),
        ] {
            let live = Holding {
                lock_held: true,
                ..h.clone()
            };
            assert!(
                said(&live).ends_with(&format!("{says}; 1 in flight in another run")),
                "{}",
                said(&live)
            );
        }
        // A hold that has passed holds nothing.
        let passed = Holding {
            hold_until: Some(NOW - 1),
            ..base
        };
        assert!(
            said(&passed).ends_with("2 in the retry tier, due now; 6 pending, not run"),
            "{}",
            said(&passed)
        );
    }

    /// Seen with no run in question, what could run waits for a runner or
    /// the next fire; each item's first reason (`show`) is the reason it
    /// is counted under, so the counts add up to every open item.
    #[test]
    fn with_no_run_in_question_each_item_has_the_reason_it_is_counted_under() {
        use crate::model::{Status, Tier};
        let items = [
            (Status::Pending, None, None),
            (Status::Pending, None, None),
            (Status::Failed, Some(Tier::Retry), Some(LATER)),
            (Status::Failed, Some(Tier::Retry), Some(NOW - 1)),
            (Status::Failed, Some(Tier::Manual), None),
            (Status::Claimed, None, None),
        ];
        let h = |idle, paused| Holding {
            counts: counts(2, 1, 2, 1),
            retry: RetryTier {
                due: 1,
                later: 1,
                next_at: Some(LATER),
                ..RetryTier::default()
            },
            paused,
            idle: Some(idle),
            ..Holding::default()
        };
        // The batch's counts by reason, and the items' own reasons tallied
        // (`orphaned`: the claimed item's run holds no live seat).
        let both = |holding: &Holding, orphaned: bool| {
            let counted: std::collections::HashMap<_, _> = waiting(holding, NOW)
                .iter()
                .map(|w| (w.reason, w.items))
                .collect();
            let mut tally = std::collections::HashMap::new();
            for (status, tier, next_attempt_at) in items {
                let w = Waits {
                    status,
                    tier,
                    next_attempt_at,
                    pool_wait_since: None,
                    retry_at: None,
                    orphaned: orphaned && status == Status::Claimed,
                };
                let (reason, _) = item_reason(holding, w, NOW).unwrap();
                *tally.entry(reason).or_insert(0i64) += 1;
            }
            (counted, tally)
        };
        for holding in [
            h(Idle::NoRunner, false),
            h(Idle::NextFire(LATER), false),
            h(Idle::NoRunner, true),
        ] {
            let (counted, tally) = both(&holding, false);
            assert_eq!(counted, tally, "{holding:?}");
            let all = waiting(&holding, NOW).iter().map(|w| w.items).sum::<i64>();
            assert_eq!(all, 6);
        }
        // Beside a live holder, the claim of a dead run: counted where its
        // own reason puts it (the holder takes it back), not in flight.
        let beside = Holding {
            lock_held: true,
            orphaned: 1,
            idle: None,
            ..h(Idle::NoRunner, false)
        };
        let (counted, tally) = both(&beside, true);
        assert_eq!(counted, tally, "{beside:?}");
        assert!(!counted.contains_key(&WaitReason::InFlight), "{counted:?}");
        let fire = waiting(&h(Idle::NextFire(LATER), false), NOW);
        assert_eq!(
            describe(&fire, NOW),
            "1 quarantined awaits a human; 1 in the retry tier, next at 07:16:00Z; \
             4 wait for the schedule's next fire at 07:16Z"
        );
        // A fire with seconds is said to the second, not as the minute after.
        let fire = waiting(&h(Idle::NextFire(LATER + 5_000), false), NOW);
        assert!(
            describe(&fire, NOW).ends_with("4 wait for the schedule's next fire at 07:16:05Z"),
            "{}",
            describe(&fire, NOW)
        );
    }
}
