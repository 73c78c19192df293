//! Domain types shared by the store, the runner, the dashboard and the CLI.
//!
//! These speak the product's words (item, claim, lease, tier, outcome, dead
//! letter) and know nothing of SQL: a PostgreSQL store returns the same types.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

use crate::util::json_text::JsonText;

/// Milliseconds since the Unix epoch, UTC. Every time in the store is one.
pub type Millis = i64;

/// Where an item is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Claimed,
    Done,
    Failed,
}

/// Which way a failed item goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Transient: redriven automatically once its next-attempt time passes.
    Retry,
    /// Quarantined for a human: permanent error, or attempts exhausted.
    Manual,
}

/// How a done item finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Done,
    /// The worker succeeded but produced nothing: kept apart on purpose.
    Empty,
    /// A human marked it done without running it.
    Skipped,
}

macro_rules! str_enum {
    ($ty:ident { $($variant:ident => $s:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $s),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($ty::$variant),)+
                    _ => Err(format!(
                        "unknown {} {s:?} (expected one of: {})",
                        stringify!($ty).to_lowercase(),
                        [$($s),+].join(", ")
                    )),
                }
            }
        }
    };
}

str_enum!(Status { Pending => "pending", Claimed => "claimed", Done => "done", Failed => "failed" });
str_enum!(Tier { Retry => "retry", Manual => "manual" });
str_enum!(Outcome { Done => "done", Empty => "empty", Skipped => "skipped" });

/// The short state word of an item: `pending`, `claimed`, `done`,
/// `done/empty`, `done/skipped`, `failed/retry`, `failed/manual` (the
/// buckets of [`Counts`]).
pub fn state_word(status: Status, tier: Option<Tier>, outcome: Option<Outcome>) -> String {
    match (status, tier, outcome) {
        (Status::Failed, Some(t), _) => format!("failed/{t}"),
        (Status::Done, _, Some(o)) if o != Outcome::Done => format!("done/{o}"),
        (s, _, _) => s.to_string(),
    }
}

// After `str_enum!`, which it uses.
pub mod claim_view;
mod event_kind;
pub mod pace;
pub mod waiting;
pub use event_kind::EventKind;
mod liveness;
mod owed;
pub use liveness::{
    DAEMON_BEAT, DAEMON_SILENT, Daemon, DaemonInfo, DaemonState, RunSeen, Runners, Seat, Taken,
    daemon_for,
};
pub use owed::Owed;

/// Item counts of one batch. Read in O(1) from counters the store keeps in
/// the same transaction as every transition.
///
/// The one definition of every count every view shows (`status` and its
/// `--json`, `--short` and `--prometheus`, the run summary, the dashboard;
/// the README's "What the counts mean" says the same). The seven fields
/// are disjoint: every item is in exactly one of them, so they add up to
/// [`Counts::total`]. "Done" is never a sum: an item that succeeded with
/// nothing is `empty`, counted apart (the silent failure to catch), and
/// one a human marked done is `skipped`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Waiting for a run to claim it.
    pub pending: i64,
    /// Claimed by a run: in flight.
    pub claimed: i64,
    /// The worker succeeded with a result (outcome `done`).
    pub done: i64,
    /// The worker succeeded with nothing on stdout (outcome `empty`).
    pub empty: i64,
    /// Marked done by a human without running (outcome `skipped`).
    pub skipped: i64,
    /// Failed, transient: redriven once its next-attempt time passes.
    pub retry: i64,
    /// Failed for a human (quarantined): runs again only when requeued.
    pub manual: i64,
}

impl Counts {
    pub fn total(&self) -> i64 {
        self.to_do() + self.finished() + self.failed()
    }
    /// Nothing more will happen to them unless requeued: done, empty and
    /// skipped (the items whose status is `done`).
    pub fn finished(&self) -> i64 {
        self.done + self.empty + self.skipped
    }
    /// Both tiers: `retry + manual` (the items whose status is `failed`).
    pub fn failed(&self) -> i64 {
        self.retry + self.manual
    }
    /// Not yet finished or failed: pending or in flight. With
    /// [`finished`](Self::finished) and [`failed`](Self::failed) it makes
    /// the total (`✓ ✗ …` in `status --short` and the dashboard's header).
    pub fn to_do(&self) -> i64 {
        self.pending + self.claimed
    }
    /// Finished of total, 0.0 to 1.0 (0.0 for an empty batch).
    pub fn progress(&self) -> f64 {
        if self.total() > 0 {
            self.finished() as f64 / self.total() as f64
        } else {
            0.0
        }
    }
    /// [`progress`](Self::progress) in whole percent, rounded down: 100 %
    /// only when every item is finished.
    pub fn percent(&self) -> Option<i64> {
        (self.total() > 0).then(|| self.finished() * 100 / self.total())
    }
}

/// The attempts a claim has used: its first attempt, counted at the
/// claim, is not used while its call waits for a place in its pool (a
/// retry counts its attempt once admitted). The store's `attempts_used!`
/// says the same in SQL.
#[must_use]
pub fn attempts_used(
    attempts: i64,
    pool_wait_since: Option<Millis>,
    retry_at: Option<Millis>,
) -> i64 {
    attempts - i64::from(pool_wait_since.is_some() && retry_at.is_none())
}

/// An item's attempts as the views say them: the attempts it used, and
/// when its claim's attempt has not started, which one waits and for
/// what (it counts once its call starts; a crash gives it back).
#[must_use]
pub fn attempts_said(item: &Item) -> String {
    let counted = i64::from(item.attempts);
    let used = attempts_used(counted, item.pool_wait_since, item.retry_at);
    if item.status == Status::Claimed && used < counted {
        format!("{used} (attempt {counted} has not started: its call waits for its pool)")
    } else {
        counted.to_string()
    }
}

/// Whether an item has used its attempts: a claim its dead runner left
/// behind is then quarantined by the next run instead of run again
/// (a poison item that kills its runner every time).
#[must_use]
pub fn attempts_used_up(attempts: i64, max_attempts: u32) -> bool {
    attempts >= i64::from(max_attempts)
}

/// One item as read back from the store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub id: i64,
    pub batch: String,
    pub key: String,
    pub label: String,
    /// As it was given: its numbers and key order kept.
    pub payload: JsonText,
    pub status: Status,
    pub tier: Option<Tier>,
    pub outcome: Option<Outcome>,
    pub attempts: u32,
    pub op_id: Option<String>,
    /// As the worker wrote it (JSON), or its text as a string.
    pub result: Option<JsonText>,
    pub cost: Option<f64>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    /// A failed item's next attempt (retry tier), or a pending one's
    /// not-before time: not claimed before it.
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub next_attempt_at: Option<Millis>,
    pub lease_run: Option<i64>,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub lease_until: Option<Millis>,
    pub lease_token: i64,
    #[serde(serialize_with = "crate::util::time::json")]
    pub created_at: Millis,
    #[serde(serialize_with = "crate::util::time::json")]
    pub updated_at: Millis,
    /// The batch `version` it was last done under (none: done before the
    /// batch had one, or not done).
    pub done_version: Option<String>,
    /// Claims take higher priorities first (default 0), then older items.
    pub priority: i32,
    /// Claimed, its call deferred by its limit pool since then: it waits
    /// for a place, it is not in flight (counted only while claimed).
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub pool_wait_since: Option<Millis>,
    /// Claimed, its attempt failed and it runs again in this cycle at
    /// this time (after its backoff, or the batch's hold): it waits, it
    /// is not in flight (counted only while claimed).
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub retry_at: Option<Millis>,
}

impl Item {
    /// A pending item of `batch`, labelled by its key, made at `now`,
    /// with nothing else set: for the views' tests.
    #[cfg(test)]
    pub fn for_test(batch: &str, key: &str, now: Millis) -> Item {
        Item {
            id: 1,
            batch: batch.into(),
            key: key.into(),
            label: key.into(),
            payload: JsonText::stored("null"),
            status: Status::Pending,
            tier: None,
            outcome: None,
            attempts: 0,
            op_id: None,
            result: None,
            cost: None,
            error_class: None,
            error_message: None,
            next_attempt_at: None,
            lease_run: None,
            lease_until: None,
            lease_token: 0,
            created_at: now,
            updated_at: now,
            done_version: None,
            priority: 0,
            pool_wait_since: None,
            retry_at: None,
        }
    }
}

/// An item to add: its key and label come from `key::derive_line`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewItem {
    pub key: String,
    pub label: String,
    /// The payload as JSON text, stored as given.
    pub payload: String,
    /// Claims take higher priorities first, then older items.
    pub priority: i32,
    /// Not claimed before this time (it waits `not-due` until then).
    pub not_before: Option<Millis>,
}

/// What `add` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AddReport {
    pub added: u64,
    /// Already in the batch: as an item, or as the tombstone of one that
    /// was done and pruned (its key is kept, so it is not run again).
    pub present: u64,
    /// Of `present`, the keys of pruned items.
    pub pruned: u64,
    /// When the first and the last of those were pruned: in JSON (a
    /// `source` event's fields) `pruned_between`, in RFC 3339, as `add
    /// --json` says it.
    #[serde(
        rename = "pruned_between",
        serialize_with = "crate::util::time::json_span_opt"
    )]
    pub pruned_span: Option<(Millis, Millis)>,
    /// The priorities and not-before times the add gave its items.
    #[serde(skip)]
    pub order: AddOrder,
}

/// The priorities (other than 0) and not-before times an add gave, as
/// their lowest and highest: what its `added` event records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOrder {
    pub priority: Option<(i32, i32)>,
    pub not_before: Option<(Millis, Millis)>,
}

fn span<T: Ord + Copy>(a: Option<(T, T)>, b: Option<(T, T)>) -> Option<(T, T)> {
    match (a, b) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (one, other) => one.or(other),
    }
}

impl AddOrder {
    /// What `items` were given.
    pub fn of(items: &[NewItem]) -> AddOrder {
        items.iter().fold(AddOrder::default(), |o, i| AddOrder {
            priority: span(
                o.priority,
                (i.priority != 0).then_some((i.priority, i.priority)),
            ),
            not_before: span(o.not_before, i.not_before.map(|t| (t, t))),
        })
    }

    /// The order of two parts of one add.
    #[must_use]
    pub fn then(self, more: AddOrder) -> AddOrder {
        AddOrder {
            priority: span(self.priority, more.priority),
            not_before: span(self.not_before, more.not_before),
        }
    }

    /// The priorities given, as the `added` event and `add --json` say
    /// them: `5`, or `[-1, 9]` for the lowest and the highest.
    pub fn priority_json(&self) -> Option<serde_json::Value> {
        self.priority
            .map(|(low, high)| one_or_span((low, high), |p| p.into()))
    }

    /// The not-before times given, as [`AddOrder::priority_json`], in RFC 3339.
    pub fn not_before_json(&self) -> Option<serde_json::Value> {
        self.not_before
            .map(|span| one_or_span(span, |t| crate::util::time::rfc3339(t).into()))
    }

    /// The priorities given in words: `priority 5`, `priorities -1 to 9`.
    pub fn priority_words(&self) -> Option<String> {
        self.priority.map(|(low, high)| {
            if low == high {
                format!("priority {low}")
            } else {
                format!("priorities {low} to {high}")
            }
        })
    }
}

fn one_or_span<T: PartialEq>(
    (low, high): (T, T),
    f: fn(T) -> serde_json::Value,
) -> serde_json::Value {
    if low == high {
        f(low)
    } else {
        serde_json::json!([f(low), f(high)])
    }
}

impl AddReport {
    /// Counts a key found as the tombstone of an item pruned at `at`.
    pub fn count_pruned(&mut self, at: Millis) {
        self.present += 1;
        self.pruned += 1;
        self.pruned_span = Some(match self.pruned_span {
            Some((first, last)) => (first.min(at), last.max(at)),
            None => (at, at),
        });
    }

    /// The report of this add followed by `more`.
    #[must_use]
    pub fn then(self, more: AddReport) -> AddReport {
        AddReport {
            added: self.added + more.added,
            present: self.present + more.present,
            pruned: self.pruned + more.pruned,
            pruned_span: span(self.pruned_span, more.pruned_span),
            order: self.order.then(more.order),
        }
    }

    /// `added 3, already present 2 (1 of them done and pruned on 2026-11-02)`.
    pub fn summary(&self) -> String {
        self.summary_as("added")
    }

    /// [`summary`](Self::summary) with another verb for `added` (a dry
    /// run's `would add`).
    pub fn summary_as(&self, added: &str) -> String {
        let mut s = format!("{added} {}, already present {}", self.added, self.present);
        if let Some((first, last)) = self.pruned_span {
            let day = |ms| {
                crate::util::time::to_datetime(ms)
                    .format("%Y-%m-%d")
                    .to_string()
            };
            let (first, last) = (day(first), day(last));
            let when = if first == last {
                format!("on {first}")
            } else {
                format!("between {first} and {last}")
            };
            s.push_str(&format!(
                " ({} of them done and pruned {when})",
                self.pruned
            ));
        }
        s
    }
}

/// What pruning keeps of a done item: its key, and when and how it was
/// done, so that adding the same input again does not run it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tombstone {
    pub key: String,
    pub outcome: Outcome,
    #[serde(serialize_with = "crate::util::time::json")]
    pub done_at: Millis,
    #[serde(serialize_with = "crate::util::time::json")]
    pub pruned_at: Millis,
}

/// What `skip` did, key by key (in the order given, each key once).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkipReport {
    /// Marked done (outcome `skipped`) now.
    pub skipped: Vec<String>,
    /// Done already: left as they were.
    pub already_done: Vec<String>,
}

/// A claimed item: the lease token fences every write the runner makes
/// about it, so a runner that lost the lease cannot overwrite a newer claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub item_id: i64,
    pub key: String,
    pub label: String,
    /// The payload as stored JSON text (what the worker reads on stdin).
    pub payload: String,
    /// The attempt this claim starts (1 for a first run).
    pub attempt: u32,
    pub op_id: Option<String>,
    pub token: i64,
}

/// An append-only record of an item landing in `failed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    pub id: i64,
    pub batch: String,
    pub key: String,
    pub label: String,
    pub payload: JsonText,
    pub error_class: String,
    pub message: String,
    pub attempt: u32,
    #[serde(serialize_with = "crate::util::time::json")]
    pub failed_at: Millis,
    pub tier: Tier,
    pub run_id: Option<i64>,
}

/// One failed attempt of an item, as `show` and the dashboard's item
/// detail list them: one that ended its claim (its dead letter, in a
/// tier), or one retried at once in the same claim (its `retry` event).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedAttempt {
    pub attempt: u32,
    #[serde(serialize_with = "crate::util::time::json")]
    pub failed_at: Millis,
    pub error_class: String,
    pub message: String,
    /// The tier it was left in; `None`: retried at once.
    pub tier: Option<Tier>,
    pub run_id: Option<i64>,
}

impl FailedAttempt {
    /// Where the attempt left its item: its tier, or `retried` (at once).
    pub fn then(&self) -> &'static str {
        self.tier.map_or("retried", Tier::as_str)
    }
}

impl From<DeadLetter> for FailedAttempt {
    fn from(d: DeadLetter) -> FailedAttempt {
        FailedAttempt {
            attempt: d.attempt,
            failed_at: d.failed_at,
            error_class: d.error_class,
            message: d.message,
            tier: Some(d.tier),
            run_id: d.run_id,
        }
    }
}

/// Dead letters of one error class: the morning check compares the last 24 h
/// with the 24 h before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DlqGroup {
    pub error_class: String,
    pub last_24h: i64,
    pub prev_24h: i64,
    pub total: i64,
    /// Items of this class that are failed now, by tier.
    pub retry_now: i64,
    pub manual_now: i64,
}

/// How a run ended (or that it has not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    Running,
    Ok,
    Failed,
    Aborted,
    Paused,
    LockHeld,
    /// Found unfinished with its process gone.
    Crashed,
}
str_enum!(RunState {
    Running => "running",
    Ok => "ok",
    Failed => "failed",
    Aborted => "aborted",
    Paused => "paused",
    LockHeld => "lock-held",
    Crashed => "crashed",
});

impl RunState {
    /// How a run that ended this way is recorded: the one rule its exit
    /// code, its alert and `nightshift_last_run_success` follow. `aborted`
    /// for a signal or `nightshift stop` (130; and for a store lost under
    /// it, which takes nothing more), `paused` for a pause, `failed` when
    /// anything failed in it or it lost its lock or its worker (1), and
    /// `ok` otherwise (0), also when it stopped where its `max_duration` or
    /// `max_cost` told it to: that is what it was set to do, and the rest
    /// waits for the next cycle.
    #[must_use]
    pub fn ended(stopped: Option<StopCause>, failed: bool) -> RunState {
        match stopped {
            Some(StopCause::Paused) => RunState::Paused,
            Some(
                StopCause::Signal | StopCause::Stop | StopCause::StoreLost | StopCause::StoreFailed,
            ) => RunState::Aborted,
            Some(StopCause::LockLost | StopCause::WorkerCannotStart) => RunState::Failed,
            Some(StopCause::MaxDuration | StopCause::MaxCost) | None if failed => RunState::Failed,
            Some(StopCause::MaxDuration | StopCause::MaxCost) | None => RunState::Ok,
        }
    }
}

/// Why a run stopped before it ran out of work, kept with the run
/// (`stopped` in `--json`, a label of the metrics): words a script can
/// match, where its summary says it in a sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopCause {
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// `nightshift stop` (the dashboard's `X`).
    Stop,
    MaxDuration,
    MaxCost,
    Paused,
    LockLost,
    StoreLost,
    /// A write the run needed failed (the store unreachable past what a
    /// run waits for, a full disk...).
    StoreFailed,
    WorkerCannotStart,
}
str_enum!(StopCause {
    Signal => "signal",
    Stop => "stop",
    MaxDuration => "max_duration",
    MaxCost => "max_cost",
    Paused => "paused",
    LockLost => "lock-lost",
    StoreLost => "store-lost",
    StoreFailed => "store-failed",
    WorkerCannotStart => "worker-cannot-start",
});

impl Serialize for StopCause {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl StopCause {
    /// One of the batch's own limits (`max_duration`, `max_cost`): the run
    /// stopped claiming as set, and what is left waits for the next cycle.
    #[must_use]
    pub fn is_limit(self) -> bool {
        matches!(self, StopCause::MaxDuration | StopCause::MaxCost)
    }

    /// What a view says beside the run's state.
    #[must_use]
    pub fn note(self) -> &'static str {
        match self {
            StopCause::Signal => "interrupted",
            StopCause::Stop => "stopped by request",
            StopCause::MaxDuration => "max_duration reached",
            StopCause::MaxCost => "max_cost reached",
            StopCause::Paused => "paused",
            StopCause::LockLost => "lock lost",
            StopCause::StoreLost => "store lost",
            StopCause::StoreFailed => "store failed",
            StopCause::WorkerCannotStart => "worker cannot start",
        }
    }
}

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Manual,
    Schedule,
    Dashboard,
}
str_enum!(Trigger { Manual => "manual", Schedule => "schedule", Dashboard => "dashboard" });

/// The one-line summary counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RunCounts {
    pub done: i64,
    pub empty: i64,
    pub failed: i64,
    pub retry: i64,
    pub manual: i64,
    /// Extra attempts made by immediate retries.
    pub retried: i64,
    /// Items already done when the run started: the work a resume did not pay for twice.
    pub skipped_done: i64,
    pub redriven: i64,
    pub released: i64,
    /// Items whose worker the run stopped for a `nightshift cancel`.
    pub cancelled: i64,
    pub cost: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: i64,
    pub batch: String,
    pub trigger: Trigger,
    /// Who started it (`user@host`): the one who typed `nightshift run`,
    /// pressed `r` in the dashboard, or runs the daemon. `None` for runs
    /// recorded before nightshift kept it.
    pub actor: Option<String>,
    pub host: String,
    pub pid: u32,
    #[serde(serialize_with = "crate::util::time::json")]
    pub started_at: Millis,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub ended_at: Option<Millis>,
    pub state: RunState,
    /// Why it stopped before it ran out of work, if it did.
    pub stopped: Option<StopCause>,
    pub counts: RunCounts,
    pub summary: Option<String>,
}

impl Run {
    /// Why it stopped early, as a view says it beside its state `seen`
    /// (`ok, max_duration reached`): not for a pause (its state says so),
    /// nor once it is seen crashed or silent (its runner said nothing).
    #[must_use]
    pub fn stop_note(&self, seen: RunSeen) -> Option<&'static str> {
        match (seen, self.stopped) {
            (RunSeen::Stored(_), Some(cause)) if cause != StopCause::Paused => Some(cause.note()),
            _ => None,
        }
    }

    /// Did it step down at once, doing nothing: it found the lock held,
    /// or ended paused or aborted without touching an item (it found the
    /// batch paused, or was stopped while waiting for the lock)? Such a
    /// run never hides the run that did work (`BatchInfo::last_run`).
    /// The stores' `STEPPED_DOWN` condition says the same in SQL.
    pub fn stepped_down(&self) -> bool {
        let c = &self.counts;
        match self.state {
            RunState::LockHeld => true,
            RunState::Paused | RunState::Aborted => {
                c.done + c.empty + c.failed + c.redriven + c.released + c.cancelled == 0
            }
            _ => false,
        }
    }
}

/// Who holds a batch lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// Process start time (clock ticks since boot on Linux), so a reused pid
    /// is not mistaken for the holder.
    pub pid_start: Option<u64>,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.pid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockInfo {
    pub batch: String,
    pub token: String,
    pub holder: Holder,
    pub run_id: Option<i64>,
    #[serde(serialize_with = "crate::util::time::json")]
    pub acquired_at: Millis,
    #[serde(serialize_with = "crate::util::time::json")]
    pub expires_at: Millis,
    /// Its last renewal (its expiry less the holder's TTL; the acquisition
    /// for a seat recorded before the TTL was).
    #[serde(serialize_with = "crate::util::time::json")]
    pub renewed_at: Millis,
    /// Who asked its runner to stop (`stop`, the dashboard's `X`), not yet
    /// heard to the end: it is finishing its in-flight items.
    pub stop_by: Option<String>,
}

/// Pause flag of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    pub reason: String,
    pub by: String,
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
}

/// A retry-after hold on a batch: no worker call of the batch starts before
/// `until` (see `runner::gate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hold {
    #[serde(serialize_with = "crate::util::time::json")]
    pub until: Millis,
    /// The item whose answer asked for it.
    pub key: Option<String>,
    /// That item's label, while the item is kept.
    pub label: Option<String>,
}

impl Hold {
    /// Is the hold still on at `now`?
    #[must_use]
    pub fn active(&self, now: Millis) -> bool {
        self.until > now
    }

    /// `KEY (LABEL)`: the item whose answer asked for the hold (its label
    /// when it has one of its own). Not made inert.
    #[must_use]
    pub fn source(&self) -> Option<String> {
        let key = self.key.as_deref()?;
        Some(
            match self.label.as_deref().filter(|l| !l.is_empty() && *l != key) {
                Some(label) => format!("{key} ({label})"),
                None => key.to_string(),
            },
        )
    }

    /// `held until 15:20:00Z by a retry-after from KEY (LABEL)`: the same
    /// words in every view. Not made inert.
    #[must_use]
    pub fn describe(&self, now: Millis) -> String {
        let until = crate::util::time::utc_clock(self.until, now);
        match self.source() {
            Some(from) => format!("held until {until} by a retry-after from {from}"),
            None => format!("held until {until} by a retry-after"),
        }
    }
}

/// The outcome of a schedule fire, kept so "why did it not run" has an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fire {
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
    pub outcome: String,
    pub reason: Option<String>,
    pub run_id: Option<i64>,
}

/// The rule a daemon fires a batch by, as it read its config: stored with
/// the next fire it plans (`BatchInfo::next_fire`), so that the views give
/// the live daemon's fires rather than the file's (edited since, and not
/// reloaded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FireRule {
    /// The cron expression, as written.
    pub schedule: String,
    /// The time zone's name.
    pub timezone: String,
}

/// Per-batch state kept beside the items: pause flag and schedule state.
/// (`Default`: a batch with nothing recorded yet.)
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BatchInfo {
    pub name: String,
    pub counts: Counts,
    pub pause: Option<Pause>,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub next_fire: Option<Millis>,
    pub last_fire: Option<Fire>,
    /// The rule of the daemon that planned `next_fire`.
    pub fire_rule: Option<FireRule>,
    /// The fires still owed a cycle (one cut short, one queued).
    pub owed: Owed,
    /// The seats of the batch lock, oldest first (expired ones included).
    pub locks: Vec<LockInfo>,
    /// The newest run that did work, or is doing it: never one that
    /// stepped down ([`Run::stepped_down`]), which is `stepped_down`.
    pub last_run: Option<Run>,
    /// The newest run, when it stepped down (newer than `last_run`).
    pub stepped_down: Option<Run>,
    /// The last retry-after hold (over once `until` has passed).
    pub hold: Option<Hold>,
    /// Who is alive among them, as of the read (derived, not stored).
    #[serde(skip)]
    pub runners: Runners,
}

impl BatchInfo {
    /// A batch with no rows yet (only configured so far).
    #[must_use]
    pub fn empty(name: &str) -> BatchInfo {
        BatchInfo {
            name: name.to_string(),
            ..BatchInfo::default()
        }
    }

    /// A batch whose run `run` holds a live seat (host `h`, pid 7) from a
    /// minute before `now` to a minute after: for the views' tests.
    #[cfg(test)]
    pub fn live_for_test(name: &str, run: i64, now: Millis) -> BatchInfo {
        let mut info = BatchInfo::empty(name);
        info.locks.push(LockInfo {
            batch: name.into(),
            token: "t".into(),
            holder: Holder {
                host: "h".into(),
                pid: 7,
                pid_start: None,
            },
            run_id: Some(run),
            acquired_at: now - 60_000,
            expires_at: now + 60_000,
            renewed_at: now - 1_000,
            stop_by: None,
        });
        info.runners.seats.push(Seat::Live);
        info
    }

    /// The retry-after hold still on at `now`.
    #[must_use]
    pub fn held(&self, now: Millis) -> Option<&Hold> {
        self.hold.as_ref().filter(|h| h.active(now))
    }

    /// The oldest seat of the batch lock: the runner, unless several share
    /// the batch.
    #[must_use]
    pub fn lock(&self) -> Option<&LockInfo> {
        self.locks.first()
    }

    /// Does a live runner hold a seat? A seat whose runner crashed here,
    /// or went silent elsewhere past its expiry, stays until a runner takes
    /// it over, but holds nothing.
    #[must_use]
    pub fn running(&self) -> bool {
        self.runners.held()
    }

    /// Who holds a claim of run `run_id` now: the seat of that run and
    /// how it is, by the rule that counts `runners.orphaned`. `None` for
    /// a run that holds no seat: its claim is orphaned unless a live
    /// runner is there to take it back.
    #[must_use]
    pub fn claim_seat(&self, run_id: Option<i64>) -> Option<(&LockInfo, Seat)> {
        let run_id = run_id?;
        self.locks
            .iter()
            .zip(&self.runners.seats)
            .find(|(l, _)| l.run_id == Some(run_id))
            .map(|(l, s)| (l, *s))
    }

    /// Whether the run `run_id` holding a claim has a live seat: its claim
    /// is worked (or waits in it), else orphaned (see `claim_view`).
    #[must_use]
    pub fn claim_is_live(&self, run_id: Option<i64>) -> bool {
        self.claim_seat(run_id).is_some_and(|(_, s)| s.is_live())
    }

    /// Who asked a live runner of the batch to stop: it claims nothing more
    /// and is finishing its in-flight items (within the batch's `grace`).
    #[must_use]
    pub fn stop_asked_by(&self) -> Option<&str> {
        self.locks
            .iter()
            .zip(&self.runners.seats)
            .filter(|(_, s)| s.is_live())
            .find_map(|(l, _)| l.stop_by.as_deref())
    }

    /// Whether the batch's live runners are all stopping (see
    /// [`all_stopping`]): they take nothing more.
    #[must_use]
    pub fn lock_stopping(&self) -> bool {
        all_stopping(&self.locks, &self.runners.seats)
    }

    /// `crashed` when a seat's runner, or the last run's, is gone from
    /// this host; `silent` when one elsewhere is unheard past its expiry.
    #[must_use]
    pub fn dead_runner(&self) -> Option<&'static str> {
        match (self.runners.dead(), self.last_run_seen()) {
            (Some(Seat::Crashed), _) | (_, Some(RunSeen::Crashed { .. })) => Some("crashed"),
            (Some(Seat::Silent { .. }), _) | (_, Some(RunSeen::Silent { .. })) => Some("silent"),
            _ => None,
        }
    }

    /// The limit (`max_duration`, `max_cost`) that stopped the last run
    /// that did work, while items it left wait and no runner is live: why
    /// they wait, though that run was `ok`.
    #[must_use]
    pub fn stopped_at_limit(&self) -> Option<StopCause> {
        let run = self.last_run.as_ref()?;
        let seen = self.last_run_seen()?;
        run.stopped
            .filter(|c| c.is_limit())
            .filter(|_| matches!(seen, RunSeen::Stored(_)))
            .filter(|_| !self.running() && self.counts.to_do() > 0)
    }

    /// The last run's state as it is (crashed when its runner is gone,
    /// even before a run records it).
    #[must_use]
    pub fn last_run_seen(&self) -> Option<RunSeen> {
        self.runners
            .last_run
            .or_else(|| self.last_run.as_ref().map(|r| RunSeen::Stored(r.state)))
    }

    /// The run that stepped down after `last_run`, if that was within the
    /// last hour: worth a word beside the run that did work.
    #[must_use]
    pub fn recent_step_down(&self, now: Millis) -> Option<&Run> {
        const RECENT_MS: Millis = 3_600_000;
        self.stepped_down
            .as_ref()
            .filter(|r| now - r.started_at < RECENT_MS)
    }

    /// What the batch is doing, for its ETA: claiming only with a live
    /// run (a live seat, and the last run running as it is: not crashed
    /// or silent), neither paused (by its flag or the emergency stop) nor
    /// held. `held` is until when no call may start, by every hold the
    /// caller knows of (the batch's retry-after, its pool's, a budget
    /// reached): a live run then claims nothing.
    #[must_use]
    pub fn activity(&self, emergency: bool, held: Option<Millis>) -> pace::Activity {
        let live = self.running() && self.last_run_seen().is_some_and(RunSeen::is_running);
        let run = self.last_run.as_ref().filter(|_| live);
        match (run, held) {
            _ if self.pause.is_some() || emergency => pace::Activity::Paused,
            (None, _) => pace::Activity::Idle,
            (Some(_), Some(until)) => pace::Activity::Held { until },
            (Some(r), _) if self.lock_stopping() => pace::Activity::Stopping {
                since: r.started_at,
                done: r.counts.done + r.counts.empty + r.counts.failed,
            },
            (Some(r), _) => pace::Activity::Running {
                since: r.started_at,
                done: r.counts.done + r.counts.empty + r.counts.failed,
            },
        }
    }
}

/// A structured run-log record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: i64,
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
    pub batch: Option<String>,
    pub run_id: Option<i64>,
    pub key: Option<String>,
    /// The item's label, read with the event (none once the item is
    /// pruned).
    pub label: Option<String>,
    pub kind: String,
    pub actor: Option<String>,
    pub message: String,
    pub fields: serde_json::Value,
}

impl Event {
    /// Who did it, for a view to add to the message: none when the
    /// message already says `by` them (`requeued from manual by alice`).
    #[must_use]
    pub fn named_actor(&self) -> Option<&str> {
        self.actor
            .as_deref()
            .filter(|a| !self.message.contains(&format!("by {a}")))
    }
}

#[cfg(test)]
mod named_actor_tests {
    use super::Event;

    fn event(message: &str, actor: Option<&str>) -> Event {
        Event {
            id: 1,
            at: 0,
            batch: None,
            run_id: None,
            key: None,
            label: None,
            kind: "requeued".into(),
            actor: actor.map(Into::into),
            message: message.into(),
            fields: serde_json::Value::Null,
        }
    }

    #[test]
    fn an_actor_is_named_unless_the_message_says_by_them() {
        assert_eq!(
            event("requeued from manual by 山田@host", Some("山田@host")).named_actor(),
            None
        );
        assert_eq!(
            event("hold lifted", Some("山田@host")).named_actor(),
            Some("山田@host")
        );
        // Another's name in the message is not theirs.
        assert_eq!(
            event("requeued from manual by 山田@host", Some("alice@host")).named_actor(),
            Some("alice@host")
        );
        assert_eq!(event("done", None).named_actor(), None);
    }
}

/// An event to append (the store assigns id).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewEvent {
    pub at: Millis,
    pub batch: Option<String>,
    pub run_id: Option<i64>,
    pub key: Option<String>,
    pub kind: String,
    pub actor: Option<String>,
    pub message: String,
    pub fields: Option<serde_json::Value>,
}

impl NewEvent {
    /// The fields as stored and logged: compact JSON, as `Display` writes
    /// it, but into a buffer directly (`Display` goes through a formatter
    /// per token, which cost twice as much; two events per item).
    pub fn fields_text(&self) -> Option<String> {
        self.fields
            .as_ref()
            .map(|f| serde_json::to_string(f).unwrap_or_else(|_| f.to_string()))
    }

    /// An event of `batch`. Its kind is typed, so every kind written is in
    /// the one list (`EventKind`); what is read back stays text
    /// (`Event::kind`), as a store may hold kinds of another version.
    pub fn new(at: Millis, batch: &str, kind: EventKind, message: impl Into<String>) -> NewEvent {
        NewEvent {
            at,
            batch: Some(batch.to_string()),
            kind: kind.as_str().to_string(),
            message: message.into(),
            ..NewEvent::default()
        }
    }
    pub fn run(mut self, run_id: i64) -> Self {
        self.run_id = Some(run_id);
        self
    }
    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }
    pub fn actor(mut self, actor: &str) -> Self {
        self.actor = Some(actor.to_string());
        self
    }
    pub fn fields(mut self, fields: serde_json::Value) -> Self {
        self.fields = Some(fields);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_through_their_names() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>().unwrap(), *s);
        }
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>().unwrap(), *s);
        }
        for c in StopCause::ALL {
            assert_eq!(c.as_str().parse::<StopCause>().unwrap(), *c);
            assert_eq!(serde_json::json!(c), c.as_str());
        }
        let err = "bogus".parse::<Tier>().unwrap_err();
        assert!(err.contains("retry, manual"), "{err}");
    }

    /// A run is `aborted` only when a signal or `nightshift stop` ended it
    /// (as the README's exit codes say: 130); one that stopped at its own
    /// `max_duration` or `max_cost` did what it was set to, and is `ok`
    /// unless something failed in it (it was `aborted`, and monitoring
    /// took every capped night for a failure).
    #[test]
    fn a_run_is_aborted_only_by_a_signal_or_a_stop() {
        use StopCause as C;
        let cases = [
            (None, false, RunState::Ok),
            (None, true, RunState::Failed),
            (Some(C::MaxDuration), false, RunState::Ok),
            (Some(C::MaxCost), false, RunState::Ok),
            (Some(C::MaxDuration), true, RunState::Failed),
            (Some(C::MaxCost), true, RunState::Failed),
            (Some(C::Signal), false, RunState::Aborted),
            (Some(C::Signal), true, RunState::Aborted),
            (Some(C::Stop), true, RunState::Aborted),
            (Some(C::StoreLost), false, RunState::Aborted),
            (Some(C::Paused), true, RunState::Paused),
            (Some(C::Paused), false, RunState::Paused),
            (Some(C::LockLost), false, RunState::Failed),
            (Some(C::WorkerCannotStart), false, RunState::Failed),
        ];
        for (stopped, failed, state) in cases {
            assert_eq!(
                RunState::ended(stopped, failed),
                state,
                "{stopped:?}, {failed}"
            );
        }
    }

    /// A `source` event's fields give the pruned keys' span as every JSON
    /// time is given (and named as `add --json` names it), where they
    /// gave epoch milliseconds.
    #[test]
    fn an_add_report_gives_its_pruned_span_in_rfc3339() {
        let report = AddReport {
            present: 2,
            pruned: 2,
            pruned_span: Some((1_767_250_000_000, 1_767_251_760_000)),
            ..AddReport::default()
        };
        let json = serde_json::to_value(report).unwrap();
        assert_eq!(
            json["pruned_between"],
            serde_json::json!(["2026-01-01T06:46:40Z", "2026-01-01T07:16:00Z"])
        );
        assert!(json.get("pruned_span").is_none(), "{json}");
        let none = serde_json::to_value(AddReport::default()).unwrap();
        assert_eq!(none["pruned_between"], serde_json::Value::Null);
    }
}

/// A worker's process group as its runner recorded it (one per slot), so
/// a later run on the same host can stop it once the runner died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerGroup {
    pub run_id: i64,
    pub slot: u32,
    pub host: String,
    /// The kernel's boot id: start times count from boot.
    pub boot: String,
    pub pgid: u32,
    /// When its leader started (clock ticks since boot): a reused pid has
    /// another.
    pub started: u64,
}

/// Whether some seat of `locks` (judged `seats`, in the same order) is
/// live and every live one was asked to stop (a signal, `nightshift
/// stop`): its runner claims nothing more, so what waits for the lock
/// waits for a run after it.
#[must_use]
pub fn all_stopping(locks: &[LockInfo], seats: &[Seat]) -> bool {
    let mut live = locks
        .iter()
        .zip(seats)
        .filter(|(_, s)| s.is_live())
        .peekable();
    live.peek().is_some() && live.all(|(l, _)| l.stop_by.is_some())
}
