//! A requeue keeps every count exact, on both backends: the status
//! buckets and the failed items by class and tier (the dead-letter pane's
//! "now" figures), for failed items of both tiers and several classes and
//! for done items of an outcome; and writes after it are counted as
//! before.

use super::*;

fn fail(s: &mut Store, c: &nightshift::model::Claim, run: i64, tier: Tier, class: &str) {
    let next_attempt_at = (tier == Tier::Retry).then_some(T0 + 60 * MIN);
    let f = nightshift::store::Failure {
        item_id: c.item_id,
        token: c.token,
        run_id: run,
        tier,
        error_class: class,
        message: "m",
        next_attempt_at,
        cost: None,
        now: T0,
    };
    assert!(
        s.fail(&f, &NewEvent::new(T0, "b", EventKind::Failed, "failed"))
            .unwrap()
    );
}

/// (error class, retry now, manual now) of every class failed now.
fn classes(s: &Store) -> Vec<(String, i64, i64)> {
    let mut g: Vec<_> = s
        .dlq_groups("b", T0)
        .unwrap()
        .into_iter()
        .filter(|g| g.retry_now + g.manual_now > 0)
        .map(|g| (g.error_class, g.retry_now, g.manual_now))
        .collect();
    g.sort();
    g
}

/// Batch `b` of eight items, seven of them claimed by a run: the run and
/// its claims.
fn seven_claimed(s: &mut Store) -> (i64, Vec<nightshift::model::Claim>) {
    s.add_items("b", &items(8), T0, |_| {}).unwrap();
    let run = s
        .start_run("b", Trigger::Manual, None, &holder(1), T0, None)
        .unwrap();
    s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + 60 * MIN, T0, &[], 1)
        .unwrap();
    let c = s.claim("b", run, 7, T0 + 60 * MIN, T0).unwrap().unwrap();
    (run, c)
}

/// (pending, claimed, done, empty, retry, manual).
fn counts(s: &Store) -> (i64, i64, i64, i64, i64, i64) {
    let c = s.counts("b").unwrap();
    (c.pending, c.claimed, c.done, c.empty, c.retry, c.manual)
}

both_stores! {
    fn a_requeue_keeps_every_count_exact(db, s) {
        let (run, c) = seven_claimed(&mut s);
        for (i, tier, class) in [(0, Tier::Manual, "A"), (1, Tier::Manual, "B"), (2, Tier::Retry, "A"),
                                 (3, Tier::Manual, "A"), (4, Tier::Retry, "B")] {
            fail(&mut s, &c[i], run, tier, class);
        }
        for (i, outcome) in [(5, Outcome::Done), (6, Outcome::Empty)] {
            let d = Completion { usage: None, item_id: c[i].item_id, token: c[i].token, run_id: run,
                outcome, result: None, cost: None, version: None, now: T0 };
            assert!(s.complete(&d, &done_event(&c[i].key)).unwrap());
        }
        assert_eq!(counts(&s), (1, 0, 1, 1, 2, 3));
        assert_eq!(classes(&s), [("A".into(), 1, 2), ("B".into(), 1, 1)]);

        // Class A, both tiers: three items leave three places.
        let by_class = Selection { class: Some("A".into()), ..Selection::default() };
        assert_eq!(s.requeue("b", &by_class, false, false, "me", T0).unwrap().len(), 3);
        assert_eq!(counts(&s), (4, 0, 1, 1, 1, 1));
        assert_eq!(classes(&s), [("B".into(), 1, 1)]);
        // Done items of an outcome.
        let empty = Selection { outcome: Some(Outcome::Empty), ..Selection::default() };
        assert_eq!(s.requeue("b", &empty, false, false, "me", T0).unwrap().len(), 1);
        assert_eq!(counts(&s), (5, 0, 1, 0, 1, 1));
        // By key, then the rest.
        let by_key = Selection { keys: vec!["k004".into()], ..Selection::default() };
        assert_eq!(s.requeue("b", &by_key, true, false, "me", T0).unwrap().len(), 1);
        assert_eq!(classes(&s), [("B".into(), 0, 1)]);
        let all = Selection { all_failed: true, ..Selection::default() };
        assert_eq!(s.requeue("b", &all, false, false, "me", T0).unwrap().len(), 1);
        assert_eq!(counts(&s), (7, 0, 1, 0, 0, 0));
        assert_eq!(classes(&s), []);
        assert_eq!(s.events(&EventFilter { kinds: vec!["requeued".into()], ..Default::default() })
            .unwrap().len(), 6);

        // Writes after it are counted by the store's usual rule.
        let c = s.claim("b", run, 2, T0 + 60 * MIN, T0).unwrap().unwrap();
        assert_eq!(counts(&s), (5, 2, 1, 0, 0, 0));
        fail(&mut s, &c[0], run, Tier::Manual, "C");
        assert_eq!((counts(&s), classes(&s)), ((5, 1, 1, 0, 0, 1), vec![("C".into(), 0, 1)]));
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    fn a_requeue_that_only_counts_moves_what_a_listed_one_would(db, s) {
        let (run, c) = seven_claimed(&mut s);
        for (i, tier, class) in [(0, Tier::Manual, "A"), (1, Tier::Manual, "B"), (2, Tier::Retry, "A"),
                                 (3, Tier::Manual, "A"), (4, Tier::Retry, "B"), (5, Tier::Manual, "B")] {
            fail(&mut s, &c[i], run, tier, class);
        }
        let requeued = |s: &Store| s.events(&EventFilter { kinds: vec!["requeued".into()], ..Default::default() })
            .unwrap().len();
        // Each selection: what a dry run lists is what the counted requeue moves.
        let manual_a = Selection { class: Some("A".into()), tier: Some(Tier::Manual), ..Selection::default() };
        let listed = s.requeue("b", &manual_a, false, true, "me", T0).unwrap();
        assert_eq!(listed.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["k000", "k003"]);
        assert_eq!(s.requeue_counted("b", &manual_a, false, "me", T0).unwrap(), 2);
        assert_eq!(counts(&s), (3, 1, 0, 0, 2, 2));
        assert_eq!(classes(&s), [("A".into(), 1, 0), ("B".into(), 1, 2)]);
        assert_eq!(requeued(&s), 2);
        // Nothing left of it: none moved, no event.
        assert_eq!(s.requeue_counted("b", &manual_a, false, "me", T0).unwrap(), 0);
        assert_eq!(requeued(&s), 2);
        // By key: a key not failed refuses the whole requeue, as listed.
        let bad = Selection { keys: vec!["k001".into(), "k000".into()], ..Selection::default() };
        let counted = s.requeue_counted("b", &bad, false, "me", T0).unwrap_err().to_string();
        let listed = s.requeue("b", &bad, false, false, "me", T0).unwrap_err().to_string();
        assert_eq!(counted, listed);
        assert!(counted.contains("k000"), "{counted}");
        assert_eq!(requeued(&s), 2);
        let by_key = Selection { keys: vec!["k001".into(), "k001".into()], ..Selection::default() };
        assert_eq!(s.requeue_counted("b", &by_key, false, "me", T0).unwrap(), 1);
        // No selection is refused alike.
        let none = s.requeue_counted("b", &Selection::default(), false, "me", T0).unwrap_err();
        assert_eq!(none.to_string(), s.requeue("b", &Selection::default(), false, false, "me", T0)
            .unwrap_err().to_string());
        // The rest.
        let all = Selection { all_failed: true, ..Selection::default() };
        assert_eq!(s.requeue_counted("b", &all, false, "me", T0).unwrap(), 3);
        assert_eq!(counts(&s), (7, 1, 0, 0, 0, 0));
        assert_eq!(classes(&s), []);
        assert_eq!(requeued(&s), 6);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }
}
