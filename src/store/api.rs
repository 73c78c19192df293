//! The contract types both dialects speak: what callers pass to [`Store`]
//! and what they get back. Neutral ground: `sqlite/` and `pg/` import
//! from here, never from each other.
//!
//! [`Store`]: super::Store

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{
    BatchInfo, DaemonInfo, DlqGroup, Event, FailedAttempt, Hold, Holder, Item, LockInfo, Millis,
    NewItem, Outcome, Run, RunState, Status, StopCause, Tier,
};

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Monitoring: SQLite's read-only flag; no byte of any file changes.
    ReadOnly,
    ReadWrite,
}

/// What `unpause` found and undid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpaused {
    pub was_paused: bool,
    /// The retry-after hold it lifted (one still on).
    pub lifted: Option<Hold>,
}

/// Which items a listing shows.
#[derive(Debug, Clone, Default)]
pub struct ItemFilter {
    pub status: Option<Status>,
    pub tier: Option<Tier>,
    pub outcome: Option<Outcome>,
    pub error_class: Option<String>,
    /// Substring of key, label or error message.
    pub search: Option<String>,
    /// Done under another version than this one (see [`stale_sql`]).
    pub stale: Option<String>,
    /// Only the items a run would claim (see [`Claimable`]), in the
    /// claims' order.
    pub claimable: Option<Claimable>,
    pub limit: Option<usize>,
    pub offset: usize,
}

/// What a run starting `at` would claim: the pending items due, the
/// retry tier's due (redriven first) and, with `reclaim`, the claims it
/// would take back (left by runs that hold no seat of the lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimable {
    pub at: crate::model::Millis,
    pub reclaim: bool,
}

/// Which items a requeue moves (all given conditions must hold): failed
/// items, or with `outcome` done items of that outcome (they run again).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub keys: Vec<String>,
    pub class: Option<String>,
    pub tier: Option<Tier>,
    /// Match every failed item when no other condition is given.
    pub all_failed: bool,
    /// Done items with this outcome instead of failed ones.
    pub outcome: Option<Outcome>,
    /// Done items stale under this batch version instead (see [`stale_sql`]).
    pub stale: Option<String>,
    /// Where they go: pending, but not claimed before this time (none: at
    /// once).
    pub not_before: Option<crate::model::Millis>,
}

impl Selection {
    /// The items it moves, as a condition on `i`: fixed words, and with
    /// `stale` the placeholder `version` that the caller binds to it.
    pub(crate) fn moves_sql(&self, version: &str) -> String {
        match (&self.stale, self.outcome) {
            (Some(_), _) => stale_sql(version),
            (None, Some(o)) => format!(" AND i.status = 'done' AND i.outcome = '{}'", o.as_str()),
            (None, None) => " AND i.status = 'failed'".into(),
        }
    }
}

/// The one rule of versioned done, as a condition on `i` with the current
/// version bound to the placeholder `version`: an item a worker finished
/// (outcome done or empty; a skipped one never ran) under another version,
/// or before the batch had one, is stale.
pub(crate) fn stale_sql(version: &str) -> String {
    format!(
        " AND i.status = 'done' AND i.outcome <> 'skipped' \
          AND (i.done_version IS NULL OR i.done_version <> {version})"
    )
}

/// One item a requeue moved (or would move), and where from: its tier
/// (a failed item) or its outcome (a done one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Requeue {
    pub key: String,
    pub label: String,
    pub tier: Option<Tier>,
    pub outcome: Option<Outcome>,
    pub error_class: Option<String>,
    pub attempts: u32,
}

/// Result of a finished worker run, as the runner reports it.
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    pub item_id: i64,
    pub token: i64,
    pub run_id: i64,
    pub outcome: Outcome,
    pub result: Option<&'a str>,
    pub cost: Option<f64>,
    /// The batch `version` the item is done under.
    pub version: Option<&'a str>,
    /// The attempt's usage line, kept on the item with the done mark (see
    /// `Store::settle_usage`); `None`: its settlement wrote it, or none.
    pub usage: Option<&'a str>,
    pub now: Millis,
}

/// A failure that ends the claim.
#[derive(Debug, Clone)]
pub struct Failure<'a> {
    pub item_id: i64,
    pub token: i64,
    pub run_id: i64,
    pub tier: Tier,
    pub error_class: &'a str,
    pub message: &'a str,
    pub next_attempt_at: Option<Millis>,
    pub cost: Option<f64>,
    pub now: Millis,
}

/// A claimed item's failed attempt that runs again in this cycle, at `at`
/// (after its backoff, or the batch's hold).
#[derive(Debug, Clone, Copy)]
pub struct Retrying<'a> {
    pub item_id: i64,
    pub token: i64,
    pub run_id: i64,
    /// The failed attempt's cost: counted on the item and the run here,
    /// as `fail` counts a failure's.
    pub cost: Option<f64>,
    pub at: Millis,
    pub error_class: &'a str,
    pub message: &'a str,
    pub now: Millis,
}

/// Which events to read.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub batch: Option<String>,
    /// Any of these kinds (empty: all).
    pub kinds: Vec<String>,
    pub key: Option<String>,
    /// Only events with a larger id (following the log).
    pub after_id: Option<i64>,
    pub since: Option<Millis>,
    pub limit: usize,
}

/// Where `log --follow` is, so each later event is shown once, in the
/// order of ids. On SQLite (one writer at a time) ids are in commit order:
/// the last id shown is enough. On PostgreSQL a transaction can commit
/// after another that took a larger id: there the cursor is the horizon of
/// finished transactions (`pg::events`).
#[derive(Debug, Clone, Default)]
pub struct FollowCursor {
    pub(crate) after_id: i64,
    /// PostgreSQL: events of transactions below this one were all seen.
    pub(crate) horizon: Option<i64>,
    /// Ids already shown from transactions at or above the horizon.
    pub(crate) shown: Vec<i64>,
}

impl FollowCursor {
    /// Records events shown by a plain `events` listing read after the
    /// cursor was taken, so following does not show them again.
    pub fn shown(&mut self, events: &[Event]) {
        if let Some(last) = events.iter().map(|e| e.id).max() {
            self.after_id = self.after_id.max(last);
        }
        self.shown.extend(events.iter().map(|e| e.id));
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    /// We hold a seat now; `took_over` names the stale holder whose seat
    /// we took, if any.
    Acquired { took_over: Option<LockInfo> },
    /// Every seat is held by a live runner (oldest first; never empty).
    Held(Vec<LockInfo>),
}

/// How a run ended, as [`Store::finish_run`](crate::store::Store::finish_run)
/// records it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunEnd<'a> {
    pub state: RunState,
    /// Why it stopped before it ran out of work, if it did.
    pub stopped: Option<StopCause>,
    /// Its one-line summary.
    pub summary: &'a str,
    /// Items already done when it began: the work a resume did not pay for.
    pub skipped_done: i64,
    /// Extra attempts its immediate retries made.
    pub retried: i64,
}

impl<'a> RunEnd<'a> {
    /// A run that ended in `state`, not stopped early, that skipped and
    /// retried nothing.
    #[must_use]
    pub fn new(state: RunState, summary: &'a str) -> RunEnd<'a> {
        RunEnd {
            state,
            stopped: None,
            summary,
            skipped_done: 0,
            retried: 0,
        }
    }
}

/// A run that has not ended, and who ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRun {
    pub id: i64,
    pub holder: Holder,
    pub started_at: Millis,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Done items deleted: each leaves its tombstone (unless forgotten).
    pub done_items: i64,
    pub events: i64,
    /// Attempts' kept stderr (`AttemptLog`), older than the cutoff.
    pub attempt_logs: i64,
    pub runs: i64,
    pub failed_items: i64,
    pub dead_letters: i64,
    /// Old failed items and dead letters left in place (no `include_failed`).
    pub failed_items_kept: i64,
    pub dead_letters_kept: i64,
    /// With `forget_keys`: tombstones dropped, by batch (keys of items done
    /// before the cutoff, the done items deleted now included).
    pub forgotten_keys: BTreeMap<String, i64>,
}

impl PruneReport {
    pub fn forgotten_total(&self) -> i64 {
        self.forgotten_keys.values().sum()
    }

    /// The `pruned` event's message.
    pub(crate) fn message(&self) -> String {
        let keys = if self.forgotten_keys.is_empty() {
            " (their keys kept)"
        } else {
            ""
        };
        let mut m = format!(
            "pruned {} done items{keys}, {} events, {} attempts' stderr, {} runs, {} failed items, {} dead letters",
            self.done_items,
            self.events,
            self.attempt_logs,
            self.runs,
            self.failed_items,
            self.dead_letters
        );
        if !self.forgotten_keys.is_empty() {
            m.push_str(&format!(
                "; forgot {} keys (adding one again runs it again)",
                self.forgotten_total()
            ));
        }
        m
    }
}

/// Above this many matches a filtered item count stops counting ("10000+").
pub const COUNT_CAP: i64 = 10_000;

/// What one poll reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DashQuery {
    /// The selected batch: runs, dead letters and items are read for it.
    pub batch: Option<String>,
    /// Minutes of per-minute completions per batch (rates and sparkline).
    pub minutes: i64,
    /// How many of the selected batch's newest runs to read.
    pub runs: usize,
    pub items: Option<ItemsQuery>,
    /// The failed items of one error class (the dead-letter pane).
    pub class_items: Option<ItemsQuery>,
    pub dlq: bool,
    pub events: Option<EventsQuery>,
    /// Key of the item whose detail is open.
    pub detail: Option<String>,
    /// The limit pools of the config, each read as the views show it.
    pub pools: Vec<PoolSpec>,
    /// The selected batch's budgets' windows (`runner::budget::key`).
    pub spend: Vec<SpendKey>,
}

/// A window of the selected batch's items, in insertion order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ItemsQuery {
    pub status: Option<Status>,
    /// Only done items with this outcome.
    pub outcome: Option<Outcome>,
    /// Only failed items of this error class.
    pub class: Option<String>,
    /// Substring of key or label ("" for none). (The CLI's `items
    /// --search` also looks in error messages; see `ItemFilter`.)
    pub search: String,
    pub offset: usize,
    pub limit: usize,
}

impl ItemsQuery {
    pub(crate) fn filter(&self) -> ItemFilter {
        ItemFilter {
            status: if self.class.is_some() {
                Some(Status::Failed)
            } else {
                self.status
            },
            outcome: self.outcome,
            error_class: self.class.clone(),
            search: (!self.search.is_empty()).then(|| self.search.clone()),
            ..ItemFilter::default()
        }
    }
}

/// The newest events up to an anchor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventsQuery {
    pub batch: Option<String>,
    /// Any of these kinds (empty: all).
    pub kinds: Vec<String>,
    /// Only events with an id at most this (None: the newest).
    pub up_to: Option<i64>,
    pub limit: usize,
}

/// One batch on the dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchView {
    pub info: BatchInfo,
    /// (done, failed) completions per minute, oldest first, the last one
    /// being the minute of the poll; none from before the batch existed
    /// (a batch made two minutes ago has two or three).
    pub minutes: Vec<(i64, i64)>,
    /// When the batch was made: a rate is never over a longer time.
    pub created_at: Millis,
}

/// An item as a table row: no payload or result, the error cut short.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemRow {
    pub key: String,
    pub label: String,
    pub status: Status,
    pub tier: Option<Tier>,
    pub outcome: Option<Outcome>,
    pub attempts: u32,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub updated_at: Millis,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ItemPage {
    pub offset: usize,
    pub rows: Vec<ItemRow>,
    /// Items matching the filter; at most `COUNT_CAP + 1` when `capped`.
    pub total: i64,
    pub capped: bool,
    /// A search still scanning: the percentage of items looked at so far.
    pub searching: Option<u8>,
}

/// What one attempt of an item printed on stderr: the last 16 KiB, as the
/// worker wrote it (`cut`: its start was left out). Views make it inert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptLog {
    pub attempt: u32,
    pub run_id: Option<i64>,
    /// When the attempt ended.
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
    pub stderr: String,
    pub cut: bool,
}

/// One item with every failure (newest first) and its own events.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemDetail {
    pub item: Item,
    /// Its failed attempts, newest first.
    pub failures: Vec<FailedAttempt>,
    /// What its newest attempts printed on stderr, newest first.
    pub attempt_logs: Vec<AttemptLog>,
    /// Oldest first.
    pub events: Vec<Event>,
}

/// Everything a poll read, as of one transaction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dashboard {
    pub batches: Vec<BatchView>,
    /// The selected batch's newest runs, newest first.
    pub runs: Vec<Run>,
    pub dlq: Vec<DlqGroup>,
    pub items: Option<ItemPage>,
    pub class_items: Option<ItemPage>,
    /// Oldest first.
    pub events: Vec<Event>,
    /// The open item, or why it could not be read.
    pub detail: Option<std::result::Result<ItemDetail, String>>,
    /// The selected batch (by name) and its retry tier (due now, later and
    /// when): what its waiting reasons need beside its counts.
    pub retry: Option<(String, crate::model::waiting::RetryTier)>,
    /// The selected batch's claimed items waiting for a place in its pool,
    /// read with `retry`.
    pub pool_waiting: i64,
    /// The selected batch's claimed items waiting to retry, read with
    /// `retry`.
    pub retry_waiting: crate::model::waiting::RetryWaits,
    /// The selected batch's budgets' windows asked for, and their spend.
    pub spent: Vec<(SpendKey, Spent)>,
    /// The scheduler daemons recorded, with their state at the poll.
    pub daemons: Vec<DaemonInfo>,
    /// The emergency-stop file `PAUSED` beside the store, if it is there
    /// (a file, not a row: the poller looks for it beside each read).
    pub emergency: Option<std::path::PathBuf>,
    /// The pools asked for (`DashQuery::pools`), in its order.
    pub pools: Vec<PoolView>,
}

/// The seats, runs and daemons a poll judged alive or not, kept so that
/// a poller notices a runner or daemon dying (or going silent) while the
/// store does not change: nothing is written when a process is killed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AliveWatch {
    batches: Vec<BatchInfo>,
    daemons: Vec<DaemonInfo>,
    /// The first moment the selected batch's waits change with no write:
    /// a retry falls due, a claimed retry's backoff ends, a hold ends.
    due: Option<Millis>,
}

impl Dashboard {
    #[must_use]
    /// What a poll at `read` (when this was read) saw, to tell whether a
    /// later one would see otherwise without a write.
    pub fn alive_watch(&self, read: Millis) -> AliveWatch {
        let held = self
            .batches
            .iter()
            .filter_map(|b| b.info.hold.as_ref().map(|h| h.until));
        let due = self
            .retry
            .as_ref()
            .and_then(|(_, tier)| tier.next_at)
            .into_iter()
            .chain(self.retry_waiting.next)
            .chain(held)
            .filter(|t| *t > read)
            .min();
        AliveWatch {
            batches: self.batches.iter().map(|b| b.info.clone()).collect(),
            daemons: self.daemons.clone(),
            due,
        }
    }
}

impl AliveWatch {
    /// Would a poll at `now` judge any of them otherwise? (Also once a
    /// wait it read has ended: the view said "next at 07:36Z" for up to a
    /// minute after.)
    #[must_use]
    pub fn changed(&self, now: Millis) -> bool {
        self.due.is_some_and(|t| now >= t)
            || self.batches.iter().any(|info| {
                let again = crate::store::ops::liveness::runners(info, now, |_| {
                    Ok::<_, ()>(info.runners.orphan_attempts.clone())
                });
                again.is_ok_and(|r| {
                    r.seats != info.runners.seats || r.last_run != info.runners.last_run
                })
            })
            || self
                .daemons
                .iter()
                .any(|d| crate::store::ops::liveness::daemon_state(&d.daemon, now) != d.state)
    }
}

/// What changed since a moment: the "since you last looked" summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SinceSummary {
    pub since: Millis,
    /// (batch, error class, tier, dead letters) since then.
    pub failures: Vec<(String, String, Tier, i64)>,
    /// (batch, state now, runs) of the runs that overlap the time since
    /// then: started since, ended since, or still running.
    pub runs: Vec<(String, String, i64)>,
    /// (batch, lock takeovers).
    pub takeovers: Vec<(String, i64)>,
    /// (batch, fire outcome, fires) of schedule fires since then.
    pub fires: Vec<(String, String, i64)>,
}

impl SinceSummary {
    pub fn is_empty(&self) -> bool {
        self.failures.is_empty()
            && self.runs.is_empty()
            && self.takeovers.is_empty()
            && self.fires.is_empty()
    }
}

/// How many items a filter without a search or class matches, from the
/// counters (`None`: not one of those, e.g. an outcome of pending items).
pub(crate) fn counted(counts: &crate::model::Counts, q: &ItemsQuery) -> Option<i64> {
    Some(match (q.status, q.outcome) {
        (None, None) => counts.total(),
        (Some(Status::Pending), None) => counts.pending,
        (Some(Status::Claimed), None) => counts.claimed,
        (Some(Status::Done), None) => counts.finished(),
        (Some(Status::Failed), None) => counts.failed(),
        (None | Some(Status::Done), Some(Outcome::Done)) => counts.done,
        (None | Some(Status::Done), Some(Outcome::Empty)) => counts.empty,
        (None | Some(Status::Done), Some(Outcome::Skipped)) => counts.skipped,
        _ => return None,
    })
}

/// Where a cancelled item goes (`cancel --to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelTo {
    /// Back to pending: it runs again (the cancelled attempt counts).
    Pending,
    /// The `manual` tier as `Cancelled`: it waits for a human.
    Manual,
}

impl CancelTo {
    pub fn as_str(self) -> &'static str {
        match self {
            CancelTo::Pending => "pending",
            CancelTo::Manual => "manual",
        }
    }
}

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
}

/// A retry-after hold on every batch of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolHold {
    #[serde(serialize_with = "crate::util::time::json")]
    pub until: Millis,
    pub batch: String,
    pub key: Option<String>,
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

/// What `cancel` did to an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Claimed by a live run, which was asked to stop its worker (or,
    /// with `waiting`, to drop it: not started, waiting for its backoff
    /// or a place in its pool) and move it (its heartbeat hears it within
    /// a second).
    Asked {
        run_id: Option<i64>,
        waiting: Option<crate::model::waiting::WaitReason>,
    },
    /// Not running: moved at once, from where it was (`pending`,
    /// `failed/retry`, ...).
    Moved { from: String },
    /// Not running and already where it was to go: nothing changed.
    Already { at: String },
    /// Claimed by a run whose runner is gone (crashed, or silent past its
    /// lock's expiry): nobody runs it, so it was moved at once.
    Orphaned { run_id: Option<i64> },
}

/// Where a cancelled claim was when its runner honoured the cancel: the
/// `cancelled` event says it, not that a worker was stopped when none ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelledWhile {
    /// Its worker was on it, and was stopped.
    Running,
    /// Its attempt had failed and it waited out the backoff.
    WaitingToRetry,
    /// Its call had not started (waiting for its pool, or not yet sent
    /// to its persistent worker).
    NotStarted,
    /// Its worker had answered, after the cancel: the answer is not kept.
    Answered,
}

impl CancelledWhile {
    /// The event's words for it.
    #[must_use]
    pub fn words(self) -> &'static str {
        match self {
            CancelledWhile::Running => "its worker was stopped",
            CancelledWhile::WaitingToRetry => "it was waiting to retry; no worker ran",
            CancelledWhile::NotStarted => "its call had not started",
            CancelledWhile::Answered => {
                "its worker's answer came after the cancel and was not kept"
            }
        }
    }
}

/// A cancel the runner honoured: the item moved where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelSettled {
    pub key: String,
    pub to: CancelTo,
    pub by: Option<String>,
}

/// A seat `ask_stop` asked: its runner, and when it was last heard from
/// when it is silent (its seat lapsed, on another host or stopped here):
/// it stops if it comes back, unless a run takes its seat over first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopAsked {
    pub seat: LockInfo,
    pub silent_since: Option<Millis>,
}

impl StopAsked {
    /// `vm:4242`, or `host-x:12 (silent since 02:14Z)`.
    pub fn said(&self, now: Millis) -> String {
        match self.silent_since {
            None => self.seat.holder.to_string(),
            Some(t) => format!(
                "{} (silent since {})",
                self.seat.holder,
                crate::util::time::utc_clock(t, now)
            ),
        }
    }
}

/// What the store asks of a running cycle (read by its heartbeat).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steering {
    /// A stop asked of its seat: `true` for `--now`, and who asked.
    pub stop: Option<(bool, Option<String>)>,
    /// The items it holds that were asked to be cancelled.
    pub cancels: Vec<i64>,
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
    pub in_flight: i64,
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

/// An add's items handed over part by part, in input order, while the rest
/// of the input is still being read (`Store::add_fed`).
pub trait AddFeed<'a> {
    /// The next part; `None` once every part was given. `Err`: the input
    /// is refused (a bad line), and nothing of it may be kept.
    fn next_part(&mut self) -> Option<std::result::Result<&'a [NewItem], FeedRefused>>;
    /// Once `next_part` said `None`: every item given, by key and then
    /// place (its index among all the items given), with its place.
    fn by_key(&mut self) -> Vec<(&'a str, usize)>;
}

/// The input of an add fed to the store was found bad.
#[derive(Debug)]
pub struct FeedRefused;

#[cfg(test)]
mod tests {
    use super::PruneReport;

    /// The `pruned` event says the keys were kept only when they were.
    #[test]
    fn a_prune_that_forgot_keys_does_not_say_it_kept_them() {
        let mut report = PruneReport {
            done_items: 5,
            ..PruneReport::default()
        };
        assert!(
            report
                .message()
                .starts_with("pruned 5 done items (their keys kept), ")
        );
        report.forgotten_keys.insert("b".into(), 8);
        let said = report.message();
        assert!(said.starts_with("pruned 5 done items, 0 events"), "{said}");
        assert!(
            said.ends_with("; forgot 8 keys (adding one again runs it again)"),
            "{said}"
        );
    }
}
