//! What SQLite alone needs to insert N items, without nightshift's parsing
//! or code: the floor under `nightshift add` (bench/README.md, Foundation).
//!
//! ```text
//! sqlite_floor DIR N
//! ```
//!
//! Three fresh databases in DIR, each with the items table and queue index
//! of the store's schema and the store's pragmas (WAL, synchronous =
//! NORMAL, foreign keys on, a page cache big enough for the whole insert),
//! N rows inserted in one transaction by one cached statement per row, as
//! `Store::add_items` does, then committed (with SQLite's automatic
//! checkpoint, as in `add`):
//!
//! - `unique key index`: the store's `UNIQUE (batch_id, key)`; keys are
//!   hashes, so each row's index entry lands on a random page;
//! - `no key index`: the same table without it (nothing could find an item
//!   by key: the floor of writing the rows themselves);
//! - `index built after`: the rows first, then the unique index created
//!   in the same transaction (SQLite sorts the keys and fills its pages in
//!   order);
//! - `sorted key table`: no index on the table; the keys go into a separate
//!   `(batch_id, key) -> id` table afterwards, sorted, so its pages fill in
//!   order (a design the store does not use; see bench/README.md).
//!
//! Prints CPU seconds per phase and the wall time.

use std::path::Path;
use std::time::Instant;

use rusqlite::{Connection, params};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The store's items table (src/store/schema.rs), with `{unique}` where its
/// key constraint goes.
const ITEMS: &str = "
CREATE TABLE batches (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL) STRICT;
INSERT INTO batches VALUES (1, 'b', 0);
CREATE TABLE items (
    id              INTEGER PRIMARY KEY,
    batch_id        INTEGER NOT NULL REFERENCES batches(id),
    key             TEXT NOT NULL,
    label           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status = 'pending' OR status = 'claimed'
                                         OR status = 'done' OR status = 'failed'),
    tier            TEXT CHECK (tier = 'retry' OR tier = 'manual'),
    outcome         TEXT CHECK (outcome = 'done' OR outcome = 'empty' OR outcome = 'skipped'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    op_id           TEXT,
    result          TEXT,
    cost            REAL,
    error_class     TEXT,
    error_message   TEXT,
    next_attempt_at INTEGER,
    lease_run       INTEGER,
    lease_until     INTEGER,
    lease_token     INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    {unique}
    CHECK ((status = 'failed') = (tier IS NOT NULL)),
    CHECK ((status = 'done') = (outcome IS NOT NULL)),
    CHECK (status <> 'failed' OR error_class IS NOT NULL),
    CHECK ((status = 'claimed') = (lease_run IS NOT NULL))
) STRICT;
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at);
CREATE INDEX items_failed ON items (batch_id, error_class) WHERE status = 'failed';
CREATE TABLE item_keys (
    batch_id INTEGER NOT NULL,
    key      TEXT NOT NULL,
    item_id  INTEGER NOT NULL,
    PRIMARY KEY (batch_id, key)
) STRICT, WITHOUT ROWID;
";

/// CPU time (user + system) of this process so far, in seconds.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    (ticks(11).unwrap_or(0.0) + ticks(12).unwrap_or(0.0)) / 100.0
}

/// The items of `bench/foundation.sh`: natural keys hashed as `add
/// --key-fields site,category,slug` does.
fn items(n: usize) -> Vec<(String, String, String)> {
    (0..n)
        .map(|i| {
            let label = format!("blog{}:c{}:post-{i}", i % 4, i % 37);
            let payload = format!(
                r#"{{"site":"blog{}","category":"c{}","slug":"post-{i}","title":"Title number {i}"}}"#,
                i % 4,
                i % 37
            );
            (nightshift::key::hash_key(&label), label, payload)
        })
        .collect()
}

fn run(dir: &Path, name: &str, items: &[(String, String, String)]) -> Res<()> {
    let path = dir.join(format!("floor-{}.db", name.replace(' ', "-")));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let conn = Connection::open(&path)?;
    let unique = if name == "unique key index" {
        "UNIQUE (batch_id, key),"
    } else {
        ""
    };
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY; PRAGMA cache_size = -524288;",
    )?;
    conn.execute_batch(&ITEMS.replace("{unique}", unique))?;
    let (cpu0, wall0) = (cpu(), Instant::now());
    conn.execute_batch("BEGIN IMMEDIATE")?;
    {
        let mut st = conn.prepare(
            "INSERT INTO items (batch_id, key, label, payload, status, created_at, updated_at)
             VALUES (1, ?1, ?2, ?3, 'pending', 0, 0) ON CONFLICT DO NOTHING",
        )?;
        for (key, label, payload) in items {
            st.execute(params![key, label, payload])?;
        }
    }
    let cpu1 = cpu();
    if name == "index built after" {
        // A bulk load's classic: the unique index built once, by sorting.
        conn.execute_batch("CREATE UNIQUE INDEX items_key ON items (batch_id, key)")?;
    }
    if name == "sorted key table" {
        let mut keys: Vec<(&str, i64)> = items
            .iter()
            .enumerate()
            .map(|(i, item)| (item.0.as_str(), i as i64 + 1))
            .collect();
        keys.sort_unstable();
        let mut st =
            conn.prepare("INSERT INTO item_keys (batch_id, key, item_id) VALUES (1, ?1, ?2)")?;
        for (key, id) in keys {
            st.execute(params![key, id])?;
        }
    }
    let cpu2 = cpu();
    conn.execute_batch("COMMIT")?;
    let cpu3 = cpu();
    println!(
        "{name:>17}, {} rows: rows {:.2} s, key table {:.2} s, commit {:.2} s: cpu {:.2} s, wall {:.2} s",
        items.len(),
        cpu1 - cpu0,
        cpu2 - cpu1,
        cpu3 - cpu2,
        cpu3 - cpu0,
        wall0.elapsed().as_secs_f64()
    );
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, n] = args.as_slice() else {
        return Err("usage: sqlite_floor DIR N".into());
    };
    let items = items(n.parse()?);
    for name in [
        "unique key index",
        "no key index",
        "index built after",
        "sorted key table",
    ] {
        run(Path::new(dir), name, &items)?;
    }
    Ok(())
}
