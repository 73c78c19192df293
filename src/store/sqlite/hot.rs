//! The hot paths of SQLite, whole: add, claim, complete and complete_all run
//! once per item (or chunk) at full speed, and their statements are shaped
//! for this engine (one cached `INSERT` per row, `RETURNING` batches), so
//! they are not split into the shared statement interface of `dialect`.
//!
//! `add.rs` writes an add's items; `claim.rs` claims them and marks them
//! done.

mod add;
mod claim;

// For the schema's tests, which check a claim's plan.
#[cfg(test)]
pub(super) use claim::CLAIMABLE;

use crate::store::{Fault, Result, StoreError};

/// Item ids as a JSON array, for a statement that reads them with
/// `json_each` (the claim's, a requeue chunk's).
pub(super) fn ids_json(ids: impl Iterator<Item = i64>) -> Result<String> {
    serde_json::to_string(&ids.collect::<Vec<_>>())
        .map_err(|e| StoreError::Fault(Fault::Encoding(format!("encoding item ids: {e}"))))
}
