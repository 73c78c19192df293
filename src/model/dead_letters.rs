//! Dead letters: the append-only record of each item landing in
//! `failed`, an item's failed attempts as `show` lists them, and the DLQ's
//! groups by error class.

use serde::Serialize;

use super::{Millis, Tier};
use crate::util::json_text::JsonText;

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
