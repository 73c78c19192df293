//! The counts every view shows, and what waits: one definition of each
//! count in `status` (text, `--json`, `--short`, `--prometheus`) and the run
//! summary; the summary and the dry run say what the batch still holds;
//! a run that stepped down never hides the run that did work; items with
//! the outcome `empty` are listed and run again. The real binary, on both
//! stores.

use crate::support as common;

use common::{Env, Ran};

/// A worker by key prefix: `d` a result, `e` nothing on stdout (outcome
/// `empty`) until `full` exists, `m` a permanent failure, `r` a transient
/// one (exit 75), `g` waits for the file `gate`.
const WORKER: &str = r#"cat >/dev/null
case "$NIGHTSHIFT_KEY" in
  d*) echo '{"ok":1}' ;;
  e*) if [ -e full ]; then echo '{"found":1}'; fi ;;
  m*) echo '{"error_class":"BadInput","transient":false,"message":"no title"}' >&2; exit 1 ;;
  r*) exit 75 ;;
  g*) touch started; while [ ! -e gate ]; do sleep 0.05; done; echo '{"ok":1}' ;;
esac"#;

fn setup(env: &Env, keys: &[&str]) {
    env.script("w.sh", WORKER);
    // Retry-tier items stay not due for the whole test (an hour).
    env.config("[batch.b]\nworker = [\"./w.sh\"]\nretries = 0\nbackoff_max = \"1h\"\n");
    common::add_keys(env, "b", keys);
}

fn batch(env: &Env) -> serde_json::Value {
    env.status()["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "b")
        .cloned()
        .unwrap()
}

/// `07:16:05Z`: how the summary names the retry tier's next attempt, the
/// soonest of `keys`' (their backoffs are jittered: one key's own time
/// could fall in another minute than the tier's next), to the second as
/// `show` and `items` say it.
fn next_retry(env: &Env, keys: &[&str]) -> String {
    let at = keys
        .iter()
        .map(|key| {
            let item = env.run(&["show", "b", key, "--json"]).code(0).json();
            let at = item["item"]["next_attempt_at"]
                .as_str()
                .unwrap()
                .to_string();
            chrono::DateTime::parse_from_rfc3339(&at)
                .unwrap()
                .timestamp_millis()
        })
        .min()
        .unwrap();
    nightshift::util::time::utc_clock(at, nightshift::util::time::now_ms())
}

/// `1h2m`, `3m4s`, `5s` in seconds.
fn seconds_of(text: &str) -> i64 {
    let (mut total, mut n) = (0, 0);
    for c in text.chars() {
        match c {
            'd' => (total, n) = (total + n * 86_400, 0),
            'h' => (total, n) = (total + n * 3600, 0),
            'm' => (total, n) = (total + n * 60, 0),
            's' => (total, n) = (total + n, 0),
            d => n = n * 10 + i64::from(d.to_digit(10).unwrap_or_else(|| panic!("{text}"))),
        }
    }
    total
}

fn add_more(env: &Env, keys: &[&str]) {
    let lines: String = keys
        .iter()
        .map(|k| format!("{{\"key\":\"{k}\"}}\n"))
        .collect();
    env.write("more.jsonl", &lines);
    env.run(&["add", "b", "more.jsonl"]).code(0);
}

fn line_of<'a>(ran: &'a Ran, start: &str) -> &'a str {
    ran.stdout
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in {:?}", ran.stdout))
}

both_backends! {
    /// One time, one precision: `status` rounded the retry tier's next
    /// attempt up to the minute (`next at 05:37Z`) where `items` and
    /// `show` said its second (`05:36:41Z`); and `show`'s `in 3m59s`,
    /// cut down, said a time to come nearer than it was. Now all three
    /// say the second, and a time to come is rounded up.
    fn status_items_and_show_say_a_retry_time_alike(env) {
        setup(&env, &["r1"]);
        env.run(&["run", "b"]).code(1);
        let item = env.run(&["show", "b", "r1", "--json"]).code(0).json();
        let at = item["item"]["next_attempt_at"].as_str().unwrap().to_string();
        let at_ms = chrono::DateTime::parse_from_rfc3339(&at).unwrap().timestamp_millis();
        let clock = nightshift::util::time::utc_clock(at_ms, nightshift::util::time::now_ms());
        let status = env.run(&["status", "b"]);
        assert!(status.code(0).stdout.contains(&format!("1 in the retry tier, next at {clock}")),
            "{clock}: {}", status.stdout);
        let items = env.run(&["items", "b"]);
        assert!(items.code(0).stdout.contains(&format!("not-due until {clock}")), "{clock}: {}", items.stdout);
        let before = nightshift::util::time::now_ms();
        let show = env.run(&["show", "b", "r1"]);
        let after = nightshift::util::time::now_ms();
        let line = show.code(0).stdout.lines().find(|l| l.starts_with("next try:")).unwrap().to_string();
        assert!(line.contains(&at), "{line}");
        // `(in 59m58s)`: at least what was left when `show` ended, to the
        // second rounded up (the time is stored to the millisecond, `at`
        // cut to its second).
        let shown = line.rsplit("(in ").next().unwrap().trim_end_matches(')');
        let said = seconds_of(shown);
        assert!(said * 1000 >= at_ms - after, "{line}: {} ms left at the end", at_ms - after);
        assert!(said * 1000 <= at_ms + 1000 - before + 1000, "{line}");
    }

    /// Item 3 of "Morning truth": after items were quarantined, the next
    /// run did nothing and exits 0, but its summary keeps its own counts
    /// and says what still waits; the dry run says why it would run
    /// nothing.
    fn the_summary_and_the_dry_run_say_what_the_batch_still_holds(env) {
        setup(&env, &["d1", "d2", "m1", "m2", "r1", "r2"]);
        let first = env.run(&["run", "b"]);
        first.code(1);
        let at = next_retry(&env, &["r1", "r2"]);
        let holds = format!("2 quarantined await a human; 2 in the retry tier, next at {at}");
        assert!(first.stdout.starts_with("b: 2 done, 0 empty, 4 failed (2 retry, 2 manual),"), "{}", first.stdout);
        assert!(first.stdout.trim_end().ends_with(&format!(" · still in the batch: {holds}")), "{}", first.stdout);

        let second = env.run(&["run", "b"]);
        second.code(0);
        assert!(second.stdout.starts_with("b: 0 done, 0 empty, 0 failed (0 retry, 0 manual), 0 retried, 2 skipped-done, "),
            "{}", second.stdout);
        assert!(second.stdout.contains(&format!(" · still in the batch: {holds}\n")), "{}", second.stdout);
        // The stored summary is the run's own.
        let last = batch(&env)["last_run"].clone();
        assert!(!last["summary"].as_str().unwrap().contains("still in the batch"), "{last}");
        let json = env.run(&["run", "b", "--json"]).code(0).json();
        assert_eq!(json["waiting"][0], serde_json::json!({"reason": "quarantined", "items": 2, "until": null}));
        assert_eq!((&json["waiting"][1]["reason"], &json["waiting"][1]["items"]), (&"not-due".into(), &2.into()));

        let dry = env.run(&["run", "b", "--dry-run"]);
        dry.code(0);
        assert!(dry.stdout.contains("b: would run 0 items with ./w.sh"), "{}", dry.stdout);
        assert_eq!(line_of(&dry, "nothing to run now: "), format!("nothing to run now: {holds}"));
        let plan = env.run(&["run", "b", "--dry-run", "--json"]).code(0).json();
        assert_eq!(plan["waiting"].as_array().unwrap().len(), 2, "{plan}");

        // What a --limit leaves is said too, in the dry run and the run.
        add_more(&env, &["d3", "d4", "d5"]);
        let dry = env.run(&["run", "b", "--dry-run", "--limit", "1"]);
        assert_eq!(line_of(dry.code(0), "not in this run: "),
            format!("not in this run: {holds}; 2 pending, not run"));
        let limited = env.run(&["run", "b", "--limit", "1"]);
        assert!(limited.code(0).stdout.trim_end().ends_with(&format!("still in the batch: {holds}; 2 pending, not run")),
            "{}", limited.stdout);

        // Paused: the dry run says so, with what waits.
        env.run(&["pause", "b", "--reason", "deploy"]).code(0);
        let dry = env.run(&["run", "b", "--dry-run"]);
        assert_eq!(line_of(dry.code(0), "waiting: "),
            format!("waiting: {holds}; 2 wait: the batch is paused"));
    }

    /// A batch with nothing left: the dry run says every item is finished,
    /// or that there are none yet.
    fn a_dry_run_of_a_finished_batch_says_so(env) {
        setup(&env, &["d1", "e1"]);
        env.run(&["run", "b"]).code(0);
        let dry = env.run(&["run", "b", "--dry-run"]);
        assert_eq!(line_of(dry.code(0), "nothing to run"),
            "nothing to run: all 2 items are finished (1 done, 1 empty, 0 skipped)");
        env.config("[batch.b]\nworker = [\"./w.sh\"]\n\n[batch.new]\nworker = [\"./w.sh\"]\n");
        let dry = env.run(&["run", "new", "--dry-run"]);
        assert_eq!(line_of(dry.code(0), "nothing to run"),
            "nothing to run: the batch has no items yet (nightshift add new FILE)");
        common::add_keys(&env, "new", &["d1"]);
        env.run(&["run", "new"]).code(0);
        let dry = env.run(&["run", "new", "--dry-run"]);
        assert_eq!(line_of(dry.code(0), "nothing to run"),
            "nothing to run: the one item is finished (1 done, 0 empty, 0 skipped)");
    }

    /// Item 7: one definition of each count in every view. The seven
    /// buckets are disjoint and add up to the total; done never includes
    /// empty or skipped (in `status` as in the run summary); `--short`'s
    /// ✓ ✗ … are finished, failed (both tiers, once) and to do.
    fn every_view_counts_the_same_way(env) {
        setup(&env, &["d1", "d2", "e1", "m1", "r1", "s1"]);
        env.run(&["skip", "b", "s1", "--reason", "by hand"]).code(0);
        let ran = env.run(&["run", "b"]);
        assert!(ran.code(1).stdout.starts_with("b: 2 done, 1 empty, 2 failed (1 retry, 1 manual),"), "{}", ran.stdout);
        add_more(&env, &["p1", "p2"]);
        let b = batch(&env);
        let n = |f: &str| b[f].as_i64().unwrap_or_else(|| panic!("no {f} in {b}"));
        assert_eq!(
            [n("pending"), n("claimed"), n("done"), n("empty"), n("skipped"), n("retry"), n("manual")],
            [2, 0, 2, 1, 1, 1, 1]
        );
        assert_eq!([n("finished"), n("failed"), n("to_do"), n("total")], [4, 2, 2, 8]);
        assert_eq!(n("finished") + n("failed") + n("to_do"), n("total"));

        assert_eq!(env.run(&["status", "--short"]).code(0).stdout, "b 4✓ 2✗ 2…\n");
        let table = env.run(&["status"]);
        table.code(0);
        let row: Vec<&str> = line_of(&table, "b ").split_whitespace().collect();
        assert_eq!(row, ["b", "2", "0", "2", "1", "1", "1", "1", "50%"]);
        let prom = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        for (labels, v) in [
            (r#"status="done",outcome="done""#, 2),
            (r#"status="done",outcome="empty""#, 1),
            (r#"status="done",outcome="skipped""#, 1),
            (r#"status="failed",tier="retry""#, 1),
            (r#"status="failed",tier="manual""#, 1),
            (r#"status="pending""#, 2),
        ] {
            let line = format!("nightshift_items{{batch=\"b\",{labels}}} {v}");
            assert!(prom.lines().any(|l| l == line), "{line} not in\n{prom}");
        }
    }

    /// Item 7: a run that stepped down (the lock held) does not hide the
    /// live run, in `status`, its `--json` and the Prometheus metrics.
    fn a_stepped_down_run_does_not_hide_the_live_one(env) {
        setup(&env, &["g1"]);
        let mut live = env.spawn("live", &["run", "b"]);
        common::wait_for("the live run's worker", || env.path("started").exists());
        let held = env.run(&["run", "b"]);
        assert!(held.code(0).stdout.contains("lock-held"), "{}", held.stdout);
        let b = batch(&env);
        assert_eq!((&b["last_run"]["id"], &b["last_run"]["state"]), (&1.into(), &"running".into()), "{b}");
        assert_eq!((&b["stepped_down"]["id"], &b["stepped_down"]["state"]), (&2.into(), &"lock-held".into()), "{b}");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("\n  last run #1 running (manual, "), "{text}");
        assert!(text.contains("\n  then #2 lock-held (manual, "), "{text}");
        let prom = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        assert!(!prom.contains("nightshift_last_run_success{"), "a live run has no verdict yet:\n{prom}");

        std::fs::write(env.path("gate"), "").unwrap();
        common::wait_for("the live run to end", || live.try_wait().unwrap().is_some());
        let b = batch(&env);
        assert_eq!((&b["last_run"]["id"], &b["last_run"]["state"]), (&1.into(), &"ok".into()), "{b}");
        let prom = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        assert!(prom.contains("nightshift_last_run_success{batch=\"b\",state=\"ok\"} 1"), "{prom}");
    }

    /// A batch whose only run stepped down has no last run that did work,
    /// and says so.
    fn a_batch_whose_runs_all_stepped_down_says_so(env) {
        setup(&env, &["d1"]);
        env.run(&["pause", "b", "--reason", "not yet"]).code(0);
        env.run(&["run", "b"]).code(0);
        let b = batch(&env);
        assert_eq!((&b["last_run"], &b["stepped_down"]["state"]), (&serde_json::Value::Null, &"paused".into()), "{b}");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("\n  last run: none that did work\n  then #1 paused (manual, "), "{text}");
    }

    /// Item 9: items that succeeded with nothing are listed by outcome and
    /// sent back to run again (a dry run first), recorded with who did it.
    fn empty_items_are_listed_and_run_again(env) {
        setup(&env, &["d1", "e1", "e2", "s1"]);
        env.run(&["skip", "b", "s1", "--reason", "by hand"]).code(0);
        env.run(&["run", "b"]).code(0);
        let keys = |args: &[&str]| -> Vec<String> {
            let mut all = vec!["items", "b", "--json"];
            all.extend_from_slice(args);
            env.run(&all).code(0).json_lines().iter().map(|i| i["key"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(keys(&["--outcome", "empty"]), ["e1", "e2"]);
        assert_eq!(keys(&["--outcome", "done"]), ["d1"]);
        assert_eq!(keys(&["--outcome", "skipped"]), ["s1"]);
        assert_eq!(keys(&["--outcome", "empty", "--status", "done"]), ["e1", "e2"]);
        let text = env.run(&["items", "b", "--outcome", "empty"]).code(0).stdout.clone();
        assert!(text.contains("done/empty"), "{text}");
        let bad = env.run(&["items", "b", "--outcome", "empty", "--status", "pending"]);
        assert!(bad.code(2).stderr.contains("--outcome empty lists done items: it cannot be combined with --status pending"),
            "{}", bad.stderr);
        env.run(&["items", "b", "--outcome", "empty", "--tier", "retry"]).code(2);
        env.run(&["items", "b", "--outcome", "nothing"]).code(2);
        let one = env.run(&["run", "b", "--dry-run", "--key", "e1"]);
        assert_eq!(line_of(one.code(0), "nothing to run"), "nothing to run: item e1 is done/empty");

        let before = env.snapshot();
        let dry = env.run(&["requeue", "b", "--outcome", "empty", "--dry-run"]);
        assert!(dry.code(0).stdout.starts_with("b: would requeue 2 items\n"), "{}", dry.stdout);
        assert!(dry.stdout.contains("done/empty"), "{}", dry.stdout);
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");
        env.run(&["requeue", "b", "--outcome", "empty", "--class", "X"]).code(2);
        let not_failed = env.run(&["requeue", "b", "e1"]);
        assert!(not_failed.code(2).stderr.contains("e1 (done/empty)"), "{}", not_failed.stderr);
        assert!(not_failed.stderr.contains("--outcome"), "{}", not_failed.stderr);
        assert_eq!(env.snapshot(), before, "refused: nothing changed");

        let moved = env.cmd().env("USER", "operator").env("NIGHTSHIFT_HOST", "nightbox")
            .args(["requeue", "b", "--outcome", "empty"]).output().unwrap();
        assert_eq!(common::ran(moved).code(0).stdout, "b: requeued 2 items\n");
        let b = batch(&env);
        assert_eq!((&b["pending"], &b["empty"], &b["done"]), (&2.into(), &0.into(), &1.into()));
        let events = env.events("b", "requeued");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["actor"], "operator@nightbox");
        assert_eq!(events[0]["message"], "requeued from empty by operator@nightbox");
        // Who did it is said once, where the message names them already.
        let said = |ran: &Ran| -> Vec<String> {
            let lines = ran.stdout.lines().filter(|l| l.contains("requeued from empty"));
            lines.map(str::to_string).collect()
        };
        let log = said(env.run(&["log", "b", "--kind", "requeued"]).code(0));
        let shown = said(env.run(&["show", "b", "e1"]).code(0));
        assert_eq!((log.len(), shown.len()), (2, 1), "{log:?} {shown:?}");
        for line in log.iter().chain(&shown) {
            assert!(line.ends_with("requeued from empty by operator@nightbox"), "{line}");
        }
        let item = env.run(&["show", "b", "e1", "--json"]).code(0).json()["item"].clone();
        assert_eq!((&item["status"], &item["attempts"], &item["result"]), (&"pending".into(), &1.into(), &serde_json::Value::Null));

        // They run again; this time they find something.
        std::fs::write(env.path("full"), "").unwrap();
        let again = env.run(&["run", "b"]);
        assert!(again.code(0).stdout.starts_with("b: 2 done, 0 empty,"), "{}", again.stdout);
        assert_eq!(keys(&["--outcome", "empty"]), Vec::<String>::new());
        assert_eq!(env.run(&["show", "b", "e1", "--json"]).code(0).json()["item"]["attempts"], 2);
        env.assert_counts_consistent();
    }
}
