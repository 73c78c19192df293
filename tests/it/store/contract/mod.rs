//! The store's semantics, one suite run against both backends: every test
//! below is compiled twice, once on a temp-dir SQLite store and once on a
//! fresh database of a private PostgreSQL server (see `support/pg.rs`).
//! Both go through `Store`, which every caller uses: a path opens SQLite,
//! a `postgres://` URL PostgreSQL.

use crate::support::pg;

use nightshift::model::{
    EventKind, Fire, Hold, Holder, NewEvent, NewItem, Outcome, Pause, RunState, SkipReport, Tier,
    Tombstone, Trigger, WorkerGroup,
};
use nightshift::store::{
    Access, AddFeed, AttemptLog, CancelledWhile, Claimable, Completion, DashQuery, EventFilter,
    FeedRefused, ItemFilter, ItemsQuery, LockOutcome, RunEnd, Selection, Store, StoreError,
};
use nightshift::util::signals::Stop;

const T0: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

fn items(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem {
            key: format!("k{i:03}"),
            label: format!("label {i}"),
            payload: format!(r#"{{"n":{i}}}"#),
            ..Default::default()
        })
        .collect()
}

/// An add's items as `add` hands a large input to the store while it
/// parses it (`Store::add_fed`): `parts` in turn, then, when `refused`, the
/// input found bad (a bad line or a key given twice further on).
struct Fed<'a> {
    parts: Vec<&'a [NewItem]>,
    given: usize,
    refused: bool,
}

impl<'a> Fed<'a> {
    fn new(parts: Vec<&'a [NewItem]>, refused: bool) -> Fed<'a> {
        Fed {
            parts,
            given: 0,
            refused,
        }
    }
}

impl<'a> AddFeed<'a> for Fed<'a> {
    fn next_part(&mut self) -> Option<Result<&'a [NewItem], FeedRefused>> {
        if let Some(&part) = self.parts.get(self.given) {
            self.given += 1;
            return Some(Ok(part));
        }
        std::mem::take(&mut self.refused).then_some(Err(FeedRefused))
    }

    fn by_key(&mut self) -> Vec<(&'a str, usize)> {
        by_key(&self.parts)
    }
}

/// Every item of `parts` by key, then place among them all: the order a
/// feed hands the store its keys in (`AddFeed::by_key`).
pub(super) fn by_key<'a>(parts: &[&'a [NewItem]]) -> Vec<(&'a str, usize)> {
    let keys = parts.iter().flat_map(|p| p.iter().map(|i| i.key.as_str()));
    let mut by_key: Vec<_> = keys.enumerate().map(|(place, key)| (key, place)).collect();
    by_key.sort_unstable();
    by_key
}

fn holder(pid: u32) -> Holder {
    Holder {
        host: format!("host-{pid}"),
        pid,
        pid_start: Some(7),
    }
}

/// A daemon of `batches` on a host of its own (`n`), heard from at
/// `beat_at`: judged by its heartbeat, as one elsewhere is.
fn daemon(token: &str, n: u32, batches: &[&str], beat_at: i64) -> nightshift::model::Daemon {
    nightshift::model::Daemon {
        token: token.into(),
        holder: Holder {
            host: format!("daemon-host-{n}"),
            pid: 100 + n,
            pid_start: Some(7),
        },
        started_at: beat_at,
        beat_at,
        stopped_at: None,
        batches: batches.iter().map(ToString::to_string).collect(),
        stopping_at: None,
    }
}

fn done_event(key: &str) -> NewEvent {
    NewEvent::new(T0, "b", EventKind::Done, "done").key(key)
}

/// Batch `b` with three items, after one run of two claims: `k000` done,
/// `k001` failed to the manual tier, `k002` still pending. The run's id.
fn one_done_one_failed(s: &mut Store) -> i64 {
    s.add_items("b", &items(3), T0, |_| {}).unwrap();
    let run = s
        .start_run("b", Trigger::Manual, None, &holder(1), T0, None)
        .unwrap();
    s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1)
        .unwrap();
    let c = s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap();
    let done = Completion {
        usage: None,
        item_id: c[0].item_id,
        token: c[0].token,
        run_id: run,
        outcome: Outcome::Done,
        result: None,
        cost: None,
        version: None,
        now: T0,
    };
    s.complete(&done, &done_event("k000")).unwrap();
    let f = nightshift::store::Failure {
        item_id: c[1].item_id,
        token: c[1].token,
        run_id: run,
        tier: Tier::Manual,
        error_class: "E",
        message: "m",
        next_attempt_at: None,
        cost: None,
        now: T0,
    };
    s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed"))
        .unwrap();
    run
}

mod sqlite_backend {
    use nightshift::store::{Access, Store};

    pub struct Db {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
    }

    impl Db {
        pub fn open(&self, access: Access) -> Store {
            Store::open(&self.path, access).unwrap()
        }

        /// The planner's statistics brought up to date.
        pub fn analyze(&self) {
            rusqlite::Connection::open(&self.path)
                .unwrap()
                .execute_batch("ANALYZE")
                .unwrap();
        }
    }

    pub fn fresh() -> Option<(Db, Store)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let (store, created) = Store::create(&path).unwrap();
        assert!(created);
        Some((Db { _dir: dir, path }, store))
    }
}

/// Through the [`Store`] every caller uses, given the database's URL.
mod pg_backend {
    use nightshift::store::{Access, Store};
    use std::path::Path;

    pub struct Db {
        pub url: String,
    }

    impl Db {
        pub fn open(&self, access: Access) -> Store {
            let store = Store::open(Path::new(&self.url), access).unwrap();
            assert!(matches!(store, Store::Pg(_)));
            store
        }

        /// The planner's statistics brought up to date.
        pub fn analyze(&self) {
            let mut c = postgres::Client::connect(&self.url, postgres::NoTls).unwrap();
            c.batch_execute("ANALYZE nightshift.items").unwrap();
        }
    }

    pub fn fresh() -> Option<(Db, Store)> {
        let url = super::pg::server()?.database();
        let (store, created) = Store::create(Path::new(&url)).unwrap();
        assert!(matches!(store, Store::Pg(_)));
        assert!(created);
        Some((Db { url }, store))
    }
}

/// Each test, once per backend: `fn name(db, store) { body }`.
macro_rules! both_stores {
    ($( $(#[$meta:meta])* fn $name:ident($db:ident, $s:ident) $body:block )*) => {
        mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$meta])*
                #[test]
                #[allow(unused_variables, unused_mut)]
                fn $name() {
                    let Some(($db, mut $s)) = super::sqlite_backend::fresh() else { return };
                    $body
                }
            )*
        }
        mod postgres {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$meta])*
                #[test]
                #[allow(unused_variables, unused_mut)]
                fn $name() {
                    let Some(($db, mut $s)) = super::pg_backend::fresh() else { return };
                    $body
                }
            )*
        }
    };
}

both_stores! {
    /// A whole group keeps every write or none: a failure after an add
    /// leaves the batch without its items (a plain group keeps the add),
    /// and the store takes the next write as usual.
    fn a_whole_group_keeps_nothing_when_a_write_fails(db, s) {
        let out = s.group_whole(|s| {
            s.add_items("b", &items(3), T0, |_| {})?;
            s.claim("nope", 1, 1, T0 + MIN, T0)?;
            Ok(())
        });
        assert!(matches!(out, Err(StoreError::UnknownBatch { .. })), "{out:?}");
        assert!(matches!(s.counts("b"), Err(StoreError::UnknownBatch { .. })), "nothing kept");
        let kept = s.group(|s| {
            s.add_items("b", &items(3), T0, |_| {})?;
            s.claim("nope", 1, 1, T0 + MIN, T0)
        });
        assert!(matches!(kept, Ok(Err(StoreError::UnknownBatch { .. }))), "{kept:?}");
        assert_eq!(s.counts("b").unwrap().pending, 3, "a plain group keeps what came before");
        s.group_whole(|s| s.add_items("b", &items(4), T0, |_| {})).unwrap();
        assert_eq!(s.counts("b").unwrap().pending, 4);
    }

    /// The budgets' ledger: one exact sum (millionths) per scope, name,
    /// period and window, added to by each attempt, zero for a window never
    /// drawn; the dashboard's poll reads those it asks for in its snapshot,
    /// whichever batch is selected.
    fn spend_is_summed_per_budget_and_window(db, s) {
        use nightshift::store::{SpendAdd, SpendKey, SpendScope, Spent};
        let key = |scope, name: &str, period_ms, window_start| SpendKey { scope, name: name.into(), period_ms, window_start };
        let day = key(SpendScope::Batch, "記事", 86_400_000, 0);
        let pool = key(SpendScope::Pool, "記事", 86_400_000, 0);
        let hour = key(SpendScope::Batch, "記事", 3_600_000, 0);
        let next = key(SpendScope::Batch, "記事", 86_400_000, 86_400_000);
        let add = |k: &SpendKey, micros| SpendAdd { key: k.clone(), micros };
        s.add_spend(&[add(&day, 250_000), add(&pool, 250_000)]).unwrap();
        s.add_spend(&[add(&day, 100_001), add(&hour, 7)]).unwrap();
        let spent = s.spent(&[day.clone(), pool.clone(), hour.clone(), next.clone()]).unwrap();
        assert_eq!(spent, [
            Spent { micros: 350_001, attempts: 2 },
            Spent { micros: 250_000, attempts: 1 },
            Spent { micros: 7, attempts: 1 },
            Spent::default(),
        ]);
        s.add_items("b", &items(1), T0, |_| {}).unwrap();
        let q = DashQuery { batch: Some("b".into()), spend: vec![day.clone(), next.clone()], ..DashQuery::default() };
        let d = s.dashboard(&q, T0).unwrap();
        assert_eq!(d.spent, [(day, Spent { micros: 350_001, attempts: 2 }), (next, Spent::default())]);
        // A pool's spend does not depend on the batch selected: one only
        // configured (no rows yet), or none, reads it too.
        for batch in [Some("configured only"), None] {
            let q = DashQuery { batch: batch.map(Into::into), spend: vec![pool.clone()], ..DashQuery::default() };
            let d = s.dashboard(&q, T0).unwrap();
            assert_eq!(d.spent, [(pool.clone(), Spent { micros: 250_000, attempts: 1 })], "{batch:?}");
        }
    }

    /// Each attempt's stderr is kept as written (NUL aside on PostgreSQL),
    /// newest first, the newest 20 of an item; the item detail reads the
    /// newest 5.
    fn attempt_logs_keep_the_newest_per_item(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let id = s.item("b", "k000").unwrap().id;
        let other = s.item("b", "k001").unwrap().id;
        for n in 1..=25u32 {
            let log = AttemptLog { attempt: n, run_id: Some(7), at: T0 + i64::from(n), stderr: format!("試行 {n}\n\u{1b}[0m"), cut: n == 3 };
            s.record_attempt_log(id, &log).unwrap();
        }
        let log = AttemptLog { attempt: 1, run_id: None, at: T0, stderr: "other".into(), cut: false };
        s.record_attempt_log(other, &log).unwrap();
        let logs = s.attempt_logs(id).unwrap();
        let numbers: Vec<u32> = logs.iter().map(|l| l.attempt).collect();
        assert_eq!(numbers, (6..=25).rev().collect::<Vec<_>>());
        assert_eq!(logs[0], AttemptLog { attempt: 25, run_id: Some(7), at: T0 + 25, stderr: "試行 25\n\u{1b}[0m".into(), cut: false });
        assert_eq!(s.attempt_logs(other).unwrap().len(), 1);
        let q = DashQuery { batch: Some("b".into()), detail: Some("k000".into()), ..DashQuery::default() };
        let d = s.dashboard(&q, T0).unwrap().detail.unwrap().unwrap();
        let shown: Vec<u32> = d.attempt_logs.iter().map(|l| l.attempt).collect();
        assert_eq!(shown, [25, 24, 23, 22, 21]);
    }

    fn adding_is_idempotent_and_counted(db, s) {
        let r = s.add_items("b", &items(3), T0, |_| {}).unwrap();
        assert_eq!((r.added, r.present), (3, 0));
        let r = s.add_items("b", &items(5), T0 + 1, |_| {}).unwrap();
        assert_eq!((r.added, r.present), (2, 3));
        let c = s.counts("b").unwrap();
        assert_eq!((c.pending, c.total()), (5, 5));
        // Present items are left exactly as they were.
        assert_eq!(s.item("b", "k000").unwrap().created_at, T0);
        assert_eq!(s.item("b", "k004").unwrap().created_at, T0 + 1);
        assert_eq!(s.batch_names().unwrap(), vec!["b".to_string()]);
        assert!(matches!(s.counts("nope"), Err(StoreError::UnknownBatch { .. })));
        let added = s.events(&EventFilter { kinds: vec!["added".into()], ..Default::default() }).unwrap();
        assert_eq!(added.len(), 2);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    /// An add run again with a few new keys among many present ones (the
    /// present ones looked up in key order): the present are left as they
    /// were, the new ones added in the input's order, which is their claim
    /// order.
    fn adding_again_adds_only_the_new_keys_in_input_order(db, s) {
        s.add_items("b", &items(300), T0, |_| {}).unwrap();
        let new = |key: &str| NewItem { key: key.into(), label: key.into(), payload: "{}".into(), ..Default::default() };
        let mut again: Vec<NewItem> = items(300).into_iter().rev().collect();
        again.insert(0, new("zz-first"));
        again.insert(150, new("aa-second"));
        again.push(new("mm-third"));
        let r = s.add_items("b", &again, T0 + 1, |_| {}).unwrap();
        assert_eq!((r.added, r.present), (3, 300));
        let id = |key: &str| s.item("b", key).unwrap().id;
        assert!(id("zz-first") < id("aa-second") && id("aa-second") < id("mm-third"));
        assert!(id("k299") < id("zz-first"), "present items keep their place");
        assert_eq!(s.item("b", "k000").unwrap().created_at, T0);
        let c = s.counts("b").unwrap();
        assert_eq!((c.pending, c.total()), (303, 303));
        let r = s.add_items("b", &again, T0 + 2, |_| {}).unwrap();
        assert_eq!((r.added, r.present), (0, 303));
    }

    fn claims_need_the_lock_and_go_in_order(db, s) {
        s.add_items("b", &items(5), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        assert_eq!(s.claim("b", run, 2, T0 + MIN, T0).unwrap(), None, "no lock, no claim");
        let got = s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        assert_eq!(got, LockOutcome::Acquired { took_over: None });
        let first = s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap();
        let keys: Vec<&str> = first.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["k000", "k001"]);
        assert!(first.iter().all(|c| c.attempt == 1 && c.payload.starts_with("{\"n\"")));
        let more = s.claim("b", run, 10, T0 + MIN, T0).unwrap().unwrap();
        assert_eq!(more.len(), 3);
        assert!(s.claim("b", run, 10, T0 + MIN, T0).unwrap().unwrap().is_empty());
        let c = s.counts("b").unwrap();
        assert_eq!((c.pending, c.claimed), (0, 5));
        let item = s.item("b", "k000").unwrap();
        assert_eq!((item.lease_run, item.lease_until, item.attempts), (Some(run), Some(T0 + MIN), 1));
        // A newer holder cuts the old run off.
        s.acquire_lock("b", "tok2", &holder(2), None, T0 + 2 * MIN, T0 + 2 * MIN, &[], 1).unwrap();
        assert_eq!(s.claim("b", run, 1, T0 + MIN, T0).unwrap(), None);
    }

    /// A run's end frees its seat in the same write: freed after, a runner
    /// killed between the two left the seat of a finished run behind, and
    /// `status` called the batch's runner crashed. Another's seat stays.
    fn a_finished_run_holds_no_seat(db, s) {
        s.acquire_lock("b", "tok1", &holder(1), None, T0 + MIN, T0, &[], 3).unwrap();
        let mine = s.start_run("b", Trigger::Manual, None, &holder(1), T0, Some("tok1")).unwrap();
        s.acquire_lock("b", "tok2", &holder(2), None, T0 + MIN, T0, &[], 3).unwrap();
        let other = s.start_run("b", Trigger::Manual, None, &holder(2), T0, Some("tok2")).unwrap();
        s.finish_run(mine, &RunEnd::new(RunState::Failed, "b: 0 done, 1 failed"), T0 + 1).unwrap();
        let seats: Vec<_> = s.locks("b").unwrap().into_iter().map(|l| (l.token, l.run_id)).collect();
        assert_eq!(seats, [("tok2".to_string(), Some(other))]);
        assert!(!s.release_lock("b", "tok1").unwrap(), "nothing left to release");
    }

    /// A pool's hold names the item that asked for it by its label too, as
    /// a batch's own hold does (the dashboard showed a bare key hash); an
    /// item of another batch or no longer kept has none.
    fn a_pool_hold_reads_the_label_of_the_item_that_asked(db, s) {
        s.add_items("記事", &items(2), T0, |_| {}).unwrap();
        let hold = |batch: &str, key: &str| nightshift::store::PoolHold {
            until: T0 + MIN,
            batch: batch.into(),
            key: Some(key.into()),
            label: None,
        };
        s.set_pool_hold("本番", &hold("記事", "k001")).unwrap();
        let read = s.pool_hold("本番", T0).unwrap().unwrap();
        assert_eq!((read.key.as_deref(), read.label.as_deref()), (Some("k001"), Some("label 1")));
        assert_eq!(read.source().as_deref(), Some("k001 (label 1)"));
        s.set_pool_hold("other", &hold("b", "k001")).unwrap();
        assert_eq!(s.pool_hold("other", T0).unwrap().unwrap().label, None, "no such item in b");
    }

    fn a_take_over_finds_the_open_runs_that_hold_no_seat(db, s) {
        // Seated: the seat taken, then the run recorded with it, as `run` does.
        s.acquire_lock("b", "tok1", &holder(1), None, T0 + MIN, T0, &[], 3).unwrap();
        let seated = s.start_run("b", Trigger::Manual, None, &holder(1), T0, Some("tok1")).unwrap();
        // Gone without its seat.
        let gone = s.start_run("b", Trigger::Manual, None, &holder(2), T0, None).unwrap();
        s.acquire_lock("b", "tok3", &holder(3), None, T0 + MIN, T0, &[], 3).unwrap();
        let me = s.start_run("b", Trigger::Manual, None, &holder(3), T0, Some("tok3")).unwrap();
        let ids = |s: &Store| s.unseated_runs("b", me).unwrap().iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&s), [gone], "seated {seated}, me {me}");
        s.release_lock("b", "tok1").unwrap();
        assert_eq!(ids(&s), [seated, gone], "its seat released");
    }

    fn completion_is_fenced_by_the_lease_token(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap();
        let stale = Completion { usage: None, item_id: c[0].item_id, token: c[0].token - 1000, run_id: run,
            outcome: Outcome::Done, result: Some("{}"), cost: None, version: None, now: T0 };
        assert!(!s.complete(&stale, &done_event("k000")).unwrap());
        let ok = Completion { usage: None, token: c[0].token, result: Some(r#"{"url":"x"}"#), cost: Some(0.5), ..stale };
        assert!(s.complete(&ok, &done_event("k000")).unwrap());
        assert!(!s.complete(&ok, &done_event("k000")).unwrap(), "a second completion is refused");
        let empty = Completion { usage: None, item_id: c[1].item_id, token: c[1].token, run_id: run,
            outcome: Outcome::Empty, result: None, cost: None, version: None, now: T0 + 1 };
        assert!(s.complete(&empty, &done_event("k001")).unwrap());
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.finished(), counts.done, counts.empty, counts.claimed), (2, 1, 1, 0));
        let item = s.item("b", "k000").unwrap();
        assert_eq!(item.result.map(|r| r.value()), Some(serde_json::json!({"url": "x"})));
        assert_eq!((item.outcome, item.lease_run, item.cost), (Some(Outcome::Done), None, Some(0.5)));
        let r = s.run(run).unwrap().unwrap();
        assert_eq!((r.counts.done, r.counts.empty, r.counts.cost), (1, 1, 0.5));
        let minutes = s.minute_stats("b", T0, 2).unwrap();
        assert_eq!(minutes.last(), Some(&(2, 0)));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn failures_leave_dead_letters_and_retries_come_back_when_due(db, s) {
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        let fail = |i: usize, tier: Tier, class: &'static str, next: Option<i64>| nightshift::store::Failure {
            item_id: c[i].item_id, token: c[i].token, run_id: run, tier, error_class: class,
            message: "boom\0with a NUL", next_attempt_at: next, cost: Some(1.0), now: T0,
        };
        let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
        assert!(s.fail(&fail(0, Tier::Retry, "Timeout", Some(T0 + 10 * MIN)), &ev).unwrap());
        assert!(s.fail(&fail(1, Tier::Manual, "BadInput", None), &ev).unwrap());
        assert!(s.fail(&fail(2, Tier::Retry, "Timeout", Some(T0 + 20 * MIN)), &ev).unwrap());
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.failed(), counts.retry, counts.manual), (3, 2, 1));
        let dl = s.dead_letters("b", None, None).unwrap();
        assert_eq!(dl.len(), 3);
        assert_eq!((dl[0].attempt, dl[0].run_id, dl[0].failed_at), (1, Some(run), T0));
        assert!(dl[0].message.starts_with("boom"));
        assert_eq!(s.dead_letters("b", None, Some("BadInput")).unwrap().len(), 1);
        assert_eq!(s.item_failures(c[0].item_id).unwrap().len(), 1);
        let groups = s.dlq_groups("b", T0).unwrap();
        assert_eq!(groups[0].error_class, "Timeout");
        assert_eq!((groups[0].last_24h, groups[0].retry_now), (2, 2));
        assert_eq!((groups[1].error_class.as_str(), groups[1].manual_now), ("BadInput", 1));
        let w = s.dlq_window_counts("b", T0 + 1, 60 * MIN).unwrap();
        assert_eq!(w.iter().map(|(_, a, _)| a).sum::<i64>(), 3);
        // Not due yet, then one, then the other.
        assert!(s.redrive_due("b", Some(run), T0 + MIN).unwrap().is_empty());
        let claimable = ItemFilter {
            claimable: Some(Claimable { at: T0 + 15 * MIN, reclaim: false }),
            ..ItemFilter::default()
        };
        let due: Vec<String> = s.items("b", &claimable).unwrap().into_iter().map(|i| i.key).collect();
        assert_eq!(due, ["k000"], "a run then would claim it");
        assert_eq!(s.redrive_due("b", Some(run), T0 + 15 * MIN).unwrap(), vec!["k000".to_string()]);
        assert_eq!(s.redrive_due("b", None, T0 + 30 * MIN).unwrap(), vec!["k002".to_string()]);
        assert_eq!(s.run(run).unwrap().unwrap().counts.redriven, 1);
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.pending, counts.retry, counts.manual), (2, 0, 1));
        let r = s.run(run).unwrap().unwrap();
        assert_eq!((r.counts.failed, r.counts.retry, r.counts.manual), (3, 2, 1));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn release_and_reclaim_give_items_back(db, s) {
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let dead = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "t1", &holder(1), Some(dead), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", dead, 3, T0 + MIN, T0).unwrap().unwrap();
        let ev = NewEvent::new(T0, "b", EventKind::Released, "released");
        assert!(s.release(c[0].item_id, c[0].token, dead, true, &ev).unwrap());
        assert_eq!(s.item("b", "k000").unwrap().attempts, 0, "a cut-short attempt is not counted");
        assert!(!s.release(c[0].item_id, c[0].token, dead, true, &ev).unwrap());
        // The second item has used its attempts: reclaiming quarantines it.
        assert_eq!(s.begin_attempt(c[1].item_id, c[1].token, T0).unwrap(), Some(2));
        assert_eq!(s.begin_attempt(c[1].item_id, c[1].token + 99, T0).unwrap(), None);
        // The first run dies; a new one takes the expired lock over.
        let run = s.start_run("b", Trigger::Manual, None, &holder(2), T0 + 2 * MIN, None).unwrap();
        let got = s.acquire_lock("b", "t2", &holder(2), Some(run), T0 + 3 * MIN, T0 + 2 * MIN, &[], 1).unwrap();
        assert!(matches!(got, LockOutcome::Acquired { took_over: Some(ref l) } if l.token == "t1"));
        assert_eq!(s.reclaim("b", run, 2, T0 + 2 * MIN).unwrap(), (1, 1));
        let q = s.item("b", "k001").unwrap();
        assert_eq!((q.tier, q.error_class.as_deref()), (Some(Tier::Manual), Some("Interrupted")));
        let why = format!("its runner (run {dead}) stopped while the item was in flight, its attempts used (attempt 2, max_attempts 2)");
        assert_eq!(q.error_message, Some(why));
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.pending, counts.claimed, counts.manual), (2, 0, 1));
        assert_eq!(s.run(dead).unwrap().unwrap().counts.released, 1);
        let kinds: Vec<String> = s.events(&EventFilter { batch: Some("b".into()), ..Default::default() })
            .unwrap().into_iter().map(|e| e.kind).collect();
        for kind in ["claimed", "released", "lock-takeover", "reclaimed", "quarantined"] {
            assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
        }
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn worker_groups_are_kept_per_slot_until_their_run_ends(db, s) {
        s.ensure_batch("b", T0).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        let other = s.start_run("b", Trigger::Manual, None, &holder(2), T0, None).unwrap();
        let group = |run_id, slot, pgid, started| WorkerGroup {
            run_id,
            slot,
            host: "h".into(),
            boot: "boot".into(),
            pgid,
            started,
        };
        s.record_worker(&group(run, 0, 100, 5)).unwrap();
        s.record_worker(&group(run, 1, 101, 6)).unwrap();
        // A slot's next worker replaces its record.
        s.record_worker(&group(run, 0, 102, u64::from(u32::MAX) + 7)).unwrap();
        s.record_worker(&group(other, 0, 200, 8)).unwrap();
        assert_eq!(
            s.worker_groups(&[run]).unwrap(),
            [group(run, 0, 102, u64::from(u32::MAX) + 7), group(run, 1, 101, 6)]
        );
        assert_eq!(s.worker_groups(&[run, other]).unwrap().len(), 3);
        // Only an ended run's records go.
        s.forget_workers(&[run, other]).unwrap();
        assert_eq!(s.worker_groups(&[run, other]).unwrap().len(), 3);
        s.finish_run(run, &RunEnd::new(RunState::Ok, "ok"), T0).unwrap();
        s.mark_crashed(&[other], T0).unwrap();
        s.forget_workers(&[run, other]).unwrap();
        assert!(s.worker_groups(&[run, other]).unwrap().is_empty());
    }

    fn the_lock_has_one_holder(db, s) {
        let got = s.acquire_lock("b", "a", &holder(1), None, T0 + MIN, T0, &[], 1).unwrap();
        assert_eq!(got, LockOutcome::Acquired { took_over: None });
        let held = s.acquire_lock("b", "b", &holder(2), None, T0 + MIN, T0 + 1000, &[], 1).unwrap();
        assert!(matches!(held, LockOutcome::Held(ref l) if l.len() == 1 && l[0].token == "a" && l[0].holder == holder(1)));
        assert!(s.renew_lock("b", "a", T0 + 2 * MIN).unwrap());
        assert!(!s.renew_lock("b", "b", T0 + 2 * MIN).unwrap());
        assert!(!s.release_lock("b", "b").unwrap(), "never someone else's");
        // A holder found dead can be stolen by its token.
        let stolen = s.acquire_lock("b", "c", &holder(3), None, T0 + 3 * MIN, T0 + 1000, &["a"], 1).unwrap();
        assert!(matches!(stolen, LockOutcome::Acquired { took_over: Some(_) }));
        assert!(!s.renew_lock("b", "a", T0 + 9 * MIN).unwrap(), "the old holder lost it");
        let run = s.start_run("b", Trigger::Manual, None, &holder(3), T0 + 1000, Some("c")).unwrap();
        let lock = s.locks("b").unwrap().remove(0);
        assert_eq!((lock.token.as_str(), lock.run_id, lock.acquired_at, lock.expires_at),
                   ("c", Some(run), T0 + 1000, T0 + 3 * MIN));
        assert!(s.release_lock("b", "c").unwrap());
        assert_eq!(s.locks("b").unwrap(), vec![]);
    }

    fn the_lock_has_seats_for_runners_sharing_a_batch(db, s) {
        s.add_items("b", &items(6), T0, |_| {}).unwrap();
        let mut runs = Vec::new();
        for (i, tok) in ["a", "b"].iter().enumerate() {
            let got = s.acquire_lock("b", tok, &holder(i as u32), None, T0 + MIN, T0, &[], 2).unwrap();
            assert_eq!(got, LockOutcome::Acquired { took_over: None });
            let run = s.start_run("b", Trigger::Manual, None, &holder(i as u32), T0, Some(tok)).unwrap();
            assert_eq!(s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap().len(), 2);
            runs.push(run);
        }
        // Both seats taken: a third steps down and is told who holds them.
        let held = s.acquire_lock("b", "c", &holder(3), None, T0 + MIN, T0 + 1000, &[], 2).unwrap();
        assert!(matches!(held, LockOutcome::Held(ref l) if l.len() == 2), "{held:?}");
        // A seat whose holder stops renewing expires; only the seats named
        // are freed, and reclaim takes back only the claims of runs
        // without a seat.
        assert!(s.renew_lock("b", "b", T0 + 5 * MIN).unwrap());
        let t = T0 + 2 * MIN;
        assert_eq!(s.free_stale_locks("b", t, &["b"], &[]).unwrap(), vec![]);
        let freed = s.free_stale_locks("b", t, &["a", "b"], &[]).unwrap();
        assert_eq!(freed.iter().map(|l| l.token.as_str()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(s.claim("b", runs[0], 1, t + MIN, t).unwrap(), None, "a is cut off");
        assert_eq!(s.reclaim("b", runs[1], 5, t).unwrap(), (2, 0));
        assert_eq!(s.counts("b").unwrap().claimed, 2, "b keeps its claims");
        // Now there is room for the third.
        let got = s.acquire_lock("b", "c", &holder(3), None, t + MIN, t, &[], 2).unwrap();
        assert_eq!(got, LockOutcome::Acquired { took_over: None });
        assert_eq!(s.locks("b").unwrap().len(), 2);
        // A dead holder's seat is freed at once when named as dead.
        let freed = s.free_stale_locks("b", t, &["c"], &["c"]).unwrap();
        assert_eq!(freed.len(), 1);
        assert_eq!(s.locks("b").unwrap().iter().map(|l| l.token.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    fn requeue_and_skip_move_only_what_they_should(db, s) {
        s.add_items("b", &items(4), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
        for (i, class) in [(0, "A"), (1, "B")] {
            let f = nightshift::store::Failure { item_id: c[i].item_id, token: c[i].token, run_id: run,
                tier: Tier::Manual, error_class: class, message: "m", next_attempt_at: None, cost: None, now: T0 };
            s.fail(&f, &ev).unwrap();
        }
        let not_failed = s.requeue("b", &Selection { keys: vec!["k000".into(), "k003".into()], ..Default::default() },
            false, false, "me", T0).unwrap_err();
        assert!(not_failed.to_string().contains("k003 (pending)"), "{not_failed}");
        assert_eq!(s.counts("b").unwrap().manual, 2, "nothing moved");
        assert!(s.requeue("b", &Selection::default(), false, false, "me", T0).is_err());
        let dry = s.requeue("b", &Selection { all_failed: true, ..Default::default() }, false, true, "me", T0).unwrap();
        assert_eq!(dry.len(), 2);
        assert_eq!(s.counts("b").unwrap().manual, 2, "a dry run moves nothing");
        let moved = s.requeue("b", &Selection { class: Some("A".into()), ..Default::default() }, true, false, "me", T0).unwrap();
        assert_eq!(moved.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["k000"]);
        let item = s.item("b", "k000").unwrap();
        assert_eq!((item.attempts, item.tier), (0, None));
        let requeued = s.events(&EventFilter { kinds: vec!["requeued".into()], ..Default::default() }).unwrap();
        assert_eq!(requeued[0].fields["tier"], "manual");
        assert_eq!(requeued[0].actor.as_deref(), Some("me"));
        // Skip: an in-flight item is refused, and nothing changes.
        let err = s.skip("b", &["k003".into(), "k002".into()], "no", "me", T0).unwrap_err();
        assert!(err.to_string().contains("in flight"), "{err}");
        // Each key once, whatever the repeats; in the order given.
        let keys = ["k003".into(), "k001".into(), "k003".into()];
        let done = |skipped: &[&str], already: &[&str]| SkipReport {
            skipped: skipped.iter().map(|k| k.to_string()).collect(),
            already_done: already.iter().map(|k| k.to_string()).collect(),
        };
        assert_eq!(s.skip("b", &keys, "not needed", "me", T0).unwrap(), done(&["k003", "k001"], &[]));
        assert_eq!(s.skip("b", &["k003".into()], "again", "me", T0).unwrap(), done(&[], &["k003"]));
        let skipped = s.events(&EventFilter { kinds: vec!["skipped".into()], ..Default::default() }).unwrap();
        assert_eq!(skipped.len(), 2, "one event per item skipped");
        assert!(matches!(s.skip("b", &["zzz".into()], "x", "me", T0), Err(StoreError::UnknownKey { .. })));
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.skipped, counts.manual, counts.pending, counts.claimed), (2, 0, 1, 1));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn claim_by_key_runs_failed_items_again(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim_key("b", "k001", run, T0 + MIN, T0).unwrap();
        assert_eq!((c.key.as_str(), c.attempt), ("k001", 1));
        assert!(s.claim_key("b", "k001", run, T0 + MIN, T0).unwrap_err().to_string().contains("in flight"));
        let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
        let f = nightshift::store::Failure { item_id: c.item_id, token: c.token, run_id: run,
            tier: Tier::Retry, error_class: "E", message: "m", next_attempt_at: Some(T0 + 99 * MIN), cost: None, now: T0 };
        s.fail(&f, &ev).unwrap();
        let again = s.claim_key("b", "k001", run, T0 + MIN, T0).unwrap();
        assert!(again.token > c.token);
        assert_eq!(again.attempt, 2);
        assert!(matches!(s.claim_key("b", "nope", run, T0, T0), Err(StoreError::UnknownKey { .. })));
        assert_eq!(s.oldest_pending("b").unwrap(), Some(T0));
        assert!(s.set_op_id(again.item_id, again.token, "op-1", &NewEvent::new(T0, "b", EventKind::OpId, "op")).unwrap());
        assert!(!s.set_op_id(again.item_id, c.token, "op-2", &NewEvent::new(T0, "b", EventKind::OpId, "op")).unwrap());
        assert_eq!(s.item("b", "k001").unwrap().op_id.as_deref(), Some("op-1"));
        assert_eq!(s.renew_leases("b", run, T0 + 5 * MIN).unwrap(), vec![again.item_id]);
        assert_eq!(s.item("b", "k001").unwrap().lease_until, Some(T0 + 5 * MIN));
    }

    fn pause_schedule_and_runs_are_kept(db, s) {
        let p = Pause { reason: "deploy".into(), by: "ops".into(), at: T0 };
        assert!(!s.pause_batch("b", &p).unwrap());
        assert!(s.pause_batch("b", &p).unwrap());
        assert_eq!(s.pause("b").unwrap(), Some(p));
        assert!(s.unpause_batch("b", "ops", T0 + 1).unwrap().was_paused);
        assert!(!s.unpause_batch("b", "ops", T0 + 1).unwrap().was_paused);
        assert_eq!(s.pause("b").unwrap(), None);
        let kinds = s.event_kinds_since(T0 - 1).unwrap();
        assert!(kinds.contains(&("b".to_string(), "paused".to_string(), 2)), "{kinds:?}");
        assert!(kinds.contains(&("b".to_string(), "unpaused".to_string(), 1)), "{kinds:?}");
    }

    /// A retry-after hold names the item that asked for it (with its
    /// label, while the item is kept), is never shortened, shows in the
    /// batch's info, and `unpause` lifts it, as an operator action.
    fn a_hold_is_kept_with_its_key_and_lifted_by_unpause(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        assert_eq!(s.hold("b").unwrap(), None);
        s.set_hold("b", T0 + 5000, Some("k001")).unwrap();
        s.set_hold("b", T0 + 1000, Some("k000")).unwrap();
        let held = Hold { until: T0 + 5000, key: Some("k001".into()), label: Some("label 1".into()) };
        assert_eq!(s.hold("b").unwrap(), Some(held.clone()), "a hold is never shortened");
        assert_eq!(s.batch_infos(Some("b")).unwrap()[0].hold, Some(held.clone()));
        s.set_hold("b", T0 + 9000, Some("gone")).unwrap();
        let gone = s.hold("b").unwrap().unwrap();
        assert_eq!((gone.until, gone.key.as_deref(), gone.label), (T0 + 9000, Some("gone"), None));
        // `unpause` of a batch that is held but not paused lifts the hold.
        let done = s.unpause_batch("b", "ops@box", T0 + 10).unwrap();
        assert!(!done.was_paused);
        assert_eq!(done.lifted.map(|h| h.until), Some(T0 + 9000));
        assert_eq!(s.hold("b").unwrap(), None);
        let lifted = s.events(&EventFilter { kinds: vec!["hold-lifted".into()], ..Default::default() }).unwrap();
        assert_eq!(lifted.len(), 1);
        assert_eq!((lifted[0].actor.as_deref(), lifted[0].key.as_deref()), (Some("ops@box"), Some("gone")));
        assert!(lifted[0].message.contains("lifted by ops@box"), "{}", lifted[0].message);
        // A hold already over is cleared without a word: nothing was lifted.
        s.set_hold("b", T0 + 20, Some("k000")).unwrap();
        assert_eq!(s.unpause_batch("b", "ops@box", T0 + 30).unwrap().lifted, None);
        assert_eq!(s.hold("b").unwrap(), None);
        assert_eq!(s.events(&EventFilter { kinds: vec!["hold-lifted".into()], ..Default::default() }).unwrap().len(), 1);
    }

    fn schedule_and_runs_are_kept(db, s) {
        s.set_next_fire("b", Some(T0 + 3_600_000), T0).unwrap();
        let fire = Fire { at: T0 + 10, outcome: "skipped".into(), reason: Some("paused".into()), run_id: None };
        s.record_fire("b", &fire, T0 + 15).unwrap();
        let info = &s.batch_infos(Some("b")).unwrap()[0];
        assert_eq!((info.next_fire, info.last_fire.as_ref()), (Some(T0 + 3_600_000), Some(&fire)));
        let run = s.start_run("b", Trigger::Schedule, None, &holder(5), T0 + 20, None).unwrap();
        s.add_retried(run, 3).unwrap();
        let open = s.open_runs("b").unwrap();
        assert_eq!((open.len(), open[0].id, open[0].started_at), (1, run, T0 + 20));
        let other = s.start_run("b", Trigger::Manual, Some("ops@box"), &holder(6), T0 + 30, None).unwrap();
        s.finish_run(run, &RunEnd { skipped_done: 4, retried: 5, ..RunEnd::new(RunState::Ok, "ok: 0 done") }, T0 + 40).unwrap();
        s.mark_crashed(&[run, other], T0 + 50).unwrap();
        let r = s.run(run).unwrap().unwrap();
        assert_eq!((r.state, r.counts.skipped_done, r.counts.retried, r.ended_at), (RunState::Ok, 4, 5, Some(T0 + 40)));
        let o = s.run(other).unwrap().unwrap();
        assert_eq!((o.state, o.ended_at), (RunState::Crashed, Some(T0 + 50)));
        // Who started a run is kept with it (none given: none kept).
        assert_eq!((o.actor.as_deref(), r.actor.as_deref()), (Some("ops@box"), None));
        assert_eq!(s.batch_infos(Some("b")).unwrap()[0].last_run.as_ref().unwrap().actor.as_deref(), Some("ops@box"));
        assert_eq!(s.runs("b", 10).unwrap().iter().map(|r| r.id).collect::<Vec<_>>(), vec![other, run]);
        assert!(s.open_runs("b").unwrap().is_empty());
        let since = s.since(T0 - 1, T0 + MIN).unwrap();
        assert_eq!(since.fires, vec![("b".to_string(), "skipped".to_string(), 1)]);
        assert_eq!(since.runs.len(), 2);
        let kinds = s.event_kinds_since(T0 - 1).unwrap();
        assert!(kinds.contains(&("b".to_string(), "fire".to_string(), 1)), "{kinds:?}");
    }

    fn a_running_fire_whose_run_is_found_crashed_is_recorded_crashed(db, s) {
        let fire = Fire { at: T0 + 10, outcome: "running".into(), reason: None, run_id: None };
        s.record_fire("b", &fire, T0 + 15).unwrap();
        let run = s.start_run("b", Trigger::Schedule, None, &holder(5), T0 + 20, None).unwrap();
        s.mark_crashed(&[run], T0 + MIN).unwrap();
        let last = s.batch_infos(Some("b")).unwrap()[0].last_fire.clone().unwrap();
        assert_eq!((last.at, last.outcome.as_str(), last.run_id), (T0 + 10, "crashed", Some(run)));
        let fires = s.events(&EventFilter { kinds: vec!["fire".into()], ..Default::default() }).unwrap();
        let crashed: Vec<_> = fires.iter().filter(|e| e.fields["outcome"] == "crashed").collect();
        assert_eq!(crashed.len(), 1, "{fires:?}");
        // Stamped when it was written, after the run's start, naming its
        // fire time and its run.
        assert_eq!((crashed[0].at, crashed[0].run_id), (T0 + MIN, Some(run)), "{fires:?}");
        let fire_at = nightshift::util::time::rfc3339(T0 + 10);
        assert_eq!(crashed[0].fields["fire_at"], fire_at.as_str());
        assert!(crashed[0].message.starts_with(&format!("fire at {fire_at} crashed: its run {run} crashed")), "{}", crashed[0].message);
        let ids: Vec<i64> = fires.iter().map(|e| e.id).collect();
        let stamps: Vec<i64> = fires.iter().map(|e| e.at).collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "in the order written: {ids:?} {stamps:?}");
        // Found again (another run's recovery): no second record.
        s.mark_crashed(&[run], T0 + 2 * MIN).unwrap();
        let again = s.events(&EventFilter { kinds: vec!["fire".into()], ..Default::default() }).unwrap();
        assert_eq!(again.len(), fires.len());
    }

    /// The fire whose cycle never ended stays owed behind later fires (a
    /// skipped or queued one became the last fire), so the next daemon
    /// finds it; a run finding its run dead records it crashed, at its
    /// fire time, leaving the later last fire as it is.
    fn a_cycle_cut_short_is_owed_behind_later_fires(db, s) {
        let fire = |at, outcome: &str| Fire { at, outcome: outcome.into(), reason: None, run_id: None };
        let owed = |s: &Store| s.batch_infos(Some("b")).unwrap()[0].owed;
        s.record_fire("b", &fire(T0 + 10, "running"), T0 + 10 + 1).unwrap();
        let run = s.start_run("b", Trigger::Schedule, None, &holder(5), T0 + 20, None).unwrap();
        s.record_fire("b", &fire(T0 + 30, "skipped-overlap"), T0 + 30 + 1).unwrap();
        s.record_fire("b", &fire(T0 + 40, "queued"), T0 + 40 + 1).unwrap();
        let o = owed(&s);
        assert_eq!((o.cycle, o.crashed, o.queued), (Some(T0 + 10), false, Some(T0 + 40)));
        s.mark_crashed(&[run], T0 + MIN).unwrap();
        let o = owed(&s);
        assert_eq!((o.cycle, o.crashed), (Some(T0 + 10), true));
        let last = s.batch_infos(Some("b")).unwrap()[0].last_fire.clone().unwrap();
        assert_eq!((last.at, last.outcome.as_str()), (T0 + 40, "queued"));
        let fires = s.events(&EventFilter { kinds: vec!["fire".into()], ..Default::default() }).unwrap();
        let crashed: Vec<_> = fires.iter().filter(|e| e.fields["outcome"] == "crashed").collect();
        assert_eq!(crashed.len(), 1, "{fires:?}");
        assert_eq!((crashed[0].at, crashed[0].fields["fire_at"].as_str()), (T0 + MIN, Some(nightshift::util::time::rfc3339(T0 + 10).as_str())));
        assert_eq!(crashed[0].run_id, Some(run));
        // Found again: no second record.
        s.mark_crashed(&[run], T0 + 2 * MIN).unwrap();
        assert_eq!(s.events(&EventFilter { kinds: vec!["fire".into()], ..Default::default() }).unwrap().len(), fires.len());
        // The queued fire runs: its cycle is the one owed now, until it ends.
        s.record_fire("b", &fire(T0 + 40, "running"), T0 + 40 + 1).unwrap();
        let o = owed(&s);
        assert_eq!((o.cycle, o.crashed, o.queued), (Some(T0 + 40), false, None));
        s.record_fire("b", &fire(T0 + 40, "ran"), T0 + 40 + 1).unwrap();
        assert_eq!(owed(&s), Default::default());
    }

    fn events_filter_and_follow(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let mut ids = Vec::new();
        for i in 0..5 {
            let e = NewEvent::new(T0 + i, "b", if i % 2 == 0 { EventKind::Done } else { EventKind::Failed }, format!("m{i}"))
                .key("k001").fields(serde_json::json!({"i": i}));
            ids.push(s.log_event(&e).unwrap());
        }
        let evens = s.events(&EventFilter { batch: Some("b".into()), kinds: vec!["done".into()], ..Default::default() }).unwrap();
        assert_eq!(evens.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["m0", "m2", "m4"]);
        assert_eq!(evens[1].fields["i"], 2);
        let newest = s.events(&EventFilter { limit: 2, ..Default::default() }).unwrap();
        assert_eq!(newest.iter().map(|e| e.id).collect::<Vec<_>>(), ids[3..].to_vec());
        let after = s.events(&EventFilter { after_id: Some(ids[1]), limit: 2, ..Default::default() }).unwrap();
        assert_eq!(after.iter().map(|e| e.id).collect::<Vec<_>>(), ids[2..4].to_vec());
        let by_key = s.events(&EventFilter { key: Some("k001".into()), ..Default::default() }).unwrap();
        assert_eq!(by_key.len(), 5);
        let since = s.events(&EventFilter { since: Some(T0 + 3), ..Default::default() }).unwrap();
        assert_eq!(since.len(), 2);
    }

    // The kinds written once per item (claimed, done, empty) are not in
    // the kind index; reads of them, of other kinds and of both, store-wide
    // and per batch, each find exactly their events.
    fn events_of_dense_and_rare_kinds_alike(db, s) {
        s.add_items("b", &items(1), T0, |_| {}).unwrap();
        s.add_items("c", &items(1), T0, |_| {}).unwrap();
        for (i, (batch, kind)) in [("b", EventKind::Done), ("c", EventKind::Failed), ("b", EventKind::Empty),
                                   ("c", EventKind::LockTakeover), ("b", EventKind::Claimed), ("c", EventKind::Done)]
            .into_iter()
            .enumerate()
        {
            s.log_event(&NewEvent::new(T0 + i as i64, batch, kind, format!("m{i}"))).unwrap();
        }
        let messages = |batch: Option<&str>, kinds: &[&str]| -> Vec<String> {
            let filter = EventFilter {
                batch: batch.map(String::from),
                kinds: kinds.iter().map(|k| k.to_string()).collect(),
                ..Default::default()
            };
            let mut m: Vec<String> = s.events(&filter).unwrap().into_iter().map(|e| e.message).collect();
            m.sort();
            m
        };
        assert_eq!(messages(None, &["done"]), ["m0", "m5"]);
        assert_eq!(messages(None, &["failed"]), ["m1"]);
        assert_eq!(messages(None, &["failed", "lock-takeover"]), ["m1", "m3"]);
        assert_eq!(messages(None, &["done", "failed", "claimed"]), ["m0", "m1", "m4", "m5"]);
        assert_eq!(messages(Some("b"), &["empty", "claimed"]), ["m2", "m4"]);
        assert_eq!(messages(Some("c"), &["lock-takeover"]), ["m3"]);
        assert_eq!(s.since(T0 - 1, T0 + MIN).unwrap().takeovers, vec![("c".to_string(), 1)]);
    }

    fn following_the_log_shows_each_later_event_once(db, s) {
        macro_rules! log {
            ($s:expr, $kind:expr, $m:expr) => { $s.log_event(&NewEvent::new(T0, "b", $kind, $m)).unwrap() };
        }
        s.ensure_batch("b", T0).unwrap();
        log!(s, EventKind::Alert, "before");
        let evens = EventFilter { batch: Some("b".into()), kinds: vec!["done".into()], ..Default::default() };
        let mut cursor = s.follow_start().unwrap();
        log!(s, EventKind::Done, "during the listing");
        let listed = s.events(&evens).unwrap();
        cursor.shown(&listed);
        assert_eq!(listed.len(), 1);
        assert_eq!(s.follow_next(&evens, &mut cursor).unwrap(), vec![], "nothing new");
        for i in 0..1500 {
            log!(s, if i % 3 == 0 { EventKind::Done } else { EventKind::Failed }, format!("m{i}"));
        }
        // On PostgreSQL another test's transaction (the server is shared)
        // may hold the horizon back for a moment: poll, as `log -f` does.
        macro_rules! follow_until {
            ($n:expr) => {{
                let mut got = Vec::new();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while got.len() < $n && std::time::Instant::now() < deadline {
                    got.extend(s.follow_next(&evens, &mut cursor).unwrap());
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                got
            }};
        }
        let next = follow_until!(500);
        assert_eq!(next.len(), 500, "all of them, beyond one page");
        assert_eq!(next[0].message, "m0");
        assert!(next.windows(2).all(|w| w[0].id < w[1].id));
        assert_eq!(s.follow_next(&evens, &mut cursor).unwrap(), vec![]);
        log!(s, EventKind::Done, "last");
        let last = follow_until!(1);
        assert_eq!(last.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["last"]);
    }

    fn the_dashboard_reads_one_consistent_view(db, s) {
        s.add_items("b", &items(30), T0, |_| {}).unwrap();
        s.add_items("other", &items(2), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap();
        let f = nightshift::store::Failure { item_id: c[0].item_id, token: c[0].token, run_id: run,
            tier: Tier::Manual, error_class: "Bad", message: "no", next_attempt_at: None, cost: None, now: T0 };
        s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed").key("k000")).unwrap();
        let q = DashQuery {
            batch: Some("b".into()),
            minutes: 5,
            runs: 5,
            items: Some(ItemsQuery { offset: 25, limit: 10, ..Default::default() }),
            class_items: Some(ItemsQuery { class: Some("Bad".into()), limit: 10, ..Default::default() }),
            dlq: true,
            events: Some(nightshift::store::EventsQuery { batch: Some("b".into()), limit: 3, ..Default::default() }),
            detail: Some("k000".into()),
            pools: Vec::new(),
            spend: Vec::new(),
        };
        let d = s.dashboard(&q, T0).unwrap();
        assert_eq!(d.batches.len(), 2);
        assert_eq!(d.batches[0].info.counts.pending, 28);
        // The batch was made this minute: no minutes from before it.
        assert_eq!(d.batches[0].minutes.len(), 1);
        assert_eq!(d.batches[0].info.lock().map(|l| l.token.as_str()), Some("tok"));
        let page = d.items.unwrap();
        // Past the middle a page is read from the end: the last full page.
        assert_eq!((page.total, page.offset, page.rows.len()), (30, 20, 10));
        assert_eq!(page.rows[0].key, "k020");
        let class = d.class_items.unwrap();
        assert_eq!((class.total, class.rows[0].key.as_str()), (1, "k000"));
        assert_eq!(d.dlq[0].manual_now, 1);
        assert_eq!(d.runs[0].id, run);
        assert_eq!(d.events.len(), 3);
        let detail = d.detail.unwrap().unwrap();
        assert_eq!((detail.failures.len(), detail.item.key.as_str()), (1, "k000"));
        assert!(detail.events.iter().any(|e| e.kind == "failed"));
        // A search scans for a short budget per poll: poll, as the dashboard does.
        let sq = DashQuery { batch: Some("b".into()),
            items: Some(ItemsQuery { search: "k02".into(), limit: 50, ..Default::default() }), ..Default::default() };
        let search = (0..10_000)
            .map(|_| s.dashboard(&sq, T0).unwrap().items.unwrap())
            .find(|page| page.searching.is_none())
            .expect("the search never ended");
        assert_eq!(search.total, 10);
        assert_eq!(s.failed_keys("b", &ItemsQuery::default()).unwrap(), vec!["k000".to_string()]);
        assert_eq!(s.failed_among("b", &["k000".into(), "k001".into()]).unwrap(), vec!["k000".to_string()]);
        assert_eq!(s.count_items("b", &ItemFilter { search: Some("k01".into()), ..Default::default() }).unwrap(), 10);
        let listed = s.items("b", &ItemFilter { limit: Some(3), offset: 1, ..Default::default() }).unwrap();
        assert_eq!(listed.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["k001", "k002", "k003"]);
    }

    fn prune_removes_only_old_history(db, s) {
        let run = one_done_one_failed(&mut s);
        s.finish_run(run, &RunEnd::new(RunState::Failed, "x"), T0).unwrap();
        // A later run, as old: the store's newest run is never pruned (its
        // number would be given again), the one before it is.
        let newest = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.finish_run(newest, &RunEnd::new(RunState::Ok, "x"), T0).unwrap();
        let dry = s.prune(T0 + 1, false, false, true, "me", T0 + 2).unwrap();
        assert_eq!((dry.done_items, dry.runs, dry.failed_items_kept, dry.dead_letters_kept), (1, 1, 1, 1));
        assert_eq!(s.counts("b").unwrap().done, 1, "a dry run deletes nothing");
        let r = s.prune(T0 + 1, false, false, false, "me", T0 + 2).unwrap();
        assert_eq!(r, dry);
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.done, counts.manual, counts.pending), (0, 1, 1));
        assert_eq!(s.dead_letters("b", None, None).unwrap().len(), 1);
        s.prune(T0 + 1, true, false, false, "me", T0 + 2).unwrap();
        assert_eq!(s.counts("b").unwrap().manual, 0);
        assert!(s.dead_letters("b", None, None).unwrap().is_empty());
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn prune_deletes_the_attempts_of_pruned_items(db, s) {
        use nightshift::store::AttemptUsage;
        let run = one_done_one_failed(&mut s);
        let ids: Vec<i64> = ["k000", "k001", "k002"].iter().map(|k| s.item("b", k).unwrap().id).collect();
        let usage: Vec<AttemptUsage> = ["k000", "k001", "k002"].iter().map(|k| AttemptUsage {
            batch: "b".into(), run_id: run, key: (*k).into(), attempt: 1, pool: Some("api".into()),
            place: None, with_done: false, at: T0, estimate: 10, input_tokens: Some(3), output_tokens: Some(4) }).collect();
        s.settle_usage(None, &usage).unwrap();
        // Logged after the cutoff (a host whose clock runs ahead): they go
        // with their items, not by their own time.
        for id in &ids {
            let log = AttemptLog { attempt: 1, run_id: Some(run), at: T0 + 5, stderr: "e".into(), cut: false };
            s.record_attempt_log(*id, &log).unwrap();
        }
        let kept = |s: &Store| -> Vec<(usize, usize)> {
            ["k000", "k001", "k002"].iter().zip(&ids)
                .map(|(k, id)| (s.item_usage("b", k).unwrap().len(), s.attempt_logs(*id).unwrap().len()))
                .collect()
        };
        assert_eq!(kept(&s), [(1, 1), (1, 1), (1, 1)]);
        s.prune(T0 + 1, false, false, false, "me", T0 + 2).unwrap();
        assert_eq!(kept(&s), [(0, 0), (1, 1), (1, 1)], "the done item's attempts go with it");
        // The run's sum is the run's record: it stays while the run does.
        assert_eq!(s.run_usage(run).unwrap().attempts, 3);
        s.prune(T0 + 1, true, false, false, "me", T0 + 2).unwrap();
        assert_eq!(kept(&s), [(0, 0), (0, 0), (1, 1)], "the failed one's with it, the pending one's stay");
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn prune_keeps_a_pools_minutes_for_a_week_then_lets_them_go(db, s) {
        use nightshift::store::{AttemptUsage, PoolSpec};
        let spec = PoolSpec { name: "api".into(), dims: Vec::new(), concurrency: None };
        let used = AttemptUsage {
            batch: "b".into(), run_id: 1, key: "k".into(), attempt: 1, pool: Some("api".into()),
            place: None, with_done: false, at: T0, estimate: 10, input_tokens: Some(3), output_tokens: Some(4) };
        s.settle_usage(None, &[used]).unwrap();
        // Read back at the minute they were drawn: the day's sums.
        let today = |s: &Store| s.pool_view(&spec, T0 + 1000).unwrap().today.attempts;
        assert_eq!(today(&s), 1);
        const DAY: i64 = 86_400_000;
        // A cutoff a minute after them, but a view of the last week still
        // reads them.
        s.prune(T0 + MIN, false, false, false, "me", T0 + 6 * DAY).unwrap();
        assert_eq!(today(&s), 1, "a pool's minutes within the week stay");
        s.prune(T0 + MIN, false, false, false, "me", T0 + 8 * DAY).unwrap();
        assert_eq!(today(&s), 0, "a pool's minutes older than the week and the cutoff go");
    }

    fn a_group_commits_together(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let out = s.group(|s| {
            s.pause_batch("b", &Pause { reason: "r".into(), by: "me".into(), at: T0 }).unwrap();
            // A failing write inside the group undoes only itself.
            assert!(s.skip("b", &["nope".into()], "x", "me", T0).is_err());
            s.skip("b", &["k000".into()], "x", "me", T0).unwrap()
        }).unwrap();
        assert_eq!(out.skipped, ["k000"]);
        assert!(s.pause("b").unwrap().is_some());
        assert_eq!(s.counts("b").unwrap().skipped, 1);
    }

    fn the_runner_chains_a_success_and_the_next_claim_in_one_group(db, s) {
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let mut claim = s.claim("b", run, 1, T0 + MIN, T0).unwrap().unwrap().remove(0);
        let mut done = Vec::new();
        loop {
            let (accepted, next) = s.group(|s| {
                let ok = s.complete(&Completion { usage: None, item_id: claim.item_id, token: claim.token, run_id: run,
                    outcome: Outcome::Done, result: None, cost: None, version: None, now: T0 }, &done_event(&claim.key)).unwrap();
                (ok, s.claim("b", run, 1, T0 + MIN, T0).unwrap().unwrap())
            }).unwrap();
            assert!(accepted);
            done.push(claim.key.clone());
            match next.into_iter().next() {
                Some(c) => claim = c,
                None => break,
            }
        }
        assert_eq!(done, ["k000", "k001", "k002"]);
        assert_eq!(s.counts("b").unwrap().done, 3);
        assert_eq!(s.run(run).unwrap().unwrap().counts.done, 3);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn a_batch_of_completions_commits_together_and_is_fenced(db, s) {
        s.add_items("b", &items(4), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 4, T0 + MIN, T0).unwrap().unwrap();
        let done = |i: usize, token: i64, outcome: Outcome, cost: Option<f64>| Completion { usage: None,
            item_id: c[i].item_id, token, run_id: run, outcome,
            result: (outcome == Outcome::Done).then_some(r#"{"ok":true}"#), cost, version: None, now: T0 + 5 };
        // What the runner's done events carry: the run, fields, an actor-less message.
        let evs: Vec<NewEvent> = c.iter().enumerate()
            .map(|(i, c)| done_event(&c.key).run(run).fields(serde_json::json!({"attempt": 1, "ms": i, "cost": null})))
            .collect();
        assert_eq!(s.complete_all(&[]).unwrap(), Vec::<bool>::new());
        let batch = [
            (done(0, c[0].token, Outcome::Done, Some(0.25)), &evs[0]),
            // A stale token: refused, the rest still kept.
            (done(1, c[1].token - 1000, Outcome::Done, Some(9.0)), &evs[1]),
            (done(2, c[2].token, Outcome::Empty, None), &evs[2]),
            (done(3, c[3].token, Outcome::Done, Some(0.5)), &evs[3]),
        ];
        assert_eq!(s.complete_all(&batch).unwrap(), [true, false, true, true]);
        assert_eq!(s.complete_all(&batch[..1]).unwrap(), [false], "a second completion is refused");
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.finished(), counts.done, counts.empty, counts.claimed), (3, 2, 1, 1));
        let r = s.run(run).unwrap().unwrap();
        assert_eq!((r.counts.done, r.counts.empty, r.counts.cost), (2, 1, 0.75));
        let item = s.item("b", "k000").unwrap();
        assert_eq!((item.result.map(|r| r.value()), item.cost, item.updated_at, item.lease_run),
            (Some(serde_json::json!({"ok": true})), Some(0.25), T0 + 5, None));
        assert_eq!(s.item("b", "k001").unwrap().lease_run, Some(run), "k001 is still claimed");
        let logged = s.events(&EventFilter { kinds: vec!["done".into()], ..Default::default() }).unwrap();
        let keys: Vec<_> = logged.iter().map(|e| e.key.as_deref().unwrap()).collect();
        assert_eq!(keys, ["k000", "k002", "k003"], "one event per kept completion, in order");
        assert!(logged.iter().all(|e| e.at == T0 && e.batch.as_deref() == Some("b")));
        let carried: Vec<_> = logged.iter().map(|e| (e.run_id, e.message.as_str(), e.actor.clone(), e.fields.clone())).collect();
        assert_eq!(carried, [0, 2, 3].map(|i| (Some(run), "done", None,
            serde_json::json!({"attempt": 1, "ms": i, "cost": null}))), "each event as written");
        let labels: Vec<_> = logged.iter().map(|e| e.label.as_deref()).collect();
        assert_eq!(labels, [Some("label 0"), Some("label 2"), Some("label 3")], "each tied to its item");
        let by_key = s.events(&EventFilter { key: Some("k002".into()), ..Default::default() }).unwrap();
        assert!(by_key.iter().any(|e| e.kind == "done"), "events are tied to their item");
        // Inside a group, rolled back with it.
        let c4 = c[1].clone();
        let err = s.group(|s| {
            let ok = s.complete_all(&[(Completion { usage: None, item_id: c4.item_id, token: c4.token, run_id: run,
                outcome: Outcome::Done, result: None, cost: None, version: None, now: T0 }, &evs[1])]).unwrap();
            assert_eq!(ok, [true]);
            s.item("b", "k001").unwrap().status
        }).unwrap();
        assert_eq!(err, nightshift::model::Status::Done, "a group sees its own writes");
        assert_eq!(s.counts("b").unwrap().finished(), 4);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn a_plain_group_of_completions_keeps_what_earlier_attempts_left(db, s) {
        use nightshift::store::AttemptUsage;
        // A runner's usual group: one time, no version, one outcome, no
        // cost and no usage line of its own (SQLite's `COMPLETE_PLAIN`).
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        // k000's first attempt failed at a cost, and is claimed again.
        let first = s.claim("b", run, 1, T0 + MIN, T0).unwrap().unwrap();
        let f = nightshift::store::Failure { item_id: first[0].item_id, token: first[0].token, run_id: run,
            tier: Tier::Manual, error_class: "E", message: "m", next_attempt_at: None, cost: Some(0.4), now: T0 };
        s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed")).unwrap();
        let again = s.claim_key("b", "k000", run, T0 + MIN, T0).unwrap();
        let rest = s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap();
        let c = [again, rest[0].clone(), rest[1].clone()];
        // k001's usage settled apart from its done mark.
        let used = AttemptUsage { batch: "b".into(), run_id: run, key: "k001".into(), attempt: 1, pool: None,
            place: None, with_done: false, at: T0, estimate: 10, input_tokens: Some(3), output_tokens: Some(4) };
        s.settle_usage(None, &[used]).unwrap();
        let results = [r#"{"n":0}"#, r#"{"n":1}"#, r#"{"n":2}"#];
        let evs: Vec<NewEvent> = c.iter().map(|c| done_event(&c.key).run(run)).collect();
        let group: Vec<_> = c.iter().zip(&evs).zip(results).map(|((c, e), result)| (Completion { usage: None,
            item_id: c.item_id, token: c.token, run_id: run, outcome: Outcome::Done, result: Some(result),
            cost: None, version: None, now: T0 + 7 }, e)).collect();
        assert_eq!(s.complete_all(&group).unwrap(), [true, true, true]);
        let item = |k: &str| s.item("b", k).unwrap();
        let seen: Vec<_> = ["k000", "k001", "k002"].iter().map(|k| {
            let i = item(k);
            (i.status, i.outcome, i.result.map(|r| r.value()), i.cost, i.updated_at, i.lease_run)
        }).collect();
        let done = |n: i64, cost: Option<f64>| (nightshift::model::Status::Done, Some(Outcome::Done),
            Some(serde_json::json!({"n": n})), cost, T0 + 7, None);
        assert_eq!(seen, [done(0, Some(0.4)), done(1, None), done(2, None)], "each its own result; k000 its cost");
        let usage = s.item_usage("b", "k001").unwrap();
        assert_eq!(usage.iter().map(|u| u.input_tokens).collect::<Vec<_>>(), [Some(3)], "k001's usage kept");
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.done, counts.claimed, counts.manual), (3, 0, 0));
        assert_eq!(s.run(run).unwrap().unwrap().counts.done, 3);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn a_run_marked_crashed_by_a_takeover_stays_crashed(db, s) {
        let old = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.mark_crashed(&[old], T0 + MIN).unwrap();
        s.finish_run(old, &RunEnd::new(RunState::Ok, "all done"), T0 + 2 * MIN).unwrap();
        let r = s.run(old).unwrap().unwrap();
        assert_eq!(r.state, RunState::Crashed);
        let live = s.start_run("b", Trigger::Manual, None, &holder(2), T0, None).unwrap();
        s.finish_run(live, &RunEnd::new(RunState::Ok, "all done"), T0 + 2 * MIN).unwrap();
        assert_eq!(s.run(live).unwrap().unwrap().state, RunState::Ok);
    }

    fn the_dashboard_search_looks_at_keys_and_labels(db, s) {
        s.add_items("b", &items(40), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 1, T0 + MIN, T0).unwrap().unwrap();
        let f = nightshift::store::Failure { item_id: c[0].item_id, token: c[0].token, run_id: run,
            tier: Tier::Manual, error_class: "Bad", message: "label 39 is not here", next_attempt_at: None,
            cost: None, now: T0 };
        s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed").key("k000")).unwrap();
        // Polls as the dashboard does, until the search has looked at everything.
        let search = |text: &str, status| {
            let q = DashQuery { batch: Some("b".into()), items: Some(ItemsQuery { search: text.into(),
                status, limit: 50, ..Default::default() }), ..Default::default() };
            for _ in 0..10_000 {
                let page = s.dashboard(&q, T0).unwrap().items.unwrap();
                if page.searching.is_none() {
                    return page.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
                }
            }
            panic!("the search never ended")
        };
        assert_eq!(search("label 39", None), ["k039"], "not k000, whose error message says it");
        assert_eq!(search("k00", None).len(), 10);
        assert_eq!(search("k00", Some(nightshift::model::Status::Failed)), ["k000"]);
        assert_eq!(search("k00", Some(nightshift::model::Status::Pending)).len(), 9);
        assert!(search("nothing like it", None).is_empty());
    }

    /// Two daemons of one batch starting at the same moment: on
    /// PostgreSQL each read the other's record as absent (`READ
    /// COMMITTED`, nothing locked), both started and both fired every fire
    /// time. One is recorded, the other refused, every time.
    fn two_daemons_starting_at_once_one_is_refused(db, s) {
        let now = nightshift::util::time::now_ms();
        for round in 0..40 {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
            let starts: Vec<_> = (0..2)
                .map(|i| {
                    let (barrier, mut s) = (barrier.clone(), db.open(Access::ReadWrite));
                    let d = daemon(&format!("r{round}d{i}"), i, &[&format!("b{round}")], now);
                    std::thread::spawn(move || {
                        barrier.wait();
                        s.daemon_started(&d, now)
                    })
                })
                .collect();
            let results: Vec<_> = starts.into_iter().map(|t| t.join().unwrap()).collect();
            let refused = results
                .iter()
                .filter(|r| matches!(r, Err(StoreError::Refused(nightshift::store::Refusal::DaemonLive { .. }))))
                .count();
            assert_eq!((refused, results.iter().filter(|r| r.is_ok()).count()), (1, 1),
                "round {round}: {results:?}");
            let live = s.daemons(now).unwrap().into_iter().filter(|d| d.live()).count();
            assert_eq!(live, round + 1, "one more live daemon each round");
        }
    }

    /// One daemon a batch, whatever the order: a daemon replaced while it
    /// was silent, heard again, steps down from the batch its successor
    /// took (and keeps its others); a reload's batches another live daemon
    /// schedules are said taken and left out; and a returning daemon's
    /// beat racing a new daemon's start leaves exactly one of them with
    /// the batch.
    fn a_daemon_replaced_while_silent_loses_the_batch_at_its_next_beat(db, s) {
        let now = nightshift::util::time::now_ms();
        let silent = nightshift::model::DAEMON_SILENT + 1_000;
        let old = daemon("old", 0, &["b", "c"], now - silent);
        s.daemon_started(&old, now - silent).unwrap();
        let new = daemon("new", 1, &["b"], now);
        s.daemon_started(&new, now).unwrap();
        let back = nightshift::model::Daemon { beat_at: now, ..old.clone() };
        let taken = s.daemon_beat(&back, now).unwrap();
        assert_eq!(taken, [nightshift::model::Taken { batch: "b".into(), by: new.holder.clone() }]);
        let live: Vec<_> = s.daemons(now).unwrap().into_iter().filter(|d| d.live())
            .map(|d| (d.daemon.token, d.daemon.batches)).collect();
        assert_eq!(live.len(), 2, "{live:?}");
        assert!(live.contains(&("old".into(), vec!["c".into()])), "{live:?}");
        assert!(live.contains(&("new".into(), vec!["b".into()])), "{live:?}");
        assert_eq!(s.daemon_beat(&new, now).unwrap(), [], "the new one keeps it");
        // A reload of the old one naming `b` again: `b` is said taken.
        let reload = nightshift::model::Daemon { batches: vec!["b".into(), "c".into(), "d".into()], ..back };
        let taken = s.daemon_taken(&reload, now).unwrap();
        assert_eq!(taken.iter().map(|t| t.batch.as_str()).collect::<Vec<_>>(), ["b"]);

        for round in 0..20 {
            let batch = format!("r{round}");
            let gone = daemon(&format!("gone{round}"), 2, &[&batch], now - silent);
            s.daemon_started(&gone, now - silent).unwrap();
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
            let (b1, b2) = (barrier.clone(), barrier);
            let (mut s1, mut s2) = (db.open(Access::ReadWrite), db.open(Access::ReadWrite));
            let returning = nightshift::model::Daemon { beat_at: now, ..gone };
            let beat = std::thread::spawn(move || {
                b1.wait();
                s1.daemon_beat(&returning, now).unwrap()
            });
            let starting = daemon(&format!("start{round}"), 3, &[&batch], now);
            let start = std::thread::spawn(move || {
                b2.wait();
                s2.daemon_started(&starting, now)
            });
            let (taken, started) = (beat.join().unwrap(), start.join().unwrap());
            assert_eq!(taken.is_empty(), started.is_err(), "round {round}: {taken:?} {started:?}");
            let holders = s.daemons(now).unwrap().into_iter()
                .filter(|d| d.live() && d.daemon.batches.contains(&batch)).count();
            assert_eq!(holders, 1, "round {round}");
        }
    }

    /// The runner's and the daemon's async code call the store directly:
    /// the PostgreSQL client, which runs a runtime of its own, must not
    /// panic there (nor when its session is closed there).
    fn the_store_works_inside_an_async_runtime(db, s) {
        drop(s);
        for multi in [true, false] {
            let rt = if multi {
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
            } else {
                tokio::runtime::Builder::new_current_thread().enable_all().build()
            }.unwrap();
            rt.block_on(async {
                let mut s = db.open(Access::ReadWrite);
                s.add_items("b", &items(2), T0, |_| {}).unwrap();
                tokio::task::yield_now().await;
                let paused = s.group(|s| {
                    s.pause_batch("b", &Pause { reason: "r".into(), by: "me".into(), at: T0 }).unwrap()
                }).unwrap();
                assert_eq!(paused, !multi, "paused, then already paused");
                assert_eq!(s.counts("b").unwrap().pending, 2);
                drop(s);
            });
        }
    }

    fn a_read_only_store_writes_nothing(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        drop(s);
        let mut ro = db.open(Access::ReadOnly);
        assert_eq!(ro.counts("b").unwrap().pending, 2);
        assert!(matches!(ro.pause_batch("b", &Pause { reason: "r".into(), by: "me".into(), at: T0 }),
            Err(StoreError::ReadOnlyStore(_))));
        assert!(ro.group(|_| ()).is_err());
        assert!(ro.dashboard(&DashQuery::default(), T0).is_ok());
        let rw = db.open(Access::ReadWrite);
        assert_eq!(rw.pause("b").unwrap(), None);
    }

    /// Pruning a done item keeps its key: adding it again finds it present
    /// (and says it was pruned), every lookup by key says what became of
    /// it, and only `--forget-keys` (dry run first) lets it be added again.
    fn a_pruned_done_key_stays_present_until_forgotten(db, s) {
        s.add_items("b", &items(4), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + 10 * MIN, T0, &[], 1).unwrap();
        for (c, outcome) in s.claim("b", run, 2, T0 + MIN, T0).unwrap().unwrap().iter().zip([Outcome::Done, Outcome::Empty]) {
            let done = Completion { usage: None, item_id: c.item_id, token: c.token, run_id: run, outcome,
                result: None, cost: None, version: None, now: T0 };
            assert!(s.complete(&done, &done_event(&c.key)).unwrap());
        }
        s.skip("b", &["k003".into()], "by hand", "me", T0).unwrap();
        let r = s.prune(T0 + 1, false, false, false, "me", T0 + MIN).unwrap();
        assert_eq!(r.done_items, 3);
        assert_eq!(s.pruned_keys("b").unwrap(), 3);
        assert_eq!(s.counts("b").unwrap().total(), 1, "k002 is still pending");

        let again = s.add_items("b", &items(5), T0 + 2 * MIN, |_| {}).unwrap();
        assert_eq!((again.added, again.present, again.pruned), (1, 4, 3));
        assert_eq!(again.pruned_span, Some((T0 + MIN, T0 + MIN)));
        assert_eq!(s.counts("b").unwrap().pending, 2, "k002 and the new k004");
        let added = s.events(&EventFilter { kinds: vec!["added".into()], ..Default::default() }).unwrap();
        assert_eq!(added.last().unwrap().fields["pruned"], 3);
        let pruned = |e: StoreError| match e {
            StoreError::Pruned { tombstone, .. } => tombstone,
            other => panic!("not Pruned: {other}"),
        };
        assert_eq!(pruned(s.item("b", "k001").unwrap_err()),
            Tombstone { key: "k001".into(), outcome: Outcome::Empty, done_at: T0, pruned_at: T0 + MIN });
        assert_eq!(pruned(s.item("b", "k003").unwrap_err()).outcome, Outcome::Skipped);
        let by_key = Selection { keys: vec!["k000".into()], ..Default::default() };
        pruned(s.requeue("b", &by_key, false, false, "me", T0).unwrap_err());
        pruned(s.skip("b", &["k000".into()], "x", "me", T0).unwrap_err());
        pruned(s.claim_key("b", "k000", run, T0 + MIN, T0).unwrap_err());
        assert!(matches!(s.item("b", "nope"), Err(StoreError::UnknownKey { .. })));

        // Forgetting: a dry run counts and changes nothing; a cutoff before
        // they were done forgets nothing.
        let dry = s.prune(T0 + 1, false, true, true, "me", T0 + 3 * MIN).unwrap();
        assert_eq!(dry.forgotten_keys, std::collections::BTreeMap::from([("b".to_string(), 3)]));
        assert_eq!(s.pruned_keys("b").unwrap(), 3);
        assert!(s.prune(T0, false, true, false, "me", T0 + 3 * MIN).unwrap().forgotten_keys.is_empty());
        assert_eq!(s.pruned_keys("b").unwrap(), 3);
        let real = s.prune(T0 + 1, false, true, false, "me", T0 + 3 * MIN).unwrap();
        assert_eq!(real.forgotten_keys, dry.forgotten_keys);
        assert_eq!(s.pruned_keys("b").unwrap(), 0);
        let forgot = s.events(&EventFilter { kinds: vec!["keys-forgotten".into()], ..Default::default() }).unwrap();
        assert_eq!(forgot.len(), 1);
        assert_eq!((forgot[0].fields["keys"].as_i64(), forgot[0].actor.as_deref()), (Some(3), Some("me")));
        assert!(matches!(s.item("b", "k001"), Err(StoreError::UnknownKey { .. })));
        let back = s.add_items("b", &items(5), T0 + 4 * MIN, |_| {}).unwrap();
        assert_eq!((back.added, back.present, back.pruned), (3, 2, 0));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    /// Prune keeps many keys, in chunks, and forgets them in chunks.
    fn many_keys_are_kept_and_forgotten_in_chunks(db, s) {
        s.add_items("b", &items(12_000), T0, |_| {}).unwrap();
        // Done in three statements (`skip` would take one round trip per key
        // on PostgreSQL, in a transaction that holds back other tests' log
        // followers on the shared server).
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let claims = s.claim("b", run, 12_000, T0 + MIN, T0).unwrap().unwrap();
        let done: Vec<_> = claims.iter().map(|c| Completion { usage: None, item_id: c.item_id, token: c.token,
            run_id: run, outcome: Outcome::Done, result: None, cost: None, version: None, now: T0 }).collect();
        let event = done_event("k");
        let all: Vec<_> = done.iter().map(|d| (d.clone(), &event)).collect();
        assert!(s.complete_all(&all).unwrap().iter().all(|ok| *ok));
        assert_eq!(s.prune(T0 + 1, false, false, false, "me", T0 + MIN).unwrap().done_items, 12_000);
        assert_eq!(s.pruned_keys("b").unwrap(), 12_000);
        // Fed part by part (as `add` writes a large input while it parses).
        let more = items(12_001);
        let mut fed = Fed::new(vec![&more[..6_000], &more[6_000..]], false);
        let r = s.add_fed("b", &mut fed, 0, T0 + MIN, |_| {}).unwrap().unwrap();
        assert_eq!((r.added, r.present, r.pruned), (1, 12_000, 12_000));
        let r = s.prune(T0 + 1, false, true, false, "me", T0 + 2 * MIN).unwrap();
        assert_eq!(r.forgotten_total(), 12_000);
        assert_eq!(s.pruned_keys("b").unwrap(), 0);
    }

    /// A batch's first add that knows its key spec records it; an add
    /// keying otherwise (all at once, or fed part by part) is refused in
    /// its own transaction, nothing of it written; one that does not know
    /// (`add_items`) is not checked. A batch with nothing recorded adopts
    /// the spec of its next add where its items were keyed so, and refuses
    /// it where they were not.
    fn an_add_keyed_otherwise_than_the_batch_is_refused_whole(db, s) {
        use nightshift::key::KeySpec;
        let fields = |f: &[&str]| KeySpec::Fields(f.iter().map(|s| (*s).to_string()).collect());
        let (first, other) = (fields(&["site", "slug"]), fields(&["slug", "site"]));
        let keyed = |n: usize, spec: &KeySpec| -> Vec<NewItem> {
            (0..n).map(|i| nightshift::key::derive_line(&format!(r#"{{"site":"s","slug":"p{i}"}}"#), spec).unwrap()).collect()
        };
        s.add_items("b", &keyed(2, &first), T0, |_| {}).unwrap();
        assert_eq!(s.keyed_by("b").unwrap(), None);
        let refused = s.add_keyed(("b", Some(&other)), &keyed(3, &other), T0, |_| {}).unwrap_err();
        assert!(refused.to_string().contains("its items were keyed otherwise than by key_fields [\"slug\", \"site\"]"), "{refused}");
        assert_eq!(s.counts("b").unwrap().total(), 2, "nothing of it written");
        let r = s.add_keyed(("b", Some(&first)), &keyed(3, &first), T0, |_| {}).unwrap();
        assert_eq!((r.added, r.present), (1, 2), "adopted by its next add");
        assert_eq!(s.keyed_by("b").unwrap(), Some(first.clone()));
        let more = keyed(6, &first);
        for err in [
            s.add_keyed(("b", Some(&other)), &more, T0, |_| {}).unwrap_err(),
            s.add_fed_keyed(("b", Some(&other)), &mut Fed::new(vec![&more[..4], &more[4..]], false), 0, T0, |_| {}).unwrap_err(),
            s.check_keyed("b", &KeySpec::Explicit).unwrap_err(),
        ] {
            assert!(err.is_user_error(), "{err}");
            let said = err.to_string();
            assert!(said.contains("batch \"b\": its items were keyed by key_fields [\"site\", \"slug\"]"), "{said}");
            assert!(said.ends_with("nothing was added"), "{said}");
        }
        assert_eq!(s.counts("b").unwrap().total(), 3, "nothing of it written");
        assert_eq!(s.keyed_by("b").unwrap(), Some(first.clone()));
        s.check_keyed("b", &first).unwrap();
        s.check_keyed("new", &other).unwrap();
        let r = s.add_fed_keyed(("b", Some(&first)), &mut Fed::new(vec![&more[..4], &more[4..]], false), 0, T0, |_| {});
        assert_eq!(r.unwrap().unwrap().added, 3);
    }

    /// A stop request (a signal) before a bulk write commits anything
    /// changes nothing and says so.
    fn a_stop_before_the_first_chunk_changes_nothing(db, s) {
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        for c in s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap() {
            let f = nightshift::store::Failure { item_id: c.item_id, token: c.token, run_id: run,
                tier: Tier::Manual, error_class: "E", message: "m", next_attempt_at: None, cost: None, now: T0 };
            s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed")).unwrap();
        }
        let stop = Stop::default();
        s.set_stop(stop.clone());
        stop.request(15);
        let all = Selection { all_failed: true, ..Default::default() };
        let err = s.requeue("b", &all, false, false, "me", T0).unwrap_err();
        assert_eq!(err.to_string(), "interrupted by SIGTERM: nothing was changed");
        assert!(err.is_interrupted());
        assert_eq!(s.counts("b").unwrap().manual, 3);
        let err = s.add_items("new", &items(3), T0, |_| {}).unwrap_err();
        assert_eq!(err.to_string(), "interrupted by SIGTERM: nothing was changed");
        assert_eq!(s.batch_names().unwrap(), ["b"]);
    }

    /// A stop request during an add while a runner is live: SQLite writes
    /// in chunks and keeps the committed ones, saying exactly how many (and
    /// recording them); PostgreSQL's add is one transaction and keeps
    /// nothing. Either way the error says what the store holds.
    fn a_stop_during_an_add_says_exactly_what_was_added(db, s) {
        s.acquire_lock("other", "tok", &holder(1), None, nightshift::util::time::now_ms() + 10 * MIN, T0, &[], 1).unwrap();
        let stop = Stop::default();
        s.set_stop(stop.clone());
        // Asked to stop while the first chunk is being written.
        let err = s.add_items("b", &items(20_000), T0, |n| if n == 0 { stop.request(2) }).unwrap_err();
        assert!(err.is_interrupted(), "{err}");
        let added = s.counts("b").map(|c| c.pending).unwrap_or(0);
        match &err {
            StoreError::CutShort(c) => {
                assert!(added > 0 && added < 20_000, "{added}");
                assert_eq!((c.done, c.total), (added as u64, 20_000));
                assert_eq!(err.to_string(), format!(
                    "{added} of 20000 items added before SIGINT; run it again to add the rest (adding is idempotent)"));
                let events = s.events(&EventFilter { kinds: vec!["added".into()], ..Default::default() }).unwrap();
                assert_eq!((events.len(), events[0].fields["added"].as_i64()), (1, Some(added)));
                assert_eq!(events[0].fields["cut_short"], "SIGINT");
            }
            StoreError::Interrupted(_) => {
                assert!(matches!(s, Store::Pg(_)), "SQLite adds in chunks while a runner is live");
                assert_eq!(added, 0);
            }
            other => panic!("{other}"),
        }
        s.set_stop(Stop::default());
        let rest = s.add_items("b", &items(20_000), T0, |_| {}).unwrap();
        assert_eq!((rest.added, rest.present), (20_000 - added as u64, added as u64));
    }

    /// An add fed part by part (a large input, written while it is parsed)
    /// does what `add_items` of all its items does: every item once, in
    /// input order, progress in steps of 10,000, one `added` event; fed
    /// again with one key more, it adds that one.
    fn a_fed_add_adds_as_add_items_does(db, s) {
        let all = items(12_001);
        let mut steps = Vec::new();
        let parts = vec![&all[..5_000], &all[..0], &all[5_000..12_000]];
        let r = s.add_fed("b", &mut Fed::new(parts, false), 0, T0, |n| steps.push(n)).unwrap().unwrap();
        assert_eq!((r.added, r.present), (12_000, 0));
        assert_eq!(steps, [0, 10_000]);
        let id = |s: &Store, key: &str| s.item("b", key).unwrap().id;
        assert!(id(&s, "k000") < id(&s, "k4999") && id(&s, "k4999") < id(&s, "k5000"));
        assert!(id(&s, "k5000") < id(&s, "k11999"), "ids in input order");
        let added = |s: &Store| s.events(&EventFilter { kinds: vec!["added".into()], ..Default::default() }).unwrap();
        assert_eq!(added(&s).len(), 1);
        assert_eq!(added(&s)[0].fields["added"], 12_000);

        let parts = vec![&all[..6_000], &all[6_000..]];
        let r = s.add_fed("b", &mut Fed::new(parts, false), 0, T0 + 1, |_| {}).unwrap().unwrap();
        assert_eq!((r.added, r.present), (1, 12_000));
        assert!(id(&s, "k11999") < id(&s, "k12000"));
        assert_eq!(s.counts("b").unwrap().pending, 12_001);
        assert_eq!(added(&s).len(), 2);
        // An input without items writes nothing, and makes no batch.
        let r = s.add_fed("none", &mut Fed::new(vec![&all[..0]], false), 0, T0, |_| {}).unwrap();
        assert_eq!(r.map(|r| (r.added, r.present)), Some((0, 0)));
        assert_eq!(s.batch_names().unwrap(), ["b"]);
    }

    /// An add fed part by part whose input is then refused (a bad line, or
    /// a key given twice, found after its first parts were written) keeps
    /// nothing: no batch made, a batch that held items left with those.
    fn a_fed_add_of_a_refused_input_keeps_nothing(db, s) {
        let all = items(12_000);
        let parts = || vec![&all[..6_000], &all[6_000..]];
        assert!(s.add_fed("b", &mut Fed::new(parts(), true), 0, T0, |_| {}).unwrap().is_none());
        assert!(s.batch_names().unwrap().is_empty(), "no batch made");
        // The key given twice reaches the store before the refusal.
        let twice = vec![&all[..6_000], &all[5_999..7_000]];
        assert!(s.add_fed("b", &mut Fed::new(twice, true), 0, T0, |_| {}).unwrap().is_none());
        assert!(s.batch_names().unwrap().is_empty(), "no batch made");

        s.add_items("held", &all[..3], T0, |_| {}).unwrap();
        assert!(s.add_fed("held", &mut Fed::new(parts(), true), 0, T0, |_| {}).unwrap().is_none());
        assert_eq!(s.counts("held").unwrap().pending, 3);
        let added = s.events(&EventFilter { kinds: vec!["added".into()], ..Default::default() }).unwrap();
        assert_eq!(added.len(), 1, "the first add's alone");
        let r = s.add_fed("held", &mut Fed::new(parts(), false), 0, T0, |_| {}).unwrap().unwrap();
        assert_eq!((r.added, r.present), (11_997, 3));
    }

    /// A stop request (a signal) during an add fed part by part with no
    /// runner live (one transaction on both stores) keeps nothing of it.
    fn a_stop_during_a_fed_add_keeps_nothing(db, s) {
        let stop = Stop::default();
        s.set_stop(stop.clone());
        let all = items(12_000);
        let parts = vec![&all[..6_000], &all[6_000..]];
        let err = s.add_fed("b", &mut Fed::new(parts, false), 0, T0, |n| if n == 0 { stop.request(2) }).unwrap_err();
        assert!(matches!(err, StoreError::Interrupted(_)), "{err}");
        assert_eq!(err.to_string(), "interrupted by SIGINT: nothing was changed");
        assert!(s.batch_names().unwrap().is_empty(), "no batch made");
    }

    /// `labelled` finds items by their exact label (`show BATCH LABEL`),
    /// and events are read back with their item's label (the run log, the
    /// dashboard's log and an item's detail).
    fn items_are_found_by_label_and_events_carry_it(db, s) {
        let mut three = items(3);
        three[1].label = "label 0".into();
        s.add_items("b", &three, T0, |_| {}).unwrap();
        let keys = |rows: Vec<nightshift::store::ItemRow>| rows.into_iter().map(|r| r.key).collect::<Vec<_>>();
        assert_eq!(keys(s.labelled("b", "label 0", 10).unwrap()), ["k000", "k001"]);
        assert_eq!(keys(s.labelled("b", "label 0", 1).unwrap()), ["k000"]);
        assert!(s.labelled("b", "label", 10).unwrap().is_empty(), "exact, not a substring");
        assert!(matches!(s.labelled("nope", "x", 1), Err(StoreError::UnknownBatch { .. })));

        s.log_event(&NewEvent::new(T0, "b", EventKind::Skipped, "by hand").key("k002")).unwrap();
        s.log_event(&NewEvent::new(T0, "b", EventKind::Paused, "no item")).unwrap();
        let events = s.events(&EventFilter { batch: Some("b".into()), limit: 100, ..EventFilter::default() }).unwrap();
        let skipped = events.iter().find(|e| e.kind == "skipped").unwrap();
        assert_eq!(skipped.label.as_deref(), Some("label 2"));
        assert_eq!(events.iter().find(|e| e.kind == "paused").unwrap().label, None);
        let q = DashQuery {
            batch: Some("b".into()),
            events: Some(nightshift::store::EventsQuery { limit: 100, ..Default::default() }),
            detail: Some("k002".into()),
            ..DashQuery::default()
        };
        let d = s.dashboard(&q, T0).unwrap();
        let shown = d.events.iter().find(|e| e.kind == "skipped").unwrap();
        assert_eq!(shown.label.as_deref(), Some("label 2"));
        let detail = d.detail.unwrap().unwrap();
        assert!(detail.events.iter().all(|e| e.label.as_deref() == Some("label 2")), "{:?}", detail.events);
    }

    /// Per-minute completions start at the batch's creation: a batch made
    /// two minutes ago has three minutes (this one included), not 150.
    fn the_minutes_start_when_the_batch_was_made(db, s) {
        s.add_items("b", &items(1), T0, |_| {}).unwrap();
        assert_eq!(s.minute_stats("b", T0 + 2 * MIN, 150).unwrap().len(), 3);
        assert_eq!(s.minute_stats("b", T0 + 500 * MIN, 150).unwrap().len(), 150);
        let q = DashQuery { batch: Some("b".into()), minutes: 150, ..DashQuery::default() };
        assert_eq!(s.dashboard(&q, T0 + 2 * MIN).unwrap().batches[0].minutes.len(), 3);
    }

    /// The newest run that did work stays the batch's last run: one that
    /// stepped down after it (the lock held; paused or aborted having done
    /// nothing) is kept apart, and a run paused midway after doing work,
    /// or one that found nothing to do, did work.
    fn a_stepped_down_run_does_not_hide_the_run_that_did_work(db, s) {
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let live = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(live), T0 + MIN, T0, &[], 1).unwrap();
        let step = |s: &mut Store, state: RunState, at: i64| {
            let r = s.start_run("b", Trigger::Schedule, None, &holder(2), at, None).unwrap();
            s.finish_run(r, &RunEnd::new(state, "b: stepped down"), at).unwrap();
            r
        };
        let last = |s: &Store| {
            let info = s.batch_infos(Some("b")).unwrap().remove(0);
            (info.last_run.map(|r| (r.id, r.state)), info.stepped_down.map(|r| r.id))
        };
        let held = step(&mut s, RunState::LockHeld, T0 + 5);
        assert_eq!(last(&s), (Some((live, RunState::Running)), Some(held)));
        let paused = step(&mut s, RunState::Paused, T0 + 6);
        assert_eq!(last(&s), (Some((live, RunState::Running)), Some(paused)));
        // The live run completes an item and is then paused: it did work.
        let c = s.claim("b", live, 1, T0 + MIN, T0 + 7).unwrap().unwrap();
        let done = Completion { usage: None, item_id: c[0].item_id, token: c[0].token, run_id: live,
            outcome: Outcome::Done, result: Some("1"), cost: None, version: None, now: T0 + 8 };
        assert!(s.complete(&done, &done_event("k000")).unwrap());
        s.finish_run(live, &RunEnd::new(RunState::Paused, "b: 1 done; stopped: paused"), T0 + 9).unwrap();
        assert_eq!(last(&s), (Some((live, RunState::Paused)), Some(paused)));
        let aborted = step(&mut s, RunState::Aborted, T0 + 10);
        assert_eq!(last(&s), (Some((live, RunState::Paused)), Some(aborted)));
        let ok = step(&mut s, RunState::Ok, T0 + 11);
        assert_eq!(last(&s), (Some((ok, RunState::Ok)), None), "a run that found nothing to do ran");
        // Only step-downs: no run did work.
        s.ensure_batch("c", T0).unwrap();
        let r = s.start_run("c", Trigger::Schedule, None, &holder(2), T0, None).unwrap();
        s.finish_run(r, &RunEnd::new(RunState::LockHeld, "c: stepped down"), T0).unwrap();
        let info = s.batch_infos(Some("c")).unwrap().remove(0);
        assert_eq!((info.last_run.map(|r| r.id), info.stepped_down.map(|r| r.id)), (None, Some(r)));
    }

    /// "Since you last looked" counts every run that overlaps the time
    /// since: one that began before and ended after, one still running,
    /// one that began after; not one that ended before.
    fn since_counts_every_run_that_overlaps_the_time_since(db, s) {
        s.ensure_batch("b", T0).unwrap();
        let run = |s: &mut Store, from: i64, to: Option<(i64, RunState)>| {
            let r = s.start_run("b", Trigger::Manual, None, &holder(1), from, None).unwrap();
            if let Some((at, state)) = to {
                s.finish_run(r, &RunEnd::new(state, "b: ran"), at).unwrap();
            }
        };
        run(&mut s, T0, Some((T0 + MIN, RunState::Failed)));
        run(&mut s, T0 + MIN, Some((T0 + 3 * MIN, RunState::Ok)));
        run(&mut s, T0 + MIN, None);
        run(&mut s, T0 + 4 * MIN, Some((T0 + 5 * MIN, RunState::Failed)));
        let since = s.since(T0 + 2 * MIN, T0 + 3 * MIN).unwrap();
        let runs: Vec<(&str, &str, i64)> = since.runs.iter().map(|(b, st, n)| (b.as_str(), st.as_str(), *n)).collect();
        assert_eq!(runs, [("b", "failed", 1), ("b", "ok", 1), ("b", "running", 1)]);
    }

    /// A run the store still says is running is counted as it is, as the
    /// Batches pane says: crashed when its process here is gone (with a
    /// seat or without), silent when its seat elsewhere expired; a live
    /// one is running.
    fn since_counts_a_dead_running_run_as_it_is(db, s) {
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let host = nightshift::util::identity::host();
        let dead = Holder { host: host.clone(), pid: gone.id(), pid_start: None };
        let live = Holder { host, pid: std::process::id(), pid_start: None };
        let start = |s: &mut Store, batch: &str, h: &Holder| s.start_run(batch, Trigger::Manual, None, h, T0, None).unwrap();
        // Crashed holding its seat, and crashed after losing it.
        let seated = start(&mut s, "b", &dead);
        s.acquire_lock("b", "tok", &dead, Some(seated), T0 + 10 * MIN, T0, &[], 1).unwrap();
        start(&mut s, "b", &dead);
        // Silent: elsewhere, its seat expired.
        let far = start(&mut s, "c", &holder(9));
        s.acquire_lock("c", "tok", &holder(9), Some(far), T0 + MIN, T0, &[], 1).unwrap();
        // Live: this process.
        let mine = start(&mut s, "d", &live);
        s.acquire_lock("d", "tok", &live, Some(mine), T0 + 10 * MIN, T0, &[], 1).unwrap();
        let since = s.since(T0 - 1, T0 + 2 * MIN).unwrap();
        let runs: Vec<(&str, &str, i64)> = since.runs.iter().map(|(b, st, n)| (b.as_str(), st.as_str(), *n)).collect();
        assert_eq!(runs, [("b", "crashed", 2), ("c", "silent", 1), ("d", "running", 1)]);
        // What the Batches pane says of the same runs.
        let b = s.batch_infos(Some("b")).unwrap().remove(0);
        assert_eq!(b.last_run_seen().unwrap().as_str(), "crashed");
    }

    /// The retry tier says how many are due and when the next of the rest
    /// is; a batch's hold is part of its info.
    fn the_retry_tier_says_what_is_due_and_when_the_rest_is(db, s) {
        use nightshift::model::waiting::RetryTier;
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        assert_eq!(s.retry_tier("b", T0).unwrap(), RetryTier::default());
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
        for (i, tier, next) in [(0, Tier::Retry, Some(T0 + 10 * MIN)), (1, Tier::Retry, Some(T0 + 20 * MIN)), (2, Tier::Manual, None)] {
            let f = nightshift::store::Failure { item_id: c[i].item_id, token: c[i].token, run_id: run,
                tier, error_class: "E", message: "m", next_attempt_at: next, cost: None, now: T0 };
            assert!(s.fail(&f, &ev).unwrap());
        }
        assert_eq!(s.retry_tier("b", T0 + MIN).unwrap(), RetryTier { due: 0, later: 2, next_at: Some(T0 + 10 * MIN), ..RetryTier::default() });
        assert_eq!(s.retry_tier("b", T0 + 15 * MIN).unwrap(), RetryTier { due: 1, later: 1, next_at: Some(T0 + 20 * MIN), ..RetryTier::default() });
        assert_eq!(s.batch_infos(Some("b")).unwrap()[0].hold, None);
        s.set_hold("b", T0 + 30 * MIN, Some(&c[0].key)).unwrap();
        let hold = s.batch_infos(Some("b")).unwrap()[0].hold.clone().unwrap();
        assert_eq!((hold.until, hold.key), (T0 + 30 * MIN, Some(c[0].key.clone())));
    }

    /// A large retry tier is counted exactly on either side of now, also
    /// past the 256 entries a side is first counted to (the other side the
    /// rest of the tier's total), and when both sides are large; a retry
    /// failure with no time is neither due nor later.
    fn a_large_retry_tier_is_counted_exactly_on_both_sides_of_now(db, s) {
        use nightshift::model::waiting::RetryTier;
        let n = 700;
        s.add_items("b", &items(n), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, n, T0 + MIN, T0).unwrap().unwrap();
        let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
        // 300 at +10 min, 360 at +20 min, 40 with no time; in short
        // transactions (PostgreSQL's other tests wait for a long one).
        for (chunk, claims) in c.chunks(100).enumerate() {
            s.group(|s| {
                for (j, claim) in claims.iter().enumerate() {
                    let next = match chunk * 100 + j {
                        0..300 => Some(T0 + 10 * MIN),
                        300..660 => Some(T0 + 20 * MIN),
                        _ => None,
                    };
                    let f = nightshift::store::Failure { item_id: claim.item_id, token: claim.token, run_id: run,
                        tier: Tier::Retry, error_class: "E", message: "m", next_attempt_at: next, cost: None, now: T0 };
                    assert!(s.fail(&f, &ev).unwrap());
                }
            }).unwrap();
        }
        let tier = |s: &Store, at| { let t = s.retry_tier("b", at).unwrap(); (t.due, t.later, t.next_at) };
        assert_eq!(tier(&s, T0 + MIN), (0, 660, Some(T0 + 10 * MIN)), "all later");
        assert_eq!(tier(&s, T0 + 15 * MIN), (300, 360, Some(T0 + 20 * MIN)), "both sides large");
        assert_eq!(s.retry_tier("b", T0 + 30 * MIN).unwrap(),
            RetryTier { due: 660, later: 0, next_at: None, pending_due: 0, pending_later: 0 }, "all due");
    }

    /// `requeue --outcome empty`: done items of that outcome back to
    /// pending, to run again: their result and operation id dropped, their
    /// attempts kept, each move an event with its actor. By key, an item
    /// in another state refuses the whole requeue. `items --outcome` and
    /// the dashboard's filter list them, counted from the counters.
    fn done_items_of_an_outcome_are_requeued_to_run_again(db, s) {
        s.add_items("b", &items(4), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 4, T0 + MIN, T0).unwrap().unwrap();
        let op = NewEvent::new(T0, "b", EventKind::OpId, "op").key("k002");
        assert!(s.set_op_id(c[2].item_id, c[2].token, "op-2", &op).unwrap());
        for (i, outcome, result) in [(0, Outcome::Done, Some("1")), (1, Outcome::Empty, None), (2, Outcome::Empty, None)] {
            let d = Completion { usage: None, item_id: c[i].item_id, token: c[i].token, run_id: run,
                outcome, result, cost: None, version: None, now: T0 };
            assert!(s.complete(&d, &done_event(&c[i].key)).unwrap());
        }
        let f = nightshift::store::Failure { item_id: c[3].item_id, token: c[3].token, run_id: run,
            tier: Tier::Manual, error_class: "E", message: "m", next_attempt_at: None, cost: None, now: T0 };
        assert!(s.fail(&f, &NewEvent::new(T0, "b", EventKind::Quarantined, "q")).unwrap());

        let empty = ItemFilter { outcome: Some(Outcome::Empty), ..ItemFilter::default() };
        let listed: Vec<String> = s.items("b", &empty).unwrap().into_iter().map(|i| i.key).collect();
        assert_eq!(listed, ["k001", "k002"]);
        let page = |s: &Store, status, outcome| {
            let q = DashQuery { batch: Some("b".into()),
                items: Some(ItemsQuery { status, outcome, limit: 10, ..ItemsQuery::default() }),
                ..DashQuery::default() };
            let p = s.dashboard(&q, T0).unwrap().items.unwrap();
            (p.total, p.rows.into_iter().map(|r| r.key).collect::<Vec<_>>())
        };
        use nightshift::model::Status;
        assert_eq!(page(&s, Some(Status::Done), Some(Outcome::Empty)), (2, vec!["k001".into(), "k002".into()]));
        assert_eq!(page(&s, Some(Status::Done), Some(Outcome::Done)), (1, vec!["k000".into()]));
        assert_eq!(page(&s, Some(Status::Done), None).0, 3, "status done: every outcome");

        let by_outcome = Selection { outcome: Some(Outcome::Empty), ..Selection::default() };
        let dry = s.requeue("b", &by_outcome, false, true, "me", T0).unwrap();
        assert_eq!(dry.iter().map(|r| (r.key.as_str(), r.outcome, r.tier)).collect::<Vec<_>>(),
            [("k001", Some(Outcome::Empty), None), ("k002", Some(Outcome::Empty), None)]);
        assert_eq!(s.counts("b").unwrap().empty, 2, "a dry run moves nothing");
        let mixed = Selection { keys: vec!["k001".into(), "k000".into()], ..by_outcome.clone() };
        let err = s.requeue("b", &mixed, false, false, "me", T0).unwrap_err().to_string();
        assert!(err.contains("k000 (done)") && err.contains("nothing was requeued"), "{err}");
        let not_failed = Selection { keys: vec!["k001".into()], ..Selection::default() };
        let err = s.requeue("b", &not_failed, false, false, "me", T0).unwrap_err().to_string();
        assert!(err.contains("k001 (done/empty)") && err.contains("--outcome"), "{err}");
        let with_tier = Selection { tier: Some(Tier::Manual), ..by_outcome.clone() };
        assert!(s.requeue("b", &with_tier, false, false, "me", T0).is_err());
        assert_eq!(s.counts("b").unwrap().empty, 2, "nothing moved");

        let moved = s.requeue("b", &by_outcome, false, false, "me", T0 + 1).unwrap();
        assert_eq!(moved.len(), 2);
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.pending, counts.done, counts.empty, counts.manual), (2, 1, 0, 1));
        let item = s.item("b", "k002").unwrap();
        assert_eq!((item.status, item.outcome, item.result.map(|r| r.value()), item.op_id.as_deref(), item.attempts),
            (Status::Pending, None, None, None, 1));
        let requeued = s.events(&EventFilter { kinds: vec!["requeued".into()], ..Default::default() }).unwrap();
        assert_eq!(requeued.len(), 2);
        assert_eq!((requeued[1].key.as_deref(), requeued[1].actor.as_deref()), (Some("k002"), Some("me")));
        assert_eq!(requeued[1].message, "requeued from empty by me");
        assert_eq!((&requeued[1].fields["outcome"], &requeued[1].fields["op_id"]), (&serde_json::json!("empty"), &serde_json::json!("op-2")));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn a_run_names_its_seat_and_keeps_its_counts(db, s) {
        assert!(matches!(s.runs("nope", 5), Err(StoreError::UnknownBatch { .. })));
        s.acquire_lock("b", "tok", &holder(1), None, T0 + MIN, T0, &[], 1).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, Some("tok")).unwrap();
        assert_eq!(s.locks("b").unwrap()[0].run_id, Some(run), "named in the same transaction");
        let other = s.start_run("b", Trigger::Manual, None, &holder(2), T0 + 1, None).unwrap();
        s.add_retried(run, 3).unwrap();
        s.add_retried(run, 4).unwrap();
        assert_eq!(s.run(run).unwrap().unwrap().counts.retried, 7);
        let mut open: Vec<i64> = s.open_runs("b").unwrap().iter().map(|r| r.id).collect();
        open.sort_unstable();
        assert_eq!(open, [run, other]);
        // A run holding a seat is alive, whatever the caller concluded.
        s.mark_crashed(&[run, other], T0 + 2).unwrap();
        assert_eq!(s.run(run).unwrap().unwrap().state, RunState::Running);
        assert_eq!(s.run(other).unwrap().unwrap().state, RunState::Crashed);
        assert_eq!(s.run(other + 100).unwrap(), None);
    }

    fn the_log_and_the_dead_letters_are_read_as_they_were_written(db, s) {
        assert!(matches!(s.events(&EventFilter { batch: Some("nope".into()), ..Default::default() }), Err(StoreError::UnknownBatch { .. })));
        assert!(matches!(s.dead_letters("nope", None, None), Err(StoreError::UnknownBatch { .. })));
        assert!(matches!(s.dlq_groups("nope", T0), Err(StoreError::UnknownBatch { .. })));
        s.add_items("a", &items(1), T0, |_| {}).unwrap();
        s.add_items("b", &items(4), T0, |_| {}).unwrap();
        s.log_event(&NewEvent::new(T0, "a", EventKind::Alert, "a1").key("k000")).unwrap();
        s.log_event(&NewEvent::new(T0 + 1, "b", EventKind::Alert, "b1").key("k000")).unwrap();
        s.log_event(&NewEvent::new(T0 + 2, "b", EventKind::Done, "b2")).unwrap();
        // A key without a batch finds the item in every batch.
        let by_key = s.events(&EventFilter { key: Some("k000".into()), ..Default::default() }).unwrap();
        assert_eq!(by_key.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["a1", "b1"]);
        assert_eq!(by_key[0].label.as_deref(), Some("label 0"));
        let one = s.events(&EventFilter { batch: Some("b".into()), key: Some("k000".into()), ..Default::default() }).unwrap();
        assert_eq!(one.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["b1"]);
        // Counts by batch and kind, strictly after `since`, in order.
        assert_eq!(s.event_kinds_since(T0).unwrap(), [("b".to_string(), "alert".to_string(), 1), ("b".to_string(), "done".to_string(), 1)]);
        // Dead letters: two classes tied on the last 24 h order by what is failed now, then by name.
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 4, T0 + MIN, T0).unwrap().unwrap();
        let ev = NewEvent::new(T0, "b", EventKind::Failed, "failed");
        let hour = 60 * MIN;
        let at = [T0 - 30 * hour, T0, T0, T0];
        let class = ["Zeta", "Zeta", "Alpha", "Beta"];
        for i in 0..4 {
            let f = nightshift::store::Failure {
                item_id: c[i].item_id, token: c[i].token, run_id: run, tier: Tier::Manual, error_class: class[i],
                message: "boom", next_attempt_at: None, cost: None, now: at[i],
            };
            assert!(s.fail(&f, &ev).unwrap());
        }
        let g = s.dlq_groups("b", T0).unwrap();
        let row = |i: usize| (g[i].error_class.as_str(), g[i].last_24h, g[i].prev_24h, g[i].total, g[i].manual_now);
        assert_eq!([row(0), row(1), row(2)], [("Zeta", 1, 1, 2, 2), ("Alpha", 1, 0, 1, 1), ("Beta", 1, 0, 1, 1)]);
        let mut w = s.dlq_window_counts("b", T0, 24 * hour).unwrap();
        w.sort();
        assert_eq!(w, [("Alpha".to_string(), 1, 0), ("Beta".to_string(), 1, 0), ("Zeta".to_string(), 1, 1)]);
        let mut w = s.dlq_window_counts("b", T0, 10 * hour).unwrap();
        w.sort();
        assert_eq!(w.last().unwrap(), &("Zeta".to_string(), 1, 0), "30 h ago is outside both windows");
        let since = s.dead_letters("b", Some(T0), None).unwrap();
        assert_eq!(since.iter().map(|d| d.key.as_str()).collect::<Vec<_>>(), ["k001", "k002", "k003"]);
        assert_eq!(s.dead_letters("b", None, None).unwrap()[0].key, "k000", "oldest first");
        assert_eq!(s.item_failures(c[0].item_id).unwrap()[0].error_class, "Zeta");
    }

    // ---- Steering a live batch: cancel, stop ----

    fn a_cancelled_claim_is_never_marked_done_and_goes_where_asked(db, s) {
        use nightshift::store::{CancelOutcome, CancelTo};
        s.add_items("b", &items(5), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        let asked = s.cancel_item("b", "k000", CancelTo::Manual, "ops@h2", "stuck", T0).unwrap();
        assert_eq!(asked, CancelOutcome::Asked { run_id: Some(run), waiting: None });
        assert_eq!(s.steering("b", run, "tok").unwrap().cancels, vec![c[0].item_id]);
        // The worker's success racing the cancel loses, alone or in a group;
        // so do a failure, a release and a further attempt.
        let done = Completion { usage: None, item_id: c[0].item_id, token: c[0].token, run_id: run,
            outcome: Outcome::Done, result: Some("{}"), cost: None, now: T0 + 1, version: None };
        assert!(!s.complete(&done, &done_event("k000")).unwrap());
        let ev = done_event("k000");
        assert_eq!(s.complete_all(&[(done.clone(), &ev)]).unwrap(), vec![false]);
        let fail = nightshift::store::Failure { item_id: c[0].item_id, token: c[0].token,
            run_id: run, tier: Tier::Retry, error_class: "X", message: "m",
            next_attempt_at: None, cost: None, now: T0 + 1 };
        assert!(!s.fail(&fail, &done_event("k000")).unwrap());
        assert!(!s.release(c[0].item_id, c[0].token, run, true, &done_event("k000")).unwrap());
        assert_eq!(s.begin_attempt(c[0].item_id, c[0].token, T0 + 1).unwrap(), None);
        assert_eq!(s.item("b", "k000").unwrap().status, nightshift::model::Status::Claimed);
        // A stale token settles nothing; the holder's does.
        assert_eq!(s.settle_cancel("b", c[0].item_id, c[0].token - 1, (run, T0 + 2), CancelledWhile::Running).unwrap(), None);
        let settled = s.settle_cancel("b", c[0].item_id, c[0].token, (run, T0 + 2), CancelledWhile::Running).unwrap().unwrap();
        assert_eq!((settled.key.as_str(), settled.to, settled.by.as_deref()),
            ("k000", CancelTo::Manual, Some("ops@h2")));
        let item = s.item("b", "k000").unwrap();
        assert_eq!((item.tier, item.error_class.as_deref(), item.outcome),
            (Some(Tier::Manual), Some("Cancelled"), None));
        assert_eq!(item.error_message.as_deref(), Some("cancelled by ops@h2: stuck"));
        assert!(s.steering("b", run, "tok").unwrap().cancels.is_empty());
        // --to pending: it runs again.
        s.cancel_item("b", "k001", CancelTo::Pending, "ops@h2", "retry it", T0).unwrap();
        s.settle_cancel("b", c[1].item_id, c[1].token, (run, T0 + 2), CancelledWhile::Running).unwrap().unwrap();
        assert_eq!(s.item("b", "k001").unwrap().status, nightshift::model::Status::Pending);
        // Uncancelled claims complete as ever; a done item is refused.
        let ok = Completion { usage: None, item_id: c[2].item_id, token: c[2].token, ..done };
        assert!(s.complete(&ok, &done_event("k002")).unwrap());
        assert!(matches!(
            s.cancel_item("b", "k002", CancelTo::Manual, "ops@h2", "late", T0),
            Err(StoreError::Refused(_))
        ));
        // Not running: moved at once; again: nothing changes. Unknown: named.
        let moved = s.cancel_item("b", "k003", CancelTo::Manual, "ops@h2", "no", T0).unwrap();
        assert_eq!(moved, CancelOutcome::Moved { from: "pending".into() });
        let again = s.cancel_item("b", "k003", CancelTo::Manual, "ops@h2", "no", T0).unwrap();
        assert_eq!(again, CancelOutcome::Already { at: "failed/manual".into() });
        assert_eq!(
            s.cancel_item("b", "k004", CancelTo::Pending, "ops@h2", "no", T0).unwrap(),
            CancelOutcome::Already { at: "pending".into() }
        );
        assert!(matches!(
            s.cancel_item("b", "nope", CancelTo::Manual, "ops@h2", "no", T0),
            Err(StoreError::UnknownKey { .. })
        ));
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.manual, counts.pending, counts.done, counts.claimed), (2, 2, 1, 0));
        let kinds = |k: &str| s.events(&EventFilter { kinds: vec![k.into()], ..Default::default() }).unwrap();
        assert_eq!(kinds("cancel-asked").len(), 2);
        let cancelled = kinds("cancelled");
        assert_eq!(cancelled.len(), 3);
        assert!(cancelled.iter().all(|e| e.actor.as_deref() == Some("ops@h2")), "{cancelled:?}");
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    /// The completions per minute (the dashboard's Activity) count the
    /// workers' answers only, as the runs do: a claim cancelled (asked and
    /// settled, or of a dead runner, moved at once) or skipped ends no
    /// attempt in done or failed; a failure and a success do.
    fn a_cancel_or_a_skip_of_a_claim_is_no_completion(db, s) {
        use nightshift::store::CancelTo;
        s.add_items("b", &items(5), T0, |_| {}).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let dead = Holder { host: nightshift::util::identity::host(), pid: gone.id(), pid_start: Some(7) };
        let old = s.start_run("b", Trigger::Manual, None, &dead, T0, None).unwrap();
        s.acquire_lock("b", "old", &dead, Some(old), T0 + MIN, T0, &[], 2).unwrap();
        let left = s.claim("b", old, 2, T0 + MIN, T0).unwrap().unwrap();
        // Both claims of the dead runner: one cancelled, one skipped.
        s.cancel_item("b", &left[0].key, CancelTo::Manual, "ops", "stuck", T0 + 1).unwrap();
        s.skip("b", &[left[1].key.clone()], "by hand", "ops", T0 + 1).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 2).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        s.cancel_item("b", &c[0].key, CancelTo::Manual, "ops", "stuck", T0 + 1).unwrap();
        s.settle_cancel("b", c[0].item_id, c[0].token, (run, T0 + 2), CancelledWhile::Running).unwrap().unwrap();
        assert_eq!(s.counts("b").unwrap().manual, 2);
        assert_eq!(s.minute_stats("b", T0 + 2, 1).unwrap(), [(0, 0)], "no answer, no completion");
        let fail = nightshift::store::Failure { item_id: c[1].item_id, token: c[1].token, run_id: run,
            tier: Tier::Manual, error_class: "X", message: "m", next_attempt_at: None, cost: None, now: T0 + 2 };
        assert!(s.fail(&fail, &done_event(&c[1].key)).unwrap());
        let done = Completion { usage: None, item_id: c[2].item_id, token: c[2].token, run_id: run,
            outcome: Outcome::Done, result: Some("{}"), cost: None, now: T0 + 2, version: None };
        assert!(s.complete(&done, &done_event(&c[2].key)).unwrap());
        assert_eq!(s.minute_stats("b", T0 + 2, 1).unwrap(), [(1, 1)]);
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.manual, counts.done, counts.skipped, counts.claimed), (3, 1, 1, 0));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    /// A claim whose runner is dead has nobody to hear a cancel: it moves
    /// at once (a holder here whose process is gone, before its seat's
    /// expiry; a holder elsewhere once its seat expired), and a stop asks
    /// no dead seat.
    fn a_cancel_of_a_dead_runners_claim_moves_it_at_once(db, s) {
        use nightshift::store::{CancelOutcome, CancelTo};
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let here = Holder { host: nightshift::util::identity::host(), pid: gone.id(), pid_start: Some(7) };
        let run = s.start_run("b", Trigger::Manual, None, &here, T0, None).unwrap();
        s.acquire_lock("b", "tok", &here, Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        assert!(s.ask_stop("b", false, "ops@h2", T0 + 1).unwrap().is_empty(), "a crashed runner is not asked");
        // A skip of its claim marks it, the dry run first.
        let keys = ["k002".to_string()];
        assert_eq!(s.skip_dry_run("b", &keys, T0 + 1).unwrap().skipped, keys);
        assert_eq!(s.skip("b", &keys, "by hand", "ops@h2", T0 + 1).unwrap().skipped, keys);
        let item = s.item("b", "k002").unwrap();
        assert_eq!((item.status, item.outcome, item.lease_run), (nightshift::model::Status::Done, Some(Outcome::Skipped), None));
        let moved = s.cancel_item("b", "k000", CancelTo::Manual, "ops@h2", "stuck", T0 + 1).unwrap();
        assert_eq!(moved, CancelOutcome::Orphaned { run_id: Some(run) });
        let item = s.item("b", "k000").unwrap();
        assert_eq!((item.status, item.tier, item.error_class.as_deref()),
            (nightshift::model::Status::Failed, Some(Tier::Manual), Some("Cancelled")));
        assert!(s.steering("b", run, "tok").unwrap().cancels.is_empty(), "nothing left asked");
        // --to pending: the stopped attempt is not counted.
        s.cancel_item("b", "k001", CancelTo::Pending, "ops@h2", "again", T0 + 1).unwrap();
        let item = s.item("b", "k001").unwrap();
        assert_eq!((item.status, item.attempts), (nightshift::model::Status::Pending, 0));
        // The dead run's late answer is refused.
        let done = Completion { usage: None, item_id: c[0].item_id, token: c[0].token, run_id: run,
            outcome: Outcome::Done, result: Some("{}"), cost: None, now: T0 + 2, version: None };
        assert!(!s.complete(&done, &done_event("k000")).unwrap());
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.manual, counts.pending, counts.claimed, counts.skipped), (1, 1, 0, 1));
        let cancelled = s.events(&EventFilter { kinds: vec!["cancelled".into()], ..Default::default() }).unwrap();
        assert!(cancelled[0].message.contains("it was claimed by run 1, whose runner is gone; now manual"), "{cancelled:?}");

        // Elsewhere: live until its seat expires, then moved at once.
        s.add_items("c", &items(2), T0, |_| {}).unwrap();
        let far = s.start_run("c", Trigger::Manual, None, &holder(9), T0, None).unwrap();
        s.acquire_lock("c", "tok-c", &holder(9), Some(far), T0 + MIN, T0, &[], 1).unwrap();
        s.claim("c", far, 2, T0 + MIN, T0).unwrap().unwrap();
        assert!(matches!(s.skip("c", &["k001".to_string()], "x", "ops@h2", T0 + 1),
            Err(StoreError::Refused(_))), "a live runner's claim is in flight");
        assert_eq!(s.cancel_item("c", "k000", CancelTo::Manual, "ops@h2", "x", T0 + 1).unwrap(),
            CancelOutcome::Asked { run_id: Some(far), waiting: None });
        assert_eq!(s.cancel_item("c", "k001", CancelTo::Manual, "ops@h2", "x", T0 + 2 * MIN).unwrap(),
            CancelOutcome::Orphaned { run_id: Some(far) });
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn a_stop_is_asked_of_every_seat_not_crashed_and_now_is_never_weakened(db, s) {
        s.add_items("b", &items(1), T0, |_| {}).unwrap();
        assert!(s.ask_stop("b", false, "ops@h2", T0).unwrap().is_empty(), "no runner");
        let (a, b) = (
            s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap(),
            s.start_run("b", Trigger::Manual, None, &holder(2), T0, None).unwrap(),
        );
        s.acquire_lock("b", "tok-a", &holder(1), Some(a), T0 + MIN, T0, &[], 2).unwrap();
        s.acquire_lock("b", "tok-b", &holder(2), Some(b), T0 + MIN, T0, &[], 2).unwrap();
        assert_eq!(s.steering("b", a, "tok-a").unwrap().stop, None);
        assert!(s.batch_infos(Some("b")).unwrap()[0].locks.iter().all(|l| l.stop_by.is_none()));
        let asked = s.ask_stop("b", false, "ops@h2", T0 + 1).unwrap();
        let mut pids: Vec<u32> = asked.iter().map(|a| a.seat.holder.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, [1, 2]);
        assert!(asked.iter().all(|a| a.silent_since.is_none()), "both live");
        assert_eq!(s.steering("b", a, "tok-a").unwrap().stop, Some((false, Some("ops@h2".into()))));
        // A seat asked to stop claims nothing more, though it holds the
        // lock: a runner frozen while it was asked claims nothing when it
        // wakes, before its heartbeat reads the ask.
        assert_eq!(s.claim("b", a, 1, T0 + MIN, T0 + 1).unwrap(), Some(Vec::new()));
        assert_eq!(s.batch_infos(Some("b")).unwrap()[0].counts.pending, 1);
        // The views read who asked with the seats (the batch is `stopping`).
        let stop_by = |s: &Store| -> Vec<Option<String>> {
            s.batch_infos(Some("b")).unwrap()[0].locks.iter().map(|l| l.stop_by.clone()).collect()
        };
        assert_eq!(stop_by(&s), [Some("ops@h2".to_string()), Some("ops@h2".to_string())]);
        s.ask_stop("b", true, "ops@h2", T0 + 2).unwrap();
        s.ask_stop("b", false, "ops@h3", T0 + 3).unwrap();
        assert_eq!(s.steering("b", b, "tok-b").unwrap().stop.map(|(now, _)| now), Some(true));
        // A lapsed seat on another host is asked, and said silent: its
        // runner may come back (a frozen host, a partition), and stops.
        let silent = s.ask_stop("b", false, "ops@h2", T0 + 2 * MIN).unwrap();
        assert_eq!(silent.len(), 2);
        assert!(silent.iter().all(|a| a.silent_since.is_some()), "{silent:?}");
        assert!(silent[0].said(T0 + 2 * MIN).contains("(silent since "), "{silent:?}");
        let asked = s.events(&EventFilter { kinds: vec!["stop-asked".into()], ..Default::default() }).unwrap();
        assert_eq!(asked.len(), 4);
        assert_eq!(asked[0].actor.as_deref(), Some("ops@h2"));
        assert!(asked.iter().any(|e| e.message.contains("(silent since ")), "{asked:?}");
    }

    // ---- Limit pools ----

    /// A runner's places in flight are its while a seat of it is live, and
    /// free to the next call at once when its seats lapsed: never before
    /// (two live runners stay within the pool's concurrency), and not an
    /// `item_timeout` later (they were counted in flight until they
    /// lapsed). The views say them as the gone runner's, not in flight.
    fn a_gone_runners_places_are_free_and_a_live_ones_are_not(db, s) {
        use nightshift::store::{PoolCall, PoolSpec, place_key};
        let spec = PoolSpec { name: "p".into(), dims: Vec::new(), concurrency: Some(2) };
        let calls = |pid: u32, n: usize| {
            vec![PoolCall { runner: place_key(&holder(pid)), estimate: 0, until: T0 + 60 * MIN, item: None }; n]
        };
        s.acquire_lock("b", "tok1", &holder(1), None, T0 + MIN, T0, &[], 2).unwrap();
        s.acquire_lock("b", "tok2", &holder(2), None, T0 + MIN, T0, &[], 2).unwrap();
        assert_eq!(s.pool_admit(&spec, &calls(1, 2), T0).unwrap().admitted, 2);
        // Runner 1 is live: no room for runner 2.
        assert_eq!(s.pool_admit(&spec, &calls(2, 1), T0 + 1000).unwrap().admitted, 0);
        let v = s.pool_view(&spec, T0 + 1000).unwrap();
        assert_eq!((v.in_flight, v.gone.len()), (2, 0));
        // Runner 2 renews; runner 1's seat lapses: its places are free.
        assert!(s.renew_lock("b", "tok2", T0 + 3 * MIN).unwrap());
        let v = s.pool_view(&spec, T0 + MIN + 1).unwrap();
        assert_eq!(v.in_flight, 0);
        assert_eq!(
            v.gone.iter().map(|g| (g.runner.as_str(), g.places, g.until)).collect::<Vec<_>>(),
            [("host-1:1", 2, T0 + 60 * MIN)]
        );
        assert_eq!(s.pool_admit(&spec, &calls(2, 2), T0 + MIN + 1).unwrap().admitted, 2);
        let v = s.pool_view(&spec, T0 + MIN + 2).unwrap();
        assert_eq!((v.in_flight, v.gone.len()), (2, 0));
        // Runner 2 live, its places taken: none for another.
        s.acquire_lock("b", "tok3", &holder(3), None, T0 + 3 * MIN, T0 + MIN + 2, &[], 2).unwrap();
        assert_eq!(s.pool_admit(&spec, &calls(3, 1), T0 + MIN + 3).unwrap().admitted, 0);
    }

    fn a_pool_admits_within_every_limit_and_settles_with_usage(db, s) {
        use nightshift::config::limits::Measure;
        use nightshift::store::{AttemptUsage, PoolCall, PoolDim, PoolHold, PoolSpec};
        let spec = PoolSpec {
            name: "openai".into(),
            dims: vec![
                PoolDim { name: "requests/s".into(), measure: Measure::Requests, count: 2, per_us: 1_000_000 },
                PoolDim { name: "tokens/min".into(), measure: Measure::Tokens, count: 600, per_us: 60_000_000 },
            ],
            concurrency: Some(3),
        };
        let call = |_id: &str, estimate| PoolCall { runner: "r1".into(), estimate, until: T0 + MIN, item: None };
        // Two requests a second: the third waits half a second.
        let a = s.pool_admit(&spec, &[call("c1", 100), call("c2", 100), call("c3", 100)], T0).unwrap();
        assert_eq!(a.admitted, 2);
        let w = a.wait.unwrap();
        assert_eq!((w.dimension.as_str(), w.until), ("requests/s", T0 + 500));
        // 600 tokens a minute: 200 drawn, 400 left; a call of 500 waits
        // for the refill (10 tokens a second: 10 s).
        let a = s.pool_admit(&spec, &[call("c3", 500)], T0 + 1000).unwrap();
        assert_eq!(a.admitted, 0);
        let w = a.wait.unwrap();
        assert_eq!((w.dimension.as_str(), w.until), ("tokens/min", T0 + 10_000));
        // A third call fits; then all three places in flight are taken.
        assert_eq!(s.pool_admit(&spec, &[call("c3", 100)], T0 + 1000).unwrap().admitted, 1);
        let a = s.pool_admit(&spec, &[call("c4", 0)], T0 + 2000).unwrap();
        assert_eq!((a.admitted, a.wait.unwrap().dimension.as_str()), (0, "concurrency"));
        // Settled: c1 used 300 tokens (200 more than reserved), c2 reported
        // nothing (its 100 stand); both places are given back.
        let usage = |call: &str, attempt, input: Option<i64>, output: Option<i64>| AttemptUsage {
            batch: "b".into(), run_id: 7, key: call.into(), attempt, pool: Some("openai".into()),
            place: Some("r1".into()), with_done: false, at: T0 + 2000, estimate: 100, input_tokens: input, output_tokens: output,
        };
        s.settle_usage(Some(&spec), &[usage("c1", 1, Some(100), Some(200)), usage("c2", 1, None, None)]).unwrap();
        let v = s.pool_view(&spec, T0 + 2000).unwrap();
        // The dashboard reads the same, in its one snapshot.
        let q = nightshift::store::DashQuery { pools: vec![spec.clone()], ..Default::default() };
        assert_eq!(s.dashboard(&q, T0 + 2000).unwrap().pools, std::slice::from_ref(&v));
        assert_eq!(v.in_flight, 1);
        // Drawn: 300 + 100 + 100 = 500, less 20 refilled in the 2 s since.
        assert_eq!((v.dims[1].dimension.as_str(), v.dims[1].used, v.dims[1].limit), ("tokens/min", 480, 600));
        assert_eq!((v.today.attempts, v.today.input_tokens, v.today.output_tokens), (2, 100, 200));
        assert_eq!((v.today.unreported, v.today.estimated_tokens), (1, 100));
        assert_eq!(v.tokens_per_minute.iter().sum::<i64>(), 400);
        assert_eq!(s.run_usage(7).unwrap().attempts, 2);
        // A hold stops every call until it ends, and is never shortened.
        let hold = |until| PoolHold {
            until,
            batch: "a".into(),
            key: Some("k".into()),
            label: None,
        };
        s.set_pool_hold("openai", &hold(T0 + 9000)).unwrap();
        s.set_pool_hold("openai", &hold(T0 + 4000)).unwrap();
        let a = s.pool_admit(&spec, &[call("c5", 0)], T0 + 3000).unwrap();
        let w = a.wait.unwrap();
        assert_eq!((a.admitted, w.dimension.as_str(), w.until), (0, "hold", T0 + 9000));
        assert_eq!(s.pool_hold("openai", T0 + 3000).unwrap().map(|h| h.batch), Some("a".into()));
        assert_eq!(s.pool_admit(&spec, &[call("c5", 0)], T0 + 9000).unwrap().admitted, 1);
        // A place whose runner died lapses at its `until`.
        let a = s.pool_admit(&spec, &[call("c6", 0), call("c7", 0)], T0 + MIN + 1).unwrap();
        assert_eq!(a.admitted, 2, "c3 and c5 lapsed");
    }

    /// A call whose estimate is past its whole bucket (`max_tokens` of 5M
    /// against 1M a day) draws the bucket; reporting no usage, its
    /// reservation stands as drawn. It was charged back whole, and every
    /// batch of the pool waited four days; now the bucket refills in a day.
    fn an_estimate_past_the_bucket_draws_the_bucket_and_no_more(db, s) {
        use nightshift::config::limits::Measure;
        use nightshift::store::{AttemptUsage, PoolCall, PoolDim, PoolSpec};
        const DAY_US: i64 = 86_400_000_000;
        let spec = PoolSpec {
            name: "p".into(),
            dims: vec![PoolDim { name: "tokens/day".into(), measure: Measure::Tokens, count: 1_000_000, per_us: DAY_US }],
            concurrency: None,
        };
        let call = |estimate| PoolCall { runner: "r1".into(), estimate, until: T0 + MIN, item: None };
        assert_eq!(s.pool_admit(&spec, &[call(5_000_000)], T0).unwrap().admitted, 1);
        let usage = AttemptUsage {
            batch: "b".into(), run_id: 7, key: "k".into(), attempt: 1, pool: Some("p".into()),
            place: None, with_done: false, at: T0, estimate: 5_000_000, input_tokens: None, output_tokens: None,
        };
        s.settle_usage(Some(&spec), &[usage]).unwrap();
        let a = s.pool_admit(&spec, &[call(1000)], T0).unwrap();
        let w = a.wait.expect("the bucket is drawn");
        assert!(w.until <= T0 + 86_400_000, "held till {} ms past T0", w.until - T0);
    }

    /// The defect: a claim whose call its pool deferred was counted in
    /// flight by every view; nothing in the store said it waited. A call
    /// the pool defers marks its item (since its first deferral), one it
    /// admits after that unmarks it, and a new claim starts unmarked.
    fn a_claim_its_pool_defers_waits_for_a_place_until_admitted(db, s) {
        use nightshift::model::Claim;
        use nightshift::store::{AttemptUsage, PoolCall, PoolItem, PoolSpec};
        s.add_items("b", &items(3), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + MIN, T0, &[], 1).unwrap();
        let c = s.claim("b", run, 3, T0 + MIN, T0).unwrap().unwrap();
        let spec = PoolSpec { name: "p".into(), dims: Vec::new(), concurrency: Some(1) };
        let call = |c: &Claim, deferred| PoolCall {
            runner: "r1".into(), estimate: 0, until: T0 + MIN,
            item: Some(PoolItem { id: c.item_id, token: c.token, deferred }),
        };
        let since = |s: &Store, key: &str| s.item("b", key).unwrap().pool_wait_since;
        // One place: the first call has it, the two others wait.
        let a = s.pool_admit(&spec, &[call(&c[0], false), call(&c[1], false), call(&c[2], false)], T0 + 1).unwrap();
        assert_eq!(a.admitted, 1);
        assert_eq!(s.pool_waiting("b").unwrap(), 2);
        assert_eq!((since(&s, "k000"), since(&s, "k001")), (None, Some(T0 + 1)));
        // Asked again and deferred again: waiting since the first time.
        let a = s.pool_admit(&spec, &[call(&c[1], true), call(&c[2], true)], T0 + 2).unwrap();
        assert_eq!(a.admitted, 0);
        assert_eq!(since(&s, "k002"), Some(T0 + 1));
        // The place given back: k001 has it and waits no more.
        let settled = AttemptUsage {
            batch: "b".into(), run_id: run, key: "k000".into(), attempt: 1, pool: Some("p".into()),
            place: Some("r1".into()), with_done: false, at: T0 + 3, estimate: 0, input_tokens: None, output_tokens: None,
        };
        s.settle_usage(Some(&spec), &[settled]).unwrap();
        let a = s.pool_admit(&spec, &[call(&c[1], true), call(&c[2], true)], T0 + 3).unwrap();
        assert_eq!(a.admitted, 1);
        assert_eq!((since(&s, "k001"), since(&s, "k002")), (None, Some(T0 + 1)));
        assert_eq!(s.pool_waiting("b").unwrap(), 1);
        // Released while waiting, it waits for nothing; claimed again, it
        // starts unmarked, and its old claim's call marks nothing.
        let ev = NewEvent::new(T0, "b", EventKind::Released, "released");
        assert!(s.release(c[2].item_id, c[2].token, run, true, &ev).unwrap());
        assert_eq!(s.pool_waiting("b").unwrap(), 0);
        let again = s.claim("b", run, 1, T0 + MIN, T0 + 4).unwrap().unwrap();
        assert_eq!((again[0].key.as_str(), since(&s, "k002")), ("k002", None));
        assert_eq!(s.pool_admit(&spec, &[call(&c[2], false)], T0 + 5).unwrap().admitted, 0);
        assert_eq!((since(&s, "k002"), s.pool_waiting("b").unwrap()), (None, 0));
        assert_eq!(s.pool_admit(&spec, &[call(&again[0], false)], T0 + 6).unwrap().admitted, 0);
        assert_eq!((since(&s, "k002"), s.pool_waiting("b").unwrap()), (Some(T0 + 6), 1));
    }

    fn a_pools_places_are_counted_per_runner_and_a_dead_runners_come_back(db, s) {
        use nightshift::store::{AttemptUsage, PoolCall, PoolSpec};
        let spec = PoolSpec { name: "p".into(), dims: Vec::new(), concurrency: Some(3) };
        let call = |runner: &str, until| PoolCall { runner: runner.into(), estimate: 0, until, item: None };
        let settled = |runner: &str| AttemptUsage {
            batch: "b".into(), run_id: 1, key: "k".into(), attempt: 1, pool: Some("p".into()),
            place: Some(runner.into()), with_done: false, at: T0, estimate: 0, input_tokens: None, output_tokens: None,
        };
        // r1 takes two places; r2, on another host, gets the third only.
        assert_eq!(s.pool_admit(&spec, &[call("r1", T0 + MIN), call("r1", T0 + MIN)], T0).unwrap().admitted, 2);
        let a = s.pool_admit(&spec, &[call("r2", T0 + 10 * MIN), call("r2", T0 + 10 * MIN)], T0).unwrap();
        assert_eq!((a.admitted, a.wait.unwrap().dimension.as_str()), (1, "concurrency"));
        assert_eq!(s.pool_view(&spec, T0).unwrap().in_flight, 3);
        // r1 gives one back: r2 takes it; r2's settlement gives back only its own.
        s.settle_usage(Some(&spec), &[settled("r1")]).unwrap();
        assert_eq!(s.pool_admit(&spec, &[call("r2", T0 + 10 * MIN)], T0 + 1).unwrap().admitted, 1);
        assert_eq!(s.pool_admit(&spec, &[call("r2", T0 + 10 * MIN)], T0 + 2).unwrap().admitted, 0);
        s.settle_usage(Some(&spec), &[settled("r2")]).unwrap();
        assert_eq!(s.pool_view(&spec, T0 + 3).unwrap().in_flight, 2, "r1's one and r2's one");
        // r1 dies holding its place: it comes back when r1's places lapse,
        // r2's stay taken.
        assert_eq!(s.pool_admit(&spec, &[call("r2", T0 + 10 * MIN)], T0 + 4).unwrap().admitted, 1);
        assert_eq!(s.pool_admit(&spec, &[call("r2", T0 + 10 * MIN)], T0 + MIN - 1).unwrap().admitted, 0);
        let a = s.pool_admit(&spec, &[call("r2", T0 + 10 * MIN), call("r2", T0 + 10 * MIN)], T0 + MIN).unwrap();
        assert_eq!(a.admitted, 1, "r1's place back, r2's two still taken");
        assert_eq!(s.pool_view(&spec, T0 + MIN).unwrap().in_flight, 3);
        // A runner never gives back more than it holds.
        for _ in 0..5 {
            s.settle_usage(Some(&spec), &[settled("r2")]).unwrap();
        }
        assert_eq!(s.pool_view(&spec, T0 + MIN).unwrap().in_flight, 0);
    }

    /// The defect: a limit showed its bucket's level (`requests/min 1/600`
    /// while a call a second passed): calls spread out leave the bucket
    /// near empty. It shows the calls of its last minute.
    fn a_pools_limit_shows_the_calls_of_its_window_not_the_buckets_level(db, s) {
        use nightshift::config::limits::Measure;
        use nightshift::store::{AttemptUsage, PoolCall, PoolDim, PoolSpec};
        let spec = PoolSpec {
            name: "p".into(),
            dims: vec![PoolDim { name: "requests/min".into(), measure: Measure::Requests, count: 600, per_us: 60_000_000 }],
            concurrency: None,
        };
        for i in 0..30 {
            let at = T0 + i * 1000;
            let call = PoolCall { runner: "r".into(), estimate: 0, until: at + MIN, item: None };
            assert_eq!(s.pool_admit(&spec, &[call], at).unwrap().admitted, 1);
            let u = AttemptUsage {
                batch: "b".into(), run_id: 1, key: format!("k{i}"), attempt: 1, pool: Some("p".into()), place: None, with_done: false,
                at, estimate: 0, input_tokens: None, output_tokens: None,
            };
            s.settle_usage(Some(&spec), &[u]).unwrap();
        }
        let v = s.pool_view(&spec, T0 + 29_000).unwrap();
        assert!(v.dims[0].used <= 1, "the bucket is near empty: {}", v.dims[0].used);
        assert_eq!((v.dims[0].recent, v.dims[0].limit), (30, 600));
        assert_eq!(v.today.attempts, 30);
    }

    fn a_pools_usage_is_kept_per_attempt_run_pool_and_window(db, s) {
        use nightshift::config::limits::Measure;
        use nightshift::store::{AttemptUsage, PoolDim, PoolSpec};
        s.add_items("b", &items(2), T0, |_| {}).unwrap();
        let spec = PoolSpec {
            name: "p".into(),
            dims: vec![
                PoolDim { name: "requests/min".into(), measure: Measure::Requests, count: 100, per_us: 60_000_000 },
                PoolDim { name: "tokens/day".into(), measure: Measure::Tokens, count: 1_000_000, per_us: 86_400_000_000 },
            ],
            concurrency: None,
        };
        // Minutes: T0 is 20 s into one.
        let m0 = T0 - T0.rem_euclid(MIN);
        let attempt = |key: &str, run, attempt, at, usage: Option<(i64, i64)>| AttemptUsage {
            batch: "b".into(), run_id: run, key: key.into(), attempt, pool: Some("p".into()), place: None, with_done: false,
            at, estimate: 50, input_tokens: usage.map(|u| u.0), output_tokens: usage.map(|u| u.1),
        };
        // k1 fails once reporting nothing (its 50 stand), then is done with 10 + 20;
        // k2 in another run, a minute later.
        s.settle_usage(Some(&spec), &[attempt("k000", 1, 1, m0 + 1000, None), attempt("k000", 1, 2, m0 + 2000, Some((10, 20)))]).unwrap();
        s.settle_usage(Some(&spec), &[attempt("k001", 2, 1, m0 + MIN + 1000, Some((1, 2)))]).unwrap();
        // Per attempt, as `show` lists them.
        let k1 = s.item_usage("b", "k000").unwrap();
        let seen: Vec<_> = k1.iter().map(|u| (u.run_id, u.attempt, u.at, u.estimate, u.input_tokens, u.output_tokens)).collect();
        assert_eq!(seen, [(1, 1, m0 + 1000, 50, None, None), (1, 2, m0 + 2000, 50, Some(10), Some(20))]);
        assert_eq!(k1[0].pool.as_deref(), Some("p"));
        assert_eq!(s.item_usage("b", "k001").unwrap().len(), 1);
        assert!(s.item_usage("b", "nope").unwrap().is_empty());
        // Per run.
        let r1 = s.run_usage(1).unwrap();
        assert_eq!((r1.attempts, r1.input_tokens, r1.output_tokens, r1.unreported, r1.estimated_tokens), (2, 10, 20, 1, 50));
        assert_eq!(s.run_usage(2).unwrap().attempts, 1);
        assert_eq!(s.run_usage(3).unwrap(), Default::default());
        // Per pool: today, per minute, and each limit's window.
        let v = s.pool_view(&spec, m0 + MIN + 30_000).unwrap();
        assert_eq!((v.today.attempts, v.today.input_tokens, v.today.output_tokens, v.today.estimated_tokens), (3, 11, 22, 50));
        assert_eq!(v.tokens_per_minute[v.tokens_per_minute.len() - 2..], [80, 3]);
        // The last minute: half of the first minute's 2 calls, and the 1 since.
        assert_eq!((v.dims[0].dimension.as_str(), v.dims[0].recent, v.dims[0].limit), ("requests/min", 2, 100));
        assert_eq!((v.dims[1].recent, v.dims[1].limit), (83, 1_000_000));
        // Two minutes on, the first minute is out of the minute's window, not the day's.
        let v = s.pool_view(&spec, m0 + 3 * MIN).unwrap();
        assert_eq!((v.dims[0].recent, v.dims[1].recent), (0, 83));
    }
}

// Priority and not-before: the claim order, and items that wait for a time.
mod priority;

// Requeue's counts: exact after a requeue of several classes, tiers and outcomes.
mod requeue_counts;

// The claim and the done marks count themselves; writes beside them in one transaction too.
mod hot_counts;
