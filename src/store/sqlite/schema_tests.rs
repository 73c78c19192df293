//! The SQLite schema's own tests: migrations from older layouts, query
//! plans of the statements every item write runs.

use super::*;

/// A store in memory at the layout `version` (its migrations applied as
/// `migrate` applies them), before any later one.
fn at_version(version: usize) -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    for (from, sql) in MIGRATIONS[..version].iter().enumerate() {
        apply(&conn, from, sql).unwrap();
    }
    conn
}

/// The version a store has just before `migration` (one of `MIGRATIONS`).
fn before(migration: &str) -> usize {
    MIGRATIONS.iter().position(|m| *m == migration).unwrap()
}

fn migrated() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    migrate(&mut conn).unwrap();
    conn.execute_batch("INSERT INTO batches (name, created_at) VALUES ('b', 0)")
        .unwrap();
    conn
}

/// A store written before runs had an actor gains the column; its old
/// runs have none.
#[test]
fn version_2_stores_gain_the_run_actor() {
    let mut conn = at_version(2);
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0);
         INSERT INTO runs (batch_id, trigger, host, pid, started_at, state)
         VALUES (1, 'manual', 'h', 1, 0, 'ok');",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let (version, actor): (i32, Option<String>) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), actor FROM runs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, actor), (SCHEMA_VERSION, None));
}

/// The query plan of `sql`, every parameter bound to 1.
fn plan(conn: &Connection, sql: &str) -> String {
    let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let ones = vec![1; st.parameter_count()];
    st.query_map(rusqlite::params_from_iter(ones), |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
        .join("\n")
}

/// Issue 16: an add writes each new row into one queue index, not two
/// (version 13's partial claim index cost 13 % of an add), and the
/// reads that had their own order keep it: the oldest claimable item
/// is found without a sort of every claimable entry.
#[test]
fn one_queue_index_serves_the_claim_order_and_the_oldest_pending() {
    let conn = migrated();
    let names: Vec<String> = conn
        .prepare("SELECT name FROM pragma_index_list('items') WHERE origin = 'c'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(names.contains(&"items_queue".to_string()), "{names:?}");
    assert!(!names.contains(&"items_claimable".to_string()), "{names:?}");
    let oldest = plan(&conn, crate::store::dialect::items::OLDEST_PENDING.sqlite);
    assert!(
        oldest.contains("USING COVERING INDEX items_queue"),
        "{oldest}"
    );
    assert!(!oldest.contains("TEMP B-TREE"), "{oldest}");
}

/// A store of the two queue indexes keeps its claimable items in claim
/// order under the one index that replaces them.
#[test]
fn stores_with_a_claim_index_fold_it_into_the_queue_index() {
    let mut conn = at_version(before(V15));
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0);
         INSERT INTO items (batch_id, key, label, payload, status, priority, created_at, updated_at)
         VALUES (1, 'a', 'a', '{}', 'pending', 0, 0, 0), (1, 'b', 'b', '{}', 'pending', 3, 0, 0),
                (1, 'c', 'c', '{}', 'pending', 0, 0, 0);",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let claim = "SELECT key FROM items
      WHERE batch_id = 1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
      ORDER BY priority DESC, id";
    assert!(
        !plan(&conn, claim).contains("TEMP B-TREE"),
        "{}",
        plan(&conn, claim)
    );
    let keys: Vec<String> = conn
        .prepare(claim)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys, ["b", "a", "c"]);
}

/// A store with a `usage` row per attempt keeps its figures in the
/// sums that replace it: per run, per pool and minute, on the item.
#[test]
fn usage_rows_are_carried_into_their_sums() {
    let mut conn = at_version(before(V17));
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0);
         INSERT INTO items (batch_id, key, label, payload, status, created_at, updated_at)
         VALUES (1, 'k', 'k', '{}', 'pending', 0, 0);
         INSERT INTO usage (batch, run_id, key, attempt, pool, at, estimate, input_tokens,
             output_tokens) VALUES ('b', 7, 'k', 1, 'p', 60000, 50, NULL, NULL),
             ('b', 7, 'k', 2, 'p', 61000, 50, 10, 20);
         INSERT INTO pool_calls (pool, call, until_ms) VALUES ('p', 'r:1:0', 1);",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let one = |sql: &str| -> (i64, i64, i64, i64, i64) {
        conn.query_row(sql, [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
    };
    let sums = "attempts, input_tokens, output_tokens, unreported, estimated_tokens";
    assert_eq!(
        one(&format!("SELECT {sums} FROM run_usage WHERE run_id = 7")),
        (2, 10, 20, 1, 50)
    );
    let pooled = "SELECT calls, input_tokens, output_tokens, unreported, estimated_tokens
        FROM pool_usage WHERE pool = 'p' AND minute = 1";
    assert_eq!(one(pooled), (2, 10, 20, 1, 50));
    let lines: String = conn
        .query_row("SELECT usage FROM items", [], |r| r.get(0))
        .unwrap();
    assert_eq!(lines, "7 1 60000 50 - - p\n7 2 61000 50 10 20 p");
}

/// A store of version 18 keeps its failed classes as they were, and from
/// then on a statement that counts itself (flips `self_counted`, as a
/// requeue chunk does) is passed over by the failed-class trigger, which
/// still counts every other writer.
#[test]
fn version_18_stores_let_a_requeue_count_its_failed_classes() {
    let mut conn = at_version(before(V19));
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0);
         INSERT INTO items (batch_id, key, label, payload, status, created_at, updated_at)
         VALUES (1, 'a', 'a', '{}', 'pending', 0, 0), (1, 'b', 'b', '{}', 'pending', 0, 0);
         UPDATE items SET status = 'failed', tier = 'manual', error_class = 'E';",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let failed = |conn: &Connection| -> i64 {
        conn.query_row("SELECT sum(n) FROM failed_classes", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(failed(&conn), 2);
    conn.execute_batch(
        "UPDATE items SET status = 'pending', tier = NULL, self_counted = 1 - self_counted
          WHERE key = 'a'",
    )
    .unwrap();
    assert_eq!(
        failed(&conn),
        2,
        "left to the statement that flipped the flag"
    );
    conn.execute_batch("UPDATE items SET status = 'pending', tier = NULL WHERE key = 'b'")
        .unwrap();
    assert_eq!(failed(&conn), 1, "any other writer counted by the trigger");
}

/// Item writes must not build a temporary b-tree per statement (an IN
/// list in a CHECK does): it made every transition several times slower.
#[test]
fn item_writes_use_no_temporary_btree() {
    let conn = migrated();
    for sql in [
        "INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at)
         VALUES (1, 1, 'k', 'k', '{}', 'pending', 0, 0)",
        "INSERT INTO item_keys (batch_id, key, item_id) VALUES (1, 'k', 1)
         ON CONFLICT (batch_id, key) DO NOTHING",
        "UPDATE items SET status = 'done', outcome = 'done' WHERE id = 1",
        "UPDATE items SET status = 'failed', tier = 'retry', error_class = 'X' WHERE id = 1",
        // A partial index's condition is checked on every insert too.
        "INSERT INTO events (at, batch_id, key, item_id, kind, message) VALUES (0, 1, 'k', 1, 'done', 'm')",
    ] {
        let ops: Vec<String> = conn
            .prepare(&format!("EXPLAIN {sql}"))
            .unwrap()
            .query_map([], |r| r.get(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(!ops.iter().any(|op| op == "OpenEphemeral"), "{sql}");
    }
}

/// A read of kinds outside the dense ones finds them by the kind index
/// (the dashboard counts lock takeovers and fires so, at any size),
/// which it may only if it repeats the index's condition word for word.
#[test]
fn rare_kinds_are_read_by_the_kind_index() {
    let conn = migrated();
    let rare = crate::store::dialect::events::rare_kinds_only(&["lock-takeover"]);
    let plan: Vec<String> = conn
        .prepare(&format!(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM events e WHERE e.kind = ?1{rare} AND e.at > ?2"
        ))
        .unwrap()
        .query_map(rusqlite::params!["lock-takeover", 0], |r| r.get(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter().any(|p| p.contains("events_by_rare_kind")),
        "{plan:?}"
    );
}

#[test]
fn checks_still_refuse_unknown_states() {
    let conn = migrated();
    let insert = |status: &str, tier: Option<&str>, outcome: Option<&str>| {
        conn.execute(
            "INSERT INTO items (batch_id, key, label, payload, status, tier, outcome, error_class,
                                lease_run, created_at, updated_at)
             VALUES (1, ?1 || coalesce(?2, '') || coalesce(?3, ''), 'l', '{}', ?1, ?2, ?3, 'E',
                     CASE WHEN ?1 = 'claimed' THEN 1 END, 0, 0)",
            rusqlite::params![status, tier, outcome],
        )
    };
    assert!(insert("pending", None, None).is_ok());
    assert!(insert("claimed", None, None).is_ok());
    assert!(insert("done", None, Some("empty")).is_ok());
    assert!(insert("failed", Some("manual"), None).is_ok());
    assert!(insert("bogus", None, None).is_err());
    assert!(insert("failed", Some("later"), None).is_err());
    assert!(insert("done", None, Some("maybe")).is_err());
}

/// Version 20: a store of version 19 keeps every item, and each status
/// is read through its own index: the claim through the queue of pending
/// (and failed) rows, a run's claims through `items_claimed`, a page of
/// done items through `items_done` in id order; none by a scan or a sort.
#[test]
fn version_19_stores_index_each_status_where_its_readers_look() {
    let mut conn = at_version(before(V20));
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0);
         INSERT INTO items (batch_id, key, label, payload, status, tier, outcome, error_class,
                            lease_run, created_at, updated_at)
         VALUES (1, 'p', 'p', '{}', 'pending', NULL, NULL, NULL, NULL, 0, 0),
                (1, 'c', 'c', '{}', 'claimed', NULL, NULL, NULL, 7, 0, 0),
                (1, 'd1', 'd1', '{}', 'done', NULL, 'done', NULL, NULL, 0, 0),
                (1, 'f', 'f', '{}', 'failed', 'manual', NULL, 'E', NULL, 0, 0),
                (1, 'd2', 'd2', '{}', 'done', NULL, 'empty', NULL, NULL, 0, 0);",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let reads = [
        (super::super::hot::CLAIMABLE, "items_queue", vec!["p"]),
        (
            "SELECT key FROM items WHERE batch_id = ?1 AND status = 'claimed' AND lease_run = ?2",
            "items_claimed",
            vec!["c"],
        ),
        (
            "SELECT i.key FROM items i WHERE i.batch_id = ?1 AND i.status = 'done'
              ORDER BY i.id LIMIT 54",
            "items_done",
            vec!["d1", "d2"],
        ),
    ];
    for (sql, index, keys) in reads {
        let p = plan(&conn, sql);
        assert!(p.contains(&format!("INDEX {index}")), "{sql}: {p}");
        assert!(!p.contains("TEMP B-TREE"), "{sql}: {p}");
        let mut st = conn.prepare(sql).unwrap();
        let args: Vec<i64> = [1, 7].into_iter().take(st.parameter_count()).collect();
        let found: Vec<String> = st
            .query_map(rusqlite::params_from_iter(args), |r| r.get("key"))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found, keys, "{sql}");
    }
    for sql in [
        super::super::views::ITEMS_CLAIMED_BY,
        super::super::views::ITEMS_CLAIMED,
    ] {
        let claimed = plan(&conn, sql);
        assert!(claimed.contains("INDEX items_claimed"), "{claimed}");
    }
}

/// Version 21: a store of version 20 keeps every item under its id, findable by key
/// through `item_keys`; `items` loses its unique key index and keeps its
/// other indexes and triggers (the counts still follow a change), and an
/// item deleted takes its key along.
#[test]
fn version_20_stores_find_their_items_by_the_key_table() {
    let mut conn = at_version(before(V21));
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0), ('c', 0);
         INSERT INTO counts (batch_id, bucket, n) VALUES (1, 'pending', 3), (1, 'manual', 0);
         INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at)
         VALUES (7, 1, 'a', 'a', '{}', 'pending', 0, 0), (9, 1, 'b', 'b', '{}', 'pending', 0, 0),
                (12, 2, 'a', 'a', '{}', 'pending', 0, 0);",
    )
    .unwrap();
    let indexes = |conn: &Connection| -> Vec<String> {
        conn.prepare("SELECT name FROM pragma_index_list('items') ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let triggers = |conn: &Connection| -> Vec<String> {
        conn.prepare("SELECT sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let (old_indexes, old_triggers) = (indexes(&conn), triggers(&conn));
    migrate(&mut conn).unwrap();
    let keys: Vec<(i64, String, i64)> = conn
        .prepare("SELECT batch_id, key, item_id FROM item_keys")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        keys,
        [(1, "a".into(), 7), (1, "b".into(), 9), (2, "a".into(), 12)]
    );
    let mut expected: Vec<String> = old_indexes
        .into_iter()
        .filter(|n| !n.starts_with("sqlite_autoindex"))
        .collect();
    expected.sort();
    assert_eq!(
        indexes(&conn),
        expected,
        "no key index on items, the rest kept"
    );
    let kept: Vec<String> = triggers(&conn)
        .into_iter()
        .filter(|t| !t.contains("items_key_delete"))
        .collect();
    assert_eq!(kept, old_triggers, "every trigger kept as it was");
    conn.execute_batch(
        "UPDATE items SET status = 'failed', tier = 'manual', error_class = 'E' WHERE id = 9;
         DELETE FROM items WHERE id = 7;",
    )
    .unwrap();
    let counts: Vec<(String, i64)> = conn
        .prepare("SELECT bucket, n FROM counts WHERE batch_id = 1 ORDER BY bucket")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(counts, [("manual".into(), 1), ("pending".into(), 1)]);
    let left: Vec<i64> = conn
        .prepare("SELECT item_id FROM item_keys ORDER BY item_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(left, [9, 12], "the deleted item's key is gone");
}

/// Every statement that names an item by batch and key reads `item_keys`
/// by its primary key and the item by id: none scans the items.
#[test]
fn items_named_by_key_are_found_through_the_key_table() {
    use crate::store::dialect::{batches, items};
    let conn = migrated();
    for sql in [
        items::ITEM_BY_KEY,
        items::ITEM_FOR_REQUEUE,
        items::MARK_SKIPPED,
        items::STATUS_LOCKED.sqlite,
        items::ITEM_CLAIM_BY_KEY.sqlite,
        batches::HOLD,
    ] {
        let plan = plan(&conn, sql);
        assert!(
            plan.contains("USING PRIMARY KEY (batch_id=? AND key=?)"),
            "{sql}\n{plan}"
        );
        assert!(!plan.contains("SCAN"), "{sql}\n{plan}");
    }
}

/// Every layout a read-only open reads through views (`shim_reader`) shows
/// each table with the current layout's columns, in its order: what the
/// statements name is there, whichever of those versions the store is at.
#[test]
fn the_views_over_an_older_layout_have_the_current_columns() {
    let columns = |conn: &Connection| -> Vec<(String, Vec<String>)> {
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY 1")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        tables
            .into_iter()
            .map(|t| {
                // Unqualified: a temporary view of the name comes first.
                let cols = conn
                    .prepare(&format!("SELECT * FROM {t} LIMIT 0"))
                    .unwrap()
                    .column_names()
                    .map(str::to_string)
                    .collect();
                (t, cols)
            })
            .collect()
    };
    let current = columns(&migrated());
    let from = readable_from();
    assert!(from < SCHEMA_VERSION, "the previous layout is read");
    for version in from..SCHEMA_VERSION {
        let conn = at_version(version as usize);
        conn.execute_batch("INSERT INTO batches (name, created_at) VALUES ('b', 0)")
            .unwrap();
        shim_reader(&conn, version).unwrap();
        assert_eq!(columns(&conn), current, "version {version}");
    }
}

/// Version 25: the queue index leaves out dead letters (the manual tier),
/// which only a requeue by hand takes: a redrive still finds the retry
/// tier's failures through it by time, every read of dead letters finds
/// them through `items_failed`, and a dead letter moved back to pending
/// (and one made) keeps both indexes whole.
#[test]
fn version_24_stores_keep_dead_letters_out_of_the_queue_index() {
    let mut conn = at_version(before(V25));
    conn.execute_batch(
        "INSERT INTO batches (name, created_at) VALUES ('b', 0);
         INSERT INTO items (batch_id, key, label, payload, status, tier, outcome, error_class,
                            next_attempt_at, created_at, updated_at)
         VALUES (1, 'p', 'p', '{}', 'pending', NULL, NULL, NULL, NULL, 0, 0),
                (1, 'r', 'r', '{}', 'failed', 'retry', NULL, 'E', 5, 0, 0),
                (1, 'm', 'm', '{}', 'failed', 'manual', NULL, 'E', NULL, 0, 0),
                (1, 'd', 'd', '{}', 'done', NULL, 'done', NULL, NULL, 0, 0);",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let keys = |sql: &str, args: [i64; 2]| -> Vec<String> {
        let mut st = conn.prepare(sql).unwrap();
        let n = st.parameter_count();
        st.query_map(rusqlite::params_from_iter(&args[..n]), |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let due = "SELECT key FROM items WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry'
                 AND next_attempt_at <= ?2";
    assert!(
        plan(&conn, due).contains("INDEX items_queue"),
        "{}",
        plan(&conn, due)
    );
    assert_eq!(keys(due, [1, 10]), ["r"]);
    let dead =
        "SELECT key FROM items WHERE batch_id = ?1 AND status = 'failed' AND tier = 'manual'";
    assert!(
        plan(&conn, dead).contains("INDEX items_failed"),
        "{}",
        plan(&conn, dead)
    );
    assert_eq!(keys(dead, [1, 0]), ["m"]);
    let claimable = |conn: &Connection| -> Vec<String> {
        let mut st = conn.prepare(super::super::hot::CLAIMABLE).unwrap();
        st.query_map(rusqlite::params![1, 10], |r| r.get(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(claimable(&conn), ["p"]);
    // A dead letter requeued, a pending item failed to the manual tier.
    conn.execute_batch(
        "UPDATE items SET status = 'pending', tier = NULL, error_class = NULL WHERE key = 'm';
         UPDATE items SET status = 'failed', tier = 'manual', error_class = 'E' WHERE key = 'p';",
    )
    .unwrap();
    assert_eq!(claimable(&conn), ["m"]);
    assert_eq!(keys(dead, [1, 0]), ["p"]);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
