//! What the views ask of the store and get back: the dashboard, item pages and details, the event log.

use serde::Serialize;

use super::{ItemFilter, PoolSpec, PoolView, SpendKey, Spent};
use crate::model::{
    BatchInfo, DaemonInfo, DlqGroup, Event, FailedAttempt, Item, Millis, Outcome, Run, Status, Tier,
};

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
