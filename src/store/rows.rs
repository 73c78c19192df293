//! Column lists written once for both dialects, for `concat!` into the
//! statement consts: each row mapper reads them in this order. And the
//! claims' order, which the claims and the list of what a run would claim
//! both take from here.

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

/// The claims' order, its one text: higher priority first, then older.
/// `$t` is the table's alias with its dot (`"i."`), or `""`. The claims
/// (`sqlite/hot.rs`, `pg/hot.rs`) and the list of what a run would claim
/// ([`order_sql`], `run --dry-run`) read it from here, so the list is in
/// the order the run takes its items.
macro_rules! claim_order {
    ($t:literal) => {
        concat!($t, "priority DESC, ", $t, "id")
    };
}
pub(crate) use claim_order;

/// The order of an item list: the claims' order for what a run would
/// claim, else insertion order.
pub(crate) fn order_sql(filter: &crate::store::api::ItemFilter) -> &'static str {
    if filter.claimable.is_some() {
        claim_order!("i.")
    } else {
        "i.id"
    }
}

/// The items a run starting at `at` (a placeholder) would claim, as a
/// condition on `i`: the pending ones due (none waiting for a later
/// not-before time), the retry tier's due (its redrive makes them pending
/// first) and, with `reclaim`, the claims it would take back. Each is
/// claimed at its place in [`claim_order`].
pub(crate) fn claimable_sql(at: &str, reclaim: bool) -> String {
    let reclaimed = if reclaim {
        " OR i.status = 'claimed'"
    } else {
        ""
    };
    format!(
        " AND ((i.status = 'pending' AND i.tier IS NULL \
              AND (i.next_attempt_at IS NULL OR i.next_attempt_at <= {at})) \
           OR (i.status = 'failed' AND i.tier = 'retry' AND i.next_attempt_at <= {at}){reclaimed})"
    )
}
