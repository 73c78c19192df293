//! The runner's hot writes (the claim, a group's done mark, one done mark)
//! count themselves once per statement (SQLite's `self_counted`,
//! PostgreSQL's version 21), and every other write is counted by the
//! triggers as before: also the write right after a hot one in the same
//! transaction, as a runner's group commit makes them. The status counts,
//! the failed classes, the per-minute completions and the run's counts all
//! stay exact.

use super::*;

both_stores! {
    fn hot_writes_and_the_writes_beside_them_count_once(db, s) {
        s.add_items("b", &items(8), T0, |_| {}).unwrap();
        let run = s.start_run("b", Trigger::Manual, None, &holder(1), T0, None).unwrap();
        s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + 60 * MIN, T0, &[], 1).unwrap();
        let done = |c: &nightshift::model::Claim, outcome| Completion { usage: None, item_id: c.item_id,
            token: c.token, run_id: run, outcome, result: None, cost: Some(0.25), version: None, now: T0 };
        // One transaction: a claim, a group's done mark, then a failure, a
        // release and a single done mark.
        s.group(|s| {
            let c = s.claim("b", run, 6, T0 + 60 * MIN, T0).unwrap().unwrap();
            assert_eq!(c.len(), 6);
            let (e0, e1) = (done_event(&c[0].key), done_event(&c[1].key));
            let group = [(done(&c[0], Outcome::Done), &e0), (done(&c[1], Outcome::Empty), &e1)];
            assert_eq!(s.complete_all(&group).unwrap(), [true, true]);
            let f = nightshift::store::Failure { item_id: c[2].item_id, token: c[2].token, run_id: run,
                tier: Tier::Manual, error_class: "A", message: "m", next_attempt_at: None, cost: None,
                now: T0 };
            assert!(s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed")).unwrap());
            let released = s.release(c[3].item_id, c[3].token, run, false, &done_event(&c[3].key));
            assert!(released.unwrap());
            assert!(s.complete(&done(&c[4], Outcome::Done), &done_event(&c[4].key)).unwrap());
        })
        .unwrap();
        // And alone: a claim, then its done marks, each its own transaction.
        let c = s.claim("b", run, 1, T0 + 60 * MIN, T0 + MIN).unwrap().unwrap();
        let e = done_event(&c[0].key);
        assert_eq!(s.complete_all(&[(Completion { now: T0 + MIN, ..done(&c[0], Outcome::Done) }, &e)]).unwrap(), [true]);
        let counts = s.counts("b").unwrap();
        assert_eq!((counts.pending, counts.claimed, counts.done, counts.empty, counts.manual), (2, 1, 3, 1, 1));
        assert_eq!(s.integrity_check().unwrap(), "ok");
        // Completions per minute: three done or empty and a failure at T0, one more a minute later.
        assert_eq!(s.minute_stats("b", T0 + MIN, 2).unwrap(), [(3, 1), (1, 0)]);
        let r = s.run(run).unwrap().unwrap();
        assert_eq!((r.counts.done, r.counts.empty, r.counts.failed), (3, 1, 1));
        assert_eq!(r.counts.cost, 1.0);
        assert_eq!(s.dlq_groups("b", T0).unwrap().iter().map(|g| g.manual_now).sum::<i64>(), 1);
    }
}
