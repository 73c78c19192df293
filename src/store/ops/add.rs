//! The decisions of an add (whose statements are hot paths, whole per
//! dialect in `sqlite/hot.rs` and `pg/hot.rs`): its `added` event and what
//! an add cut short says.

use crate::key::KeySpec;
use crate::model::{AddReport, EventKind, Millis, NewEvent};
use crate::store::{CutShort, Fault, Refusal, StoreError};

/// Whether an add keying `batch`'s items by `asked` may go on, given the
/// spec the batch recorded (`recorded`, as stored): the text to record
/// when none is yet (its first add, or a batch of an older store, which
/// adopts it), `None` when it agrees, and the refusal when it differs,
/// before anything of the add is written. A batch of an older store
/// adopts `asked` unless its first items (`sample` reads their keys and
/// payloads, as `KEY_SAMPLE` does, only when nothing is recorded) show
/// they were keyed otherwise: `asked` gives one of them another key, and
/// none its own (two specs never give one key). An item whose payload
/// `asked` cannot key (a field missing) shows nothing either way.
pub(crate) fn keyed_alike(
    batch: &str,
    recorded: Option<&str>,
    asked: &KeySpec,
    sample: impl FnOnce() -> Result<Vec<(String, String)>, StoreError>,
) -> Result<Option<String>, StoreError> {
    let Some(recorded) = recorded else {
        let sample = sample()?;
        // Per item: whether `asked` gives it its key, if it keys it at all.
        let keyed_so = |(key, payload): &(String, String)| {
            crate::key::derive_line(payload, asked)
                .ok()
                .map(|i| i.key == *key || i.written_key.as_deref() == Some(key))
        };
        let seen: Vec<Option<bool>> = sample.iter().map(keyed_so).collect();
        let otherwise = seen.iter().position(|s| *s == Some(false));
        if let Some(at) = otherwise
            && !seen.contains(&Some(true))
        {
            let key = &sample[at].0;
            return Err(Refusal::KeyedOtherwiseBefore {
                batch: batch.to_string(),
                asked: asked.clone(),
                key: key.clone(),
            }
            .into());
        }
        return Ok(Some(asked.stored()));
    };
    let recorded = recorded_spec(batch, recorded)?;
    if &recorded == asked {
        return Ok(None);
    }
    Err(Refusal::KeyedOtherwise {
        batch: batch.to_string(),
        recorded,
        asked: asked.clone(),
    }
    .into())
}

/// `batch`'s key spec as recorded (`KeySpec::stored`), read back.
pub(crate) fn recorded_spec(batch: &str, text: &str) -> Result<KeySpec, StoreError> {
    KeySpec::from_stored(text).ok_or_else(|| {
        StoreError::Fault(Fault::Unreadable(format!(
            "batch {batch:?}: its recorded key spec {text:?} is not one this build writes"
        )))
    })
}

/// A batch's first items, `?1` the batch: their keys and payloads, for
/// `keyed_alike` where no spec is recorded.
pub(crate) const KEY_SAMPLE: &str =
    "SELECT key, payload FROM items WHERE batch_id = ?1 ORDER BY id LIMIT 5";

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
    if let Some(p) = report.order.priority_json() {
        fields["priority"] = p;
    }
    if let Some(t) = report.order.not_before_json() {
        fields["not_before"] = t;
    }
    let mut message = report.summary();
    if let Some((cause, handled, total)) = cut {
        let cause = cause.as_cause();
        message.push_str(&format!(
            "; cut short by {cause} after {handled} of {total} items (the rest not added)"
        ));
        fields["cut_short"] = cause.into();
        fields["of"] = total.into();
    }
    NewEvent::new(now, batch, EventKind::Added, message)
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
