//! What SQLite alone needs to write for persistent mode's items, without
//! the runner, its worker or its runtime: the floor under the store thread
//! of `run` in persistent mode (`bench/persistent_floor`, bench/README.md).
//!
//! ```text
//! persistent_sql_floor DIR N [ROUNDS]
//! FLOOR_VARIANTS="store|narrow" persistent_sql_floor ...   # only those variants
//! FLOOR_SQL="DROP INDEX items_done" persistent_sql_floor ... # run before the set-based ones
//! FLOOR_GROUP=1 persistent_sql_floor ...    # items a transaction (process mode: 1)
//! FLOOR_PG=1 persistent_sql_floor ...       # also the store's calls on PostgreSQL
//! ```
//!
//! Each variant takes N items from pending to done in groups of 1,024 (a
//! persistent slot's largest batch; `FLOOR_GROUP`), each group one transaction that
//! marks the last group done and claims the next, as a slot's chained
//! commit does. Every variant starts from a fresh store of N items made by
//! the store itself (`Store::create`, `add_items`: every table, index and
//! trigger of the schema), untimed, and is timed on its own connection
//! with the runner's pragmas (WAL, `synchronous = NORMAL`, a 2 MiB cache)
//! and no checkpoint at all (the runner's are beside it, on another
//! thread):
//!
//! - `store calls`: `Store::claim` and `Store::complete_all`, the calls
//!   the runner's store thread makes, each item with its done event (in
//!   two transactions a group, where the runner makes one), with the
//!   runner's page cache and its checkpoints beside it;
//! - `same writes, set-based SQL`: the same rows written by one statement
//!   each (an item's claim and done mark, its two events, the counts, the
//!   minute's completions, the run's counters), the groups by id range
//!   rather than by the JSON lists the store binds: the least SQLite
//!   needs for what the store keeps;
//! - `same writes without events`: the same without the claimed and done events
//!   (below the product: an item's timeline and the run log need them);
//! - `narrow state rows`: a table of what a claim and a done mark change
//!   alone (status, run, lease, token, attempts, time) and the claim's
//!   order (a partial index of the pending rows by priority), claimed in
//!   that order and marked done: what a design keeping an item's state
//!   apart from its content (key, label, payload, result) would write,
//!   besides the events;
//! - `narrow state rows and events`: the same with the store's claimed
//!   and done events: the same information as the store's, in that
//!   other design;
//! - `store calls on PostgreSQL, one session` (`FLOOR_PG=1`): the first
//!   variant on a fresh database of a private server (as the tests start
//!   it), on one session, where a persistent run's slots each have their
//!   own (lanes); its CPU is the client's alone. `NIGHTSHIFT_PG_OPTS`
//!   sets the server's settings (`bench/persistent_targets` runs its server
//!   with `-c fsync=on -c full_page_writes=on -c shared_buffers=128MB`).
//!
//! Prints one line per variant and round:
//! `floor VARIANT: N items, S s wall, C s cpu, U µs/item`.

#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/floor.rs"]
mod floor;
#[path = "../tests/support/pg.rs"]
mod pg;
// pg.rs asks it about PostgreSQL only.
#[allow(dead_code)]
#[path = "../tests/support/require.rs"]
mod require;

use std::path::Path;
use std::time::Instant;

use cpu::cpu;
use floor::{plain_done, remove_db, seat};
use nightshift::model::{Millis, NewEvent, NewItem};
use nightshift::store::pg::PgStore;
use nightshift::store::{Completion, Store};
use nightshift::util::time::now_ms;
use rusqlite::{Connection, Transaction, params};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Items a transaction claims: a persistent slot's largest batch
/// (`runner::slot::pipeline::MAX_BATCH`), or `FLOOR_GROUP` (1: process
/// mode, where a slot's success and its next claim are one transaction).
fn group() -> usize {
    std::env::var("FLOOR_GROUP")
        .ok()
        .and_then(|g| g.parse().ok())
        .filter(|g| *g > 0)
        .unwrap_or(1024)
}

/// The items of `bench/persistent_floor`: `{"key":"kN","n":N}`.
fn items(n: usize) -> Vec<NewItem> {
    (1..=n)
        .map(|i| NewItem {
            key: format!("k{i}"),
            label: String::new(),
            payload: format!(r#"{{"key":"k{i}","n":{i}}}"#),
            priority: 0,
            not_before: None,
            written_key: None,
        })
        .collect()
}

/// A fresh store of `n` pending items in batch `b`, and the run holding
/// its lock.
/// On PostgreSQL (`pg`: a fresh database of the private server the tests
/// use) where `db` is not used.
fn prepare(db: &Path, n: usize, pg: bool) -> Res<(Store, i64)> {
    remove_db(db);
    let mut s = if pg {
        let server = pg::server().ok_or("no PostgreSQL server binaries: install postgresql")?;
        Store::Pg(PgStore::create(&server.database())?.0)
    } else {
        Store::create(db)?.0
    };
    let run = seat(&mut s, &items(n))?;
    Ok((s, run))
}

/// The runner's connection, as a floor: its pragmas, no checkpoint.
fn open(db: &Path) -> Res<Connection> {
    let c = Connection::open(db)?;
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY; PRAGMA cache_size = -2048; PRAGMA wal_autocheckpoint = 0;",
    )?;
    Ok(c)
}

/// `store calls`: the runner's store calls, a group at a time.
fn store_calls(s: &mut Store, run: i64, n: usize) -> Res<usize> {
    let mut done = 0;
    loop {
        let now = now_ms();
        let claims = s
            .claim("b", run, group(), now + 600_000, now)?
            .ok_or("lock lost")?;
        if claims.is_empty() {
            return Ok(done);
        }
        let successes: Vec<(Completion<'_>, NewEvent)> =
            claims.iter().map(|c| plain_done(c, run, 0, now)).collect();
        let marks: Vec<(Completion<'_>, &NewEvent)> =
            successes.iter().map(|(m, e)| (m.clone(), e)).collect();
        let accepted = s.complete_all(&marks)?;
        done += accepted.iter().filter(|a| **a).count();
        if done > n {
            return Err("more done than added".into());
        }
    }
}

/// The claim of the next group, set-based: the store's claim order
/// (`items_queue`), each row's lease and token, the counts moved.
const CLAIM: &str = "
UPDATE OR ROLLBACK items
   SET status = 'claimed', lease_run = ?1, lease_until = ?2, lease_token = lease_token + 1,
       attempts = attempts + 1, updated_at = ?3, self_counted = 1 - self_counted,
       pool_wait_since = NULL, retry_at = NULL
 WHERE id IN (SELECT id FROM items
               WHERE batch_id = 1 AND status = 'pending' AND tier IS NULL
                 AND next_attempt_at IS NULL
               ORDER BY priority DESC, id LIMIT ?4)";

const CLAIM_EVENTS: &str = "
INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message, fields)
SELECT ?1, 1, ?2, key, id, 'claimed', 'claimed (attempt ' || attempts || ')', NULL
  FROM items WHERE id >= ?3 AND id < ?4 ORDER BY id";

/// The done mark of a group: every column the store's sets.
const DONE: &str = "
UPDATE OR ROLLBACK items AS i
   SET status = 'done', outcome = 'done', result = NULL, cost = i.cost, tier = NULL,
       error_class = NULL, error_message = NULL, next_attempt_at = NULL, lease_run = NULL,
       lease_until = NULL, self_counted = 1 - i.self_counted, updated_at = ?1,
       done_version = NULL, usage = i.usage
 WHERE id >= ?2 AND id < ?3 AND status = 'claimed' AND cancel_to IS NULL";

/// The done events, each with the fields a persistent slot gives its own
/// (`runner::slot::persistent`).
const DONE_EVENTS: &str = "
INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message, fields)
SELECT ?1, 1, ?2, key, id, 'done', 'done',
       '{\"attempt\":' || attempts || ',\"ms\":0,\"cost\":null,\"usage\":null}'
  FROM items WHERE id >= ?3 AND id < ?4 ORDER BY id";

const COUNT: &str = "UPDATE counts SET n = n + ?2 WHERE batch_id = 1 AND bucket = ?1";

const MINUTE: &str = "
INSERT INTO minute_stats (batch_id, minute, done, failed) VALUES (1, ?1, ?2, 0)
    ON CONFLICT (batch_id, minute) DO UPDATE SET done = done + excluded.done";

const RUN: &str = "UPDATE runs SET done = done + ?2 WHERE id = ?1";

/// Takes every item from pending to done a group at a time, each
/// transaction the last group's done mark (`done`, over its ids `from..to`)
/// and the next group's claim (`claim`, its ids from `first` on), as a
/// slot's chained commit; each returns the rows it moved. The items done.
fn chained(
    c: &mut Connection,
    mut done: impl FnMut(&Transaction<'_>, Millis, i64, i64) -> Res<i64>,
    mut claim: impl FnMut(&Transaction<'_>, Millis, i64) -> Res<i64>,
) -> Res<usize> {
    let (mut first, mut total) = (1i64, 0usize);
    let mut last: Option<(i64, i64)> = None;
    loop {
        let now = now_ms();
        let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if let Some((from, to)) = last.take() {
            total += done(&tx, now, from, to)? as usize;
        }
        let k = claim(&tx, now, first)?;
        if k > 0 {
            last = Some((first, first + k));
            first += k;
        }
        tx.commit()?;
        if last.is_none() {
            return Ok(total);
        }
    }
}

/// `same writes, set-based SQL` (with `events`) or `same writes without events`.
fn set_based(c: &mut Connection, run: i64, events: bool) -> Res<usize> {
    let done = |tx: &Transaction<'_>, now: Millis, from: i64, to: i64| -> Res<i64> {
        let k = tx.prepare_cached(DONE)?.execute(params![now, from, to])? as i64;
        if events {
            tx.prepare_cached(DONE_EVENTS)?
                .execute(params![now, run, from, to])?;
        }
        tx.prepare_cached(COUNT)?.execute(params!["claimed", -k])?;
        tx.prepare_cached(COUNT)?.execute(params!["done", k])?;
        tx.prepare_cached(MINUTE)?
            .execute(params![now / 60_000, k])?;
        tx.prepare_cached(RUN)?.execute(params![run, k])?;
        Ok(k)
    };
    let claim = |tx: &Transaction<'_>, now: Millis, first: i64| -> Res<i64> {
        let until = now + 600_000;
        let k = tx
            .prepare_cached(CLAIM)?
            .execute(params![run, until, now, group() as i64])? as i64;
        if k > 0 {
            if events {
                tx.prepare_cached(CLAIM_EVENTS)?
                    .execute(params![now, run, first, first + k])?;
            }
            tx.prepare_cached(COUNT)?.execute(params!["pending", -k])?;
            tx.prepare_cached(COUNT)?.execute(params!["claimed", k])?;
        }
        Ok(k)
    };
    chained(c, done, claim)
}

/// `narrow state rows`: its own table beside the store's, `narrow_fill`ed
/// untimed: what a claim and a done mark change, and the claim's order.
fn narrow_fill(c: &Connection, n: usize) -> Res<()> {
    c.execute_batch(&format!(
        "CREATE TABLE state (id INTEGER PRIMARY KEY, batch_id INTEGER NOT NULL,
                             status INTEGER NOT NULL, priority INTEGER NOT NULL,
                             run INTEGER, lease_until INTEGER, token INTEGER NOT NULL,
                             attempts INTEGER NOT NULL, updated_at INTEGER) STRICT;
         WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n})
         INSERT INTO state SELECT i, 1, 0, 0, NULL, NULL, 0, 0, NULL FROM c;
         CREATE INDEX state_queue ON state (batch_id, priority DESC, id) WHERE status = 0;"
    ))?;
    Ok(())
}

/// The narrow claim: the next pending rows in the claim order.
const NARROW_CLAIM: &str = "
UPDATE state SET status = 1, run = ?1, lease_until = ?2, token = token + 1,
                 attempts = attempts + 1, updated_at = ?3
 WHERE id IN (SELECT id FROM state WHERE batch_id = 1 AND status = 0
               ORDER BY priority DESC, id LIMIT ?4)";

const NARROW_DONE: &str = "
UPDATE state SET status = 2, run = NULL, lease_until = NULL, updated_at = ?1
 WHERE id >= ?2 AND id < ?3 AND status = 1";

/// `narrow state rows` (or `… and events`: with the store's events, each
/// item's key read from its row).
fn narrow(c: &mut Connection, run: i64, events: bool) -> Res<usize> {
    let done = |tx: &Transaction<'_>, now: Millis, from: i64, to: i64| -> Res<i64> {
        let k = tx
            .prepare_cached(NARROW_DONE)?
            .execute(params![now, from, to])? as i64;
        if events {
            tx.prepare_cached(DONE_EVENTS)?
                .execute(params![now, run, from, to])?;
        }
        Ok(k)
    };
    let claim = |tx: &Transaction<'_>, now: Millis, first: i64| -> Res<i64> {
        let until = now + 600_000;
        let k =
            tx.prepare_cached(NARROW_CLAIM)?
                .execute(params![run, until, now, group() as i64])? as i64;
        if k > 0 && events {
            tx.prepare_cached(CLAIM_EVENTS)?
                .execute(params![now, run, first, first + k])?;
        }
        Ok(k)
    };
    chained(c, done, claim)
}

const VARIANTS: [&str; 5] = [
    "store calls",
    "same writes, set-based SQL",
    "same writes without events",
    "narrow state rows and events",
    "narrow state rows",
];

/// One variant on a fresh store: set up untimed, then timed. The timing
/// ends before the connection closes (its last close checkpoints the log,
/// which the floor leaves out).
fn measure(variant: &str, db: &Path, n: usize) -> Res<()> {
    let (mut store, run) = prepare(db, n, variant == PG)?;
    let (done, wall, cpu) = if variant.starts_with("store calls") {
        // As the runner's store thread (`runner::writer`).
        store.use_runner_cache();
        store.begin_checkpoints_beside();
        timed(|| store_calls(&mut store, run, n))?
    } else {
        // The store's own connection closed: the floor's is alone.
        drop(store);
        let mut c = open(db)?;
        if variant.starts_with("narrow") {
            narrow_fill(&c, n)?;
        } else if let Ok(sql) = std::env::var("FLOOR_SQL") {
            c.execute_batch(&sql)?;
        }
        timed(|| match variant {
            "narrow state rows" => narrow(&mut c, run, false),
            "narrow state rows and events" => narrow(&mut c, run, true),
            _ => set_based(&mut c, run, variant != "same writes without events"),
        })?
    };
    report(variant, done, wall, cpu);
    if done != n {
        return Err(format!("{variant}: {done} of {n} items done").into());
    }
    Ok(())
}

/// `f`'s answer, the wall time it took and the process's CPU time meanwhile.
fn timed(f: impl FnOnce() -> Res<usize>) -> Res<(usize, f64, f64)> {
    let (c0, t) = (cpu(), Instant::now());
    let done = f()?;
    Ok((done, t.elapsed().as_secs_f64(), cpu() - c0))
}

/// The store's calls on PostgreSQL: only with `FLOOR_PG=1`.
const PG: &str = "store calls on PostgreSQL, one session";

/// `FLOOR_VARIANTS` (`floor::chosen`); PostgreSQL only with `FLOOR_PG=1`.
fn chosen(variant: &str) -> bool {
    (variant != PG || std::env::var("FLOOR_PG").as_deref() == Ok("1")) && floor::chosen(variant)
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(n)) = (args.first(), args.get(1)) else {
        return Err("usage: persistent_sql_floor DIR N [ROUNDS]".into());
    };
    let n: usize = n.parse()?;
    let rounds: usize = args.get(2).map(|r| r.parse()).transpose()?.unwrap_or(1);
    let db = Path::new(dir).join("floor.db");
    for _ in 0..rounds {
        for variant in VARIANTS.iter().chain([&PG]).filter(|v| chosen(v)) {
            measure(variant, &db, n)?;
        }
    }
    Ok(())
}

fn report(variant: &str, done: usize, wall: f64, cpu: f64) {
    println!(
        "floor {variant}: {done} items, {wall:.3} s wall, {cpu:.2} s cpu, {:.2} µs/item",
        wall * 1e6 / done.max(1) as f64
    );
}
