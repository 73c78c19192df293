//! Decisions and event texts both backends make the same way, kept out of
//! their SQL: which seats of the batch lock are stale, what becomes of a
//! claim left by a dead run, and what a bulk write cut short says.

use super::{CutShort, Failure, Selection, StoreError};
use crate::model::{AddReport, Hold, LockInfo, Millis, NewEvent, Tier};
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

/// The `added` event of an add, or of the part of one that committed
/// before `cut` stopped it (what stopped it, items handled, items given).
pub(crate) fn added_event(
    batch: &str,
    report: &AddReport,
    cut: Option<(&StoreError, usize, usize)>,
    now: Millis,
) -> NewEvent {
    let mut fields = serde_json::json!({
        "added": report.added,
        "present": report.present,
        "pruned": report.pruned,
    });
    let mut message = report.summary();
    if let Some((cause, handled, total)) = cut {
        let cause = cause.as_cause();
        message.push_str(&format!(
            "; cut short by {cause} after {handled} of {total} items (the rest not added)"
        ));
        fields["cut_short"] = cause.into();
        fields["of"] = total.into();
    }
    NewEvent::new(now, batch, "added", message)
        .actor(&crate::util::identity::actor())
        .fields(fields)
}

/// The error of an add whose chunks stopped after `handled` of `total`
/// items (`report`: what those did), or `cause` itself when nothing had
/// committed. `unlogged`: why its `added` event could not be written.
pub(crate) fn add_cut_short(
    report: &AddReport,
    handled: usize,
    total: usize,
    cause: StoreError,
    unlogged: Option<String>,
) -> StoreError {
    if handled == 0 {
        return cause;
    }
    let what = if report.present == 0 {
        "items added".to_string()
    } else {
        format!(
            "items handled ({} added, {} already present)",
            report.added, report.present
        )
    };
    StoreError::CutShort(Box::new(CutShort {
        done: handled as u64,
        total: total as u64,
        what,
        next: "run it again to add the rest (adding is idempotent)".into(),
        cause,
        unlogged,
    }))
}

/// The error of a requeue whose chunks stopped after `moved` of `total`
/// items, or `cause` itself when nothing had moved. Each moved item has
/// its `requeued` event, written with it.
pub(crate) fn requeue_cut_short(
    sel: &Selection,
    moved: usize,
    total: usize,
    cause: StoreError,
) -> StoreError {
    if moved == 0 {
        return cause;
    }
    // A requeue by key refuses keys that are no longer failed.
    let next = if sel.keys.is_empty() {
        "run it again for the rest".to_string()
    } else {
        "the rest are still failed: requeue them by key again, leaving out those now pending"
            .to_string()
    };
    StoreError::CutShort(Box::new(CutShort {
        done: moved as u64,
        total: total as u64,
        what: "failed items requeued".into(),
        next,
        cause,
        unlogged: None,
    }))
}

/// The `keys-forgotten` event of one batch: `n` tombstones dropped by
/// `prune --forget-keys`.
pub(crate) fn keys_forgotten_event(
    batch: &str,
    n: i64,
    done_before: Millis,
    actor: &str,
    now: Millis,
) -> NewEvent {
    let before = crate::util::time::rfc3339(done_before);
    NewEvent::new(
        now,
        batch,
        "keys-forgotten",
        format!(
            "forgot the keys of {n} pruned items done before {before}: adding them again runs them again"
        ),
    )
    .actor(actor)
    .fields(serde_json::json!({"keys": n, "done_before": before}))
}

/// The `hold-lifted` event: `actor` lifted a retry-after hold still on
/// (`unpause`).
pub(crate) fn hold_lifted(batch: &str, hold: &Hold, actor: &str, now: Millis) -> NewEvent {
    let until = crate::util::time::rfc3339(hold.until);
    let mut event = NewEvent::new(
        now,
        batch,
        "hold-lifted",
        format!(
            "retry-after hold lifted by {actor} (it was {})",
            hold.describe(now)
        ),
    )
    .actor(actor)
    .fields(serde_json::json!({"until": until, "key": hold.key}));
    if let Some(key) = &hold.key {
        event = event.key(key);
    }
    event
}
