//! Priority and not-before, on both backends: claims take higher
//! priorities first, then older items; a not-before time keeps an item
//! out of claims until a redrive at or after it; both are recorded in the
//! `added` and `requeued` events; and the claim stays an index read in
//! claim order (no scan, no sort) however many items the batch holds.

use super::*;
use nightshift::model::waiting::RetryTier;

fn item(key: &str, priority: i32, not_before: Option<i64>) -> NewItem {
    NewItem {
        key: key.into(),
        label: key.into(),
        payload: "{}".into(),
        priority,
        not_before,
        written_key: None,
    }
}

fn locked_run(s: &mut Store) -> i64 {
    let run = s
        .start_run("b", Trigger::Manual, None, &holder(1), T0, None)
        .unwrap();
    s.acquire_lock("b", "tok", &holder(1), Some(run), T0 + 60 * MIN, T0, &[], 1)
        .unwrap();
    run
}

fn claimed_keys(s: &mut Store, run: i64, n: usize, now: i64) -> Vec<String> {
    s.claim("b", run, n, now + MIN, now)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|c| c.key)
        .collect()
}

both_stores! {
    /// Higher priority first, then insertion order, within one claim and
    /// across claims; negative priorities after the default 0.
    fn claims_take_higher_priority_first_then_age(db, s) {
        let given = [("a", 0), ("b", 5), ("c", -1), ("d", 5), ("e", 0), ("f", 9)];
        let items: Vec<NewItem> = given.iter().map(|(k, p)| item(k, *p, None)).collect();
        s.add_items("b", &items, T0, |_| {}).unwrap();
        let late = [item("g", 9, None), item("h", 0, None)];
        s.add_items("b", &late, T0 + 1, |_| {}).unwrap();
        assert_eq!(s.item("b", "f").unwrap().priority, 9);
        let run = locked_run(&mut s);
        assert_eq!(claimed_keys(&mut s, run, 3, T0), ["f", "g", "b"]);
        assert_eq!(claimed_keys(&mut s, run, 1, T0), ["d"]);
        assert_eq!(claimed_keys(&mut s, run, 10, T0), ["a", "e", "h", "c"]);
    }

    /// A pending item with a not-before time is never claimed before a
    /// redrive at or after that time makes it claimable; till then the
    /// waiting view counts it as not due, with its time.
    fn a_not_before_item_waits_for_a_redrive_at_its_time(db, s) {
        let at = T0 + 10 * MIN;
        s.add_items("b", &[item("now", 0, None), item("later", 7, Some(at))], T0, |_| {}).unwrap();
        let later = s.item("b", "later").unwrap();
        assert_eq!((later.next_attempt_at, later.priority), (Some(at), 7));
        assert_eq!(s.retry_tier("b", T0).unwrap(),
            RetryTier { due: 0, later: 1, next_at: Some(at), pending_due: 0, pending_later: 1 });
        let run = locked_run(&mut s);
        assert_eq!(s.redrive_due("b", Some(run), at - 1).unwrap(), Vec::<String>::new());
        assert_eq!(claimed_keys(&mut s, run, 10, at - 1), ["now"], "not before its time");
        assert_eq!(s.retry_tier("b", at).unwrap(),
            RetryTier { due: 1, later: 0, next_at: None, pending_due: 1, pending_later: 0 });
        s.redrive_due("b", Some(run), at).unwrap();
        assert_eq!(s.item("b", "later").unwrap().next_attempt_at, None);
        assert_eq!(s.retry_tier("b", at).unwrap(), RetryTier::default());
        assert_eq!(claimed_keys(&mut s, run, 10, at), ["later"]);
        assert_eq!(s.counts("b").unwrap().claimed, 2);
    }

    /// The `added` event says the priorities (one, or the lowest and the
    /// highest) and not-before times an add gave; an add without says
    /// neither.
    fn the_added_event_records_priority_and_not_before(db, s) {
        s.add_items("b", &[item("x", 0, None)], T0, |_| {}).unwrap();
        s.add_items("b", &[item("p", 3, Some(T0 + MIN)), item("q", 3, Some(T0 + MIN))], T0, |_| {}).unwrap();
        s.add_items("b", &[item("r", -2, None), item("s", 4, None), item("t", 0, None)], T0, |_| {}).unwrap();
        let added = s.events(&EventFilter { kinds: vec!["added".into()], ..Default::default() }).unwrap();
        let fields: Vec<serde_json::Value> = added.iter().map(|e| e.fields.clone()).collect();
        let (plain, one, span) = if fields[0]["added"] == 1 { (&fields[0], &fields[1], &fields[2]) } else { (&fields[2], &fields[1], &fields[0]) };
        assert!(plain.get("priority").is_none() && plain.get("not_before").is_none(), "{plain}");
        assert_eq!((&one["priority"], &one["not_before"]), (&serde_json::json!(3), &serde_json::json!("2023-11-14T22:14:20Z")));
        assert_eq!(span["priority"], serde_json::json!([-2, 4]));
    }

    /// A requeue with a not-before time sends the items back to pending,
    /// not claimable before it, and its events say the time.
    fn a_requeue_with_not_before_waits_for_it(db, s) {
        s.add_items("b", &[item("k", 0, None)], T0, |_| {}).unwrap();
        let run = locked_run(&mut s);
        s.skip("b", &["k".into()], "test", "me", T0).unwrap();
        let at = T0 + 30 * MIN;
        let sel = Selection { outcome: Some(Outcome::Skipped), not_before: Some(at), ..Selection::default() };
        assert_eq!(s.requeue("b", &sel, false, false, "me", T0).unwrap().len(), 1);
        let k = s.item("b", "k").unwrap();
        assert_eq!((k.status.as_str(), k.next_attempt_at), ("pending", Some(at)));
        let ev = s.events(&EventFilter { kinds: vec!["requeued".into()], ..Default::default() }).unwrap();
        assert_eq!(ev[0].fields["not_before"], "2023-11-14T22:43:20Z");
        assert!(claimed_keys(&mut s, run, 5, at - 1).is_empty());
        s.redrive_due("b", Some(run), at).unwrap();
        assert_eq!(claimed_keys(&mut s, run, 5, at), ["k"]);
    }

    /// What a run would claim (`run --dry-run`'s list) is what its
    /// redrive and claims then take, in that order: a due retry-tier item
    /// at its priority's place, not first.
    fn the_list_of_what_a_run_would_claim_is_in_claim_order(db, s) {
        let given = [item("a", 0, None), item("r", -5, None), item("u", 9, None), item("z", -9, None)];
        s.add_items("b", &given, T0, |_| {}).unwrap();
        let run = locked_run(&mut s);
        let c = s.claim_key("b", "r", run, T0 + MIN, T0).unwrap();
        let failure = nightshift::store::Failure {
            item_id: c.item_id, token: c.token, run_id: run, tier: Tier::Retry, error_class: "Boom",
            message: "boom", next_attempt_at: Some(T0 + MIN), cost: None, now: T0,
        };
        assert!(s.fail(&failure, &NewEvent::new(T0, "b", EventKind::Failed, "failed")).unwrap());
        let would = |s: &Store, at: i64| -> Vec<String> {
            let filter = ItemFilter { claimable: Some(Claimable { at, reclaim: false }), ..ItemFilter::default() };
            s.items("b", &filter).unwrap().into_iter().map(|i| i.key).collect()
        };
        assert_eq!(would(&s, T0), ["u", "a", "z"], "not due yet");
        let listed = would(&s, T0 + MIN);
        assert_eq!(listed, ["u", "a", "r", "z"]);
        s.redrive_due("b", Some(run), T0 + MIN).unwrap();
        assert_eq!(claimed_keys(&mut s, run, 10, T0 + MIN), listed);
    }

    /// The oldest-pending age (metrics) is the oldest claimable item's,
    /// whatever its priority: not the next claim's, and never a not-before
    /// item's or a claimed one's.
    fn the_oldest_pending_is_the_oldest_claimable_at_any_priority(db, s) {
        s.add_items("b", &[item("early", 5, Some(T0 + MIN))], T0, |_| {}).unwrap();
        s.add_items("b", &[item("low", -2, None), item("low2", -2, None)], T0 + 1, |_| {}).unwrap();
        s.add_items("b", &[item("mid", 0, None)], T0 + 2, |_| {}).unwrap();
        s.add_items("b", &[item("high", 9, None)], T0 + 3, |_| {}).unwrap();
        assert_eq!(s.oldest_pending("b").unwrap(), Some(T0 + 1));
        let run = locked_run(&mut s);
        s.claim_key("b", "low", run, T0 + MIN, T0).unwrap();
        s.claim_key("b", "low2", run, T0 + MIN, T0).unwrap();
        assert_eq!(s.oldest_pending("b").unwrap(), Some(T0 + 2));
        assert_eq!(claimed_keys(&mut s, run, 2, T0), ["high", "mid"]);
        assert_eq!(s.oldest_pending("b").unwrap(), None);
    }

    /// The claim reads the first entries of the claimable index, in claim
    /// order: no full scan of the items and no sort, so its cost does not
    /// grow with the batch (see bench/README.md for 10k against 1M).
    fn the_claim_is_an_index_read_in_claim_order(db, s) {
        let items: Vec<NewItem> = (0..20_000)
            .map(|i| item(&format!("k{i:05}"), i % 7 - 3, (i % 5 == 0).then_some(T0 + MIN)))
            .collect();
        s.add_items("b", &items, T0, |_| {}).unwrap();
        db.analyze();
        let plan = s.claim_plan("b").unwrap().join("\n");
        // SQLite: the one queue index, past its four equalities (`IS NULL`
        // is one there); PostgreSQL: its partial index of claimable rows.
        assert!(plan.contains("SEARCH items USING INDEX items_queue (batch_id=? AND status=? AND tier=? AND next_attempt_at=?)")
            || plan.contains("Index Scan using items_claimable on items"), "{plan}");
        let lower = plan.to_lowercase();
        assert!(!lower.contains("temp b-tree"), "no sort of the items: {plan}");
        assert!(!lower.contains("seq scan on items") && !lower.contains("scan items\n") && !lower.ends_with("scan items"),
            "no full scan: {plan}");
        assert!(!plan.contains("Sort Key: items.priority"), "no sort of the items: {plan}");
    }
}
