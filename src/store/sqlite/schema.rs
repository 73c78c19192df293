//! Schema, migrations by `PRAGMA user_version`, and the pragmas set on open.
//!
//! Durability: WAL with `synchronous = NORMAL`. Every committed transition
//! survives a crash of any process (the WAL is written before COMMIT
//! returns). A power loss or kernel crash can roll back the last few commits
//! since the previous checkpoint; the database stays consistent, and because
//! "done" is written only after the side effect, what a power loss costs is
//! that a few items run again with the same idempotency key, never that work
//! is marked done without having happened. `durability = "full"` is not
//! offered yet: fsync per commit would cap throughput at the disk's flush rate.

use rusqlite::Connection;
use rusqlite::config::DbConfig;

/// "NSHT": marks the file as a nightshift store.
pub const APPLICATION_ID: i32 = 0x4E53_4854;
/// The schema this build writes. Bump with a new entry in `MIGRATIONS`.
pub const SCHEMA_VERSION: i32 = 30;

/// How long a writer waits for another writer before giving up. Long, so a
/// busy database delays the runner instead of failing items.
pub const BUSY_TIMEOUT_MS: u64 = 60_000;
/// Page cache of a writer connection (SQLite's default is 2 MiB).
pub const WRITER_CACHE_KIB: i64 = 16 * 1024;
/// Page cache of the runner's connection once its run has begun (see
/// `SqliteStore::use_runner_cache`).
pub const RUNNER_CACHE_KIB: i64 = 2 * 1024;
/// Prepared statements kept per writer connection.
pub const STATEMENT_CACHE: usize = 128;
/// Above this the WAL is truncated after a checkpoint, keeping it bounded.
pub const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Count buckets: failed splits by tier, done by outcome.
pub const BUCKETS: [&str; 7] = [
    "pending", "claimed", "done", "empty", "skipped", "retry", "manual",
];

/// The bucket an items row counts in, as SQL over `OLD` or `NEW` (or a
/// table alias): the one rule of the triggers and of the statements that
/// count themselves by what they read (`bulk`).
macro_rules! bucket {
    ($row:literal) => {
        concat!(
            "CASE ",
            $row,
            ".status WHEN 'failed' THEN ",
            $row,
            ".tier WHEN 'done' THEN ",
            $row,
            ".outcome ELSE ",
            $row,
            ".status END"
        )
    };
}
pub(super) use bucket;

/// The trigger keeping `counts` on an update of an items row, counting
/// only rows whose change `$guard` (SQL ending in `AND`, or empty) admits.
macro_rules! count_update_trigger {
    ($guard:literal) => {
        concat!(
            "CREATE TRIGGER items_count_update AFTER UPDATE OF status, tier, outcome ON items\nWHEN ",
            $guard,
            "(",
            bucket!("OLD"),
            ") IS NOT (",
            bucket!("NEW"),
            ") BEGIN\n    UPDATE counts SET n = n - 1 WHERE batch_id = OLD.batch_id AND bucket = ",
            bucket!("OLD"),
            ";\n    UPDATE counts SET n = n + 1 WHERE batch_id = NEW.batch_id AND bucket = ",
            bucket!("NEW"),
            ";\nEND;\n"
        )
    };
}

/// The trigger keeping `minute_stats` (worker completions per minute),
/// counting only rows whose change `$guard` admits, as `count_update_trigger`.
macro_rules! minute_stats_trigger {
    ($guard:literal) => {
        concat!(
            "CREATE TRIGGER items_minute_stats AFTER UPDATE OF status ON items\nWHEN ",
            $guard,
            "OLD.status = 'claimed' AND NEW.status IN ('done', 'failed') BEGIN
    INSERT OR IGNORE INTO minute_stats (batch_id, minute, done, failed)
     VALUES (NEW.batch_id, NEW.updated_at / 60000, 0, 0);
    UPDATE minute_stats
       SET done = done + (NEW.status = 'done'), failed = failed + (NEW.status = 'failed')
     WHERE batch_id = NEW.batch_id AND minute = NEW.updated_at / 60000;
END;
"
        )
    };
}

const V1: &str = concat!(
    r#"
CREATE TABLE batches (
    id                INTEGER PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    created_at        INTEGER NOT NULL,
    paused            INTEGER NOT NULL DEFAULT 0,
    paused_reason     TEXT,
    paused_by         TEXT,
    paused_at         INTEGER,
    hold_until        INTEGER,
    next_fire         INTEGER,
    last_fire_at      INTEGER,
    last_fire_outcome TEXT,
    last_fire_reason  TEXT,
    last_fire_run     INTEGER
) STRICT;

CREATE TABLE items (
    id              INTEGER PRIMARY KEY,
    batch_id        INTEGER NOT NULL REFERENCES batches(id),
    key             TEXT NOT NULL,
    label           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    -- OR chains, not IN lists: SQLite checks an IN list of three or more
    -- values through a temporary b-tree built on every insert and update,
    -- which cost more than the rest of the write.
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
    UNIQUE (batch_id, key),
    CHECK ((status = 'failed') = (tier IS NOT NULL)),
    CHECK ((status = 'done') = (outcome IS NOT NULL)),
    CHECK (status <> 'failed' OR error_class IS NOT NULL),
    CHECK ((status = 'claimed') = (lease_run IS NOT NULL))
) STRICT;
-- Serves claims (pending in insertion order), expired leases, redrive of due
-- retry-tier items and requeue by tier.
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at);
-- Failed items by error class, in id order: the dead-letter pane's item
-- list of one class is a page of this index even when the class is rare.
-- Partial, so only failing and requeueing touch it.
CREATE INDEX items_failed ON items (batch_id, error_class) WHERE status = 'failed';

CREATE TABLE counts (
    batch_id INTEGER NOT NULL,
    bucket   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (batch_id, bucket)
) STRICT, WITHOUT ROWID;

-- Failed items now, by error class and tier: the dead-letter pane's counts
-- without scanning the failed items.
CREATE TABLE failed_classes (
    batch_id    INTEGER NOT NULL,
    error_class TEXT NOT NULL,
    tier        TEXT NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (batch_id, error_class, tier)
) STRICT, WITHOUT ROWID;

-- Worker completions per minute: rates, ETA and the sparkline.
CREATE TABLE minute_stats (
    batch_id INTEGER NOT NULL,
    minute   INTEGER NOT NULL,
    done     INTEGER NOT NULL,
    failed   INTEGER NOT NULL,
    PRIMARY KEY (batch_id, minute)
) STRICT, WITHOUT ROWID;

CREATE TABLE dead_letters (
    id          INTEGER PRIMARY KEY,
    batch_id    INTEGER NOT NULL REFERENCES batches(id),
    item_id     INTEGER,
    key         TEXT NOT NULL,
    label       TEXT NOT NULL,
    payload     TEXT NOT NULL,
    error_class TEXT NOT NULL,
    message     TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    failed_at   INTEGER NOT NULL,
    tier        TEXT NOT NULL CHECK (tier IN ('retry', 'manual')),
    run_id      INTEGER
) STRICT;
CREATE INDEX dead_letters_by_batch ON dead_letters (batch_id, failed_at);
CREATE INDEX dead_letters_by_item ON dead_letters (item_id);

-- Dead letters per class and hour: the 24 h vs previous 24 h comparison in
-- O(classes x 48) rows.
CREATE TABLE dlq_hourly (
    batch_id    INTEGER NOT NULL,
    error_class TEXT NOT NULL,
    hour        INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (batch_id, error_class, hour)
) STRICT, WITHOUT ROWID;

CREATE TABLE runs (
    id           INTEGER PRIMARY KEY,
    batch_id     INTEGER NOT NULL REFERENCES batches(id),
    trigger      TEXT NOT NULL,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    pid_start    INTEGER,
    started_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    state        TEXT NOT NULL,
    done         INTEGER NOT NULL DEFAULT 0,
    empty        INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    retry        INTEGER NOT NULL DEFAULT 0,
    manual       INTEGER NOT NULL DEFAULT 0,
    retried      INTEGER NOT NULL DEFAULT 0,
    skipped_done INTEGER NOT NULL DEFAULT 0,
    redriven     INTEGER NOT NULL DEFAULT 0,
    released     INTEGER NOT NULL DEFAULT 0,
    cost         REAL NOT NULL DEFAULT 0,
    summary      TEXT
) STRICT;
CREATE INDEX runs_by_batch ON runs (batch_id, id);
CREATE INDEX runs_open ON runs (state) WHERE state = 'running';

CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    batch_id INTEGER,
    run_id   INTEGER,
    key      TEXT,
    -- The item the event is about (NULL if none). Its timeline is found by
    -- item id rather than by key: ids of items worked on together are
    -- close, so their index entries share pages, where keys (hashes) would
    -- put every event's entry on a page of its own (requeueing 100,000
    -- items wrote ten times the pages).
    item_id  INTEGER,
    kind     TEXT NOT NULL,
    actor    TEXT,
    message  TEXT NOT NULL,
    fields   TEXT
) STRICT;
CREATE INDEX events_by_batch ON events (batch_id, id);
CREATE INDEX events_by_kind ON events (kind, id);
CREATE INDEX events_by_item ON events (item_id) WHERE item_id IS NOT NULL;
CREATE INDEX events_by_time ON events (at);

CREATE TABLE locks (
    batch_id    INTEGER PRIMARY KEY REFERENCES batches(id),
    token       TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    pid_start   INTEGER,
    run_id      INTEGER,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;

-- Inserts are counted by `Store::add_items` (the only insert), once per
-- chunk in the chunk's transaction: a per-row trigger cost more than the
-- insert itself at a million items.
"#,
    count_update_trigger!(""),
    r#"

CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN
    UPDATE counts SET n = n - 1 WHERE batch_id = OLD.batch_id AND bucket = "#,
    bucket!("OLD"),
    r#";
END;

CREATE TRIGGER items_failed_update AFTER UPDATE OF status, tier, error_class ON items
WHEN OLD.status = 'failed' OR NEW.status = 'failed' BEGIN
    UPDATE failed_classes SET n = n - 1
     WHERE OLD.status = 'failed' AND batch_id = OLD.batch_id
       AND error_class = OLD.error_class AND tier = OLD.tier;
    INSERT OR IGNORE INTO failed_classes (batch_id, error_class, tier, n)
     SELECT NEW.batch_id, NEW.error_class, NEW.tier, 0 WHERE NEW.status = 'failed';
    UPDATE failed_classes SET n = n + 1
     WHERE NEW.status = 'failed' AND batch_id = NEW.batch_id
       AND error_class = NEW.error_class AND tier = NEW.tier;
END;

CREATE TRIGGER items_failed_delete AFTER DELETE ON items WHEN OLD.status = 'failed' BEGIN
    UPDATE failed_classes SET n = n - 1
     WHERE batch_id = OLD.batch_id AND error_class = OLD.error_class AND tier = OLD.tier;
END;

-- Only worker completions count towards rates: a claim ending done or failed.
"#,
    minute_stats_trigger!(""),
    r#"

CREATE TRIGGER dead_letters_hourly AFTER INSERT ON dead_letters BEGIN
    INSERT OR IGNORE INTO dlq_hourly (batch_id, error_class, hour, n)
     VALUES (NEW.batch_id, NEW.error_class, NEW.failed_at / 3600000, 0);
    UPDATE dlq_hourly SET n = n + 1
     WHERE batch_id = NEW.batch_id AND error_class = NEW.error_class
       AND hour = NEW.failed_at / 3600000;
END;
"#
);

/// Version 2: the batch lock has seats (several runners may share a batch),
/// one row per holder instead of one per batch.
const V2: &str = r#"
CREATE TABLE locks_v2 (
    batch_id    INTEGER NOT NULL REFERENCES batches(id),
    token       TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    pid_start   INTEGER,
    run_id      INTEGER,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (batch_id, token)
) STRICT;
INSERT INTO locks_v2 SELECT batch_id, token, host, pid, pid_start, run_id, acquired_at, expires_at
  FROM locks;
DROP TABLE locks;
ALTER TABLE locks_v2 RENAME TO locks;
CREATE INDEX locks_by_expiry ON locks (expires_at);
"#;

/// Version 3: a run records who started it (`user@host`).
const V3: &str = "ALTER TABLE runs ADD COLUMN actor TEXT;";

/// Version 4: tombstones. Pruning a done item keeps its key (and when and
/// how it was done), so adding the same input again does not run it again;
/// `batches.pruned_keys` counts them (kept by triggers: prune and
/// `--forget-keys` are the only writers, and rare).
const V4: &str = r#"
CREATE TABLE tombstones (
    batch_id  INTEGER NOT NULL REFERENCES batches(id),
    key       TEXT NOT NULL,
    done_at   INTEGER NOT NULL,
    outcome   TEXT NOT NULL CHECK (outcome = 'done' OR outcome = 'empty' OR outcome = 'skipped'),
    pruned_at INTEGER NOT NULL,
    PRIMARY KEY (batch_id, key)
) STRICT, WITHOUT ROWID;
ALTER TABLE batches ADD COLUMN pruned_keys INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER tombstones_count_insert AFTER INSERT ON tombstones BEGIN
    UPDATE batches SET pruned_keys = pruned_keys + 1 WHERE id = NEW.batch_id;
END;
CREATE TRIGGER tombstones_count_delete AFTER DELETE ON tombstones BEGIN
    UPDATE batches SET pruned_keys = pruned_keys - 1 WHERE id = OLD.batch_id;
END;
"#;

/// Migrations, index `i` takes the schema from version `i` to `i + 1`.
/// Version 5: each run's worker process groups (one row per slot), so a
/// later run on the same host can stop those a crashed runner left behind
/// (see `runner::child::groups`).
const V5: &str = r#"
CREATE TABLE workers (
    run_id  INTEGER NOT NULL,
    slot    INTEGER NOT NULL,
    host    TEXT NOT NULL,
    boot    TEXT NOT NULL,
    pgid    INTEGER NOT NULL,
    started INTEGER NOT NULL,
    PRIMARY KEY (run_id, slot)
) STRICT;
"#;

/// Version 6: who is alive. A seat keeps its holder's TTL, so a view can
/// say when a silent holder last renewed it; each scheduler daemon records
/// a heartbeat (`batches`: a JSON array of the batch names it schedules),
/// so a schedule with no live daemon says so.
const V6: &str = r#"
ALTER TABLE locks ADD COLUMN ttl_ms INTEGER;
CREATE TABLE daemons (
    token      TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    pid_start  INTEGER,
    started_at INTEGER NOT NULL,
    beat_at    INTEGER NOT NULL,
    stopped_at INTEGER,
    batches    TEXT NOT NULL
) STRICT;
"#;

/// Version 7: a retry-after hold names the item whose answer asked for it.
const V7: &str = "ALTER TABLE batches ADD COLUMN hold_key TEXT;";

// ---- Steering a live batch (issue 18: cancel, stop) ----
/// Version 8: steering a live batch through the store, so any host's
/// runner hears it within a heartbeat. `items.cancel_to` asks the runner
/// holding a claimed item to stop its worker and move it there (`pending`
/// or `manual`), with who asked and why; no done mark is written while it
/// is set. `locks.stop` asks the holder of a seat to stop its run
/// (`graceful`, or `now` as a second signal), with who asked.
const V8: &str = r#"
ALTER TABLE items ADD COLUMN cancel_to TEXT CHECK (cancel_to = 'pending' OR cancel_to = 'manual');
ALTER TABLE items ADD COLUMN cancel_by TEXT;
ALTER TABLE items ADD COLUMN cancel_reason TEXT;
CREATE INDEX items_cancels ON items (batch_id, lease_run) WHERE cancel_to IS NOT NULL;
ALTER TABLE locks ADD COLUMN stop TEXT CHECK (stop = 'graceful' OR stop = 'now');
ALTER TABLE locks ADD COLUMN stop_by TEXT;
"#;
// ---- end of steering ----

/// Version 9: the worker's own words. The last 16 KiB of what each attempt
/// printed on stderr (`cut`: its start was left out), by item. No foreign
/// key: rows go by age with the events (`prune`), and the newest
/// `ops::attempts::KEPT_PER_ITEM` of an item are kept.
const V9: &str = r#"
CREATE TABLE attempt_logs (
    id      INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    run_id  INTEGER,
    at      INTEGER NOT NULL,
    stderr  TEXT NOT NULL,
    cut     INTEGER NOT NULL CHECK (cut = 0 OR cut = 1)
) STRICT;
CREATE INDEX attempt_logs_by_item ON attempt_logs (item_id, id);
CREATE INDEX attempt_logs_by_time ON attempt_logs (at);
"#;

/// Version 10: versioned done. A done item remembers the batch `version`
/// it was done under (NULL: none was set), so a new version can tell which
/// items are stale.
const V10: &str = "ALTER TABLE items ADD COLUMN done_version TEXT;";

/// Version 11: limit pools (`[limit.NAME]`, see `runner::pool`), shared by
/// every runner of the store. `pool_dims`: one GCRA theoretical arrival
/// time per pool and dimension, in microseconds; `pool_calls`: the calls
/// in flight (each with the time it gives up its place, should its runner
/// die); `pool_holds`: a retry-after hold on every batch of the pool;
/// `usage`: the tokens of each attempt (the estimate when nothing was
/// reported).
const V11: &str = r#"
CREATE TABLE pool_dims (
    pool   TEXT NOT NULL,
    dim    TEXT NOT NULL,
    tat_us INTEGER NOT NULL,
    PRIMARY KEY (pool, dim)
) STRICT, WITHOUT ROWID;
CREATE TABLE pool_calls (
    pool     TEXT NOT NULL,
    call     TEXT NOT NULL,
    until_ms INTEGER NOT NULL,
    PRIMARY KEY (pool, call)
) STRICT, WITHOUT ROWID;
CREATE TABLE pool_holds (
    pool     TEXT PRIMARY KEY,
    until_ms INTEGER NOT NULL,
    batch    TEXT NOT NULL,
    key      TEXT
) STRICT;
CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    batch         TEXT NOT NULL,
    run_id        INTEGER NOT NULL,
    key           TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    pool          TEXT,
    at            INTEGER NOT NULL,
    estimate      INTEGER NOT NULL,
    input_tokens  INTEGER,
    output_tokens INTEGER
) STRICT;
CREATE INDEX usage_run ON usage (run_id);
CREATE INDEX usage_key ON usage (batch, key);
CREATE INDEX usage_pool ON usage (pool, at);
"#;

/// Version 12: a run counts the items it cancelled (its worker stopped by
/// `nightshift cancel`), so its summary says what became of every claim.
const V12: &str = "ALTER TABLE runs ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;";

/// Version 13: priority and not-before. Claims take higher priorities
/// first, then older items: `items_claimable` holds only the claimable
/// rows in that order (its rowid breaks ties), so a claim reads the first
/// entries of it whatever the batch holds. A pending item's not-before
/// time is its `next_attempt_at`, as a retry-tier failure's: the claim
/// skips both until a run's redrive step makes them due.
const V13: &str = "
ALTER TABLE items ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE INDEX items_claimable ON items (batch_id, priority DESC)
    WHERE status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL;
";

// ---- Budgets (issue 17 item 4) ----
/// Version 14: the budgets' spend ledger (`budget = "20.0/day"`, see
/// `runner::budget`): per batch or pool (`scope`), period and UTC-aligned
/// window, the cost of every attempt that reported one (millionths, exact
/// sums) and how many. Shared by every runner of the store.
const V14: &str = r#"
CREATE TABLE spend (
    scope        TEXT NOT NULL CHECK (scope = 'batch' OR scope = 'pool'),
    name         TEXT NOT NULL,
    period_ms    INTEGER NOT NULL,
    window_start INTEGER NOT NULL,
    micros       INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    PRIMARY KEY (scope, name, period_ms, window_start)
) STRICT, WITHOUT ROWID;
"#;
// ---- end of budgets ----

/// Version 15: one queue index (issue 16). Version 13's `items_claimable`
/// beside `items_queue` made every add write each row into two indexes.
/// SQLite takes `IS NULL` as an equality for an index, so `priority DESC`
/// after the four queue columns keeps the claim (`status = 'pending' AND
/// tier IS NULL AND next_attempt_at IS NULL ORDER BY priority DESC, id`) a
/// read of the first entries in claim order (the rowid breaks ties), and
/// every read of the old `items_queue` keeps its prefix. `items_cancels`
/// goes too: every insert opened a cursor on it to skip it (1 % of an
/// add), and its one reader, a runner's heartbeat asking which of its
/// claims to cancel, reads the batch's claimed entries of `items_queue`
/// instead: the items in flight, as the dashboard's count of them does.
const V15: &str = "
DROP INDEX items_claimable;
DROP INDEX items_cancels;
DROP INDEX items_queue;
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at, priority DESC);
";

/// Version 16: the kind index without the kinds written once per item on
/// the success path (`dialect::events::DENSE_KINDS`): one index entry
/// fewer for each claim and done mark. A read of those kinds walks the
/// events by id, where they are dense; a read of other kinds repeats the
/// index's condition so the planner may use it. Three `<>`, not `NOT IN`:
/// SQLite builds a temporary b-tree for a list of three each time the
/// condition is checked, which is on every event inserted, one per
/// statement on the done path (that cost more than the index saved).
const V16: &str = "
DROP INDEX events_by_kind;
CREATE INDEX events_by_rare_kind ON events (kind, id)
    WHERE kind <> 'claimed' AND kind <> 'done' AND kind <> 'empty';
";

// ---- Pool bookkeeping in sums (issue 17) ----
/// Version 17: a limit pool's bookkeeping in sums, not a row per call
/// (see `runner::pool`). `pool_places`: the places in flight one runner
/// holds in a pool, and when they lapse should it die; `pool_usage`: the
/// calls and tokens settled per pool and minute; `run_usage`: per run;
/// `items.usage`: each attempt's tokens, a line per attempt
/// (`run attempt at estimate input output pool`, `-` for none reported). They
/// replace `pool_calls` (a row per call) and `usage` (a row per attempt),
/// whose sums are carried over; places in flight are not (they lapse).
const V17: &str = r#"
CREATE TABLE pool_places (
    pool     TEXT NOT NULL,
    runner   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    until_ms INTEGER NOT NULL,
    PRIMARY KEY (pool, runner)
) STRICT, WITHOUT ROWID;
CREATE TABLE pool_usage (
    pool             TEXT NOT NULL,
    minute           INTEGER NOT NULL,
    calls            INTEGER NOT NULL,
    input_tokens     INTEGER NOT NULL,
    output_tokens    INTEGER NOT NULL,
    unreported       INTEGER NOT NULL,
    estimated_tokens INTEGER NOT NULL,
    PRIMARY KEY (pool, minute)
) STRICT, WITHOUT ROWID;
CREATE TABLE run_usage (
    run_id           INTEGER PRIMARY KEY,
    attempts         INTEGER NOT NULL,
    input_tokens     INTEGER NOT NULL,
    output_tokens    INTEGER NOT NULL,
    unreported       INTEGER NOT NULL,
    estimated_tokens INTEGER NOT NULL
) STRICT;
ALTER TABLE items ADD COLUMN usage TEXT;
INSERT INTO pool_usage SELECT pool, at / 60000, count(*), coalesce(sum(input_tokens), 0),
    coalesce(sum(output_tokens), 0),
    sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END),
    sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN estimate ELSE 0 END)
    FROM usage WHERE pool IS NOT NULL GROUP BY pool, at / 60000;
INSERT INTO run_usage SELECT run_id, count(*), coalesce(sum(input_tokens), 0),
    coalesce(sum(output_tokens), 0),
    sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END),
    sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN estimate ELSE 0 END)
    FROM usage GROUP BY run_id;
UPDATE items SET usage = (
    SELECT group_concat(j, char(10)) FROM (
        SELECT u.run_id || ' ' || u.attempt || ' ' || u.at || ' ' || u.estimate || ' '
            || coalesce(u.input_tokens, '-') || ' ' || coalesce(u.output_tokens, '-') || ' '
            || coalesce(u.pool, '') AS j
        FROM usage u JOIN batches b ON b.name = u.batch
        WHERE b.id = items.batch_id AND u.key = items.key ORDER BY u.id))
WHERE id IN (SELECT i.id FROM usage u JOIN batches b ON b.name = u.batch
    JOIN items i ON i.batch_id = b.id AND i.key = u.key);
DROP TABLE usage;
DROP TABLE pool_calls;
"#;
// ---- end of pool bookkeeping in sums ----

// ---- Self-counted hot statements (issue 19) ----
/// Version 18: the hot statements count themselves. A claim of a group
/// and a done mark (`hot/claim.rs`) update `counts` and `minute_stats` once per
/// statement (see `counted.rs`), where the triggers did it once per row
/// (a third of a persistent worker's done mark). Such a statement flips
/// `items.self_counted` (its value means nothing; its change does), and
/// the two triggers pass over a row whose flag changed: every other
/// writer (cancel, requeue, hold, failures, manual edits) leaves the flag
/// as it is and is counted by the triggers as before.
const V18: &str = concat!(
    "ALTER TABLE items ADD COLUMN self_counted INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER items_count_update;
",
    count_update_trigger!("NEW.self_counted IS OLD.self_counted AND "),
    "DROP TRIGGER items_minute_stats;
",
    minute_stats_trigger!("NEW.self_counted IS OLD.self_counted AND ")
);
// ---- end of self-counted hot statements ----

// ---- Self-counted requeue (issue 19) ----
/// Version 19: a requeue chunk counts itself too, the failed items by
/// class and tier with the buckets (`counted::requeued`): the failed-class
/// trigger passes over a row whose `self_counted` changed, as the bucket
/// trigger does since version 18. The two triggers were a fifth of a
/// requeue's instructions (five statements a row). A claim and a done
/// mark, the other statements that flip the flag, never touch a failed
/// row.
const V19: &str = "DROP TRIGGER items_failed_update;
CREATE TRIGGER items_failed_update AFTER UPDATE OF status, tier, error_class ON items
WHEN NEW.self_counted IS OLD.self_counted AND (OLD.status = 'failed' OR NEW.status = 'failed') BEGIN
    UPDATE failed_classes SET n = n - 1
     WHERE OLD.status = 'failed' AND batch_id = OLD.batch_id
       AND error_class = OLD.error_class AND tier = OLD.tier;
    INSERT OR IGNORE INTO failed_classes (batch_id, error_class, tier, n)
     SELECT NEW.batch_id, NEW.error_class, NEW.tier, 0 WHERE NEW.status = 'failed';
    UPDATE failed_classes SET n = n + 1
     WHERE NEW.status = 'failed' AND batch_id = NEW.batch_id
       AND error_class = NEW.error_class AND tier = NEW.tier;
END;
";
// ---- end of self-counted requeue ----

// ---- Queue entries only for the rows a claim or redrive takes (issue 19) ----
/// Version 20: `items_queue` holds only pending and failed rows, the ones
/// a claim, a redrive or a requeue of failed items takes; claimed rows
/// have `items_claimed` (by run: the heartbeat's cancels and lease
/// renewals, the orphaned claims, the dashboard's count in flight) and
/// done rows `items_done` (by id: the lists of done items, a requeue of
/// done or stale ones). Every status change of the runner's path moved
/// an entry within `items_queue`, whose keys share their first five
/// columns over thousands of done rows (a seek compares them all before
/// the rowid decides); now a claim moves the row's entry into the small
/// index of claims, and its done mark from there into one keyed by the
/// batch alone: about 7 % of a persistent worker's runner instructions.
/// A read names the status it wants (`status = 'done'`), which is how
/// SQLite picks a partial index.
const V20: &str = "
DROP INDEX items_queue;
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at, priority DESC)
    WHERE status = 'pending' OR status = 'failed';
CREATE INDEX items_claimed ON items (batch_id, lease_run) WHERE status = 'claimed';
CREATE INDEX items_done ON items (batch_id) WHERE status = 'done';
";
// ---- end of queue entries for the rows a claim takes ----

// ---- Keys in a table of their own (issue 19) ----
/// Version 21: an item is found by its key through `item_keys` (the batch
/// and key naming the item), no longer through the unique index of
/// `items`, which an add filled in input order: a random leaf per item
/// with hashed keys, most of an add's time (`examples/sqlite_floor.rs`).
/// An add writes the rows in input order (their ids, the claim order) and
/// the keys sorted (`hot/add.rs`), so each b-tree fills in order, into a full
/// store too. Deleting an item deletes its key (the trigger names the item,
/// so an add dropping a row whose key another item holds leaves that key).
/// The unique constraint of `items` goes in a rebuild of the table
/// (`key_table::unkey_items`, run after this).
const V21: &str = "CREATE TABLE item_keys (
    batch_id INTEGER NOT NULL,
    key      TEXT NOT NULL,
    item_id  INTEGER NOT NULL,
    PRIMARY KEY (batch_id, key)
) STRICT, WITHOUT ROWID;
INSERT INTO item_keys (batch_id, key, item_id)
    SELECT batch_id, key, id FROM items ORDER BY batch_id, key;
CREATE TRIGGER items_key_delete AFTER DELETE ON items BEGIN
    DELETE FROM item_keys WHERE batch_id = OLD.batch_id AND key = OLD.key AND item_id = OLD.id;
END;
";
// ---- end of keys in a table of their own ----

/// Version 22: a claimed item waiting for its place in its limit pool
/// says since when (`pool_wait_since`), set by the runner when the pool
/// defers its call and cleared when the call gets its place or the item
/// is claimed again; the views count it as waiting, not in flight.
const V22: &str = "ALTER TABLE items ADD COLUMN pool_wait_since INTEGER;";

/// Version 23: a claimed item whose attempt failed and runs again in this
/// cycle says when (`retry_at`), set with its error by the runner and
/// cleared when it is claimed or its next attempt begins; the views count
/// it as waiting to retry, not in flight.
const V23: &str = "ALTER TABLE items ADD COLUMN retry_at INTEGER;";

/// Version 24: what a run's reporting attempts had reserved, so a run's
/// tokens are compared with its estimates whether they are one
/// `token_estimate` or each item's `estimate_field`.
const V24: &str = "ALTER TABLE run_usage ADD COLUMN reported_estimate INTEGER NOT NULL DEFAULT 0;";

// ---- Queue entries only for what a claim or redrive takes (issue 19) ----
/// Version 25: `items_queue` leaves out failures of the manual tier. Only
/// a claim (pending rows) and a redrive (the retry tier's, by time) read
/// it; a dead letter waits for a requeue by hand, which finds it, as every
/// list of failed items does, through `items_failed`. Each requeued dead
/// letter deleted its entry here (a seek over keys that share their first
/// five columns with every other dead letter of the batch), and each
/// failure to the manual tier inserted one: requeue of 100,000 0.60 ->
/// 0.51 s. A read that wants the retry tier names it (`tier = 'retry'`),
/// which is how SQLite proves the index's condition.
const V25: &str = "
DROP INDEX items_queue;
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at, priority DESC)
    WHERE status = 'pending' OR tier = 'retry';
";
// ---- end of queue entries for what a claim or redrive takes ----

/// Version 26: a daemon asked to stop says so while its cycles finish
/// (`stopping_at`): it fires nothing more, and views say that rather than
/// its next fires.
const V26: &str = "ALTER TABLE daemons ADD COLUMN stopping_at INTEGER;";

/// Version 27: the fires a daemon still owes a cycle (`model::Owed`): the
/// one whose cycle started and never ended, and one queued behind it. The
/// last fire alone lost them as soon as a later fire was skipped or
/// queued, so a daemon killed then left its successor nothing to resume.
const V27: &str = "
ALTER TABLE batches ADD COLUMN cycle_fire_at INTEGER;
ALTER TABLE batches ADD COLUMN cycle_crashed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN queued_fire_at INTEGER;
";

/// Version 28: why a run stopped before it ran out of work (`stopped`:
/// `model::StopCause`), so a run its `max_duration` or `max_cost` ended
/// is recorded `ok` and every view still says why it stopped.
const V28: &str = "ALTER TABLE runs ADD COLUMN stopped TEXT;";

/// Version 29: the rule (schedule, time zone) the daemon that planned
/// `next_fire` fires by (`model::FireRule`), so that every view gives the
/// live daemon's fires, and says so when the file was edited since.
const V29: &str = "
ALTER TABLE batches ADD COLUMN fire_schedule TEXT;
ALTER TABLE batches ADD COLUMN fire_timezone TEXT;
";

/// Version 30: how the batch's items were keyed (`key::KeySpec::stored`),
/// recorded by its first add that knows it, so that an add keying them
/// otherwise (`key_fields` edited) is refused rather than adding every
/// item again under a new key. NULL until then: a batch of an older store
/// adopts the spec of its next add.
const V30: &str = "ALTER TABLE batches ADD COLUMN key_spec TEXT;";

const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18, V19, V20, V21,
    V22, V23, V24, V25, V26, V27, V28, V29, V30,
];

/// What a migration needs beyond SQL, run right after the SQL named.
type Step = fn(&Connection) -> rusqlite::Result<()>;
const STEPS_AFTER: [(&str, Step); 1] = [(V21, super::key_table::unkey_items)];

/// The oldest layout a read-only open reads (through views, see
/// `store::older`): every migration since only adds columns.
pub fn readable_from() -> i32 {
    static FROM: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *FROM.get_or_init(|| crate::store::older::readable_from(&MIGRATIONS))
}

/// On a read-only connection to a store at `version`, if older but at
/// least [`readable_from`]: shadows each table that has gained columns
/// since with a view that has them, as the upgrade would fill them. In
/// memory: the store's files are never written. Any other version is left
/// as it is (a current one needs nothing; an older one is refused).
pub fn shim_reader(conn: &Connection, version: i32) -> rusqlite::Result<()> {
    let Some(missing) = crate::store::older::missing(&MIGRATIONS, version) else {
        return Ok(());
    };
    if missing.is_empty() {
        return Ok(());
    }
    conn.execute_batch(&format!(
        "PRAGMA temp_store = MEMORY;\n{}",
        crate::store::older::views(&missing, "main", false)
    ))
}

/// Pragmas for every read-write connection. Set once on open.
pub fn configure_writer(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.busy_handler(Some(wait_for_lock()))?;
    // Room for every statement of the runner's hot path: a statement that
    // fires the counter triggers costs far more to prepare than to run.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Query planner stability: without it SQLite marks statements whose
    // plan may depend on a bound value (`col = ?`, `LIMIT ?`) to be
    // re-prepared when rebound, and rusqlite's cache clears the bindings
    // of every statement it takes back, so those statements (and the
    // counter triggers compiled into them) were re-prepared on each use.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // temp_store: statement journals (every multi-row update with triggers
    // has one) stay in memory instead of a temporary file per statement.
    // cache_size: a bulk chunk dirties a few hundred scattered pages (an
    // event's key index entry each); SQLite's 2 MiB default spilled them to
    // the WAL mid-transaction and wrote them twice.
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -{WRITER_CACHE_KIB};
         PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT};"
    ))?;
    super::trace::install(conn)
}

/// A busy handler that waits for another writer to release the lock,
/// retrying every millisecond for up to `BUSY_TIMEOUT_MS`. SQLite's own
/// back-off sleeps up to 100 ms between tries and would miss the short gaps
/// a bulk writer leaves between its chunks (see `chunks`), so a runner could
/// wait for a whole requeue.
fn wait_for_lock() -> impl FnMut(i32) -> bool + Send + 'static {
    let limit = std::time::Duration::from_millis(BUSY_TIMEOUT_MS);
    let mut started = std::time::Instant::now();
    move |attempt| {
        // `attempt` counts the tries for this one wait, from 0.
        if attempt == 0 {
            started = std::time::Instant::now();
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        true
    }
}

/// Pragmas for a read-only connection: nothing that writes.
pub fn configure_reader(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA query_only = ON;")
}

/// Brings a (possibly empty) database to `SCHEMA_VERSION` in one transaction.
/// The caller has already refused versions newer than this build.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    migrate_unless(conn, |_, _| Ok(None::<()>)).map(drop)
}

/// [`migrate`], unless `refuse`, asked in the migration's transaction
/// with the older layout found (never of an empty database), gives a
/// reason not to: then that reason comes back and nothing has changed.
pub fn migrate_unless<R>(
    conn: &mut Connection,
    refuse: impl FnOnce(&rusqlite::Transaction<'_>, i32) -> rusqlite::Result<Option<R>>,
) -> rusqlite::Result<Option<R>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > 0
        && version < SCHEMA_VERSION
        && let Some(why) = refuse(&tx, version)?
    {
        return Ok(Some(why));
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        apply(&tx, from, sql)?;
    }
    if version == 0 {
        tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))?;
    }
    tx.commit().map(|()| None)
}

/// Every seat of the batch lock, at any layout (see `store::upgrade`).
pub fn seats(conn: &Connection) -> rusqlite::Result<Vec<crate::store::upgrade::SeatRow>> {
    let mut st = conn.prepare(&crate::store::upgrade::seats_sql(""))?;
    let rows = st.query_map([], |r| {
        Ok(crate::store::upgrade::SeatRow {
            batch: r.get(0)?,
            token: r.get(1)?,
            host: r.get(2)?,
            pid: r.get(3)?,
            pid_start: r.get(4)?,
            run_id: r.get(5)?,
            acquired_at: r.get(6)?,
            expires_at: r.get(7)?,
        })
    })?;
    rows.collect()
}

/// Takes a store at version `from` to the next with `sql`, that version's
/// migration, and what it needs beyond SQL.
fn apply(conn: &Connection, from: usize, sql: &str) -> rusqlite::Result<()> {
    conn.execute_batch(sql)?;
    for (after, step) in STEPS_AFTER {
        if after == sql {
            step(conn)?;
        }
    }
    conn.execute_batch(&format!("PRAGMA user_version = {}", from + 1))
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
