//! Keys in a table of their own (schema version 21): `item_keys` finds an
//! item by batch and key, where the unique index of `items` did. Here the
//! migration's rebuild of `items` without that index.

use rusqlite::Connection;

/// The unique constraint as the table's text holds it since version 1.
const UNIQUE_KEY: &str = "UNIQUE (batch_id, key),";

/// Rebuilds `items` without its unique key constraint, if it has one
/// (SQLite cannot drop one in place): the same columns, checks and rows under the same ids,
/// then every index and trigger of the table as it stood, whatever later
/// versions add to them. Runs inside the migration's transaction.
pub(super) fn unkey_items(tx: &Connection) -> rusqlite::Result<()> {
    let table: String = tx.query_row(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'items'",
        [],
        |r| r.get(0),
    )?;
    if !table.contains(UNIQUE_KEY) {
        return Ok(());
    }
    let unkeyed = table.replacen(UNIQUE_KEY, "", 1).replacen(
        "CREATE TABLE items",
        "CREATE TABLE items_unkeyed",
        1,
    );
    let others: Vec<String> = tx
        .prepare(
            "SELECT sql FROM sqlite_schema
              WHERE tbl_name = 'items' AND type IN ('index', 'trigger') AND sql IS NOT NULL
              ORDER BY type, name",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    tx.execute_batch(&unkeyed)?;
    // No trigger fires on the copy (none is on the new table yet) nor on
    // the drop (an implicit DELETE fires none).
    tx.execute_batch(
        "INSERT INTO items_unkeyed SELECT * FROM items;
         DROP TABLE items;
         ALTER TABLE items_unkeyed RENAME TO items;",
    )?;
    for sql in others {
        tx.execute_batch(&sql)?;
    }
    Ok(())
}
