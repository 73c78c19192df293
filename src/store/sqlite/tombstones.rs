//! Tombstones: what `prune` keeps of a done item, its key (and when and how
//! it was done), so that adding the same input again does not run it again
//! (the same input gives the same key forever). Written in the transaction
//! that deletes the item (`prune`), consulted by every add and wherever a
//! key is looked up; dropped only by `prune --forget-keys`.

use rusqlite::{Connection, OptionalExtension, params};

use super::parse_col;
use crate::model::{Millis, Tombstone};
use crate::store::Result;

/// Does the batch keep any tombstones? Its counter, read once per chunk:
/// an add into a batch never pruned looks up nothing more.
pub(crate) fn any(c: &Connection, batch_id: i64) -> Result<bool> {
    Ok(
        c.prepare_cached("SELECT pruned_keys > 0 FROM batches WHERE id = ?1")?
            .query_row([batch_id], |r| r.get(0))?,
    )
}

/// When the item of `key` was pruned, if it was.
pub(crate) fn pruned_at(c: &Connection, batch_id: i64, key: &str) -> Result<Option<Millis>> {
    Ok(
        c.prepare_cached("SELECT pruned_at FROM tombstones WHERE batch_id = ?1 AND key = ?2")?
            .query_row(params![batch_id, key], |r| r.get(0))
            .optional()?,
    )
}

pub(super) fn find(c: &Connection, batch_id: i64, key: &str) -> Result<Option<Tombstone>> {
    Ok(c.prepare_cached(
        "SELECT key, outcome, done_at, pruned_at FROM tombstones WHERE batch_id = ?1 AND key = ?2",
    )?
    .query_row(params![batch_id, key], |r| {
        Ok(Tombstone {
            key: r.get(0)?,
            outcome: parse_col(1, r.get_ref(1)?.as_str()?)?,
            done_at: r.get(2)?,
            pruned_at: r.get(3)?,
        })
    })
    .optional()?)
}
