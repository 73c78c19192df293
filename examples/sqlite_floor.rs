//! What SQLite alone needs to store N items, without nightshift's parsing
//! or code: the floors under `nightshift add` (`bench/bulk`, bench/README.md).
//!
//! ```text
//! sqlite_floor DIR N [hashed|given] [PREFILL]
//! FLOOR_VARIANTS="file order|after" sqlite_floor ...   # only those variants
//! ```
//!
//! The items are those of `bench/bulk`'s input files: `hashed`, the keys of
//! `add --key-fields site,category,slug` (32 hex characters of a hash,
//! spread over the whole index), or `given`, the keys as written
//! (`blog3/c7/post-42`). With PREFILL, each database first holds that many
//! other items of the same batch (built untimed, per variant).
//!
//! Each variant: a fresh database with the store's items table (every
//! column, check and index of `src/store/sqlite/schema.rs`; no triggers
//! fire on insert) and the store's pragmas (WAL, synchronous = NORMAL, a
//! page cache big enough for the whole insert), the N rows inserted in one
//! transaction by one cached statement per row, as `Store::add_items`
//! does, then committed with SQLite's automatic checkpoint, as in `add`.
//! Each row holds the add's time as the store's rows do (`created_at`,
//! `updated_at`: 0 there is stored in no bytes at all, 12 bytes a row
//! less than the information the store keeps). The variants:
//!
//! - `file order, unique index`: the store's design: rows in input order
//!   (the claim order), the `UNIQUE (batch_id, key)` index filled as they go;
//! - `key order, unique index`: the same rows sorted by key first (what
//!   the items would be claimed in, so not the same information);
//! - `key order, ids in input order`: the rows sorted by key, each with
//!   the id of its place in the input (the claim order kept: the same
//!   information), so the key index fills in order and the table at
//!   random (`FLOOR_WINDOW=W`: sorted in windows of W rows, as chunks);
//! - `unique index after rows`: rows in input order, then the unique index
//!   built in the same transaction (SQLite sorts the keys; over a prefilled
//!   table it rebuilds the whole index);
//! - `narrow row, file order`: the items row without label and payload
//!   (98 instead of ~250 bytes), those in a side table by item id, written
//!   in id order: the same information;
//! - `narrow row, key order`: both at once;
//! - `key table, key order`: rows in input order with no key index on
//!   them, the keys in a table of their own (`item_keys`, `WITHOUT ROWID`,
//!   its primary key the batch and key, naming the item) written in key
//!   order: the same information, every index filled in order;
//! - `file order, 32 rows a statement` and `key table, 32 rows a
//!   statement`: the same two with 32 rows per `INSERT` (one statement
//!   keeps its cursors on the last pages: an append needs no descent);
//! - `no key index`: nothing could find an item by key (below the floor
//!   of the same information: the cost of writing the rows alone).
//!
//! Prints one line per variant: `floor VARIANT: N rows, S s wall, C s cpu`.

#[path = "support/cpu.rs"]
mod cpu;

use std::path::{Path, PathBuf};
use std::time::Instant;

use cpu::cpu;

use rusqlite::{Connection, params};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The store's items table (src/store/sqlite/schema.rs, all migrations),
/// with `{unique}` where its key constraint goes and `{wide}` where label
/// and payload go.
const ITEMS: &str = "
CREATE TABLE IF NOT EXISTS batches (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL) STRICT;
INSERT OR IGNORE INTO batches VALUES (1, 'b', 0);
CREATE TABLE IF NOT EXISTS items (
    id              INTEGER PRIMARY KEY,
    batch_id        INTEGER NOT NULL REFERENCES batches(id),
    key             TEXT NOT NULL,
    {wide}
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
    cancel_to       TEXT CHECK (cancel_to = 'pending' OR cancel_to = 'manual'),
    cancel_by       TEXT,
    cancel_reason   TEXT,
    done_version    TEXT,
    priority        INTEGER NOT NULL DEFAULT 0,
    usage           TEXT,
    {unique}
    CHECK ((status = 'failed') = (tier IS NOT NULL)),
    CHECK ((status = 'done') = (outcome IS NOT NULL)),
    CHECK (status <> 'failed' OR error_class IS NOT NULL),
    CHECK ((status = 'claimed') = (lease_run IS NOT NULL))
) STRICT;
CREATE INDEX IF NOT EXISTS items_queue ON items (batch_id, status, tier, next_attempt_at, priority DESC);
CREATE INDEX IF NOT EXISTS items_failed ON items (batch_id, error_class) WHERE status = 'failed';
CREATE TABLE IF NOT EXISTS item_keys (
    batch_id INTEGER NOT NULL,
    key      TEXT NOT NULL,
    item_id  INTEGER NOT NULL,
    PRIMARY KEY (batch_id, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS item_bodies (
    item_id INTEGER PRIMARY KEY,
    label   TEXT NOT NULL,
    payload TEXT NOT NULL
) STRICT;
";

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    FileOrder,
    KeyOrder,
    KeyOrderInputIds,
    IndexAfter,
    NarrowFileOrder,
    NarrowKeyOrder,
    KeyTable,
    FileOrderRows,
    KeyTableRows,
    NoKeyIndex,
}

impl Variant {
    const ALL: [Variant; 10] = [
        Variant::FileOrder,
        Variant::KeyOrder,
        Variant::KeyOrderInputIds,
        Variant::IndexAfter,
        Variant::NarrowFileOrder,
        Variant::NarrowKeyOrder,
        Variant::KeyTable,
        Variant::FileOrderRows,
        Variant::KeyTableRows,
        Variant::NoKeyIndex,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::FileOrder => "file order, unique index",
            Variant::KeyOrder => "key order, unique index",
            Variant::KeyOrderInputIds => "key order, ids in input order",
            Variant::IndexAfter => "unique index after rows",
            Variant::NarrowFileOrder => "narrow row, file order",
            Variant::NarrowKeyOrder => "narrow row, key order",
            Variant::KeyTable => "key table, key order",
            Variant::FileOrderRows => "file order, 32 rows a statement",
            Variant::KeyTableRows => "key table, 32 rows a statement",
            Variant::NoKeyIndex => "no key index",
        }
    }

    fn narrow(self) -> bool {
        matches!(self, Variant::NarrowFileOrder | Variant::NarrowKeyOrder)
    }

    fn sorted(self) -> bool {
        matches!(
            self,
            Variant::KeyOrder | Variant::KeyOrderInputIds | Variant::NarrowKeyOrder
        )
    }

    /// Ids given by the floor (in input order) rather than by SQLite.
    fn explicit_ids(self) -> bool {
        matches!(
            self,
            Variant::KeyOrderInputIds | Variant::KeyTable | Variant::KeyTableRows
        ) || self.narrow()
    }

    fn schema(self) -> String {
        let unique = match self {
            Variant::IndexAfter
            | Variant::KeyTable
            | Variant::KeyTableRows
            | Variant::NoKeyIndex => "",
            _ => "UNIQUE (batch_id, key),",
        };
        let wide = if self.narrow() {
            ""
        } else {
            "label TEXT NOT NULL, payload TEXT NOT NULL,"
        };
        ITEMS.replace("{unique}", unique).replace("{wide}", wide)
    }
}

struct Item {
    key: String,
    label: String,
    payload: String,
}

/// The lines of `bench/bulk`'s input files, as `add` derives their items.
fn items(n: usize, hashed: bool, offset: usize) -> Vec<Item> {
    (offset + 1..=offset + n)
        .map(|i| {
            if hashed {
                let label = format!("blog{}:c{}:post-{i}", i % 7, i % 31);
                let payload = format!(
                    r#"{{"site":"blog{}","category":"c{}","slug":"post-{i}","title":"Article {i}","words":{}}}"#,
                    i % 7,
                    i % 31,
                    i % 5000
                );
                Item {
                    key: nightshift::key::hash_key(&label),
                    label,
                    payload,
                }
            } else {
                let key = format!("blog{}/c{}/post-{i}", i % 7, i % 31);
                let payload = format!(r#"{{"key":"{key}","title":"Article {i}"}}"#);
                Item {
                    label: key.clone(),
                    key,
                    payload,
                }
            }
        })
        .collect()
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn open(path: &Path) -> Res<Connection> {
    let conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY; PRAGMA cache_size = -524288;",
    )?;
    Ok(conn)
}

/// `items` in the variant's insertion order, each with the id it gets
/// when the variant assigns ids itself (the narrow row: ids in input
/// order, whatever the insertion order, so the claim order is kept).
/// Sorted here, before the clock starts: the floors are SQLite's part.
fn ordered(v: Variant, items: &[Item], first_id: i64) -> Vec<(i64, &Item)> {
    let mut rows: Vec<(i64, &Item)> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (first_id + i as i64, it))
        .collect();
    if v.sorted() {
        // FLOOR_WINDOW=W: sorted in windows of W rows (an add's chunks).
        let window = std::env::var("FLOOR_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(usize::MAX)
            .clamp(1, rows.len().max(1));
        for w in rows.chunks_mut(window) {
            w.sort_unstable_by(|a, b| a.1.key.cmp(&b.1.key));
        }
    }
    rows
}

/// The key table's rows in key order (sorted before the clock, as the
/// sorted variants' rows are); empty for the other variants.
fn by_key<'a>(v: Variant, rows: &[(i64, &'a Item)]) -> Vec<(i64, &'a Item)> {
    if !matches!(v, Variant::KeyTable | Variant::KeyTableRows) {
        return Vec::new();
    }
    let mut sorted = rows.to_vec();
    sorted.sort_unstable_by(|a, b| a.1.key.cmp(&b.1.key));
    sorted
}

/// Inserts `rows` into batch 1 as the variant says, in the open
/// transaction; the narrow row's bodies go in input (id) order.
/// `by_key`: the rows in key order, for the key table.
fn insert(
    conn: &Connection,
    v: Variant,
    rows: &[(i64, &Item)],
    items: &[Item],
    by_key: &[(i64, &Item)],
) -> Res<()> {
    if v.narrow() {
        let mut row = conn.prepare(
            "INSERT INTO items (id, batch_id, key, status, created_at, updated_at)
             VALUES (?1, 1, ?2, 'pending', 1764892800000, 1764892800000) ON CONFLICT DO NOTHING",
        )?;
        let mut body =
            conn.prepare("INSERT INTO item_bodies (item_id, label, payload) VALUES (?1, ?2, ?3)")?;
        for (id, it) in rows {
            row.execute(params![id, it.key])?;
        }
        let first = rows.iter().map(|r| r.0).min().unwrap_or(1);
        for (i, it) in items.iter().enumerate() {
            body.execute(params![first + i as i64, it.label, it.payload])?;
        }
        return Ok(());
    }
    if v == Variant::KeyTable {
        let mut row = conn.prepare(
            "INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at)
             VALUES (?1, 1, ?2, ?3, ?4, 'pending', 1764892800000, 1764892800000)",
        )?;
        let mut key = conn.prepare(
            "INSERT INTO item_keys (batch_id, key, item_id) VALUES (1, ?1, ?2) ON CONFLICT DO NOTHING",
        )?;
        for (id, it) in rows {
            row.execute(params![id, it.key, it.label, it.payload])?;
        }
        for (id, it) in by_key {
            key.execute(params![it.key, id])?;
        }
        return Ok(());
    }
    if v == Variant::KeyTableRows {
        many(
            conn,
            "INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at)
             VALUES ",
            "(?, 1, ?, ?, ?, 'pending', 1764892800000, 1764892800000)",
            "",
            rows,
            |st, at, (id, it)| {
                st.raw_bind_parameter(at + 1, id)?;
                st.raw_bind_parameter(at + 2, &it.key)?;
                st.raw_bind_parameter(at + 3, &it.label)?;
                st.raw_bind_parameter(at + 4, &it.payload)?;
                Ok(4)
            },
        )?;
        return many(
            conn,
            "INSERT INTO item_keys (batch_id, key, item_id) VALUES ",
            "(1, ?, ?)",
            " ON CONFLICT DO NOTHING",
            by_key,
            |st, at, (id, it)| {
                st.raw_bind_parameter(at + 1, &it.key)?;
                st.raw_bind_parameter(at + 2, id)?;
                Ok(2)
            },
        );
    }
    if v == Variant::FileOrderRows {
        return many(
            conn,
            "INSERT INTO items (batch_id, key, label, payload, status, created_at, updated_at)
             VALUES ",
            "(1, ?, ?, ?, 'pending', 1764892800000, 1764892800000)",
            " ON CONFLICT DO NOTHING",
            rows,
            |st, at, (_, it)| {
                st.raw_bind_parameter(at + 1, &it.key)?;
                st.raw_bind_parameter(at + 2, &it.label)?;
                st.raw_bind_parameter(at + 3, &it.payload)?;
                Ok(3)
            },
        );
    }
    if v.explicit_ids() {
        let mut st = conn.prepare(
            "INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at)
             VALUES (?1, 1, ?2, ?3, ?4, 'pending', 1764892800000, 1764892800000) ON CONFLICT DO NOTHING",
        )?;
        for (id, it) in rows {
            st.execute(params![id, it.key, it.label, it.payload])?;
        }
        return Ok(());
    }
    let mut st = conn.prepare(
        "INSERT INTO items (batch_id, key, label, payload, status, created_at, updated_at)
         VALUES (1, ?1, ?2, ?3, 'pending', 1764892800000, 1764892800000) ON CONFLICT DO NOTHING",
    )?;
    for (_, it) in rows {
        st.execute(params![it.key, it.label, it.payload])?;
    }
    Ok(())
}

/// Rows per statement of the `32 rows a statement` variants.
const ROWS: usize = 32;

/// Inserts `rows` `ROWS` a statement (`head`, then `row` as often, then
/// `tail`), the rest one a statement; `bind` binds one row's parameters
/// after the `at`th and says how many.
fn many(
    conn: &Connection,
    head: &str,
    row: &str,
    tail: &str,
    rows: &[(i64, &Item)],
    bind: impl Fn(&mut rusqlite::Statement<'_>, usize, &(i64, &Item)) -> rusqlite::Result<usize>,
) -> Res<()> {
    let sql = |n: usize| format!("{head}{}{tail}", vec![row; n].join(", "));
    let mut full = conn.prepare(&sql(ROWS))?;
    let mut one = conn.prepare(&sql(1))?;
    let mut groups = rows.chunks_exact(ROWS);
    for group in groups.by_ref() {
        let mut at = 0;
        for r in group {
            at += bind(&mut full, at, r)?;
        }
        full.raw_execute()?;
    }
    for r in groups.remainder() {
        bind(&mut one, 0, r)?;
        one.raw_execute()?;
    }
    Ok(())
}

/// A database of `prefill` items, for the variant's schema.
fn template(dir: &Path, v: Variant, prefill: &[Item]) -> Res<PathBuf> {
    let path = dir.join(format!(
        "floor-template-{}.db",
        v.name().replace([' ', ','], "-")
    ));
    remove_db(&path);
    let conn = open(&path)?;
    conn.execute_batch(&v.schema())?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let rows = ordered(v, prefill, 1);
    insert(&conn, v, &rows, prefill, &by_key(v, &rows))?;
    if v == Variant::IndexAfter {
        conn.execute_batch("CREATE UNIQUE INDEX items_key ON items (batch_id, key)")?;
    }
    conn.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(path)
}

fn run(dir: &Path, v: Variant, items: &[Item], prefill: &[Item]) -> Res<()> {
    let path = dir.join("floor.db");
    remove_db(&path);
    if !prefill.is_empty() {
        let t = template(dir, v, prefill)?;
        std::fs::rename(&t, &path)?;
        remove_db(&t);
    }
    let conn = open(&path)?;
    conn.execute_batch(&v.schema())?;
    let rows = ordered(v, items, prefill.len() as i64 + 1);
    let keys = by_key(v, &rows);
    let (cpu0, wall0) = (cpu(), Instant::now());
    conn.execute_batch("BEGIN IMMEDIATE")?;
    if v == Variant::IndexAfter {
        conn.execute_batch("DROP INDEX IF EXISTS items_key")?;
    }
    insert(&conn, v, &rows, items, &keys)?;
    if v == Variant::IndexAfter {
        // A bulk load's classic: the unique index built once, by sorting.
        conn.execute_batch("CREATE UNIQUE INDEX items_key ON items (batch_id, key)")?;
    }
    conn.execute_batch("COMMIT")?;
    println!(
        "floor {}: {} rows, {:.3} s wall, {:.2} s cpu",
        v.name(),
        items.len(),
        wall0.elapsed().as_secs_f64(),
        cpu() - cpu0
    );
    drop(conn);
    remove_db(&path);
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, n, hashed, prefill) = match args.as_slice() {
        [dir, n, rest @ ..] if rest.len() <= 2 => {
            let hashed = match rest.first().map(String::as_str) {
                None | Some("hashed") => true,
                Some("given") => false,
                Some(other) => return Err(format!("keys: hashed or given, not {other:?}").into()),
            };
            let prefill: usize = rest.get(1).map_or(Ok(0), |p| p.parse())?;
            (PathBuf::from(dir), n.parse::<usize>()?, hashed, prefill)
        }
        _ => return Err("usage: sqlite_floor DIR N [hashed|given] [PREFILL]".into()),
    };
    let new = items(n, hashed, prefill);
    let old = items(prefill, hashed, 0);
    // FLOOR_VARIANTS="a|b": only the variants whose names contain one of those.
    let only = std::env::var("FLOOR_VARIANTS").unwrap_or_default();
    let wanted = |v: Variant| only.is_empty() || only.split('|').any(|o| v.name().contains(o));
    for v in Variant::ALL.into_iter().filter(|&v| wanted(v)) {
        run(&dir, v, &new, &old)?;
    }
    Ok(())
}
