//! Items: their status, tier and outcome, the one definition of every
//! count ([`Counts`]), the attempts a claim has used, and an item as read
//! back, added and claimed.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

use super::Millis;
use crate::util::json_text::JsonText;

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
    /// The key as its input wrote it, where that is not `key` (keys are
    /// composed, NFC: `か` + `゛` is `が`). An item added under that form
    /// before keys were composed is this item: the add finds it by it.
    pub written_key: Option<String>,
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
