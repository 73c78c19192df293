//! What callers hand the store to select, claim, finish and add items.

use serde::Serialize;

use crate::model::{Millis, NewItem, Outcome, Status, Tier};

/// Which items a listing shows.
#[derive(Debug, Clone, Default)]
pub struct ItemFilter {
    pub status: Option<Status>,
    pub tier: Option<Tier>,
    pub outcome: Option<Outcome>,
    pub error_class: Option<String>,
    /// Substring of key, label or error message.
    pub search: Option<String>,
    /// Done under another version than this one (see `stale_sql`).
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
    /// Done items stale under this batch version instead (see `stale_sql`).
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
