//! SQLite's hot statements count themselves (schema version 18): a claim
//! and a done mark update `counts` and `minute_stats` once per statement,
//! and the per-row triggers pass over the rows they changed. Checked
//! against a recount after every step:
//! - claims and done marks (groups and single items, two runners, two
//!   batches) mixed with every other writer (cancel, fail, release, skip,
//!   redrive, requeue, reclaim) keep the counters exact;
//! - a store left by a build before version 18 (`v17_store.sql`, made by
//!   it) is migrated with its counts as they were, and runs.
//!
//! The recount of `minute_stats` needs a ledger of every worker
//! completion: a trigger of the test's own (`AUDIT`), which fires on every
//! row whatever the statement, beside the store's.

use crate::support as common;
use crate::support::require::Tool;

use std::collections::BTreeMap;
use std::path::Path;

use nightshift::model::{EventKind, Holder, NewEvent, NewItem, Outcome, Tier, Trigger};
use nightshift::store::{
    Access, CancelOutcome, CancelTo, CancelledWhile, Completion, Failure, Selection, Store,
};

const T0: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

/// Every claimed item that became done or failed, as the old
/// `items_minute_stats` trigger counted it.
const AUDIT: &str = "
CREATE TABLE test_audit (batch_id INTEGER, status TEXT, at INTEGER);
CREATE TRIGGER test_audit AFTER UPDATE OF status ON items
WHEN OLD.status = 'claimed' AND NEW.status IN ('done', 'failed') BEGIN
    INSERT INTO test_audit VALUES (NEW.batch_id, NEW.status, NEW.updated_at);
END;";

/// (batch id, minute) -> (done, failed).
type Minutes = BTreeMap<(i64, i64), (i64, i64)>;

fn minutes(conn: &rusqlite::Connection, sql: &str) -> Minutes {
    conn.prepare(sql)
        .unwrap()
        .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?))))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn stored_minutes(conn: &rusqlite::Connection) -> Minutes {
    minutes(
        conn,
        "SELECT batch_id, minute, done, failed FROM minute_stats WHERE done <> 0 OR failed <> 0",
    )
}

/// Every counter of the store at `db` equals its recount: the buckets and
/// failed classes from the items, the minutes from `before` plus the
/// audit's completions. Returns the stored minutes.
#[track_caller]
fn assert_exact(db: &Path, before: &Minutes) -> Minutes {
    let conn = rusqlite::Connection::open(db).unwrap();
    let rows = |sql: &str| -> Vec<(i64, String, String, i64)> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        rows("SELECT batch_id, bucket, '', n FROM counts WHERE n <> 0 ORDER BY 1, 2"),
        rows(
            "SELECT batch_id, CASE status WHEN 'failed' THEN tier WHEN 'done' THEN outcome
                    ELSE status END, '', count(*) FROM items GROUP BY 1, 2 ORDER BY 1, 2"
        ),
        "counts disagree with the items"
    );
    assert_eq!(
        rows(
            "SELECT batch_id, error_class, tier, n FROM failed_classes WHERE n <> 0 ORDER BY 1, 2, 3"
        ),
        rows(
            "SELECT batch_id, error_class, tier, count(*) FROM items WHERE status = 'failed'
              GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ),
        "failed classes disagree with the items"
    );
    let mut want = before.clone();
    let audited = minutes(
        &conn,
        "SELECT batch_id, at / 60000, sum(status = 'done'), sum(status = 'failed')
           FROM test_audit GROUP BY 1, 2",
    );
    for (k, (d, f)) in audited {
        let e = want.entry(k).or_default();
        *e = (e.0 + d, e.1 + f);
    }
    let stored = stored_minutes(&conn);
    assert_eq!(stored, want, "minute stats disagree with the completions");
    stored
}

fn items(prefix: &str, n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem {
            key: format!("{prefix}{i:03}"),
            label: format!("label {i}"),
            payload: format!(r#"{{"n":{i}}}"#),
            ..Default::default()
        })
        .collect()
}

fn holder(pid: u32) -> Holder {
    Holder {
        host: format!("host-{pid}"),
        pid,
        pid_start: Some(7),
    }
}

fn done(c: &nightshift::model::Claim, run: i64, outcome: Outcome, now: i64) -> Completion<'static> {
    Completion {
        usage: None,
        item_id: c.item_id,
        token: c.token,
        run_id: run,
        outcome,
        result: None,
        cost: None,
        version: None,
        now,
    }
}

fn failure(c: &nightshift::model::Claim, run: i64, tier: Tier, now: i64) -> Failure<'static> {
    let next_attempt_at = (tier == Tier::Retry).then_some(now + MIN);
    Failure {
        item_id: c.item_id,
        token: c.token,
        run_id: run,
        tier,
        error_class: "E",
        message: "m",
        next_attempt_at,
        cost: None,
        now,
    }
}

fn event(batch: &str, key: &str, at: i64) -> NewEvent {
    NewEvent::new(at, batch, EventKind::Done, "done").key(key)
}

/// A runner of `batch` holding seat `token` of two, until `until`.
fn runner(s: &mut Store, batch: &str, token: &str, pid: u32, now: i64, until: i64) -> i64 {
    let run = s
        .start_run(batch, Trigger::Manual, None, &holder(pid), now, None)
        .unwrap();
    s.acquire_lock(batch, token, &holder(pid), Some(run), until, now, &[], 2)
        .unwrap();
    run
}

#[test]
fn claims_and_done_marks_beside_every_other_writer_keep_the_counters_exact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    drop(Store::create(&db).unwrap());
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(AUDIT)
        .unwrap();
    let none = Minutes::new();
    let exact = || assert_exact(&db, &none);
    let mut s = Store::open(&db, Access::ReadWrite).unwrap();
    s.add_items("b", &items("k", 30), T0, |_| {}).unwrap();
    s.add_items("c", &items("c", 4), T0, |_| {}).unwrap();
    exact();

    // Two runners of `b`: a claim of a group, and of one item.
    let until = T0 + 30 * MIN;
    let (r1, r2) = (
        runner(&mut s, "b", "t1", 1, T0, until),
        runner(&mut s, "b", "t2", 2, T0, until),
    );
    let c = s.claim("b", r1, 8, until, T0).unwrap().unwrap();
    let one = s.claim("b", r2, 1, until, T0).unwrap().unwrap();
    assert_eq!((c.len(), one.len()), (8, 1));
    exact();

    // A group done mark: one cancelled on the way (refused), done and
    // empty across two minutes, one item listed twice (counted once),
    // a stale token (refused).
    let asked = s
        .cancel_item("b", &c[0].key, CancelTo::Manual, "ops", "stuck", T0 + 1)
        .unwrap();
    assert!(matches!(asked, CancelOutcome::Asked { .. }), "{asked:?}");
    let stale = Completion {
        token: c[4].token - 1,
        ..done(&c[4], r1, Outcome::Done, T0 + 2)
    };
    let group = [
        done(&c[0], r1, Outcome::Done, T0 + 2),
        done(&c[1], r1, Outcome::Done, T0 + 2),
        done(&c[2], r1, Outcome::Empty, T0 + MIN + 2),
        done(&c[3], r1, Outcome::Done, T0 + MIN + 3),
        done(&c[3], r1, Outcome::Empty, T0 + MIN + 3),
        stale,
    ];
    let events: Vec<_> = group.iter().map(|d| event("b", "k", d.now)).collect();
    let pairs: Vec<_> = group.iter().cloned().zip(events.iter()).collect();
    assert_eq!(
        s.complete_all(&pairs).unwrap(),
        [false, true, true, true, false, false]
    );
    exact();
    s.settle_cancel(
        "b",
        c[0].item_id,
        c[0].token,
        (r1, T0 + 3),
        CancelledWhile::Running,
    )
    .unwrap()
    .unwrap();
    exact();

    // Single done marks: the second runner's, twice (the second refused),
    // and the first's last claim of its group.
    let d = done(&one[0], r2, Outcome::Done, T0 + 2 * MIN);
    assert!(s.complete(&d, &event("b", &one[0].key, d.now)).unwrap());
    assert!(!s.complete(&d, &event("b", &one[0].key, d.now)).unwrap());
    let d = done(&c[7], r1, Outcome::Empty, T0 + 3 * MIN);
    assert!(s.complete(&d, &event("b", &c[7].key, d.now)).unwrap());
    exact();

    // Failures of both tiers, a release, a skip, a redrive, requeues.
    let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
    assert!(
        s.fail(&failure(&c[4], r1, Tier::Retry, T0 + 2 * MIN), &ev)
            .unwrap()
    );
    assert!(
        s.fail(&failure(&c[5], r1, Tier::Manual, T0 + 2 * MIN), &ev)
            .unwrap()
    );
    exact();
    let released = NewEvent::new(T0, "b", EventKind::Released, "released");
    assert!(
        s.release(c[6].item_id, c[6].token, r1, true, &released)
            .unwrap()
    );
    s.skip("b", &["k029".into()], "not needed", "me", T0 + 2 * MIN)
        .unwrap();
    exact();
    assert_eq!(
        s.redrive_due("b", Some(r1), T0 + 4 * MIN).unwrap(),
        [c[4].key.clone()]
    );
    exact();
    let all_failed = Selection {
        all_failed: true,
        ..Selection::default()
    };
    assert_eq!(
        s.requeue("b", &all_failed, false, false, "me", T0 + 4 * MIN)
            .unwrap()
            .len(),
        2
    );
    // c[2] and c[7], and c[3] if the outcome of its second listing stuck
    // (which one does is SQLite's choice: the counters follow the row).
    let empties = s.counts("b").unwrap().empty as usize;
    assert!(empties == 2 || empties == 3, "{empties}");
    let empty = Selection {
        outcome: Some(Outcome::Empty),
        ..Selection::default()
    };
    assert_eq!(
        s.requeue("b", &empty, false, false, "me", T0 + 4 * MIN)
            .unwrap()
            .len(),
        empties
    );
    exact();

    // Batch `c`: a runner claims all, marks two done and dies; the next
    // takes its seat over and quarantines the rest (their last attempt).
    let r3 = runner(&mut s, "c", "t3", 3, T0, T0 + MIN);
    let cc = s.claim("c", r3, 4, T0 + MIN, T0).unwrap().unwrap();
    let group = [
        done(&cc[0], r3, Outcome::Done, T0 + 1),
        done(&cc[1], r3, Outcome::Empty, T0 + 1),
    ];
    let events: Vec<_> = group.iter().map(|d| event("c", "c", d.now)).collect();
    let pairs: Vec<_> = group.iter().cloned().zip(events.iter()).collect();
    assert_eq!(s.complete_all(&pairs).unwrap(), [true, true]);
    let r4 = runner(&mut s, "c", "t4", 4, T0 + 5 * MIN, T0 + 30 * MIN);
    assert_eq!(s.reclaim("c", r4, 1, T0 + 5 * MIN).unwrap(), (0, 2));
    exact();

    // The rest of `b` in groups of 5 by both runners, all done.
    let mut n = 0;
    for round in 0.. {
        let run = if round % 2 == 0 { r1 } else { r2 };
        let now = T0 + (6 + round) * MIN;
        let c = s.claim("b", run, 5, until, now).unwrap().unwrap();
        if c.is_empty() {
            break;
        }
        let group: Vec<_> = c
            .iter()
            .map(|c| done(c, run, Outcome::Done, now + 1))
            .collect();
        let events: Vec<_> = c.iter().map(|c| event("b", &c.key, now + 1)).collect();
        let pairs: Vec<_> = group.iter().cloned().zip(events.iter()).collect();
        assert!(s.complete_all(&pairs).unwrap().iter().all(|ok| *ok));
        n += c.len();
        exact();
    }
    let counts = s.counts("b").unwrap();
    assert_eq!(
        (counts.pending, counts.claimed, counts.finished()),
        (0, 0, 30),
        "{counts:?}"
    );
    assert!(n >= 20, "{n}");
    let stored = exact();
    assert!(stored.len() >= 8, "completions in many minutes: {stored:?}");
    assert_eq!(s.integrity_check().unwrap(), "ok");
}

/// A store of schema version 17, as a build before version 18 left it
/// (`v17_store.sql`): a write migrates it with its counts and minutes as
/// they were, and runs in persistent mode (group claims and done marks)
/// and resumes the claims its crashed runner left, counted exactly.
#[test]
fn a_store_of_version_17_migrates_with_exact_counts_and_runs() {
    require!(Tool::Python3);
    let env = common::Env::bare();
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch(include_str!("v17_store.sql")).unwrap();
    conn.execute_batch(AUDIT).unwrap();
    let before = stored_minutes(&conn);
    let version = |c: &rusqlite::Connection| -> i64 {
        c.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&conn), 17);
    drop(conn);
    assert_exact(&env.db, &before);

    env.run(&["status"]).code(3);
    env.cmd().arg("init").assert().success();
    assert_eq!(
        version(&env.sql()),
        i64::from(nightshift::store::SCHEMA_VERSION)
    );
    assert_exact(&env.db, &before);

    env.write(
        "worker.py",
        "import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    \
         sys.stdout.write(json.dumps({'key': r['key'], 'result': {'ok': 1}}) + '\\n')\n    \
         sys.stdout.flush()\n",
    );
    let batch = |name: &str| {
        format!(
            "[batch.{name}]\nworker = [\"python3\", \"worker.py\"]\nmode = \"persistent\"\n\
             concurrency = 2\n"
        )
    };
    env.config(&format!("{}{}", batch("b"), batch("slow")));
    env.add_items("b", 60);
    assert_exact(&env.db, &before);
    // `slow`: its crashed run's two claims are taken back, then all four run.
    env.run(&["run", "slow"]).code(0);
    assert_exact(&env.db, &before);
    env.run(&["run", "b"]);
    let counts: Vec<(String, i64)> = env
        .sql()
        .prepare("SELECT bucket, n FROM counts WHERE batch_id = 1 AND n <> 0 ORDER BY 1")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // k1..k18 as the old build left them (k3, in the retry tier, is due by
    // now and runs; so do the five pending), k19..k60 new: everything not
    // quarantined is finished.
    assert_eq!(
        counts,
        [
            ("done".into(), 7 + 5 + 1 + 42),
            ("empty".into(), 2),
            ("manual".into(), 2),
            ("skipped".into(), 1)
        ]
    );
    let after = assert_exact(&env.db, &before);
    let done_now: i64 = after.values().map(|m| m.0).sum();
    assert_eq!(
        done_now - before.values().map(|m| m.0).sum::<i64>(),
        4 + 1 + 5 + 42
    );
    env.assert_counts_consistent();
}
