//! Decisions and event texts both backends make the same way, kept out of
//! their SQL: which seats of the batch lock are stale, and what becomes of
//! a claim left by a dead run.

use super::Failure;
use crate::model::{LockInfo, Millis, NewEvent, Tier};
use crate::util::identity::{self, Seen};

/// Has the seat lapsed: its expiry passed, and its holder is not a process
/// running on this host? A running holder here is live whatever the
/// clocks say (ours may be set ahead, or have jumped), so only a frozen
/// or remote holder is judged by its expiry.
pub fn lapsed(lock: &LockInfo, now: Millis) -> bool {
    lock.expires_at < now && identity::holder_seen(&lock.holder) != Seen::Running
}

/// The seats that lapsed or are held under a token in `dead`, among those
/// in `only` if given.
pub(crate) fn stale_seats(
    seats: Vec<LockInfo>,
    now: Millis,
    dead: &[&str],
    only: Option<&[&str]>,
) -> Vec<LockInfo> {
    seats
        .into_iter()
        .filter(|l| lapsed(l, now) || dead.contains(&l.token.as_str()))
        .filter(|l| only.is_none_or(|o| o.contains(&l.token.as_str())))
        .collect()
}

/// The seats still live for an acquirer: not lapsed, not found dead.
pub(crate) fn live_seats(seats: Vec<LockInfo>, now: Millis, steal: &[&str]) -> Vec<LockInfo> {
    seats
        .into_iter()
        .filter(|l| !lapsed(l, now) && !steal.contains(&l.token.as_str()))
        .collect()
}

/// The `lock-takeover` event for freeing a stale seat.
pub(crate) fn takeover_event(batch: &str, lock: &LockInfo, now: Millis) -> NewEvent {
    let why = if lock.expires_at < now {
        "expired"
    } else {
        "its process is gone"
    };
    NewEvent::new(
        now,
        batch,
        "lock-takeover",
        format!("took over the lock of {} ({why})", lock.holder),
    )
    .fields(serde_json::json!({
        "previous": lock.holder.to_string(),
        "previous_run": lock.run_id,
        "why": why
    }))
}

/// What becomes of an item claimed by a run that died.
pub(crate) enum Orphan {
    /// Its attempts are used up (a poison item that kills its runner every
    /// time): quarantined with this message and event.
    Quarantine { message: String, event: NewEvent },
    /// Back to pending, with this event.
    Release(NewEvent),
}

pub(crate) fn orphan(
    batch: &str,
    key: &str,
    attempts: i64,
    lease_run: i64,
    max_attempts: u32,
    now: Millis,
) -> Orphan {
    if attempts >= i64::from(max_attempts) {
        let message = format!(
            "its runner (run {lease_run}) stopped while the item was in flight, \
             {attempts} attempts used"
        );
        let event = NewEvent::new(now, batch, "quarantined", format!("quarantined: {message}"))
            .key(key)
            .fields(serde_json::json!({"error_class": "Interrupted", "attempt": attempts}));
        Orphan::Quarantine { message, event }
    } else {
        Orphan::Release(
            NewEvent::new(
                now,
                batch,
                "reclaimed",
                format!("reclaimed from run {lease_run}"),
            )
            .key(key)
            .fields(serde_json::json!({"from_run": lease_run})),
        )
    }
}

/// The failure that quarantines a dead run's claim (`Orphan::Quarantine`).
pub(crate) fn interrupted(
    item_id: i64,
    token: i64,
    lease_run: i64,
    message: &str,
    now: Millis,
) -> Failure<'_> {
    Failure {
        item_id,
        token,
        run_id: lease_run,
        tier: Tier::Manual,
        error_class: "Interrupted",
        message,
        next_attempt_at: None,
        cost: None,
        now,
    }
}
