//! Tombstones of pruned done items (see `store::tombstones`).
//!
//! Prune deletes a done item and writes its tombstone in one transaction;
//! an add running beside it could check for the tombstone before that
//! commits and insert the key after the delete did (its conflict on the
//! unique key waits for the delete, then finds the key free). So prune's
//! transactions take [`TOMBSTONE_LOCK`] exclusively and adds take it
//! shared: adds never wait for each other, and an add sees every
//! tombstone of a prune that ran before it.

use super::conn::{Conn, parse_col_text};
use crate::model::Tombstone;
use crate::store::Result;

/// Advisory lock key (single 64-bit space; the migration lock is
/// `0x4E53_4854`): "NSHT" and "TOMB".
pub(crate) const TOMBSTONE_LOCK: i64 = 0x4E53_4854_544F_4D42;

/// For an add: waits for a prune in progress, then keeps prunes out until
/// the add's transaction ends.
pub(crate) fn share_lock(c: &mut Conn) -> Result<()> {
    c.x(
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[&TOMBSTONE_LOCK],
    )?;
    Ok(())
}

/// For prune and `--forget-keys`: adds wait until this transaction ends.
pub(crate) fn exclusive_lock(c: &mut Conn) -> Result<()> {
    c.x("SELECT pg_advisory_xact_lock($1)", &[&TOMBSTONE_LOCK])?;
    Ok(())
}

/// Does the batch keep any tombstones? Its counter: an add into a batch
/// never pruned looks up nothing more.
pub(crate) fn any(c: &mut Conn, batch_id: i64) -> Result<bool> {
    Ok(c.one(
        "SELECT pruned_keys > 0 FROM batches WHERE id = $1",
        &[&batch_id],
    )?
    .get(0))
}

pub(super) fn find(c: &mut Conn, batch_id: i64, key: &str) -> Result<Option<Tombstone>> {
    let Some(r) = c.opt(
        "SELECT key, outcome, done_at, pruned_at FROM tombstones
          WHERE batch_id = $1 AND key = $2",
        &[&batch_id, &key],
    )?
    else {
        return Ok(None);
    };
    Ok(Some(Tombstone {
        key: r.get(0),
        outcome: parse_col_text(r.get(1))?,
        done_at: c.tout(r.get(2)),
        pruned_at: c.tout(r.get(3)),
    }))
}
