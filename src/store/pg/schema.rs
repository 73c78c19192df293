//! The PostgreSQL schema, its migrations and the identity check.
//!
//! The version lives in `nightshift.nightshift_meta`; a database with a
//! newer version is refused untouched. Migrations run under a transaction-
//! scoped advisory lock, so runners starting together on a fresh database
//! migrate it once.
//!
//! Counters: `counts`, `failed_classes`, `minute_stats` and `dlq_hourly`
//! are kept by statement-level triggers (one aggregated upsert per
//! statement, not per row). Each connection writes its own shard row
//! (`pg_backend_pid() % 32`) and reads sum the shards: with one row per
//! (batch, bucket), every claim and completion of every runner would queue
//! on the same few rows until the writer's commit.

use crate::store::Fault;
use std::path::Path;

use super::conn::Conn;
use crate::store::api::Access;
use crate::store::{Result, StoreError};

/// The PostgreSQL schema this build writes.
pub const PG_SCHEMA_VERSION: i32 = 32;

/// Key of the advisory lock that serialises migrations ("NSHT").
const MIGRATION_LOCK: i64 = 0x4E53_4854;

const V1: &str = r#"
CREATE TABLE batches (
    id                BIGSERIAL PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    created_at        BIGINT NOT NULL,
    paused            BOOLEAN NOT NULL DEFAULT false,
    paused_reason     TEXT,
    paused_by         TEXT,
    paused_at         BIGINT,
    hold_until        BIGINT,
    next_fire         BIGINT,
    last_fire_at      BIGINT,
    last_fire_outcome TEXT,
    last_fire_reason  TEXT,
    last_fire_run     BIGINT
);

-- Fencing tokens of claims: one sequence, so a later claim always has a
-- larger token, whichever host made it.
CREATE SEQUENCE lease_tokens;

CREATE TABLE items (
    id              BIGSERIAL PRIMARY KEY,
    batch_id        BIGINT NOT NULL REFERENCES batches(id),
    key             TEXT NOT NULL,
    label           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'claimed', 'done', 'failed')),
    tier            TEXT CHECK (tier IN ('retry', 'manual')),
    outcome         TEXT CHECK (outcome IN ('done', 'empty', 'skipped')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    op_id           TEXT,
    result          TEXT,
    cost            DOUBLE PRECISION,
    error_class     TEXT,
    error_message   TEXT,
    next_attempt_at BIGINT,
    lease_run       BIGINT,
    lease_until     BIGINT,
    lease_token     BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (batch_id, key),
    CHECK ((status = 'failed') = (tier IS NOT NULL)),
    CHECK ((status = 'done') = (outcome IS NOT NULL)),
    CHECK (status <> 'failed' OR error_class IS NOT NULL),
    CHECK ((status = 'claimed') = (lease_run IS NOT NULL))
);
-- The claim queue: only claimable rows, in insertion order.
CREATE INDEX items_claimable ON items (batch_id, id)
    WHERE status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL;
-- Expired leases, redrive of due retries, requeue by tier, status filters.
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at);
-- Failed items of one error class, in id order: the dead-letter pane's
-- item list of a rare class is a page of this index. Partial, so only
-- failing and requeueing touch it.
CREATE INDEX items_failed ON items (batch_id, error_class, id) WHERE status = 'failed';

CREATE TABLE counts (
    batch_id BIGINT NOT NULL,
    bucket   TEXT NOT NULL,
    shard    INT NOT NULL,
    n        BIGINT NOT NULL,
    PRIMARY KEY (batch_id, bucket, shard)
);

CREATE TABLE failed_classes (
    batch_id    BIGINT NOT NULL,
    error_class TEXT NOT NULL,
    tier        TEXT NOT NULL,
    shard       INT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (batch_id, error_class, tier, shard)
);

CREATE TABLE minute_stats (
    batch_id BIGINT NOT NULL,
    minute   BIGINT NOT NULL,
    shard    INT NOT NULL,
    done     BIGINT NOT NULL,
    failed   BIGINT NOT NULL,
    PRIMARY KEY (batch_id, minute, shard)
);

CREATE TABLE dead_letters (
    id          BIGSERIAL PRIMARY KEY,
    batch_id    BIGINT NOT NULL REFERENCES batches(id),
    item_id     BIGINT,
    key         TEXT NOT NULL,
    label       TEXT NOT NULL,
    payload     TEXT NOT NULL,
    error_class TEXT NOT NULL,
    message     TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    failed_at   BIGINT NOT NULL,
    tier        TEXT NOT NULL CHECK (tier IN ('retry', 'manual')),
    run_id      BIGINT
);
CREATE INDEX dead_letters_by_batch ON dead_letters (batch_id, failed_at);
CREATE INDEX dead_letters_by_item ON dead_letters (item_id);

CREATE TABLE dlq_hourly (
    batch_id    BIGINT NOT NULL,
    error_class TEXT NOT NULL,
    hour        BIGINT NOT NULL,
    shard       INT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (batch_id, error_class, hour, shard)
);

CREATE TABLE runs (
    id           BIGSERIAL PRIMARY KEY,
    batch_id     BIGINT NOT NULL REFERENCES batches(id),
    trigger      TEXT NOT NULL,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    pid_start    BIGINT,
    started_at   BIGINT NOT NULL,
    ended_at     BIGINT,
    state        TEXT NOT NULL,
    done         BIGINT NOT NULL DEFAULT 0,
    empty        BIGINT NOT NULL DEFAULT 0,
    failed       BIGINT NOT NULL DEFAULT 0,
    retry        BIGINT NOT NULL DEFAULT 0,
    manual       BIGINT NOT NULL DEFAULT 0,
    retried      BIGINT NOT NULL DEFAULT 0,
    skipped_done BIGINT NOT NULL DEFAULT 0,
    redriven     BIGINT NOT NULL DEFAULT 0,
    released     BIGINT NOT NULL DEFAULT 0,
    cost         DOUBLE PRECISION NOT NULL DEFAULT 0,
    summary      TEXT
);
CREATE INDEX runs_by_batch ON runs (batch_id, id);
CREATE INDEX runs_open ON runs (state) WHERE state = 'running';

CREATE TABLE events (
    id       BIGSERIAL PRIMARY KEY,
    at       BIGINT NOT NULL,
    batch_id BIGINT,
    run_id   BIGINT,
    key      TEXT,
    item_id  BIGINT,
    kind     TEXT NOT NULL,
    actor    TEXT,
    message  TEXT NOT NULL,
    fields   TEXT
);
CREATE INDEX events_by_batch ON events (batch_id, id);
CREATE INDEX events_by_kind ON events (kind, id);
CREATE INDEX events_by_item ON events (item_id) WHERE item_id IS NOT NULL;
CREATE INDEX events_by_time ON events (at);

CREATE TABLE locks (
    batch_id    BIGINT PRIMARY KEY REFERENCES batches(id),
    token       TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         BIGINT NOT NULL,
    pid_start   BIGINT,
    run_id      BIGINT,
    acquired_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

CREATE FUNCTION bucket(status TEXT, tier TEXT, outcome TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE status WHEN 'failed' THEN tier WHEN 'done' THEN outcome ELSE status END;

CREATE FUNCTION shard() RETURNS INT LANGUAGE sql STABLE PARALLEL SAFE
    RETURN pg_backend_pid() % 32;

-- Counter upserts are ordered by key, so two transactions that share a
-- shard take the rows in the same order and cannot deadlock.
CREATE FUNCTION items_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counts AS c (batch_id, bucket, shard, n)
    SELECT batch_id, b, shard(), sum(d) FROM (
        SELECT batch_id, bucket(status, tier, outcome) AS b, -1 AS d FROM old_rows
        UNION ALL
        SELECT batch_id, bucket(status, tier, outcome), 1 FROM new_rows
    ) x GROUP BY batch_id, b HAVING sum(d) <> 0 ORDER BY batch_id, b
    ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n;

    INSERT INTO failed_classes AS f (batch_id, error_class, tier, shard, n)
    SELECT batch_id, error_class, tier, shard(), sum(d) FROM (
        SELECT batch_id, error_class, tier, -1 AS d FROM old_rows WHERE status = 'failed'
        UNION ALL
        SELECT batch_id, error_class, tier, 1 FROM new_rows WHERE status = 'failed'
    ) x GROUP BY batch_id, error_class, tier HAVING sum(d) <> 0
      ORDER BY batch_id, error_class, tier
    ON CONFLICT (batch_id, error_class, tier, shard) DO UPDATE SET n = f.n + excluded.n;

    IF TG_OP = 'UPDATE' THEN
        -- Only worker completions count towards rates: a claim ending
        -- done or failed.
        INSERT INTO minute_stats AS m (batch_id, minute, shard, done, failed)
        SELECT n.batch_id, n.updated_at / 60000, shard(),
               count(*) FILTER (WHERE n.status = 'done'),
               count(*) FILTER (WHERE n.status = 'failed')
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE o.status = 'claimed' AND n.status IN ('done', 'failed')
         GROUP BY n.batch_id, n.updated_at / 60000 ORDER BY 1, 2
        ON CONFLICT (batch_id, minute, shard)
        DO UPDATE SET done = m.done + excluded.done, failed = m.failed + excluded.failed;
    END IF;
    RETURN NULL;
END $$;

-- Transition tables need one trigger per event; the missing side is an
-- empty table of the same shape.
CREATE FUNCTION items_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counts AS c (batch_id, bucket, shard, n)
    SELECT batch_id, 'pending', shard(), count(*) FROM new_rows
     GROUP BY batch_id ORDER BY batch_id
    ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END $$;

CREATE FUNCTION items_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counts AS c (batch_id, bucket, shard, n)
    SELECT batch_id, bucket(status, tier, outcome), shard(), -count(*) FROM old_rows
     GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n;
    INSERT INTO failed_classes AS f (batch_id, error_class, tier, shard, n)
    SELECT batch_id, error_class, tier, shard(), -count(*) FROM old_rows
     WHERE status = 'failed' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (batch_id, error_class, tier, shard) DO UPDATE SET n = f.n + excluded.n;
    RETURN NULL;
END $$;

CREATE TRIGGER items_counted AFTER UPDATE ON items
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION items_counted();
CREATE TRIGGER items_inserted AFTER INSERT ON items
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION items_inserted();
CREATE TRIGGER items_deleted AFTER DELETE ON items
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION items_deleted();

CREATE FUNCTION dead_letters_hourly() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dlq_hourly AS h (batch_id, error_class, hour, shard, n)
    SELECT batch_id, error_class, failed_at / 3600000, shard(), count(*) FROM new_rows
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (batch_id, error_class, hour, shard) DO UPDATE SET n = h.n + excluded.n;
    RETURN NULL;
END $$;

CREATE TRIGGER dead_letters_hourly AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_hourly();
"#;

/// Migrations, index `i` takes the schema from version `i` to `i + 1`.
/// Version 2: the batch lock has seats (several runners may share a batch),
/// one row per holder instead of one per batch.
const V2: &str = r#"
ALTER TABLE locks DROP CONSTRAINT locks_pkey;
ALTER TABLE locks ADD PRIMARY KEY (batch_id, token);
CREATE INDEX locks_by_expiry ON locks (expires_at);
"#;

// Twin of sqlite/schema.rs by shape, kept: DDL is each engine's own (types, sharded counters, not triggers).
/// Version 3: each event records its transaction, so `log --follow` can
/// wait for transactions still running instead of skipping their events.
const V3: &str = r#"
ALTER TABLE events ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX events_by_tx ON events (tx);
"#;

/// Version 4: a run records who started it (`user@host`).
const V4: &str = "ALTER TABLE runs ADD COLUMN actor TEXT;";

/// Version 5: tombstones of pruned done items (see the SQLite schema's
/// version 4), counted in `batches.pruned_keys` by statement-level
/// triggers. Prune writes them under `TOMBSTONE_LOCK` (see `pg::prune`).
const V5: &str = r#"
CREATE TABLE tombstones (
    batch_id  BIGINT NOT NULL REFERENCES batches(id),
    key       TEXT NOT NULL,
    done_at   BIGINT NOT NULL,
    outcome   TEXT NOT NULL CHECK (outcome IN ('done', 'empty', 'skipped')),
    pruned_at BIGINT NOT NULL,
    PRIMARY KEY (batch_id, key)
);
ALTER TABLE batches ADD COLUMN pruned_keys BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION tombstones_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE batches b SET pruned_keys = b.pruned_keys + x.n
          FROM (SELECT batch_id, count(*) AS n FROM new_rows GROUP BY 1 ORDER BY 1) x
         WHERE b.id = x.batch_id;
    ELSE
        UPDATE batches b SET pruned_keys = b.pruned_keys - x.n
          FROM (SELECT batch_id, count(*) AS n FROM old_rows GROUP BY 1 ORDER BY 1) x
         WHERE b.id = x.batch_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tombstones_inserted AFTER INSERT ON tombstones
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION tombstones_counted();
CREATE TRIGGER tombstones_deleted AFTER DELETE ON tombstones
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION tombstones_counted();
"#;

/// Version 6: each run's worker process groups (one row per slot), so a
/// later run on the same host can stop those a crashed runner left behind
/// (see `runner::child::groups`).
const V6: &str = r#"
CREATE TABLE workers (
    run_id  BIGINT NOT NULL,
    slot    BIGINT NOT NULL,
    host    TEXT NOT NULL,
    boot    TEXT NOT NULL,
    pgid    BIGINT NOT NULL,
    started BIGINT NOT NULL,
    PRIMARY KEY (run_id, slot)
);
"#;

/// Version 7: a store id, made once: a long-lived process notices the URL
/// naming another store (a new database under the name, a re-init) by it.
const V7: &str = r#"
INSERT INTO nightshift.nightshift_meta (key, value) VALUES ('store_id', gen_random_uuid()::text)
    ON CONFLICT (key) DO NOTHING;
"#;

/// Version 8: who is alive (see the SQLite schema's version 6): a seat
/// keeps its holder's TTL; each scheduler daemon records a heartbeat.
const V8: &str = r#"
ALTER TABLE locks ADD COLUMN ttl_ms BIGINT;
CREATE TABLE daemons (
    token      TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        BIGINT NOT NULL,
    pid_start  BIGINT,
    started_at BIGINT NOT NULL,
    beat_at    BIGINT NOT NULL,
    stopped_at BIGINT,
    batches    TEXT[] NOT NULL
);
"#;

/// Version 9: a retry-after hold names the item whose answer asked for it.
const V9: &str = "ALTER TABLE nightshift.batches ADD COLUMN hold_key TEXT;";

// ---- Steering a live batch (issue 18: cancel, stop) ----
/// Version 10: steering a live batch (see the SQLite schema's version 8):
/// `items.cancel_to` asks the runner holding an item to stop its worker
/// and move it there; `locks.stop` asks a seat's holder to stop its run.
const V10: &str = r#"
ALTER TABLE nightshift.items ADD COLUMN cancel_to TEXT
    CHECK (cancel_to IN ('pending', 'manual'));
ALTER TABLE nightshift.items ADD COLUMN cancel_by TEXT;
ALTER TABLE nightshift.items ADD COLUMN cancel_reason TEXT;
CREATE INDEX items_cancels ON nightshift.items (batch_id, lease_run) WHERE cancel_to IS NOT NULL;
ALTER TABLE nightshift.locks ADD COLUMN stop TEXT CHECK (stop IN ('graceful', 'now'));
ALTER TABLE nightshift.locks ADD COLUMN stop_by TEXT;
"#;
// ---- end of steering ----

/// Version 11: the worker's own words, the last 16 KiB of each attempt's
/// stderr (see the SQLite schema's version 9).
const V11: &str = r#"
CREATE TABLE attempt_logs (
    id      BIGSERIAL PRIMARY KEY,
    item_id BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    run_id  BIGINT,
    at      BIGINT NOT NULL,
    stderr  TEXT NOT NULL,
    cut     BOOLEAN NOT NULL
);
CREATE INDEX attempt_logs_by_item ON attempt_logs (item_id, id);
CREATE INDEX attempt_logs_by_time ON attempt_logs (at);
"#;

/// Version 12: versioned done (see the SQLite schema's version 10): a done
/// item remembers the batch `version` it was done under.
const V12: &str = "ALTER TABLE nightshift.items ADD COLUMN done_version TEXT;";

/// Version 13: limit pools (see the SQLite schema's version 11).
const V13: &str = r#"
CREATE TABLE pool_dims (
    pool   TEXT NOT NULL,
    dim    TEXT NOT NULL,
    tat_us BIGINT NOT NULL,
    PRIMARY KEY (pool, dim)
);
CREATE TABLE pool_calls (
    pool     TEXT NOT NULL,
    call     TEXT NOT NULL,
    until_ms BIGINT NOT NULL,
    PRIMARY KEY (pool, call)
);
CREATE TABLE pool_holds (
    pool     TEXT PRIMARY KEY,
    until_ms BIGINT NOT NULL,
    batch    TEXT NOT NULL,
    key      TEXT
);
CREATE TABLE usage (
    id            BIGSERIAL PRIMARY KEY,
    batch         TEXT NOT NULL,
    run_id        BIGINT NOT NULL,
    key           TEXT NOT NULL,
    attempt       BIGINT NOT NULL,
    pool          TEXT,
    at            BIGINT NOT NULL,
    estimate      BIGINT NOT NULL,
    input_tokens  BIGINT,
    output_tokens BIGINT
);
CREATE INDEX usage_run ON usage (run_id);
CREATE INDEX usage_key ON usage (batch, key);
CREATE INDEX usage_pool ON usage (pool, at);
"#;

/// Version 14: a run counts the items it cancelled (see the SQLite
/// schema's version 12).
const V14: &str = "ALTER TABLE nightshift.runs ADD COLUMN cancelled BIGINT NOT NULL DEFAULT 0;";

/// Version 15: priority and not-before (see the SQLite schema's version
/// 13): the claim queue in claim order, higher priorities first.
const V15: &str = r#"
ALTER TABLE nightshift.items ADD COLUMN priority INT NOT NULL DEFAULT 0;
DROP INDEX nightshift.items_claimable;
CREATE INDEX items_claimable ON nightshift.items (batch_id, priority DESC, id)
    WHERE status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL;
"#;

// ---- Budgets (issue 17 item 4) ----
/// Version 16: the budgets' spend ledger (see the SQLite schema's version
/// 14).
const V16: &str = r#"
CREATE TABLE spend (
    scope        TEXT NOT NULL CHECK (scope = 'batch' OR scope = 'pool'),
    name         TEXT NOT NULL,
    period_ms    BIGINT NOT NULL,
    window_start BIGINT NOT NULL,
    micros       BIGINT NOT NULL,
    attempts     BIGINT NOT NULL,
    PRIMARY KEY (scope, name, period_ms, window_start)
);
"#;
// ---- end of budgets ----

/// Version 17: the kind index without the kinds written once per item on
/// the success path (see `dialect::events::DENSE_KINDS` and the SQLite
/// schema's version 16).
const V17: &str = r#"
DROP INDEX nightshift.events_by_kind;
CREATE INDEX events_by_rare_kind ON nightshift.events (kind, id)
    WHERE kind <> 'claimed' AND kind <> 'done' AND kind <> 'empty';
"#;

// ---- Pool bookkeeping in sums (issue 17) ----
/// Version 18: a limit pool's bookkeeping in sums (see the SQLite
/// schema's version 17).
const V18: &str = r#"
CREATE TABLE pool_places (
    pool     TEXT NOT NULL,
    runner   TEXT NOT NULL,
    n        BIGINT NOT NULL,
    until_ms BIGINT NOT NULL,
    PRIMARY KEY (pool, runner)
);
CREATE TABLE pool_usage (
    pool             TEXT NOT NULL,
    minute           BIGINT NOT NULL,
    calls            BIGINT NOT NULL,
    input_tokens     BIGINT NOT NULL,
    output_tokens    BIGINT NOT NULL,
    unreported       BIGINT NOT NULL,
    estimated_tokens BIGINT NOT NULL,
    PRIMARY KEY (pool, minute)
);
CREATE TABLE run_usage (
    run_id           BIGINT PRIMARY KEY,
    attempts         BIGINT NOT NULL,
    input_tokens     BIGINT NOT NULL,
    output_tokens    BIGINT NOT NULL,
    unreported       BIGINT NOT NULL,
    estimated_tokens BIGINT NOT NULL
);
ALTER TABLE nightshift.items ADD COLUMN usage TEXT;
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
UPDATE nightshift.items i SET usage = s.lines FROM (
    SELECT b.id AS batch_id, u.key, string_agg(concat_ws(' ', u.run_id, u.attempt, u.at,
        u.estimate, coalesce(u.input_tokens::text, '-'), coalesce(u.output_tokens::text, '-'),
        coalesce(u.pool, '')), E'\n' ORDER BY u.id) AS lines
    FROM usage u JOIN batches b ON b.name = u.batch GROUP BY b.id, u.key) s
WHERE i.batch_id = s.batch_id AND i.key = s.key;
DROP TABLE usage;
DROP TABLE pool_calls;
"#;
// ---- end of pool bookkeeping in sums ----

// ---- PostgreSQL throughput (issue 19) ----
/// Version 19: `items_counted` pairs an update's old and new rows by
/// grouping on the id, not by joining the transition tables: those carry no
/// statistics, the planner takes each for one row and nests the join, so a
/// group of n completions compared n² pairs (65,280 for 256, three quarters
/// of the server's time per item). Counts and `minute_stats` unchanged.
const V19: &str = r#"
CREATE OR REPLACE FUNCTION nightshift.items_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counts AS c (batch_id, bucket, shard, n)
    SELECT batch_id, b, shard(), sum(d) FROM (
        SELECT batch_id, bucket(status, tier, outcome) AS b, -1 AS d FROM old_rows
        UNION ALL
        SELECT batch_id, bucket(status, tier, outcome), 1 FROM new_rows
    ) x GROUP BY batch_id, b HAVING sum(d) <> 0 ORDER BY batch_id, b
    ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n;

    INSERT INTO failed_classes AS f (batch_id, error_class, tier, shard, n)
    SELECT batch_id, error_class, tier, shard(), sum(d) FROM (
        SELECT batch_id, error_class, tier, -1 AS d FROM old_rows WHERE status = 'failed'
        UNION ALL
        SELECT batch_id, error_class, tier, 1 FROM new_rows WHERE status = 'failed'
    ) x GROUP BY batch_id, error_class, tier HAVING sum(d) <> 0
      ORDER BY batch_id, error_class, tier
    ON CONFLICT (batch_id, error_class, tier, shard) DO UPDATE SET n = f.n + excluded.n;

    IF TG_OP = 'UPDATE' THEN
        -- Only worker completions count towards rates: a claim ending
        -- done or failed. A row is once in each transition table, so an
        -- id found on both sides (claimed before, done or failed after)
        -- is one completion.
        INSERT INTO minute_stats AS m (batch_id, minute, shard, done, failed)
        SELECT batch_id, minute, shard(),
               count(*) FILTER (WHERE status = 'done'),
               count(*) FILTER (WHERE status = 'failed')
          FROM (SELECT max(batch_id) AS batch_id, max(minute) AS minute, max(status) AS status
                  FROM (SELECT id, NULL::int8 AS batch_id, NULL::int8 AS minute, NULL::text AS status
                          FROM old_rows WHERE status = 'claimed'
                        UNION ALL
                        SELECT id, batch_id, updated_at / 60000, status
                          FROM new_rows WHERE status IN ('done', 'failed')) s
                 GROUP BY id HAVING count(*) = 2) p
         GROUP BY batch_id, minute ORDER BY 1, 2
        ON CONFLICT (batch_id, minute, shard)
        DO UPDATE SET done = m.done + excluded.done, failed = m.failed + excluded.failed;
    END IF;
    RETURN NULL;
END $$;
"#;
// ---- end of PostgreSQL throughput ----

// ---- PostgreSQL add (issue 19) ----
/// Version 20: what an added item writes besides its row. Items keep no
/// foreign key to their batch: its check ran once per inserted row (a
/// `SELECT ... FOR KEY SHARE` of the batch row, queued as a trigger event
/// per row: a quarter of an add's server time) to guard a deletion no path
/// makes: batches are never deleted, and the one insert into items (add)
/// takes the batch's id from `ensure` in its own transaction. And
/// `items_queue` leaves out the claimable rows, which `items_claimable`
/// holds: an added item is one index entry fewer (four columns, three of
/// them equal or null in every entry, compared at each step of the
/// descent). A filter on pending items names both parts (see
/// `items::filter_sql`).
const V20: &str = r#"
ALTER TABLE nightshift.items DROP CONSTRAINT items_batch_id_fkey;
DROP INDEX nightshift.items_queue;
CREATE INDEX items_queue ON nightshift.items (batch_id, status, tier, next_attempt_at)
    WHERE status <> 'pending' OR tier IS NOT NULL OR next_attempt_at IS NOT NULL;
"#;
// ---- end of PostgreSQL add ----

// ---- PostgreSQL hot statements count themselves (issue 19) ----
/// Version 21: the claim and the done marks count themselves, once per
/// statement (see `hot::CLAIM` and `hot::done_mark`), where `items_counted`
/// ran three statements over both transition tables, a tenth of the
/// server's work per item in a persistent run. Such a statement marks
/// itself first (`counts_itself`: its own start time in a setting of the
/// transaction), and the trigger passes over the statement so marked
/// (`counted_itself`); any other statement, even the next one in the same
/// transaction, starts at another time and is counted by the trigger as
/// before.
const V21: &str = r#"
CREATE FUNCTION nightshift.counts_itself() RETURNS boolean LANGUAGE sql VOLATILE
    RETURN set_config('nightshift.self_counted', statement_timestamp()::text, true) IS NOT NULL;
CREATE FUNCTION nightshift.counted_itself() RETURNS boolean LANGUAGE sql STABLE
    RETURN current_setting('nightshift.self_counted', true) IS NOT DISTINCT FROM
           statement_timestamp()::text;
DROP TRIGGER items_counted ON nightshift.items;
CREATE TRIGGER items_counted AFTER UPDATE ON nightshift.items
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT WHEN (NOT nightshift.counted_itself())
    EXECUTE FUNCTION nightshift.items_counted();
"#;
// ---- end of PostgreSQL hot statements count themselves ----

/// Version 22: a session may be given its counters' shard
/// (`shard_beside`), where the process id modulo 32 gave it by chance: the
/// sessions of one runner (its slots' own, `runner::writer`'s lanes) then
/// never share one, where five sessions did in more than a quarter of
/// runs and queued on each other's counter rows.
const V22: &str = r#"
CREATE OR REPLACE FUNCTION nightshift.shard() RETURNS INT LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce(nullif(current_setting('nightshift.shard', true), '')::int,
                    pg_backend_pid() % 32);
CREATE OR REPLACE FUNCTION nightshift.shard_beside(other INT, k INT) RETURNS INT LANGUAGE sql VOLATILE
    RETURN set_config('nightshift.shard', ((other + k) % 32)::text, false)::int;
"#;

/// Version 23: a claimed item waiting for its place in its limit pool
/// says since when (`pool_wait_since`; see SQLite's version 22).
const V23: &str = r#"
ALTER TABLE nightshift.items ADD COLUMN IF NOT EXISTS pool_wait_since BIGINT;
"#;

/// Version 24: a claimed item waiting to retry says when (`retry_at`; see
/// SQLite's version 23).
const V24: &str = r#"
ALTER TABLE nightshift.items ADD COLUMN IF NOT EXISTS retry_at BIGINT;
"#;

/// Version 25: what a run's reporting attempts had reserved (see SQLite's
/// version 24).
const V25: &str = r#"
ALTER TABLE nightshift.run_usage ADD COLUMN IF NOT EXISTS reported_estimate BIGINT NOT NULL DEFAULT 0;
"#;

/// Version 26: an add counts its own items (`add::Adding::finish`, one
/// counter update an add), as SQLite's does, where `items_inserted`
/// counted each statement's rows from its transition table: the server
/// kept a copy of every inserted row for it, 10 % of a 1M add.
const V26: &str = r#"
DROP TRIGGER IF EXISTS items_inserted ON nightshift.items;
DROP FUNCTION IF EXISTS nightshift.items_inserted();
"#;

/// Version 27: a daemon asked to stop says so (see SQLite's version 26).
const V27: &str = r#"
ALTER TABLE nightshift.daemons ADD COLUMN IF NOT EXISTS stopping_at BIGINT;
"#;

/// Version 28: the fires a daemon still owes a cycle (see SQLite's
/// version 27).
const V28: &str = r#"
ALTER TABLE nightshift.batches ADD COLUMN IF NOT EXISTS cycle_fire_at BIGINT;
ALTER TABLE nightshift.batches ADD COLUMN IF NOT EXISTS cycle_crashed BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE nightshift.batches ADD COLUMN IF NOT EXISTS queued_fire_at BIGINT;
"#;

/// Version 29: why a run stopped before it ran out of work (see SQLite's
/// version 28).
const V29: &str = r#"
ALTER TABLE nightshift.runs ADD COLUMN IF NOT EXISTS stopped TEXT;
"#;

/// Version 30: the rule a daemon fires a batch by (see SQLite's version
/// 29).
const V30: &str = r#"
ALTER TABLE nightshift.batches ADD COLUMN IF NOT EXISTS fire_schedule TEXT;
ALTER TABLE nightshift.batches ADD COLUMN IF NOT EXISTS fire_timezone TEXT;
"#;

/// Version 31: an item is found by its key through `item_keys`, as on
/// SQLite (its version 20), where the unique key index of `items` did.
/// PostgreSQL writes a new entry into every index of a row it updates
/// unless no indexed column changed (a HOT update), and a claim and a done
/// mark change `status`: each entered the item's key, a text compared at
/// every step of its descent, once more, a tenth of the server's CPU in a
/// persistent run. The keys' table is written once, at the add, and read
/// only by key. An item deleted takes its key with it (`items_deleted`).
const V31: &str = r#"
-- readers: CREATE TEMP VIEW item_keys AS SELECT batch_id, key, id AS item_id FROM nightshift.items
CREATE TABLE nightshift.item_keys (
    batch_id BIGINT NOT NULL,
    key      TEXT NOT NULL,
    item_id  BIGINT NOT NULL,
    PRIMARY KEY (batch_id, key)
);
INSERT INTO nightshift.item_keys (batch_id, key, item_id)
SELECT batch_id, key, id FROM nightshift.items ORDER BY batch_id, key;
ALTER TABLE nightshift.items DROP CONSTRAINT items_batch_id_key_key;
CREATE OR REPLACE FUNCTION nightshift.items_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counts AS c (batch_id, bucket, shard, n)
    SELECT batch_id, bucket(status, tier, outcome), shard(), -count(*) FROM old_rows
     GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n;
    INSERT INTO failed_classes AS f (batch_id, error_class, tier, shard, n)
    SELECT batch_id, error_class, tier, shard(), -count(*) FROM old_rows
     WHERE status = 'failed' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (batch_id, error_class, tier, shard) DO UPDATE SET n = f.n + excluded.n;
    DELETE FROM item_keys k USING old_rows o
     WHERE k.batch_id = o.batch_id AND k.key = o.key AND k.item_id = o.id;
    RETURN NULL;
END $$;
"#;

/// Version 32: how a batch's items were keyed (see SQLite's version 30).
const V32: &str = r#"
ALTER TABLE nightshift.batches ADD COLUMN IF NOT EXISTS key_spec TEXT;
"#;

const MIGRATIONS: [&str; PG_SCHEMA_VERSION as usize] = [
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18, V19, V20, V21,
    V22, V23, V24, V25, V26, V27, V28, V29, V30, V31, V32,
];

/// Which store a session is on: the database (one made anew under the same
/// name has another oid) and the id its store was made with (V7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbId {
    database: i64,
    store: Option<String>,
}

const DB_ID: &str = "SELECT (SELECT oid::int8 FROM pg_database WHERE datname = current_database()),
        to_regclass('nightshift.nightshift_meta') IS NOT NULL";
const STORE_ID: &str = "SELECT value FROM nightshift.nightshift_meta WHERE key = 'store_id'";

/// The store this session is on; `None` if the database has no nightshift
/// schema (any more).
pub(super) fn db_id(conn: &mut Conn) -> Result<Option<DbId>> {
    let row = conn.one(DB_ID, &[])?;
    let (database, schema): (i64, bool) = (row.get(0), row.get(1));
    if !schema {
        return Ok(None);
    }
    let store = conn.opt(STORE_ID, &[])?.map(|r| r.get(0));
    Ok(Some(DbId { database, store }))
}

/// [`db_id`] on a bare session (a check that opens one of its own).
pub(super) fn db_id_of(client: &mut postgres::Client) -> Result<Option<DbId>> {
    let row = client.query_one(DB_ID, &[])?;
    let (database, schema): (i64, bool) = (row.get(0), row.get(1));
    if !schema {
        return Ok(None);
    }
    let store = client.query_opt(STORE_ID, &[])?.map(|r| r.get(0));
    Ok(Some(DbId { database, store }))
}

/// The schema version in the database; `None` if it has no nightshift schema.
fn version(conn: &mut Conn) -> Result<Option<i32>> {
    let exists = conn
        .one(
            "SELECT to_regclass('nightshift.nightshift_meta') IS NOT NULL",
            &[],
        )?
        .get::<_, bool>(0);
    if !exists {
        return Ok(None);
    }
    let row = conn.opt(
        "SELECT value FROM nightshift.nightshift_meta WHERE key = 'schema_version'",
        &[],
    )?;
    let Some(row) = row else { return Ok(Some(0)) };
    let v: String = row.get(0);
    v.parse().map(Some).map_err(|_| {
        StoreError::Fault(Fault::Unreadable(format!(
            "unreadable nightshift schema version {v:?}"
        )))
    })
}

/// Refuses databases without the nightshift schema, or with a newer one;
/// a read-only session also one with an older layout, which it cannot
/// migrate (see `StoreError::OlderSchema`), unless it only lacks columns
/// (see [`shim_reader`]).
pub(super) fn check_identity(conn: &mut Conn, target: &Path, access: Access) -> Result<()> {
    let version = version(conn).map_err(|e| e.at(target))?;
    match version {
        None | Some(0) => Err(StoreError::NotNightshift(target.to_path_buf())),
        Some(v) if v > PG_SCHEMA_VERSION => Err(StoreError::NewerSchema {
            path: target.to_path_buf(),
            found: v,
            supported: PG_SCHEMA_VERSION,
        }),
        Some(v) if v < readable_from() && access == Access::ReadOnly => {
            Err(StoreError::OlderSchema {
                path: target.to_path_buf(),
                found: v,
                supported: PG_SCHEMA_VERSION,
            })
        }
        Some(_) => Ok(()),
    }
}

/// The oldest layout a read-only session reads (through views, see
/// `store::older`): every migration since only adds columns.
fn readable_from() -> i32 {
    static FROM: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *FROM.get_or_init(|| crate::store::older::readable_from(&MIGRATIONS))
}

/// On a read-only session of a store with an older layout that only lacks
/// columns: shadows each table that has gained some with a temporary view
/// that has them, as the upgrade would fill them (`pg_temp` comes first in
/// the search path). Only the session's own temporary schema is written;
/// where it cannot be (a standby), the store is refused as too old.
pub(super) fn shim_reader(conn: &mut Conn, target: &Path) -> Result<()> {
    let Some(found) = version(conn)? else {
        return Ok(());
    };
    let Some(missing) = crate::store::older::missing(&MIGRATIONS, found) else {
        return Ok(());
    };
    if missing.is_empty() {
        return Ok(());
    }
    let views = crate::store::older::views(&missing, "nightshift", true);
    conn.simple(&format!("BEGIN READ WRITE; {views} COMMIT;"))
        .map_err(|_| {
            let _ = conn.simple("ROLLBACK");
            StoreError::OlderSchema {
                path: target.to_path_buf(),
                found,
                supported: PG_SCHEMA_VERSION,
            }
        })
}

/// Brings the database to `PG_SCHEMA_VERSION` in one transaction. True if
/// the schema was created. A newer schema is refused, untouched.
pub(super) fn migrate(conn: &mut Conn, target: &Path) -> Result<bool> {
    // Up to date (the usual open): no DDL, no lock, nothing a role without
    // CREATE rights would be refused.
    match version(conn)? {
        Some(v) if v > PG_SCHEMA_VERSION => {
            return Err(StoreError::NewerSchema {
                path: target.to_path_buf(),
                found: v,
                supported: PG_SCHEMA_VERSION,
            });
        }
        Some(PG_SCHEMA_VERSION) => return Ok(false),
        _ => {}
    }
    conn.simple("BEGIN")?;
    let out = (|| {
        conn.x("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        conn.simple(
            "CREATE SCHEMA IF NOT EXISTS nightshift;
             CREATE TABLE IF NOT EXISTS nightshift.nightshift_meta (
                 key   TEXT PRIMARY KEY,
                 value TEXT NOT NULL
             );",
        )?;
        let found = version(conn)?.unwrap_or(0);
        if found > PG_SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: target.to_path_buf(),
                found,
                supported: PG_SCHEMA_VERSION,
            });
        }
        if found > 0 && found < PG_SCHEMA_VERSION {
            let seats = seats(conn)?;
            let now = crate::util::time::now_ms();
            if let Some(refused) =
                crate::store::upgrade::refusal(target, found, PG_SCHEMA_VERSION, seats, now)
            {
                return Err(refused);
            }
        }
        for (from, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
            conn.simple(sql)?;
            conn.x(
                "INSERT INTO nightshift.nightshift_meta (key, value) VALUES ('schema_version', $1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&(from as i32 + 1).to_string()],
            )?;
        }
        Ok(found == 0)
    })();
    match out {
        Ok(created) => {
            conn.simple("COMMIT")?;
            Ok(created)
        }
        Err(e) => {
            let _ = conn.simple("ROLLBACK");
            Err(e)
        }
    }
}

/// Every seat of the batch lock, at any layout (see `store::upgrade`),
/// its times on this host's clock.
fn seats(conn: &mut Conn) -> Result<Vec<crate::store::upgrade::SeatRow>> {
    let rows = conn.q(&crate::store::upgrade::seats_sql("nightshift."), &[])?;
    Ok(rows
        .iter()
        .map(|r| crate::store::upgrade::SeatRow {
            batch: r.get(0),
            token: r.get(1),
            host: r.get(2),
            pid: r.get(3),
            pid_start: r.get(4),
            run_id: r.get(5),
            acquired_at: conn.tout(r.get(6)),
            expires_at: conn.tout(r.get(7)),
        })
        .collect())
}

/// Compares the counters with the items and dead letters they count.
pub(super) fn check_counts(c: &mut Conn) -> Result<String> {
    let rows = c.q(
        "WITH real AS (
             SELECT batch_id, bucket(status, tier, outcome) AS b, count(*) AS n
               FROM items GROUP BY 1, 2),
         kept AS (SELECT batch_id, bucket AS b, sum(n) AS n FROM counts GROUP BY 1, 2)
         SELECT coalesce(r.batch_id, k.batch_id), coalesce(r.b, k.b),
                coalesce(r.n, 0)::int8, coalesce(k.n, 0)::int8
           FROM real r FULL JOIN kept k ON k.batch_id = r.batch_id AND k.b = r.b
          WHERE coalesce(r.n, 0) <> coalesce(k.n, 0)
         UNION ALL
         SELECT coalesce(r.batch_id, k.batch_id), 'failed class ' || coalesce(r.c, k.c),
                coalesce(r.n, 0)::int8, coalesce(k.n, 0)::int8
           FROM (SELECT batch_id, error_class || '/' || tier AS c, count(*) AS n FROM items
                  WHERE status = 'failed' GROUP BY 1, 2) r
           FULL JOIN (SELECT batch_id, error_class || '/' || tier AS c, sum(n) AS n
                        FROM failed_classes GROUP BY 1, 2) k
             ON k.batch_id = r.batch_id AND k.c = r.c
          WHERE coalesce(r.n, 0) <> coalesce(k.n, 0)",
        &[],
    )?;
    if rows.is_empty() {
        return Ok("ok".into());
    }
    Ok(rows
        .iter()
        .map(|r| {
            format!(
                "batch {} {}: counted {} but {} items",
                r.get::<_, i64>(0),
                r.get::<_, String>(1),
                r.get::<_, i64>(3),
                r.get::<_, i64>(2)
            )
        })
        .collect::<Vec<_>>()
        .join("; "))
}
