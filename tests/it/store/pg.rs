//! What only the PostgreSQL store has to show: several connections (hosts)
//! on one queue, clock skew between hosts, schema identity, concurrent
//! migration. The shared semantics are in `store::contract`.

use crate::support::pg;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use nightshift::model::{EventKind, Holder, NewEvent, NewItem, Outcome, Trigger};
use nightshift::store::pg::PgStore;
use nightshift::store::{
    Access, AddFeed, Completion, EventFilter, FeedRefused, LockOutcome, Store, StoreError,
};

const MIN: i64 = 60_000;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn holder(pid: u32) -> Holder {
    Holder {
        host: format!("host-{pid}"),
        pid,
        pid_start: None,
    }
}

fn items(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem {
            key: format!("k{i:05}"),
            label: format!("l{i}"),
            payload: "{}".into(),
            ..Default::default()
        })
        .collect()
}

fn fresh() -> Option<(String, Store)> {
    let url = pg::server()?.database();
    let (store, _) = PgStore::create(&url).unwrap();
    Some((url, Store::Pg(store)))
}

/// A run of batch `b` started at `t`, holding its lock for ten minutes.
fn locked_run(s: &mut Store, t: i64) -> i64 {
    let run = s
        .start_run("b", Trigger::Manual, None, &holder(1), t, None)
        .unwrap();
    s.acquire_lock("b", "tok", &holder(1), Some(run), t + 10 * MIN, t, &[], 1)
        .unwrap();
    run
}

/// Four connections claim from one queue at once (SKIP LOCKED): every item
/// is claimed exactly once, and the sharded counters add up.
#[test]
fn concurrent_claimers_never_share_an_item() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(2_000), t, |_| {}).unwrap();
    let run = locked_run(&mut s, t);
    let start = Arc::new(Barrier::new(4));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                let mut s = Store::Pg(PgStore::open(&url, Access::ReadWrite).unwrap());
                start.wait();
                let mut mine = Vec::new();
                loop {
                    let claims = s.claim("b", run, 7, now() + MIN, now()).unwrap().unwrap();
                    if claims.is_empty() {
                        return mine;
                    }
                    for c in claims {
                        let done = Completion {
                            usage: None,
                            item_id: c.item_id,
                            token: c.token,
                            run_id: run,
                            outcome: Outcome::Done,
                            result: None,
                            cost: None,
                            version: None,
                            now: now(),
                        };
                        let event = NewEvent::new(now(), "b", EventKind::Done, "done").key(&c.key);
                        assert!(s.complete(&done, &event).unwrap());
                        mine.push(c.key);
                    }
                }
            })
        })
        .collect();
    let mut seen = HashSet::new();
    let mut per_worker = Vec::new();
    for w in workers {
        let keys = w.join().unwrap();
        per_worker.push(keys.len());
        for k in keys {
            assert!(seen.insert(k.clone()), "{k} was claimed twice");
        }
    }
    assert_eq!(seen.len(), 2_000);
    let counts = s.counts("b").unwrap();
    assert_eq!((counts.done, counts.pending, counts.claimed), (2_000, 0, 0));
    assert_eq!(s.run(run).unwrap().unwrap().counts.done, 2_000);
    assert_eq!(s.integrity_check().unwrap(), "ok");
    assert!(
        per_worker.iter().filter(|n| **n > 0).count() > 1,
        "the work was spread: {per_worker:?}"
    );
}

/// A host whose clock runs an hour ahead must not take over a live lock:
/// expiries are compared on the database's clock.
#[test]
fn a_fast_clock_does_not_steal_a_live_lock() {
    let Some((url, mut a)) = fresh() else { return };
    let t = now();
    let got = a
        .acquire_lock("b", "a", &holder(1), None, t + MIN, t, &[], 1)
        .unwrap();
    assert!(matches!(got, LockOutcome::Acquired { .. }));
    let hour = 60 * MIN;
    let mut b = Store::Pg(PgStore::open_with_skew(&url, Access::ReadWrite, hour).unwrap());
    let tb = now() + hour;
    let held = b
        .acquire_lock("b", "b", &holder(2), None, tb + MIN, tb, &[], 1)
        .unwrap();
    assert!(
        matches!(held, LockOutcome::Held(ref l) if l[0].token == "a"),
        "{held:?}"
    );
    // Host b reads the expiry on its own clock: about a minute from its now.
    let lock = b.locks("b").unwrap().remove(0);
    assert!((lock.expires_at - tb - MIN).abs() < 5_000, "{lock:?}");
    // A host an hour behind sees the lock as live too, and it does expire
    // for everyone when the holder stops renewing it.
    let mut c = Store::Pg(PgStore::open_with_skew(&url, Access::ReadWrite, -hour).unwrap());
    let tc = now() - hour;
    assert!(matches!(
        c.acquire_lock("b", "c", &holder(3), None, tc + MIN, tc, &[], 1)
            .unwrap(),
        LockOutcome::Held(_)
    ));
    let later = now() + 2 * MIN + hour;
    assert!(matches!(
        b.acquire_lock("b", "b", &holder(2), None, later + MIN, later, &[], 1)
            .unwrap(),
        LockOutcome::Acquired { took_over: Some(_) }
    ));
}

/// Eight hosts race for one free lock: exactly one gets it.
#[test]
fn one_of_many_racing_hosts_gets_the_lock() {
    let Some((url, mut s)) = fresh() else { return };
    s.ensure_batch("b", now()).unwrap();
    let start = Arc::new(Barrier::new(8));
    let racers: Vec<_> = (0..8u32)
        .map(|i| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                let mut s = Store::Pg(PgStore::open(&url, Access::ReadWrite).unwrap());
                start.wait();
                let t = now();
                let token = format!("t{i}");
                let got = s
                    .acquire_lock("b", &token, &holder(i), None, t + MIN, t, &[], 1)
                    .unwrap();
                matches!(got, LockOutcome::Acquired { .. }).then_some(token)
            })
        })
        .collect();
    let winners: Vec<String> = racers
        .into_iter()
        .filter_map(|r| r.join().unwrap())
        .collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(s.locks("b").unwrap()[0].token, winners[0]);
    assert_eq!(s.locks("b").unwrap().len(), 1);
}

/// Runners starting together on a fresh database migrate it once.
#[test]
fn concurrent_creates_migrate_once() {
    let Some(server) = pg::server() else { return };
    let url = server.database();
    let start = Arc::new(Barrier::new(4));
    let created: Vec<bool> = (0..4)
        .map(|_| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                PgStore::create(&url).unwrap().1
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert_eq!(created.iter().filter(|c| **c).count(), 1, "{created:?}");
}

#[test]
fn foreign_and_newer_databases_are_refused_untouched() {
    let Some(server) = pg::server() else { return };
    // An empty database is not a store.
    let url = server.database();
    let err = PgStore::open(&url, Access::ReadOnly).unwrap_err();
    assert!(matches!(err, StoreError::NotNightshift(_)), "{err}");
    assert!(err.to_string().contains("nightshift init"), "{err}");
    // A missing database says what to do.
    let missing = server.url("no_such_db");
    let err = PgStore::open(&missing, Access::ReadWrite).unwrap_err();
    assert!(err.to_string().contains("createdb"), "{err}");
    // A newer schema is refused by open and create, and left as it was.
    let (s, _) = PgStore::create(&url).unwrap();
    drop(s);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "UPDATE nightshift.nightshift_meta SET value = '99' WHERE key = 'schema_version'",
        )
        .unwrap();
    for err in [
        PgStore::open(&url, Access::ReadWrite).unwrap_err(),
        PgStore::create(&url).unwrap_err(),
    ] {
        assert!(
            matches!(err, StoreError::NewerSchema { found: 99, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade nightshift"), "{err}");
    }
    let v: String = admin
        .query_one(
            "SELECT value FROM nightshift.nightshift_meta WHERE key = 'schema_version'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(v, "99");
}

/// A database of schema 3 (before runs had an actor) is migrated on open;
/// its old runs have none.
#[test]
fn a_version_3_database_gains_the_run_actor() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.start_run("b", Trigger::Manual, None, &holder(1), t, None)
        .unwrap();
    drop(s);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            // Versions 4 to 21 undone: the actor, tombstones, worker groups,
            // the store id, the seats' TTL and the daemons' heartbeats, the
            // hold's key, steering (cancel, stop), the attempts' stderr, the done version, the limit pools,
            // the runs' cancelled count, priority and not-before, the budgets' ledger, the rare kinds' index, the pools' sums,
            // the items' foreign key and the whole queue index, the self-counting statements; version 31's key table.
            "DROP TRIGGER items_counted ON nightshift.items;
             CREATE TRIGGER items_counted AFTER UPDATE ON nightshift.items
                 REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
                 FOR EACH STATEMENT EXECUTE FUNCTION nightshift.items_counted();
             DROP FUNCTION nightshift.counts_itself(), nightshift.counted_itself();
             ALTER TABLE nightshift.items ADD FOREIGN KEY (batch_id) REFERENCES nightshift.batches (id);
             DROP INDEX nightshift.items_queue;
             CREATE INDEX items_queue ON nightshift.items (batch_id, status, tier, next_attempt_at);
             DROP TABLE nightshift.pool_places, nightshift.pool_usage, nightshift.run_usage;
             ALTER TABLE nightshift.items DROP COLUMN usage;
             DROP INDEX nightshift.events_by_rare_kind;
             CREATE INDEX events_by_kind ON nightshift.events (kind, id);
             DROP TABLE nightshift.spend; ALTER TABLE nightshift.runs DROP COLUMN cancelled;
             ALTER TABLE nightshift.items DROP COLUMN priority;
             CREATE INDEX items_claimable ON nightshift.items (batch_id, id)
                 WHERE status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL;
             DROP TABLE nightshift.pool_dims, nightshift.pool_holds;
             ALTER TABLE nightshift.items DROP COLUMN done_version; DROP TABLE nightshift.attempt_logs; DROP INDEX nightshift.items_cancels;
             ALTER TABLE nightshift.items DROP COLUMN cancel_to, DROP COLUMN cancel_by,
                 DROP COLUMN cancel_reason;
             ALTER TABLE nightshift.locks DROP COLUMN stop, DROP COLUMN stop_by;
             ALTER TABLE nightshift.batches DROP COLUMN hold_key;
             DROP TABLE nightshift.daemons; ALTER TABLE nightshift.locks DROP COLUMN ttl_ms;
             ALTER TABLE nightshift.runs DROP COLUMN actor;
             DROP TABLE nightshift.tombstones; DROP FUNCTION nightshift.tombstones_counted();
             ALTER TABLE nightshift.batches DROP COLUMN pruned_keys;
             DROP TABLE nightshift.workers;
             DELETE FROM nightshift.nightshift_meta WHERE key = 'store_id';
             DROP TABLE nightshift.item_keys; ALTER TABLE nightshift.items ADD UNIQUE (batch_id, key);
             UPDATE nightshift.nightshift_meta SET value = '3' WHERE key = 'schema_version'",
        )
        .unwrap();
    let mut s = Store::Pg(PgStore::open(&url, Access::ReadWrite).unwrap());
    let new = s
        .start_run(
            "b",
            Trigger::Dashboard,
            Some("ops@box"),
            &holder(2),
            t,
            None,
        )
        .unwrap();
    let actors: Vec<Option<String>> = s
        .runs("b", 10)
        .unwrap()
        .into_iter()
        .map(|r| r.actor)
        .collect();
    assert_eq!(
        actors,
        [Some("ops@box".to_string()), None],
        "run {new} first"
    );
    let v: String = admin
        .query_one(
            "SELECT value FROM nightshift.nightshift_meta WHERE key = 'schema_version'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(v, nightshift::store::pg::PG_SCHEMA_VERSION.to_string());
}

/// A read-only store's session refuses writes on the server too, so even a
/// bug that reached the server with a write could not change anything.
#[test]
fn read_only_sessions_are_read_only_on_the_server() {
    let Some((url, mut s)) = fresh() else { return };
    s.add_items("b", &items(3), now(), |_| {}).unwrap();
    let ro = Store::Pg(PgStore::open(&url, Access::ReadOnly).unwrap());
    assert_eq!(ro.counts("b").unwrap().pending, 3);
    // The marker is the server's WAL position: other tests write to other
    // databases of this server meanwhile, so only "a commit moves it" holds.
    let marker = ro.change_marker();
    s.add_items("b", &items(4), now(), |_| {}).unwrap();
    assert_ne!(ro.change_marker(), marker, "a commit moves the marker");
    // What the store's session settings do, shown on a plain session
    // configured the same way.
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    raw.batch_execute("SET default_transaction_read_only = on")
        .unwrap();
    let err = raw
        .batch_execute("UPDATE nightshift.batches SET paused = true")
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION)
    );
}

/// A session the server dropped (restart, idle timeout) is replaced on the
/// next call rather than failing every call from then on.
#[test]
fn a_dropped_session_is_replaced() {
    let Some((url, mut s)) = fresh() else { return };
    s.add_items("b", &items(2), now(), |_| {}).unwrap();
    let ro = Store::Pg(PgStore::open(&url, Access::ReadOnly).unwrap());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let (db, _) = crate::support::pg_database_of(&url);
    // Only client sessions (an autovacuum worker may be in the database
    // too), and a session closed during setup stays listed until its
    // backend has exited: wait for that, so exactly the store's two are
    // dropped.
    crate::support::wait_for("only the store's two sessions", || {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = $1 AND pid <> pg_backend_pid()
                    AND backend_type = 'client backend'",
                &[&db],
            )
            .unwrap()
            .get(0);
        n == 2
    });
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = $1 AND pid <> pg_backend_pid()
                AND backend_type = 'client backend'",
            &[&db],
        )
        .unwrap();
    assert_eq!(killed.len(), 2, "both sessions were dropped");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(ro.counts("b").unwrap().pending, 2);
    s.add_items("b", &items(3), now(), |_| {}).unwrap();
    assert_eq!(s.counts("b").unwrap().pending, 3);
}

/// Four connections mixing every transition at once (claims, completions,
/// failures in both tiers, releases, redrives, requeues, skips): the
/// counters, kept by triggers in per-connection shards, still match the
/// items, and every item is in exactly one state.
#[test]
fn counters_stay_exact_under_concurrent_mixed_transitions() {
    use nightshift::store::{Failure, Selection};
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(600), t, |_| {}).unwrap();
    let run = locked_run(&mut s, t);
    let start = Arc::new(Barrier::new(4));
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(w);
                let mut s = Store::Pg(PgStore::open(&url, Access::ReadWrite).unwrap());
                start.wait();
                for _ in 0..150 {
                    let t = now();
                    match rng.u8(..10) {
                        0 => {
                            s.redrive_due("b", Some(run), t + MIN).unwrap();
                        }
                        1 => {
                            let sel = Selection {
                                tier: Some(nightshift::model::Tier::Manual),
                                ..Default::default()
                            };
                            s.requeue("b", &sel, rng.bool(), false, "test", t).unwrap();
                        }
                        2 => {
                            // Skipping an item in flight is refused: fine.
                            let key = format!("k{:05}", rng.usize(..600));
                            let _ = s.skip("b", &[key], "test", "test", t);
                        }
                        _ => {
                            let claims = s.claim("b", run, 3, t + MIN, t).unwrap().unwrap();
                            for c in claims {
                                let event =
                                    NewEvent::new(t, "b", EventKind::Alert, "x").key(&c.key);
                                match rng.u8(..4) {
                                    0 => {
                                        let f = Failure {
                                            item_id: c.item_id,
                                            token: c.token,
                                            run_id: run,
                                            tier: if rng.bool() {
                                                nightshift::model::Tier::Retry
                                            } else {
                                                nightshift::model::Tier::Manual
                                            },
                                            error_class: ["A", "B", "C"][rng.usize(..3)],
                                            message: "m",
                                            next_attempt_at: Some(t),
                                            cost: None,
                                            now: t,
                                        };
                                        assert!(s.fail(&f, &event).unwrap());
                                    }
                                    1 => {
                                        let released =
                                            s.release(c.item_id, c.token, run, rng.bool(), &event);
                                        assert!(released.unwrap());
                                    }
                                    _ => {
                                        let done = Completion {
                                            usage: None,
                                            item_id: c.item_id,
                                            token: c.token,
                                            run_id: run,
                                            outcome: if rng.bool() {
                                                Outcome::Done
                                            } else {
                                                Outcome::Empty
                                            },
                                            result: None,
                                            cost: None,
                                            version: None,
                                            now: t,
                                        };
                                        assert!(s.complete(&done, &event).unwrap());
                                    }
                                }
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(s.integrity_check().unwrap(), "ok");
    let counts = s.counts("b").unwrap();
    assert_eq!(counts.total(), 600);
    assert_eq!(counts.claimed, 0, "every claim was ended");
    // Done items never leave done here, so each was completed once; every
    // failure left one dead letter.
    let r = s.run(run).unwrap().unwrap();
    assert_eq!(r.counts.done + r.counts.empty, counts.done + counts.empty);
    let dead = s.dead_letters("b", None, None).unwrap().len() as i64;
    assert!(dead > 0);
    assert_eq!(r.counts.failed, dead);
}

/// The read-only role the README documents can monitor: every read the
/// dashboard and `status` make works, and the server refuses its writes.
#[test]
fn the_documented_read_only_role_can_monitor() {
    use nightshift::store::DashQuery;
    let Some((url, mut s)) = fresh() else { return };
    s.add_items("b", &items(3), now(), |_| {}).unwrap();
    let (db, _) = crate::support::pg_database_of(&url);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // As in the README (trust authentication here, so no password).
    admin
        .batch_execute(&format!(
            "DO $$ BEGIN
                 IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'nightshift_ro') THEN
                     CREATE ROLE nightshift_ro LOGIN;
                 END IF;
             END $$;
             GRANT CONNECT ON DATABASE {db} TO nightshift_ro;
             GRANT USAGE ON SCHEMA nightshift TO nightshift_ro;
             GRANT SELECT ON ALL TABLES IN SCHEMA nightshift TO nightshift_ro;
             ALTER ROLE nightshift_ro SET default_transaction_read_only = on;"
        ))
        .unwrap();
    let ro_url = url.replace("user=postgres", "user=nightshift_ro");
    let ro = Store::Pg(PgStore::open(&ro_url, Access::ReadOnly).unwrap());
    assert_eq!(ro.counts("b").unwrap().pending, 3);
    let q = DashQuery {
        batch: Some("b".into()),
        dlq: true,
        ..DashQuery::default()
    };
    assert_eq!(ro.dashboard(&q, now()).unwrap().batches.len(), 1);
    assert!(!ro.change_marker().is_empty());
    assert_eq!(ro.integrity_check().unwrap(), "ok");
    // Even opened for writing, the role changes nothing.
    let mut rw = Store::Pg(PgStore::open(&ro_url, Access::ReadWrite).unwrap());
    assert!(rw.ensure_batch("other", now()).is_err());
    assert_eq!(s.batch_names().unwrap(), vec!["b".to_string()]);
}

/// An event listed when following began is not shown again when the
/// horizon moves up to, but not past, its transaction: the listing's ids
/// are kept until the horizon passes them. Other transactions set the
/// horizon here: `early` holds it below everything, `middle` (an id
/// between `early`'s and the listed event's) holds it there once `early`
/// ends.
#[test]
fn an_event_listed_before_following_is_not_shown_again_while_the_horizon_passes_below_it() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.ensure_batch("b", t).unwrap();
    let xid = "SELECT pg_current_xact_id()::text::int8";
    let mut early = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut early = early.transaction().unwrap();
    let early_xid: i64 = early.query_one(xid, &[]).unwrap().get(0);
    let mut middle = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut middle = middle.transaction().unwrap();
    let middle_xid: i64 = middle.query_one(xid, &[]).unwrap().get(0);
    assert!(early_xid < middle_xid);
    s.log_event(&NewEvent::new(t, "b", EventKind::Alert, "listed"))
        .unwrap();
    let all = nightshift::store::EventFilter::default();
    let mut cursor = s.follow_start().unwrap();
    let listed = s.events(&all).unwrap();
    assert_eq!(listed.len(), 1);
    cursor.shown(&listed);
    early.commit().unwrap();
    // The horizon is now at most `middle`'s id: below the listed event.
    assert_eq!(s.follow_next(&all, &mut cursor).unwrap(), vec![]);
    middle.commit().unwrap();
    s.log_event(&NewEvent::new(t, "b", EventKind::Alert, "later"))
        .unwrap();
    // Other tests' transactions may hold the horizon back a while: poll.
    let mut shown = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !shown
        .iter()
        .any(|e: &nightshift::model::Event| e.message == "later")
        && std::time::Instant::now() < deadline
    {
        shown.extend(s.follow_next(&all, &mut cursor).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        shown.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(),
        ["later"]
    );
}

/// A transaction that took an event id and commits after a later one was
/// shown: `log --follow` waits for it instead of skipping its event.
#[test]
fn following_the_log_waits_for_a_transaction_still_running() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.ensure_batch("b", t).unwrap();
    s.log_event(&NewEvent::new(t, "b", EventKind::Alert, "before"))
        .unwrap();
    let all = nightshift::store::EventFilter::default();
    let mut cursor = s.follow_start().unwrap();
    cursor.shown(&s.events(&all).unwrap());

    let mut slow = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = slow.transaction().unwrap();
    tx.execute(
        "INSERT INTO nightshift.events (at, kind, message) VALUES ($1, 'slow', 'slow')",
        &[&t],
    )
    .unwrap();
    s.log_event(&NewEvent::new(t, "b", EventKind::Alert, "fast"))
        .unwrap();
    // The fast event (a larger id) is held back while the slow one is open.
    assert_eq!(s.follow_next(&all, &mut cursor).unwrap(), vec![]);
    tx.commit().unwrap();
    // Other tests' transactions on this shared server may hold the horizon
    // back a moment longer: poll, as `log -f` does.
    let mut shown = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while shown.len() < 2 && std::time::Instant::now() < deadline {
        shown.extend(s.follow_next(&all, &mut cursor).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        shown.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(),
        ["slow", "fast"]
    );
    assert_eq!(s.follow_next(&all, &mut cursor).unwrap(), vec![]);
}

/// A group of n completions compares each of its rows with its item once,
/// not with every claimed item: with the queue's statistics taken while
/// all was pending (as after a big add), the done mark was planned as a
/// nested loop over the claimed rows and rescanned the group for each, n²
/// comparisons (19,136 for 64 of 300 claimed): most of PostgreSQL's time
/// per item in a persistent run.
#[test]
fn a_group_of_completions_is_joined_to_its_items_once() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(1_000), t, |_| {}).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute("ANALYZE nightshift.items").unwrap();
    let run = locked_run(&mut s, t);
    assert_eq!(
        s.claim("b", run, 300, t + 10 * MIN, t)
            .unwrap()
            .unwrap()
            .len(),
        300
    );
    let Store::Pg(pg) = &mut s else {
        unreachable!()
    };
    for n in [8, 64, 256] {
        let plan = pg.complete_all_plan("b", n).unwrap();
        let compared: u64 = plan
            .iter()
            .filter_map(|l| l.trim().strip_prefix("Rows Removed by Join Filter: "))
            .map(|v| v.parse::<u64>().unwrap())
            .sum();
        assert!(
            compared < n as u64,
            "{n} completions compared {compared} pairs too many:\n{}",
            plan.join("\n")
        );
        assert!(
            plan.iter().any(|l| l.contains(&format!("rows={n} "))),
            "{}",
            plan.join("\n")
        );
    }
}

/// Right after a big add, before autovacuum has looked at the table, a
/// claim still reads the first entries of the claimable index in claim
/// order: planned on no statistics it sorted every pending item, so each
/// claim read the whole queue (all 50,000 items, every claim of a run; at
/// 20,000 the two plans cost the same and either may be taken).
#[test]
fn a_claim_right_after_a_big_add_reads_the_queue_in_claim_order() {
    let Some((_url, mut s)) = fresh() else { return };
    s.add_items("b", &items(50_000), now(), |_| {}).unwrap();
    let Store::Pg(pg) = &s else { unreachable!() };
    let plan = pg.claim_plan_of("b", 1_024).unwrap().join("\n");
    assert!(
        plan.contains("Index Scan using items_claimable on items"),
        "{plan}"
    );
    assert!(
        !plan.contains("Sort Key: items.priority"),
        "no sort of the items: {plan}"
    );
}

/// A claim of a persistent run's size (1,024 items) updates the rows it
/// picked by their ids, each an index lookup: joined to the picked rows,
/// the update was planned as a hash join over a Seq Scan of every item,
/// so each claim read the whole table (all 50,000 here).
#[test]
fn a_big_claim_reads_only_the_rows_it_claims() {
    let Some((_url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(50_000), t, |_| {}).unwrap();
    let Store::Pg(pg) = &s else { unreachable!() };
    let plan = pg.claim_plan_of("b", 1_024).unwrap().join("\n");
    assert!(!plan.contains("Seq Scan on items"), "{plan}");
    assert!(
        plan.contains("Index Scan using items_pkey on items"),
        "{plan}"
    );
    // And the claim itself takes the first 1,024 in claim order.
    let run = locked_run(&mut s, t);
    let claimed = s.claim("b", run, 1_024, t + 10 * MIN, t).unwrap().unwrap();
    let keys: Vec<String> = claimed.iter().map(|c| c.key.clone()).collect();
    let first: Vec<String> = (0..1_024).map(|i| format!("k{i:05}")).collect();
    assert_eq!(keys, first);
    assert_eq!(s.counts("b").unwrap().claimed, 1_024);
}

/// Fails every item of the store at `url` by hand (`tier`, and a retry
/// time `at` for the retry tier), its statistics refreshed: a store where
/// most items failed, as when a requeue or a redrive is needed.
fn fail_all_by_hand(url: &str, tier: &str, at: Option<i64>) {
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    admin.batch_execute("SET search_path = nightshift").unwrap();
    admin
        .execute(
            "UPDATE items SET status = 'failed', tier = $1, error_class = 'E',
                    next_attempt_at = $2",
            &[&tier, &at],
        )
        .unwrap();
    admin.batch_execute("ANALYZE items").unwrap();
}

/// How a plan reads the rows its update changes (the update's own `items
/// i`, not the scan that picked them): `Seq Scan`, `Index Scan using ...`.
fn update_scans(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter_map(|l| l.split_once(" on items i  (").map(|(scan, _)| scan))
        .map(|scan| scan.trim_start().trim_start_matches("->").trim())
        .filter(|scan| scan.contains("Scan"))
        .collect()
}

/// A requeue chunk (1,000 items, the first on PostgreSQL, up to 20,000)
/// updates the rows it picked by their ids, each an index lookup: joined
/// to the picked rows, it was planned as a hash join over a Seq Scan of
/// every item, so each chunk of a requeue of 50,000 failed items read all
/// 50,000.
#[test]
fn a_requeue_chunk_reads_only_the_rows_it_moves() {
    let Some((url, mut s)) = fresh() else { return };
    s.add_items("b", &items(50_000), now(), |_| {}).unwrap();
    fail_all_by_hand(&url, "manual", None);
    let Store::Pg(pg) = &s else { unreachable!() };
    for n in [1_000, 20_000] {
        let plan = pg.requeue_plan_of("b", n).unwrap().join("\n");
        assert_eq!(
            update_scans(&plan),
            ["Index Scan using items_pkey"],
            "{n}: {plan}"
        );
    }
    // And a requeue still moves each failed item once, with its event.
    let all = nightshift::store::Selection {
        all_failed: true,
        ..Default::default()
    };
    assert_eq!(
        s.requeue("b", &all, false, false, "me", now())
            .unwrap()
            .len(),
        50_000
    );
    let requeued = nightshift::store::EventFilter {
        kinds: vec!["requeued".into()],
        limit: 100_000,
        ..Default::default()
    };
    assert_eq!(s.events(&requeued).unwrap().len(), 50_000);
}

/// The same for a redrive chunk (2,000 retry-tier failures whose time
/// came): by id, not a hash join over a Seq Scan of every item.
#[test]
fn a_redrive_chunk_reads_only_the_rows_it_moves() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(50_000), t, |_| {}).unwrap();
    fail_all_by_hand(&url, "retry", Some(t));
    let Store::Pg(pg) = &s else { unreachable!() };
    let plan = pg.redrive_plan_of("b", 2_000, t + MIN).unwrap().join("\n");
    assert_eq!(
        update_scans(&plan),
        ["Index Scan using items_pkey"],
        "{plan}"
    );
    assert_eq!(s.redrive_due("b", None, t + MIN).unwrap().len(), 50_000);
    assert_eq!(s.counts("b").unwrap().pending, 50_000);
}

/// An add checks no foreign key per row: the items' key to their batch
/// (dropped in version 20) cost a quarter of an add's server time, a
/// lookup and lock of the batch row for every item, to guard a batch
/// deletion no path makes. The add still counts what it added.
#[test]
fn an_add_checks_no_foreign_key_per_item() {
    let Some((url, mut s)) = fresh() else { return };
    let report = s.add_items("b", &items(100), now(), |_| {}).unwrap();
    assert_eq!(report.added, 100);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let keys: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_constraint
              WHERE conrelid = 'nightshift.items'::regclass AND contype = 'f'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(keys, 0);
    assert_eq!(s.counts("b").unwrap().pending, 100);
}

/// An add into a batch that holds no items inserts without a conflict
/// clause (a probe of the key index less per item); a key given twice
/// sends it back to the idempotent insert, which adds each key once, counts
/// the rest present and reports each step of progress once.
#[test]
fn a_fresh_add_with_a_key_given_twice_adds_it_once() {
    let Some((_url, mut s)) = fresh() else { return };
    let mut given = items(12_000);
    given.push(given[0].clone());
    let mut steps = Vec::new();
    let report = s.add_items("b", &given, now(), |n| steps.push(n)).unwrap();
    assert_eq!((report.added, report.present), (12_000, 1));
    assert_eq!(steps, [0, 10_000]);
    assert_eq!(s.counts("b").unwrap().pending, 12_000);
    // Into the batch it now holds: the idempotent insert from the start.
    let report = s.add_items("b", &items(12_001), now(), |_| {}).unwrap();
    assert_eq!((report.added, report.present), (1, 12_000));
    assert_eq!(s.counts("b").unwrap().pending, 12_001);
}

/// An add's parts as `add` feeds them while it parses (`Store::add_fed`):
/// `parts` in turn, `before(k)` run before part `k` is given.
struct Fed<'a, F: FnMut(usize)> {
    parts: Vec<&'a [NewItem]>,
    given: usize,
    before: F,
}

impl<'a, F: FnMut(usize)> AddFeed<'a> for Fed<'a, F> {
    fn next_part(&mut self) -> Option<Result<&'a [NewItem], FeedRefused>> {
        let part = self.parts.get(self.given).copied()?;
        (self.before)(self.given);
        self.given += 1;
        Some(Ok(part))
    }

    fn by_key(&mut self) -> Vec<(&'a str, usize)> {
        super::contract::by_key(&self.parts)
    }
}

/// The `added` events of the store.
fn added_events(s: &Store) -> Vec<nightshift::model::Event> {
    let filter = EventFilter {
        kinds: vec!["added".into()],
        ..Default::default()
    };
    s.events(&filter).unwrap()
}

/// A fed add whose transaction meets a deadlock (here: its second
/// statement, by a trigger) is tried again whole: the parts the feed
/// already gave are inserted again (the feed gives each once), and the add
/// ends with every item once, in input order, counted and logged once.
#[test]
fn a_fed_add_tried_again_after_a_deadlock_inserts_the_parts_already_given() {
    let Some((url, mut s)) = fresh() else { return };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "CREATE SEQUENCE nightshift.inserts;
             CREATE FUNCTION nightshift.deadlock_once() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF nextval('nightshift.inserts') = 2 THEN
                     RAISE EXCEPTION 'a deadlock (the test''s)' USING ERRCODE = 'deadlock_detected';
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER deadlock_once AFTER INSERT ON nightshift.items
                 FOR EACH STATEMENT EXECUTE FUNCTION nightshift.deadlock_once();",
        )
        .unwrap();
    let all = items(12_000);
    let mut asked = Vec::new();
    let mut fed = Fed {
        parts: vec![&all[..6_000], &all[6_000..]],
        given: 0,
        before: |k| asked.push(k),
    };
    let r = s.add_fed("b", &mut fed, 0, now(), |_| {}).unwrap().unwrap();
    drop(fed);
    assert_eq!((r.added, r.present), (12_000, 0));
    assert_eq!(asked, [0, 1], "each part taken from the feed once");
    let statements: i64 = admin
        .query_one("SELECT last_value FROM nightshift.inserts", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        statements,
        2 + 4,
        "the failed try's two, then all four again"
    );
    assert_eq!(s.counts("b").unwrap().pending, 12_000);
    let id = |key: &str| s.item("b", key).unwrap().id;
    assert!(
        id("k00000") < id("k05999") && id("k05999") < id("k06000") && id("k06000") < id("k11999")
    );
    let events = added_events(&s);
    assert_eq!(
        (events.len(), events[0].fields["added"].as_i64()),
        (1, Some(12_000))
    );
}

/// A fed add into a batch that holds no items (a binary COPY, no conflict
/// clause) that meets a key another session added meanwhile, after its
/// first part was written, adds the rest idempotently once every part was
/// given: that key present, every other added once, counts exact.
#[test]
fn a_fresh_fed_add_meeting_a_key_added_meanwhile_adds_the_rest() {
    let Some((url, mut s)) = fresh() else { return };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .execute(
            "INSERT INTO nightshift.batches (name, created_at) VALUES ('b', 0)",
            &[],
        )
        .unwrap();
    let all = items(12_000);
    let mut fed = Fed {
        parts: vec![&all[..6_000], &all[6_000..]],
        given: 0,
        before: |k| {
            if k != 1 {
                return;
            }
            // Another session, on a shard of the counters other than the
            // add's (whose row it holds until it commits).
            let busy = "SELECT pid % 32 FROM pg_stat_activity
                         WHERE datname = current_database() AND state = 'idle in transaction'";
            let theirs: i32 = admin.query_one(busy, &[]).unwrap().get(0);
            let other = loop {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                let shard: i32 = c
                    .query_one("SELECT pg_backend_pid() % 32", &[])
                    .unwrap()
                    .get(0);
                if shard != theirs {
                    break c;
                }
            };
            let mut other = other;
            other
                .batch_execute(
                    "SET search_path = nightshift;
                     INSERT INTO items (batch_id, key, label, payload, status, created_at,
                                        updated_at)
                     SELECT id, 'k09000', 'meanwhile', '{}', 'pending', 0, 0
                       FROM batches WHERE name = 'b';
                     INSERT INTO item_keys (batch_id, key, item_id)
                     SELECT batch_id, key, id FROM items WHERE key = 'k09000';
                     -- As an add counts the items it adds.
                     INSERT INTO counts AS c (batch_id, bucket, shard, n)
                     SELECT id, 'pending', shard(), 1 FROM batches WHERE name = 'b'
                     ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + 1",
                )
                .unwrap();
        },
    };
    let r = s.add_fed("b", &mut fed, 0, now(), |_| {}).unwrap().unwrap();
    drop(fed);
    assert_eq!((r.added, r.present), (11_999, 1));
    assert_eq!(s.counts("b").unwrap().pending, 12_000);
    assert_eq!(s.item("b", "k09000").unwrap().label, "meanwhile");
    let id = |key: &str| s.item("b", key).unwrap().id;
    assert!(
        id("k00000") < id("k05999") && id("k05999") < id("k06000") && id("k06000") < id("k11999")
    );
    assert_eq!(added_events(&s)[0].fields["added"].as_i64(), Some(11_999));
}

/// A fresh add (a binary COPY) stores every field as the idempotent insert
/// (arrays) does: texts beyond ASCII, negative priorities, not-before times
/// and their absence, the add's time, in input order.
#[test]
fn a_fresh_add_stores_every_field_as_an_add_into_a_held_batch() {
    let Some((_url, mut s)) = fresh() else { return };
    let t = now();
    let given: Vec<NewItem> = (0..7_000)
        .map(|i| NewItem {
            key: format!("clé-{i:05}"),
            label: format!("ラベル {i}"),
            payload: format!("{{\"n\":{i},\"s\":\"☃\"}}"),
            priority: i % 7 - 3,
            not_before: (i % 3 == 0).then_some(t + i64::from(i) * MIN),
            written_key: None,
        })
        .collect();
    assert_eq!(
        s.add_items("fresh", &given, t, |_| {}).unwrap().added,
        7_000
    );
    // The other batch holds an item first: the rest go by the arrays.
    s.add_items("held", &given[..1], t, |_| {}).unwrap();
    assert_eq!(s.add_items("held", &given, t, |_| {}).unwrap().added, 6_999);
    let all = nightshift::store::ItemFilter::default();
    let fresh = s.items("fresh", &all).unwrap();
    let held = s.items("held", &all).unwrap();
    assert_eq!(fresh.len(), 7_000);
    let fields = |i: &nightshift::model::Item| {
        (
            i.key.clone(),
            i.label.clone(),
            i.payload.value(),
            i.status,
            i.priority,
            i.next_attempt_at,
            i.created_at,
            i.updated_at,
            i.attempts,
        )
    };
    assert_eq!(
        fresh.iter().map(fields).collect::<Vec<_>>(),
        held.iter().map(fields).collect::<Vec<_>>()
    );
    let by_key = s.item("fresh", "clé-00003").unwrap();
    assert_eq!(
        (
            by_key.label.as_str(),
            by_key.priority,
            by_key.next_attempt_at
        ),
        ("ラベル 3", 0, Some(t + 3 * MIN))
    );
    assert_eq!(
        by_key.payload.value(),
        serde_json::json!({"n": 3, "s": "☃"})
    );
    assert_eq!(s.counts("fresh").unwrap().pending, 7_000);
}

/// A fresh item is not in `items_queue` (version 20: `items_claimable`
/// holds it), and a count of the pending items of a batch mostly done
/// still reads the indexes, both parts (claimable, and waiting for a
/// not-before time), not every row of the batch.
#[test]
fn pending_items_are_found_by_the_two_queue_indexes() {
    let Some((url, mut s)) = fresh() else { return };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let size = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one("SELECT pg_relation_size('nightshift.items_queue')", &[])
            .unwrap()
            .get(0)
    };
    let before = size(&mut admin);
    let t = now();
    let mut many = items(100_000);
    let waiting = many.split_off(99_990);
    s.add_items("b", &many, t, |_| {}).unwrap();
    assert_eq!(
        size(&mut admin),
        before,
        "claimable items are not in items_queue"
    );
    let waiting: Vec<NewItem> = (waiting.into_iter().enumerate())
        .map(|(i, item)| NewItem {
            not_before: Some(t + (i as i64 + 1) * MIN),
            ..item
        })
        .collect();
    s.add_items("b", &waiting, t, |_| {}).unwrap();
    // Most of the batch done (a plan over a queue of every row reads them
    // all), and vacuumed.
    let done = "UPDATE nightshift.items SET status = 'done', outcome = 'done' WHERE key < 'k99000'";
    admin.batch_execute("SET search_path = nightshift").unwrap();
    admin.execute(done, &[]).unwrap();
    admin
        .batch_execute("VACUUM ANALYZE nightshift.items")
        .unwrap();
    let Store::Pg(pg) = &s else { unreachable!() };
    let filter = nightshift::store::ItemFilter {
        status: Some(nightshift::model::Status::Pending),
        ..Default::default()
    };
    let plan = pg.items_count_plan("b", &filter).unwrap().join("\n");
    assert!(
        plan.contains("items_claimable") && plan.contains("items_queue"),
        "{plan}"
    );
    assert!(!plan.contains("Seq Scan"), "{plan}");
    assert_eq!(s.count_items("b", &filter).unwrap(), 1_000);
}

/// A second session on the store (a runner's lane, see `runner::writer`)
/// is a session of its own: it does not see a group under way in the
/// first, and its writes are kept beside the first's; on SQLite there is
/// none.
#[test]
fn another_session_writes_beside_the_first() {
    let Some((_url, mut s)) = fresh() else { return };
    let mut other = s.another_session().expect("a PostgreSQL store").unwrap();
    s.add_items("a", &items(2), now(), |_| {}).unwrap();
    let seen = s
        .group(|s| {
            s.add_items("a", &items(5), now(), |_| {}).unwrap();
            other.counts("a").unwrap().pending
        })
        .unwrap();
    assert_eq!(seen, 2, "the other session reads what is committed");
    other.add_items("b", &items(3), now(), |_| {}).unwrap();
    assert_eq!(
        (
            s.counts("a").unwrap().pending,
            s.counts("b").unwrap().pending
        ),
        (5, 3)
    );
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = Store::create(&dir.path().join("ns.db")).unwrap();
    assert!(file.another_session().is_none());
}

/// A runner's sessions take the rows they share in one order (see
/// `store::pg::locks`): the writer's group (a failure, then a heartbeat's
/// renewal of the seat and the leases) and a lane's chained commit (a
/// claim, then completions and the run's counts) that comes in while the
/// group is open both commit, the lane after the group. Without the seat
/// first in the writer's groups, the lane held the seat shared and waited
/// for the run's row, which the failure held, while the renewal waited for
/// the seat: the server broke that deadlock by failing one of the two.
#[test]
fn a_lane_and_the_writers_group_take_their_rows_in_one_order() {
    use nightshift::store::Failure;
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(10), t, |_| {}).unwrap();
    let run = locked_run(&mut s, t);
    let mut lane = s.another_session().unwrap().unwrap();
    let mine = s.claim("b", run, 2, t + 10 * MIN, t).unwrap().unwrap();
    let theirs = lane.claim("b", run, 2, t + 10 * MIN, t).unwrap().unwrap();
    s.seat_first_in_groups("b", run).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let (entered, enter) = std::sync::mpsc::channel::<()>();
    let lane_commit = std::thread::spawn(move || {
        enter.recv().unwrap();
        let event = NewEvent::new(t, "b", EventKind::Alert, "x");
        let done: Vec<_> = theirs
            .iter()
            .map(|c| {
                let c = Completion {
                    usage: None,
                    item_id: c.item_id,
                    token: c.token,
                    run_id: run,
                    outcome: Outcome::Done,
                    result: None,
                    cost: Some(1.0),
                    version: None,
                    now: t,
                };
                (c, &event)
            })
            .collect();
        // What a lane's chained commit does (`runner::slot::pipeline`).
        lane.group_whole(|l| {
            let next = l.claim("b", run, 2, t + 10 * MIN, t)?;
            Ok((next, l.complete_all(&done)?))
        })
    });
    let group = s.group(|s| {
        let event = NewEvent::new(t, "b", EventKind::Alert, "x").key(&mine[0].key);
        let f = Failure {
            item_id: mine[0].item_id,
            token: mine[0].token,
            run_id: run,
            tier: nightshift::model::Tier::Manual,
            error_class: "A",
            message: "m",
            next_attempt_at: None,
            cost: None,
            now: t,
        };
        let failed = s.fail(&f, &event)?;
        entered.send(()).unwrap();
        // The lane's commit is in and waits for a row this group holds.
        let waiting = "SELECT count(*) FROM pg_stat_activity
                        WHERE datname = current_database() AND wait_event_type = 'Lock'";
        while admin.query_one(waiting, &[]).unwrap().get::<_, i64>(0) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let renewed = s.renew_lock("b", "tok", t + 20 * MIN)?;
        let held = s.renew_leases("b", run, t + 20 * MIN)?;
        Ok::<_, StoreError>((failed, renewed, held))
    });
    let (failed, renewed, held) = group.unwrap().unwrap();
    assert!(failed && renewed);
    assert_eq!(
        held.len(),
        3,
        "the writer's second claim and the lane's two"
    );
    let (next, accepted) = lane_commit.join().unwrap().unwrap();
    assert_eq!(
        (next.map(|n| n.len()), accepted),
        (Some(2), vec![true, true])
    );
    let r = s.run(run).unwrap().unwrap();
    assert_eq!((r.counts.done, r.counts.failed), (2, 1));
    let counts = s.counts("b").unwrap();
    assert_eq!((counts.done, counts.claimed, counts.pending), (2, 3, 4));
}

/// A store of version 20 (its trigger counting every update) migrates to
/// 21, where the claim and the done marks count themselves: counts made
/// before and after the migration add up, by the hot statements and by the
/// other writers alike.
#[test]
fn a_version_20_store_migrates_to_hot_writes_that_count_themselves() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("b", &items(10), t, |_| {}).unwrap();
    let run = locked_run(&mut s, t);
    let before = s.claim("b", run, 4, t + 10 * MIN, t).unwrap().unwrap();
    drop(s);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP TRIGGER items_counted ON nightshift.items;
             CREATE TRIGGER items_counted AFTER UPDATE ON nightshift.items
                 REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
                 FOR EACH STATEMENT EXECUTE FUNCTION nightshift.items_counted();
             DROP FUNCTION nightshift.counts_itself(), nightshift.counted_itself();
             DROP TABLE nightshift.item_keys; ALTER TABLE nightshift.items ADD UNIQUE (batch_id, key);
             UPDATE nightshift.nightshift_meta SET value = '20' WHERE key = 'schema_version';
             -- Its runner stopped (no upgrade under a live one, see `store::upgrade`);
             -- the same run carries on after the upgrade.
             UPDATE nightshift.locks SET expires_at = 0",
        )
        .unwrap();
    let mut s = Store::Pg(PgStore::open(&url, Access::ReadWrite).unwrap());
    admin
        .execute(
            "UPDATE nightshift.locks SET expires_at = $1",
            &[&(t + 10 * MIN)],
        )
        .unwrap();
    let after = s.claim("b", run, 4, t + 10 * MIN, t).unwrap().unwrap();
    let done = |c: &nightshift::model::Claim| Completion {
        usage: None,
        item_id: c.item_id,
        token: c.token,
        run_id: run,
        outcome: Outcome::Done,
        result: None,
        cost: None,
        version: None,
        now: t,
    };
    let events: Vec<NewEvent> = before
        .iter()
        .chain(&after)
        .map(|c| NewEvent::new(t, "b", EventKind::Done, "done").key(&c.key))
        .collect();
    let group: Vec<_> = before
        .iter()
        .chain(&after[..3])
        .zip(&events)
        .map(|(c, e)| (done(c), e))
        .collect();
    assert!(s.complete_all(&group).unwrap().iter().all(|ok| *ok));
    let event = NewEvent::new(t, "b", EventKind::Released, "released");
    assert!(
        s.release(after[3].item_id, after[3].token, run, true, &event)
            .unwrap()
    );
    let counts = s.counts("b").unwrap();
    assert_eq!((counts.pending, counts.claimed, counts.done), (3, 0, 7));
    assert_eq!(s.integrity_check().unwrap(), "ok");
    assert_eq!(s.minute_stats("b", t, 1).unwrap(), [(7, 0)]);
    let v: String = admin
        .query_one(
            "SELECT value FROM nightshift.nightshift_meta WHERE key = 'schema_version'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(v, nightshift::store::pg::PG_SCHEMA_VERSION.to_string());
}

/// The sessions opened beside a store's (a runner's lanes) count on shards
/// of their own, whatever their process ids: 32 sessions, as many as there
/// are shards, count their added items in 32 shards (by process id modulo
/// 32, some two of them shared one all but always).
#[test]
fn sessions_opened_beside_count_on_shards_of_their_own() {
    let Some((url, s)) = fresh() else { return };
    let Store::Pg(first) = s else { unreachable!() };
    let mut sessions: Vec<Store> = (0..31)
        .map(|_| Store::Pg(first.another_session().unwrap()))
        .collect();
    sessions.push(Store::Pg(first));
    for (i, s) in sessions.iter_mut().enumerate() {
        s.add_items(&format!("b{i}"), &items(3), now(), |_| {})
            .unwrap();
    }
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let shards: i64 = admin
        .query_one(
            "SELECT count(DISTINCT shard) FROM nightshift.counts WHERE bucket = 'pending' AND n = 3",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(shards, 32);
}

/// A store of version 30 (an item found by the unique key index of
/// `items`) migrates to 31, where `item_keys` finds it: every item added
/// before is found by its key in each batch, is present to an add of the
/// same keys, and is claimed by key; an item pruned takes its key along.
#[test]
fn a_version_30_store_finds_its_items_by_key_after_the_migration() {
    let Some((url, mut s)) = fresh() else { return };
    let t = now();
    s.add_items("a", &items(20), t, |_| {}).unwrap();
    s.add_items("b", &items(5), t, |_| {}).unwrap();
    drop(s);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP TABLE nightshift.item_keys; ALTER TABLE nightshift.items ADD UNIQUE (batch_id, key);
             UPDATE nightshift.nightshift_meta SET value = '30' WHERE key = 'schema_version'",
        )
        .unwrap();
    let mut s = Store::Pg(PgStore::open(&url, Access::ReadWrite).unwrap());
    let keys: i64 = admin
        .query_one("SELECT count(*) FROM nightshift.item_keys", &[])
        .unwrap()
        .get(0);
    assert_eq!(keys, 25);
    assert_eq!(s.item("a", "k00019").unwrap().label, "l19");
    assert_eq!(s.item("b", "k00004").unwrap().label, "l4");
    assert!(matches!(
        s.item("b", "k00005"),
        Err(StoreError::UnknownKey { .. })
    ));
    let again = s.add_items("a", &items(21), t, |_| {}).unwrap();
    assert_eq!((again.added, again.present), (1, 20));
    let run = locked_run(&mut s, t);
    let c = s.claim_key("b", "k00003", run, t + 10 * MIN, t).unwrap();
    assert_eq!(c.key, "k00003");
    // A key given twice in one add is one item, the first line's.
    let mut twice = items(2);
    twice[1].key = "k00000".into();
    twice[1].label = "second".into();
    let r = s.add_items("c", &twice, t, |_| {}).unwrap();
    assert_eq!((r.added, r.present), (1, 1));
    assert_eq!(s.item("c", "k00000").unwrap().label, "l0");
    let r = s.add_items("c", &twice, t, |_| {}).unwrap();
    assert_eq!((r.added, r.present), (0, 2));
    admin
        .batch_execute("SET search_path = nightshift; DELETE FROM items WHERE key = 'k00000'")
        .unwrap();
    let left: i64 = admin
        .query_one(
            "SELECT count(*) FROM nightshift.item_keys WHERE key = 'k00000'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "a deleted item's key goes with it");
}
