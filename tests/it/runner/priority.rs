//! Priority and not-before, end to end: real runners at concurrency 1,
//! a worker that logs each key with the time it started. A high priority
//! runs first, equal priorities keep their age order, and an item with a
//! not-before time is not started before it (waiting `not-due` until
//! then) and is started by the first run after it. Both backends.

use crate::support as common;
use nightshift::util::time::now_ms;

use common::Env;

/// A worker that appends `KEY START_MS` to `ran.log`.
fn timed_worker(env: &Env) -> String {
    let log = env.path("ran.log");
    let w = env.script(
        "timed.sh",
        &format!(
            "cat >/dev/null\necho \"$NIGHTSHIFT_KEY $(date +%s%3N)\" >> {}\necho '\"ok\"'",
            log.display()
        ),
    );
    w.display().to_string()
}

/// The keys in the order they started, with their start times.
fn started(env: &Env) -> Vec<(String, i64)> {
    common::lines(&env.path("ran.log"))
        .iter()
        .map(|l| {
            let (key, at) = l.split_once(' ').unwrap();
            (key.to_string(), at.parse().unwrap())
        })
        .collect()
}

fn keys(env: &Env) -> Vec<String> {
    started(env).into_iter().map(|(k, _)| k).collect()
}

/// A whole second at least `ahead_ms` from now, as RFC 3339 and in ms.
fn whole_second_ahead(ahead_ms: i64) -> (String, i64) {
    let at = (now_ms() + ahead_ms + 999) / 1000 * 1000;
    let text = chrono::DateTime::from_timestamp_millis(at)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    (text, at)
}

both_backends! {
    /// An urgent item added after many ordinary ones runs first; the
    /// ordinary ones keep their age order; a priority field (named by the
    /// config) orders the lines of one add, and its event says the range.
    fn a_high_priority_item_added_after_many_low_ones_runs_first(env) {
        let worker = timed_worker(&env);
        env.config(&format!("[batch.b]\nworker = [\"{worker}\"]\nconcurrency = 1\npriority_field = \"prio\"\n"));
        env.add_items("b", 30);
        env.write("urgent.jsonl", "{\"key\":\"urgent\"}\n");
        let added = env.run(&["add", "b", "urgent.jsonl", "--priority", "5"]);
        // The line has no "prio": it takes --priority; the field is named.
        assert_eq!(added.code(0).stdout, "b: added 1, already present 0 (priority 5, priority field \"prio\")\n");
        env.write("mixed.jsonl", "{\"key\":\"m-low\",\"prio\":-1}\n{\"key\":\"m-high\",\"prio\":9}\n{\"key\":\"m-none\"}\n");
        env.run(&["add", "b", "mixed.jsonl"]).code(0);
        let shown = env.run(&["show", "b", "m-high"]).code(0).stdout.clone();
        assert!(shown.contains("\npriority:  9\n"), "{shown}");
        let listed = env.run(&["items", "b", "--json"]).code(0).json_lines();
        let urgent = listed.iter().find(|i| i["key"] == "urgent").unwrap();
        assert_eq!(urgent["priority"], 5);

        let mut want = vec!["m-high".to_string(), "urgent".to_string()];
        want.extend((1..=30).map(|i| format!("k{i}")));
        want.extend(["m-none".to_string(), "m-low".to_string()]);
        let dry = env.run(&["run", "b", "--dry-run", "--json"]).code(0).json();
        let listed: Vec<&str> = dry["items"].as_array().unwrap().iter().map(|i| i["key"].as_str().unwrap()).collect();
        assert_eq!(listed, want, "the dry run lists them in claim order");
        env.run(&["run", "b"]).code(0);
        assert_eq!(keys(&env), want);
        let events = env.events("b", "added");
        assert_eq!(events[1]["fields"]["priority"], 5, "{}", events[1]);
        assert_eq!(events[2]["fields"]["priority"], serde_json::json!([-1, 9]), "{}", events[2]);
    }

    /// A due retry-tier item is claimed by its priority among the pending
    /// ones (the run's redrive makes it pending first): the dry run lists
    /// it there too, and `--limit N` names the N items the run takes.
    fn the_dry_run_lists_a_due_redrive_in_claim_order(env) {
        let log = env.path("ran.log");
        let w = env.script("w.sh", &format!(
            "cat >/dev/null\necho $NIGHTSHIFT_KEY >> {}\n[ \"$NIGHTSHIFT_KEY$NIGHTSHIFT_ATTEMPT\" = low1 ] && exit 75\necho '\"ok\"'",
            log.display()));
        env.config(&format!("[batch.b]\nworker = [\"{}\"]\nconcurrency = 1\nretries = 0\n", w.display()));
        env.write("low.jsonl", "{\"key\":\"low\"}\n");
        env.run(&["add", "b", "low.jsonl", "--priority", "-5"]).code(0);
        env.run(&["run", "b"]).code(1);
        assert_eq!(env.item("low"), ("failed".into(), Some("retry".into()), 1));
        env.write("urgent.jsonl", "{\"key\":\"urgent\"}\n");
        env.run(&["add", "b", "urgent.jsonl", "--priority", "9"]).code(0);
        env.write("rest.jsonl", "{\"key\":\"mid\"}\n");
        env.run(&["add", "b", "rest.jsonl"]).code(0);
        env.write("last.jsonl", "{\"key\":\"last\"}\n");
        env.run(&["add", "b", "last.jsonl", "--priority", "-9"]).code(0);
        // Its retry time has come.
        assert_eq!(env.exec("UPDATE items SET next_attempt_at = 1 WHERE key = 'low'"), 1);

        let listed = |extra: &[&str]| -> Vec<(String, String)> {
            let mut args = vec!["run", "b", "--dry-run", "--json"];
            args.extend(extra);
            let dry = env.run(&args).code(0).json();
            dry["items"].as_array().unwrap().iter()
                .map(|i| (i["key"].as_str().unwrap().to_string(), i["why"].as_str().unwrap().to_string()))
                .collect()
        };
        let pair = |k: &str, why: &str| (k.to_string(), why.to_string());
        let all = vec![pair("urgent", "pending"), pair("mid", "pending"), pair("low", "redrive"), pair("last", "pending")];
        assert_eq!(listed(&[]), all, "the dry run lists them in claim order");
        assert_eq!(listed(&["--limit", "1"]), all[..1], "--limit 1 names the one a run takes");
        let text = env.run(&["run", "b", "--dry-run", "--limit", "1"]).code(0).stdout.clone();
        assert!(text.contains("urgent") && !text.contains("redrive"), "{text}");

        std::fs::write(&log, "").unwrap();
        env.run(&["run", "b", "--limit", "1"]).code(0);
        assert_eq!(common::lines(&log), ["urgent"]);
        // The run redrove it: pending now, at the same place.
        let left: Vec<String> = listed(&[]).into_iter().map(|(k, _)| k).collect();
        assert_eq!(left, ["mid", "low", "last"], "what is left, in the same order");
        env.run(&["run", "b"]).code(0);
        assert_eq!(common::lines(&log), ["urgent", "mid", "low", "last"]);
    }

    /// `add` says the priorities it gave, as its `added` event records
    /// them, and the field it read them from (the config's too): it said
    /// the `--priority` flag's, which the field had overruled, and
    /// `"priority_field": null` while the config's was read.
    fn add_says_the_priorities_it_gave_and_the_field_it_read(env) {
        env.config("[batch.b]\nworker = [\"true\"]\npriority_field = \"prio\"\n");
        let add = |name: &str, lines: &str, extra: &[&str]| {
            let file = env.write(name, lines);
            let mut args = vec!["add", "b", file.to_str().unwrap()];
            args.extend(extra);
            env.run(&args).code(0).stdout.clone()
        };
        let said = add("a.jsonl", "{\"key\":\"a\",\"prio\":1}\n", &["--priority", "100"]);
        assert_eq!(said, "b: added 1, already present 0 (priority 1, priority field \"prio\")\n");
        assert_eq!(env.run(&["show", "b", "a", "--json"]).code(0).json()["item"]["priority"], 1);
        let json: serde_json::Value = serde_json::from_str(&add("c.jsonl", "{\"key\":\"c\",\"prio\":1}\n", &["--priority", "100", "--json"])).unwrap();
        assert_eq!((&json["priority"], &json["priority_field"]), (&1.into(), &"prio".into()), "{json}");
        let two = "{\"key\":\"d\",\"prio\":7}\n{\"key\":\"e\",\"prio\":9}\n";
        let json: serde_json::Value = serde_json::from_str(&add("de.jsonl", two, &["--json", "--dry-run"])).unwrap();
        assert_eq!(json["priority"], serde_json::json!([7, 9]), "the dry run says the same: {json}");
        let json: serde_json::Value = serde_json::from_str(&add("de.jsonl", two, &["--json"])).unwrap();
        assert_eq!(json["priority"], serde_json::json!([7, 9]), "{json}");
        assert_eq!(env.events("b", "added").last().unwrap()["fields"]["priority"], json["priority"]);
        // Lines without the field take --priority; --priority-field names another.
        let said = add("f.jsonl", "{\"key\":\"f\"}\n", &["--priority", "-3", "--priority-field", "urgency"]);
        assert_eq!(said, "b: added 1, already present 0 (priority -3, priority field \"urgency\")\n");
        // A large input, added while it is parsed, says the same.
        let big: String = (0..3000).map(|i| format!("{{\"key\":\"big{i:05}\",\"prio\":{},\"pad\":\"{}\"}}\n", i % 5 - 2, "x".repeat(20))).collect();
        assert!(big.len() >= 64 * 1024);
        let said = add("big.jsonl", &big, &[]);
        assert_eq!(said, "b: added 3000, already present 0 (priorities -2 to 2, priority field \"prio\")\n");
    }

    /// `add --not-before T`: a run before T leaves the item pending (not
    /// due, until T, in `status`, `status --json` and `show`); the first
    /// run after T starts it, at T or later.
    fn a_not_before_item_is_not_started_before_its_time(env) {
        let worker = timed_worker(&env);
        env.config(&format!("[batch.b]\nworker = [\"{worker}\"]\nconcurrency = 1\n"));
        env.add_items("b", 2);
        env.write("later.jsonl", "{\"key\":\"later\"}\n");
        let (t, at) = whole_second_ahead(2_000);
        let dry = env.run(&["add", "b", "later.jsonl", "--not-before", &t, "--dry-run"]);
        assert_eq!(dry.code(0).stdout, format!("b: would add 1, already present 0 (not before {t})\n"));
        assert_eq!(env.int("SELECT count(*) FROM items WHERE key = 'later'"), 0, "a dry run adds nothing");
        env.run(&["add", "b", "later.jsonl", "--not-before", &t]).code(0);
        assert_eq!(env.events("b", "added")[1]["fields"]["not_before"], t.as_str());
        let dry = env.run(&["run", "b", "--dry-run", "--json"]).code(0).json();
        if now_ms() < at {
            let listed: Vec<&str> = dry["items"].as_array().unwrap().iter().map(|i| i["key"].as_str().unwrap()).collect();
            assert_eq!(listed, ["k1", "k2"], "the dry run would not start it yet");
        }

        env.run(&["run", "b"]).code(0);
        // Each view is checked only when it was read wholly before `t`
        // (the clock read after it): a loaded machine may pass `t` at any
        // step.
        let before_t = || now_ms() < at;
        if before_t() {
            assert_eq!(keys(&env), ["k1", "k2"], "not started before {t}");
        }
        let b = env.batch_status("b");
        if before_t() {
            let waiting = b["waiting"].as_array().unwrap();
            assert_eq!(waiting.len(), 1, "{b}");
            assert_eq!((&waiting[0]["reason"], &waiting[0]["count"]), (&"not-due".into(), &1.into()));
            assert_eq!(waiting[0]["until"], t.as_str());
        }
        let clock = &t[11..19];
        let shown = env.run(&["show", "b", "later"]).code(0).stdout.clone();
        if before_t() {
            // Nothing takes it then unless a run is started: said too.
            assert!(
                shown.contains(&format!(
                    "\nwaiting:   1 pending, not before {clock}Z, and no runner is live (`nightshift run` starts one)\n"
                )),
                "{shown}"
            );
            assert!(shown.contains(&format!("\nruns from: {t} (")), "{shown}");
        }
        let json = env.run(&["show", "b", "later", "--json"]).code(0).json();
        if before_t() {
            assert_eq!((&json["waiting"]["reason"], &json["waiting"]["until"]), (&"not-due".into(), &t.as_str().into()));
        }
        let text = env.run(&["status"]).code(0).stdout.clone();
        if before_t() {
            assert!(text.contains(&format!("1 pending, not before {clock}Z")), "{text}");
        }
        common::wait_for("the not-before time", || now_ms() >= at);
        env.run(&["run", "b"]).code(0);
        let ran = started(&env);
        let later = ran.iter().find(|(k, _)| k == "later").expect("run after its time");
        assert!(later.1 >= at, "started at {} before {at}", later.1);
        assert_eq!(env.batch_status("b")["done"], 3);
    }

    /// `requeue --not-before 2s`: the item goes back to pending, waits
    /// until then, and the first run after runs it; the dry run and the
    /// event say the time.
    fn requeue_not_before_holds_the_item_until_then(env) {
        let log = env.path("ran.log");
        let w = env.script("w.sh", &format!(
            "cat >/dev/null\necho \"$NIGHTSHIFT_KEY $(date +%s%3N)\" >> {}\n[ -e {} ] || exit 1\necho '\"ok\"'",
            log.display(), env.path("fixed").display()));
        env.config(&format!("[batch.b]\nworker = [\"{}\"]\nconcurrency = 1\n", w.display()));
        env.add_items("b", 1);
        env.run(&["run", "b"]).code(1);
        assert_eq!(env.batch_status("b")["failed"], 1);
        env.write("fixed", "");
        let before = env.snapshot();
        let dry = env.run(&["requeue", "b", "k1", "--not-before", "1h", "--dry-run"]);
        assert!(dry.code(0).stdout.starts_with("b: would requeue 1 item, not before "), "{}", dry.stdout);
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");
        let moved = env.run(&["requeue", "b", "k1", "--not-before", "2s", "--json"]).code(0).json();
        let t = moved["not_before"].as_str().unwrap().to_string();
        // As stored, to the millisecond (the JSON says it to the second).
        let at = env.int("SELECT next_attempt_at FROM items WHERE key = 'k1'");
        assert_eq!(chrono::DateTime::parse_from_rfc3339(&t).unwrap().timestamp(), at / 1000);
        let event = env.events("b", "requeued");
        assert_eq!(event[0]["fields"]["not_before"], t.as_str());
        env.run(&["run", "b"]).code(0);
        if now_ms() < at {
            assert_eq!(keys(&env), ["k1"], "not run again before {t}");
            assert_eq!(env.run(&["show", "b", "k1", "--json"]).code(0).json()["waiting"]["reason"], "not-due");
        }
        common::wait_for("the not-before time", || now_ms() >= at);
        env.run(&["run", "b"]).code(0);
        let ran = started(&env);
        assert_eq!(ran.len(), 2, "{ran:?}");
        assert!(ran[1].1 >= at, "started at {} before {at}", ran[1].1);
        assert_eq!(env.batch_status("b")["done"], 1);
    }

    /// Bad priorities and times are refused with the line, the field or
    /// the flag named, and change nothing.
    fn bad_priorities_and_times_are_refused_and_change_nothing(env) {
        env.config("[batch.b]\nworker = [\"true\"]\npriority_field = \"prio\"\n");
        env.add_items("b", 1);
        let before = env.snapshot();
        env.write("bad.jsonl", concat!(
            "{\"key\":\"a\",\"prio\":1}\n",
            "{\"key\":\"b\",\"prio\":\"high\"}\n",
            "{\"key\":\"c\",\"prio\":1.5}\n",
            "{\"key\":\"d\",\"prio\":99999999999}\n",
            "{\"key\":\"e\",\"prio\":null}\n",
        ));
        let bad = env.run(&["add", "b", "bad.jsonl"]);
        let err = bad.code(2).stderr.clone();
        assert!(err.contains("rejected, nothing imported: 4 bad lines"), "{err}");
        let range = "must be an integer from -2147483648 to 2147483647";
        assert!(err.contains(&format!("line 2: priority field \"prio\" {range}, not the string \"high\"")), "{err}");
        assert!(err.contains(&format!("line 3: priority field \"prio\" {range}, not 1.5")), "{err}");
        assert!(err.contains(&format!("line 4: priority field \"prio\" {range}, not 99999999999")), "{err}");
        assert!(err.contains(&format!("line 5: priority field \"prio\" {range}, not null")), "{err}");
        env.write("ok.jsonl", "{\"key\":\"z\"}\n");
        let flag = env.run(&["add", "b", "ok.jsonl", "--priority", "high"]);
        assert!(flag.code(2).stderr.contains("--priority"), "{}", flag.stderr);
        let when = env.run(&["add", "b", "ok.jsonl", "--not-before", "tomorrow"]);
        assert!(when.code(2).stderr.contains("\"tomorrow\" is neither an RFC 3339 time"), "{}", when.stderr);
        let when = env.run(&["requeue", "b", "k1", "--not-before", "2026-13-01T00:00:00Z"]);
        assert!(when.code(2).stderr.contains("--not-before"), "{}", when.stderr);
        let field = env.run(&["add", "b", "ok.jsonl", "--priority-field", " "]);
        assert!(field.code(2).stderr.contains("--priority-field"), "{}", field.stderr);
        assert_eq!(env.snapshot(), before, "nothing changed");
    }
}
