-- A store at schema version 17 as main's release build (`nightshift
-- 0.1.0`, before version 18) left it, dumped with Python's
-- `sqlite3.iterdump` (which does not keep the header fields: set below).
-- Batch `b`: 12 items run once through a worker failing k1, k2 (manual),
-- k3 (retry), empty for k4, k5, done for the rest; then k13..k18 added and
-- k13 skipped. Batch `slow`: 4 items, its runner SIGKILLed with s1, s2
-- claimed (their run crashed, its seat lapsed).
PRAGMA application_id = 1314080852;
PRAGMA user_version = 17;
BEGIN TRANSACTION;
CREATE TABLE attempt_logs (
    id      INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    run_id  INTEGER,
    at      INTEGER NOT NULL,
    stderr  TEXT NOT NULL,
    cut     INTEGER NOT NULL CHECK (cut = 0 OR cut = 1)
) STRICT;
INSERT INTO "attempt_logs" VALUES(1,2,1,1,1796234772881,'{"error_class":"BadInput","transient":false,"message":"title missing"}
',0);
INSERT INTO "attempt_logs" VALUES(2,1,1,1,1796234772888,'{"error_class":"BadInput","transient":false,"message":"title missing"}
',0);
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
, pruned_keys INTEGER NOT NULL DEFAULT 0, hold_key TEXT) STRICT;
INSERT INTO "batches" VALUES(1,'b',1796234772838,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "batches" VALUES(2,'slow',1796234773022,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,NULL);
CREATE TABLE counts (
    batch_id INTEGER NOT NULL,
    bucket   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (batch_id, bucket)
) STRICT, WITHOUT ROWID;
INSERT INTO "counts" VALUES(1,'claimed',0);
INSERT INTO "counts" VALUES(1,'done',7);
INSERT INTO "counts" VALUES(1,'empty',2);
INSERT INTO "counts" VALUES(1,'manual',2);
INSERT INTO "counts" VALUES(1,'pending',5);
INSERT INTO "counts" VALUES(1,'retry',1);
INSERT INTO "counts" VALUES(1,'skipped',1);
INSERT INTO "counts" VALUES(2,'claimed',2);
INSERT INTO "counts" VALUES(2,'done',0);
INSERT INTO "counts" VALUES(2,'empty',0);
INSERT INTO "counts" VALUES(2,'manual',0);
INSERT INTO "counts" VALUES(2,'pending',2);
INSERT INTO "counts" VALUES(2,'retry',0);
INSERT INTO "counts" VALUES(2,'skipped',0);
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
INSERT INTO "dead_letters" VALUES(1,1,2,'k2','k2','{"key":"k2","n":2}','BadInput','title missing',1,1796234772881,'manual',1);
INSERT INTO "dead_letters" VALUES(2,1,3,'k3','k3','{"key":"k3","n":3}','TempFail','exited with status 75',1,1796234772882,'retry',1);
INSERT INTO "dead_letters" VALUES(3,1,1,'k1','k1','{"key":"k1","n":1}','BadInput','title missing',1,1796234772888,'manual',1);
CREATE TABLE dlq_hourly (
    batch_id    INTEGER NOT NULL,
    error_class TEXT NOT NULL,
    hour        INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (batch_id, error_class, hour)
) STRICT, WITHOUT ROWID;
INSERT INTO "dlq_hourly" VALUES(1,'BadInput',498954,2);
INSERT INTO "dlq_hourly" VALUES(1,'TempFail',498954,1);
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
INSERT INTO "events" VALUES(1,1796234772838,1,NULL,NULL,NULL,'added','root@vm','added 12, already present 0','{"added":12,"present":0,"pruned":0}');
INSERT INTO "events" VALUES(2,1796234772871,1,1,NULL,NULL,'run-started','root@vm','run 1 started (manual) on vm:14347','{"concurrency":4,"holder":"vm:14347","trigger":"manual"}');
INSERT INTO "events" VALUES(3,1796234772873,1,1,'k1',1,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(4,1796234772873,1,1,'k2',2,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(5,1796234772873,1,1,'k3',3,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(6,1796234772873,1,1,'k4',4,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(7,1796234772881,1,1,'k2',2,'quarantined',NULL,'BadInput: title missing (permanent; quarantined)','{"attempt":1,"error_class":"BadInput","message":"title missing","tier":"manual","transient":false}');
INSERT INTO "events" VALUES(8,1796234772882,1,1,'k3',3,'failed',NULL,'TempFail: exited with status 75 (attempt 1; the next cycle retries it)','{"attempt":1,"error_class":"TempFail","message":"exited with status 75","tier":"retry","transient":true}');
INSERT INTO "events" VALUES(9,1796234772882,1,1,'k4',4,'empty',NULL,'done, empty result','{"attempt":1,"cost":null,"ms":4,"usage":null}');
INSERT INTO "events" VALUES(10,1796234772882,1,1,'k5',5,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(11,1796234772883,1,1,'k6',6,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(12,1796234772883,1,1,'k7',7,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(13,1796234772888,1,1,'k1',1,'quarantined',NULL,'BadInput: title missing (permanent; quarantined)','{"attempt":1,"error_class":"BadInput","message":"title missing","tier":"manual","transient":false}');
INSERT INTO "events" VALUES(14,1796234772889,1,1,'k8',8,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(15,1796234772890,1,1,'k5',5,'empty',NULL,'done, empty result','{"attempt":1,"cost":null,"ms":7,"usage":null}');
INSERT INTO "events" VALUES(16,1796234772891,1,1,'k9',9,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(17,1796234772891,1,1,'k7',7,'done',NULL,'done','{"attempt":1,"cost":null,"ms":3,"usage":null}');
INSERT INTO "events" VALUES(18,1796234772891,1,1,'k10',10,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(19,1796234772892,1,1,'k6',6,'done',NULL,'done','{"attempt":1,"cost":null,"ms":8,"usage":null}');
INSERT INTO "events" VALUES(20,1796234772893,1,1,'k11',11,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(21,1796234772896,1,1,'k8',8,'done',NULL,'done','{"attempt":1,"cost":null,"ms":6,"usage":null}');
INSERT INTO "events" VALUES(22,1796234772897,1,1,'k12',12,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(23,1796234772896,1,1,'k9',9,'done',NULL,'done','{"attempt":1,"cost":null,"ms":4,"usage":null}');
INSERT INTO "events" VALUES(24,1796234772897,1,1,'k10',10,'done',NULL,'done','{"attempt":1,"cost":null,"ms":4,"usage":null}');
INSERT INTO "events" VALUES(25,1796234772899,1,1,'k11',11,'done',NULL,'done','{"attempt":1,"cost":null,"ms":6,"usage":null}');
INSERT INTO "events" VALUES(26,1796234772900,1,1,'k12',12,'done',NULL,'done','{"attempt":1,"cost":null,"ms":2,"usage":null}');
INSERT INTO "events" VALUES(27,1796234772904,1,1,NULL,NULL,'run-finished',NULL,'b: 7 done, 2 empty, 3 failed (1 retry, 2 manual), 0 retried, 0 skipped-done, 0s','{"counts":{"cancelled":0,"cost":0.0,"done":7,"empty":2,"failed":3,"manual":2,"redriven":0,"released":0,"retried":0,"retry":1,"skipped_done":0},"state":"failed"}');
INSERT INTO "events" VALUES(28,1796234772949,1,NULL,NULL,NULL,'added','root@vm','added 6, already present 0','{"added":6,"present":0,"pruned":0}');
INSERT INTO "events" VALUES(29,1796234772982,1,NULL,'k13',13,'skipped','root@vm','skipped by root@vm: by hand','{"reason":"by hand"}');
INSERT INTO "events" VALUES(30,1796234773022,2,NULL,NULL,NULL,'added','root@vm','added 4, already present 0','{"added":4,"present":0,"pruned":0}');
INSERT INTO "events" VALUES(31,1796234773082,2,2,NULL,NULL,'run-started','root@vm','run 2 started (manual) on vm:14389','{"concurrency":2,"holder":"vm:14389","trigger":"manual"}');
INSERT INTO "events" VALUES(32,1796234773091,2,2,'s1',19,'claimed',NULL,'claimed (attempt 1)',NULL);
INSERT INTO "events" VALUES(33,1796234773092,2,2,'s2',20,'claimed',NULL,'claimed (attempt 1)',NULL);
CREATE TABLE failed_classes (
    batch_id    INTEGER NOT NULL,
    error_class TEXT NOT NULL,
    tier        TEXT NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (batch_id, error_class, tier)
) STRICT, WITHOUT ROWID;
INSERT INTO "failed_classes" VALUES(1,'BadInput','manual',2);
INSERT INTO "failed_classes" VALUES(1,'TempFail','retry',1);
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
    updated_at      INTEGER NOT NULL, cancel_to TEXT CHECK (cancel_to = 'pending' OR cancel_to = 'manual'), cancel_by TEXT, cancel_reason TEXT, done_version TEXT, priority INTEGER NOT NULL DEFAULT 0, usage TEXT,
    UNIQUE (batch_id, key),
    CHECK ((status = 'failed') = (tier IS NOT NULL)),
    CHECK ((status = 'done') = (outcome IS NOT NULL)),
    CHECK (status <> 'failed' OR error_class IS NOT NULL),
    CHECK ((status = 'claimed') = (lease_run IS NOT NULL))
) STRICT;
INSERT INTO "items" VALUES(1,1,'k1','k1','{"key":"k1","n":1}','failed','manual',NULL,1,NULL,NULL,NULL,'BadInput','title missing',NULL,NULL,NULL,1,1796234772838,1796234772888,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(2,1,'k2','k2','{"key":"k2","n":2}','failed','manual',NULL,1,NULL,NULL,NULL,'BadInput','title missing',NULL,NULL,NULL,1,1796234772838,1796234772881,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(3,1,'k3','k3','{"key":"k3","n":3}','failed','retry',NULL,1,NULL,NULL,NULL,'TempFail','exited with status 75',1796234832882,NULL,NULL,1,1796234772838,1796234772882,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(4,1,'k4','k4','{"key":"k4","n":4}','done',NULL,'empty',1,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772882,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(5,1,'k5','k5','{"key":"k5","n":5}','done',NULL,'empty',1,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772891,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(6,1,'k6','k6','{"key":"k6","n":6}','done',NULL,'done',1,NULL,'{"posted":"k6"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772893,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(7,1,'k7','k7','{"key":"k7","n":7}','done',NULL,'done',1,NULL,'{"posted":"k7"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772891,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(8,1,'k8','k8','{"key":"k8","n":8}','done',NULL,'done',1,NULL,'{"posted":"k8"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772896,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(9,1,'k9','k9','{"key":"k9","n":9}','done',NULL,'done',1,NULL,'{"posted":"k9"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772897,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(10,1,'k10','k10','{"key":"k10","n":10}','done',NULL,'done',1,NULL,'{"posted":"k10"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772897,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(11,1,'k11','k11','{"key":"k11","n":11}','done',NULL,'done',1,NULL,'{"posted":"k11"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772899,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(12,1,'k12','k12','{"key":"k12","n":12}','done',NULL,'done',1,NULL,'{"posted":"k12"}',NULL,NULL,NULL,NULL,NULL,NULL,1,1796234772838,1796234772900,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(13,1,'k13','k13','{"key":"k13","n":13}','done',NULL,'skipped',0,NULL,'{"by":"root@vm","skipped":"by hand"}',NULL,NULL,NULL,NULL,NULL,NULL,0,1796234772949,1796234772982,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(14,1,'k14','k14','{"key":"k14","n":14}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234772949,1796234772949,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(15,1,'k15','k15','{"key":"k15","n":15}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234772949,1796234772949,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(16,1,'k16','k16','{"key":"k16","n":16}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234772949,1796234772949,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(17,1,'k17','k17','{"key":"k17","n":17}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234772949,1796234772949,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(18,1,'k18','k18','{"key":"k18","n":18}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234772949,1796234772949,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(19,2,'s1','s1','{"key":"s1"}','claimed',NULL,NULL,1,NULL,NULL,NULL,NULL,NULL,NULL,2,1796234833088,1,1796234773022,1796234773091,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(20,2,'s2','s2','{"key":"s2"}','claimed',NULL,NULL,1,NULL,NULL,NULL,NULL,NULL,NULL,2,1796234833088,1,1796234773022,1796234773092,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(21,2,'s3','s3','{"key":"s3"}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234773022,1796234773022,NULL,NULL,NULL,NULL,0,NULL);
INSERT INTO "items" VALUES(22,2,'s4','s4','{"key":"s4"}','pending',NULL,NULL,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,0,1796234773022,1796234773022,NULL,NULL,NULL,NULL,0,NULL);
CREATE TABLE "locks" (
    batch_id    INTEGER NOT NULL REFERENCES batches(id),
    token       TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    pid_start   INTEGER,
    run_id      INTEGER,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL, ttl_ms INTEGER, stop TEXT CHECK (stop = 'graceful' OR stop = 'now'), stop_by TEXT,
    PRIMARY KEY (batch_id, token)
) STRICT;
INSERT INTO "locks" VALUES(2,'fea9c233e558c2966c413d32e67a8fd7','vm',14389,110601,2,1796234773080,1796234833080,60000,NULL,NULL);
CREATE TABLE minute_stats (
    batch_id INTEGER NOT NULL,
    minute   INTEGER NOT NULL,
    done     INTEGER NOT NULL,
    failed   INTEGER NOT NULL,
    PRIMARY KEY (batch_id, minute)
) STRICT, WITHOUT ROWID;
INSERT INTO "minute_stats" VALUES(1,29937246,9,3);
CREATE TABLE pool_dims (
    pool   TEXT NOT NULL,
    dim    TEXT NOT NULL,
    tat_us INTEGER NOT NULL,
    PRIMARY KEY (pool, dim)
) STRICT, WITHOUT ROWID;
CREATE TABLE pool_holds (
    pool     TEXT PRIMARY KEY,
    until_ms INTEGER NOT NULL,
    batch    TEXT NOT NULL,
    key      TEXT
) STRICT;
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
, actor TEXT, cancelled INTEGER NOT NULL DEFAULT 0) STRICT;
INSERT INTO "runs" VALUES(1,1,'manual','vm',14347,110580,1796234772871,1796234772904,'failed',7,2,3,1,2,0,0,0,0,0.0,'b: 7 done, 2 empty, 3 failed (1 retry, 2 manual), 0 retried, 0 skipped-done, 0s','root@vm',0);
INSERT INTO "runs" VALUES(2,2,'manual','vm',14389,110601,1796234773082,NULL,'running',0,0,0,0,0,0,0,0,0,0.0,NULL,'root@vm',0);
CREATE TABLE spend (
    scope        TEXT NOT NULL CHECK (scope = 'batch' OR scope = 'pool'),
    name         TEXT NOT NULL,
    period_ms    INTEGER NOT NULL,
    window_start INTEGER NOT NULL,
    micros       INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    PRIMARY KEY (scope, name, period_ms, window_start)
) STRICT, WITHOUT ROWID;
CREATE TABLE tombstones (
    batch_id  INTEGER NOT NULL REFERENCES batches(id),
    key       TEXT NOT NULL,
    done_at   INTEGER NOT NULL,
    outcome   TEXT NOT NULL CHECK (outcome = 'done' OR outcome = 'empty' OR outcome = 'skipped'),
    pruned_at INTEGER NOT NULL,
    PRIMARY KEY (batch_id, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE workers (
    run_id  INTEGER NOT NULL,
    slot    INTEGER NOT NULL,
    host    TEXT NOT NULL,
    boot    TEXT NOT NULL,
    pgid    INTEGER NOT NULL,
    started INTEGER NOT NULL,
    PRIMARY KEY (run_id, slot)
) STRICT;
INSERT INTO "workers" VALUES(2,0,'vm','483ba371-803a-428b-ba05-093b4f334331',14400,110605);
INSERT INTO "workers" VALUES(2,1,'vm','483ba371-803a-428b-ba05-093b4f334331',14402,110606);
CREATE INDEX items_failed ON items (batch_id, error_class) WHERE status = 'failed';
CREATE INDEX dead_letters_by_batch ON dead_letters (batch_id, failed_at);
CREATE INDEX dead_letters_by_item ON dead_letters (item_id);
CREATE INDEX runs_by_batch ON runs (batch_id, id);
CREATE INDEX runs_open ON runs (state) WHERE state = 'running';
CREATE INDEX events_by_batch ON events (batch_id, id);
CREATE INDEX events_by_item ON events (item_id) WHERE item_id IS NOT NULL;
CREATE INDEX events_by_time ON events (at);
CREATE TRIGGER items_count_update AFTER UPDATE OF status, tier, outcome ON items
WHEN (CASE OLD.status WHEN 'failed' THEN OLD.tier WHEN 'done' THEN OLD.outcome ELSE OLD.status END) IS NOT (CASE NEW.status WHEN 'failed' THEN NEW.tier WHEN 'done' THEN NEW.outcome ELSE NEW.status END) BEGIN
    UPDATE counts SET n = n - 1 WHERE batch_id = OLD.batch_id AND bucket = CASE OLD.status WHEN 'failed' THEN OLD.tier WHEN 'done' THEN OLD.outcome ELSE OLD.status END;
    UPDATE counts SET n = n + 1 WHERE batch_id = NEW.batch_id AND bucket = CASE NEW.status WHEN 'failed' THEN NEW.tier WHEN 'done' THEN NEW.outcome ELSE NEW.status END;
END;
CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN
    UPDATE counts SET n = n - 1 WHERE batch_id = OLD.batch_id AND bucket = CASE OLD.status WHEN 'failed' THEN OLD.tier WHEN 'done' THEN OLD.outcome ELSE OLD.status END;
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
CREATE TRIGGER items_minute_stats AFTER UPDATE OF status ON items
WHEN OLD.status = 'claimed' AND NEW.status IN ('done', 'failed') BEGIN
    INSERT OR IGNORE INTO minute_stats (batch_id, minute, done, failed)
     VALUES (NEW.batch_id, NEW.updated_at / 60000, 0, 0);
    UPDATE minute_stats
       SET done = done + (NEW.status = 'done'), failed = failed + (NEW.status = 'failed')
     WHERE batch_id = NEW.batch_id AND minute = NEW.updated_at / 60000;
END;
CREATE TRIGGER dead_letters_hourly AFTER INSERT ON dead_letters BEGIN
    INSERT OR IGNORE INTO dlq_hourly (batch_id, error_class, hour, n)
     VALUES (NEW.batch_id, NEW.error_class, NEW.failed_at / 3600000, 0);
    UPDATE dlq_hourly SET n = n + 1
     WHERE batch_id = NEW.batch_id AND error_class = NEW.error_class
       AND hour = NEW.failed_at / 3600000;
END;
CREATE INDEX locks_by_expiry ON locks (expires_at);
CREATE TRIGGER tombstones_count_insert AFTER INSERT ON tombstones BEGIN
    UPDATE batches SET pruned_keys = pruned_keys + 1 WHERE id = NEW.batch_id;
END;
CREATE TRIGGER tombstones_count_delete AFTER DELETE ON tombstones BEGIN
    UPDATE batches SET pruned_keys = pruned_keys - 1 WHERE id = OLD.batch_id;
END;
CREATE INDEX attempt_logs_by_item ON attempt_logs (item_id, id);
CREATE INDEX attempt_logs_by_time ON attempt_logs (at);
CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at, priority DESC);
CREATE INDEX events_by_rare_kind ON events (kind, id)
    WHERE kind <> 'claimed' AND kind <> 'done' AND kind <> 'empty';
COMMIT;
