//! Limit pools and budgets: their specs, admissions, holds, usage and spend.

use serde::Serialize;

use crate::model::Millis;

/// A limit pool as the store keeps it (see `runner::pool`): its name,
/// its rate dimensions and its cap on calls in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub dims: Vec<PoolDim>,
    pub concurrency: Option<u32>,
}

/// One rate of a pool: `count` units per `per_us` microseconds, a bucket
/// of `count` that refills evenly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolDim {
    /// `requests/min`, `tokens/day`, `input_tokens/min`.
    pub name: String,
    /// What it counts: requests, or which tokens.
    pub measure: crate::config::limits::Measure,
    pub count: i64,
    pub per_us: i64,
}

/// The key a runner's places in flight are kept under: its host and its
/// process (`host:pid-start`), so that a runner on any host can match
/// them to the runner's seats and tell whether it is live.
#[must_use]
pub fn place_key(holder: &crate::model::Holder) -> String {
    match holder.pid_start {
        Some(start) => format!("{}:{}-{start}", holder.host, holder.pid),
        None => format!("{}:{}", holder.host, holder.pid),
    }
}

/// The runner a place key names, as the views name a lock's holder
/// (`host:pid`); `None` for a key without its host (kept by a version
/// before keys had one: such places are judged live until they lapse).
#[must_use]
pub fn place_runner(key: &str) -> Option<String> {
    let (host, process) = key.rsplit_once(':')?;
    let pid = process.split('-').next().unwrap_or(process);
    Some(format!("{host}:{pid}"))
}

/// Places in flight of a runner that is gone (its seats lapsed, or it is
/// known dead on this host, or it holds none): no call of it is in flight
/// (its guard stopped its workers before its seats could lapse), so the
/// next call asking the pool takes them back; until then they are shown
/// as its, with when they would lapse by themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GonePlaces {
    /// `host:pid`, as `status` names a lock's holder.
    pub runner: String,
    pub places: i64,
    #[serde(serialize_with = "crate::util::time::json")]
    pub until: Millis,
}

/// A call asking for its place in a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCall {
    /// The runner that holds its place in flight (counted per runner).
    pub runner: String,
    /// The tokens reserved for it.
    pub estimate: i64,
    /// When its place in flight lapses should its runner die.
    pub until: Millis,
    /// The claimed item it is for: deferred, the item is marked waiting
    /// for its place (`Item::pool_wait_since`); admitted after a
    /// deferral, unmarked.
    pub item: Option<PoolItem>,
}

/// The claimed item of a [`PoolCall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolItem {
    pub id: i64,
    /// Its claim's lease token (a claim taken back is not marked).
    pub token: i64,
    /// Marked waiting by an earlier deferral of this claim's call.
    pub deferred: bool,
}

/// What a pool said to calls asking for their places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The first this many calls may start now.
    pub admitted: usize,
    /// Why the next may not, and when to ask again.
    pub wait: Option<PoolWait>,
}

/// Why a pool makes a call wait: `dimension` is `hold`, `concurrency` or
/// a rate (`tokens/min`); `until` is its next slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolWait {
    pub dimension: String,
    #[serde(serialize_with = "crate::util::time::json")]
    pub until: Millis,
}

impl PoolWait {
    /// Waiting for a place in flight (every one of `concurrency` taken).
    #[must_use]
    pub fn for_place(&self) -> bool {
        self.dimension == "concurrency"
    }

    /// A wait a settlement of this runner's may end: for a place in flight
    /// (it gives one back), or for a token rate (a call that used fewer
    /// tokens than it reserved gives the rest back to the bucket). A hold,
    /// or a rate of requests, ends at its time whatever is settled.
    #[must_use]
    pub fn ends_at_settlement(&self) -> bool {
        self.for_place()
            || self.dimension.starts_with("tokens/")
            || self.dimension.contains("_tokens/")
    }
}

/// A retry-after hold on every batch of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolHold {
    #[serde(serialize_with = "crate::util::time::json")]
    pub until: Millis,
    pub batch: String,
    pub key: Option<String>,
    /// That item's label, while the item is kept (read, never written:
    /// the hold stores its batch and key).
    pub label: Option<String>,
}

impl PoolHold {
    /// `KEY (LABEL)`: the item whose answer asked for the hold, in the
    /// words of a batch's own hold (`Hold::source`). Not made inert.
    #[must_use]
    pub fn source(&self) -> Option<String> {
        crate::model::asked_by(self.key.as_deref(), self.label.as_deref())
    }
}

/// The tokens one attempt used, as the worker reported them (`None`:
/// nothing reported, the estimate stands).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptUsage {
    pub batch: String,
    pub run_id: i64,
    pub key: String,
    pub attempt: i64,
    pub pool: Option<String>,
    /// The runner whose place in flight in the pool it gives back.
    #[serde(skip)]
    pub place: Option<String>,
    /// Its line goes on the item with its done mark (`Completion::usage`),
    /// not with the settlement.
    #[serde(skip)]
    pub with_done: bool,
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
    pub estimate: i64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
}

impl AttemptUsage {
    /// What it drew from the pool: the reported tokens, else the estimate.
    #[must_use]
    pub fn drawn(&self) -> (i64, i64, i64) {
        match (self.input_tokens, self.output_tokens) {
            (None, None) => (self.estimate, self.estimate, self.estimate),
            (i, o) => {
                let (i, o) = (i.unwrap_or(0), o.unwrap_or(0));
                (i.saturating_add(o), i, o)
            }
        }
    }
}

/// Tokens summed over attempts (a run, a pool, an item).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UsageSum {
    pub attempts: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Attempts that reported nothing (their estimates count in the pool).
    pub unreported: i64,
    pub estimated_tokens: i64,
    /// What the attempts that reported had reserved (`token_estimate`, or
    /// their item's `estimate_field`): against their tokens, how far off
    /// the estimates are. Kept per run only (0 in a pool's minutes).
    pub reported_estimate: i64,
}

/// A pool's state for the views: each rate's use of its bucket, calls in
/// flight, the hold, and its tokens per minute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolView {
    pub name: String,
    pub dims: Vec<PoolDimView>,
    /// Places of live runners: calls in flight.
    pub in_flight: i64,
    /// Places of runners that are gone, not in flight and free to the
    /// next call (not counted in `in_flight`).
    pub gone: Vec<GonePlaces>,
    pub concurrency: Option<u32>,
    pub hold: Option<PoolHold>,
    /// Tokens drawn per minute, oldest first, ending at the current minute.
    pub tokens_per_minute: Vec<i64>,
    /// Since the start of the UTC day.
    pub today: UsageSum,
}

/// One rate of a pool: how much of its bucket is drawn now, what was
/// settled in its window, and its bucket as read, which tells when a call
/// of any size fits (`next_slot`, the rule admission uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolDimView {
    pub dimension: String,
    /// The bucket's level (GCRA): what decides a wait, not what a user
    /// counts.
    pub used: i64,
    /// Calls (or tokens) settled in the limit's last window (per minute
    /// sums, the oldest minute weighted by its share of the window).
    pub recent: i64,
    pub limit: i64,
    /// The rate as configured.
    #[serde(skip)]
    pub rate: PoolDim,
    /// Its bucket's theoretical arrival time (µs), not before the read.
    #[serde(skip)]
    pub tat_us: i64,
}

impl PoolDimView {
    /// Room left in the bucket now.
    #[must_use]
    pub fn free(&self) -> i64 {
        (self.limit - self.used).max(0)
    }

    /// More settled in the window than the limit while the bucket has
    /// room. A bucket refills as it goes, so a window can pass up to twice
    /// its limit after a quiet one (and more when workers report more than
    /// their estimates): the views say so, or the count reads as a broken
    /// limit.
    #[must_use]
    pub fn over_window(&self) -> bool {
        self.recent > self.limit && self.used < self.limit
    }

    /// Whether `recent` is the last minute's mean scaled to a window
    /// shorter than a minute (the store sums per minute): `10/s` shows
    /// what a second of the last minute averaged, not the last second.
    #[must_use]
    pub fn recent_is_mean(&self) -> bool {
        self.rate.per_us < 60_000_000
    }

    /// What the views add after `recent`, when it is a mean.
    #[must_use]
    pub fn recent_said(&self) -> &'static str {
        if self.recent_is_mean() {
            " (the last minute's mean)"
        } else {
            ""
        }
    }
}

/// Whose budget a spend row counts: a batch's or a limit pool's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpendScope {
    Batch,
    Pool,
}

impl SpendScope {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SpendScope::Batch => "batch",
            SpendScope::Pool => "pool",
        }
    }
}

/// One window of one budget: its scope and name, its period, and the
/// window's start (UTC millis, a multiple of the period).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendKey {
    pub scope: SpendScope,
    pub name: String,
    pub period_ms: i64,
    pub window_start: Millis,
}

/// One attempt's cost (millionths) added to a budget's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendAdd {
    pub key: SpendKey,
    pub micros: i64,
}

/// What a budget's window has spent: millionths of the cost unit, over
/// how many attempts that reported a cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub micros: i64,
    pub attempts: i64,
}
