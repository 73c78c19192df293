//! Column lists written once for both dialects, for `concat!` into the
//! statement consts: each row mapper reads them in this order.

/// A run's columns (`r` joined to its batch `b`).
macro_rules! run_columns {
    () => {
        "r.id, b.name, r.trigger, r.host, r.pid, r.started_at, r.ended_at, r.state,
    r.done, r.empty, r.failed, r.retry, r.manual, r.retried, r.skipped_done, r.redriven,
    r.released, r.cost, r.summary, r.actor, r.cancelled, r.stopped"
    };
}
pub(crate) use run_columns;

/// A dead letter's columns (`d` joined to its batch `b`).
macro_rules! dead_letter_columns {
    () => {
        "d.id, b.name, d.key, d.label, d.payload, d.error_class, d.message, d.attempt,
    d.failed_at, d.tier, d.run_id"
    };
}
pub(crate) use dead_letter_columns;

/// An item's columns (`i` joined to its batch `b`).
macro_rules! item_columns {
    () => {
        "i.id, b.name, i.key, i.label, i.payload, i.status, i.tier, i.outcome,
    i.attempts, i.op_id, i.result, i.cost, i.error_class, i.error_message, i.next_attempt_at,
    i.lease_run, i.lease_until, i.lease_token, i.created_at, i.updated_at, i.done_version,
    i.priority, i.pool_wait_since, i.retry_at"
    };
}
pub(crate) use item_columns;

/// The order of an item list: the claims' order for what a run would
/// claim, else insertion order.
pub(crate) fn order_sql(filter: &crate::store::api::ItemFilter) -> &'static str {
    if filter.claimable_at.is_some() {
        "i.priority DESC, i.id"
    } else {
        "i.id"
    }
}
