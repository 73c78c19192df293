//! The decisions of `prune`.

use crate::model::{EventKind, Millis, NewEvent};

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
        EventKind::KeysForgotten,
        format!(
            "forgot the keys of {n} pruned items done before {before}: adding them again runs them again"
        ),
    )
    .actor(actor)
    .fields(serde_json::json!({"keys": n, "done_before": before}))
}
