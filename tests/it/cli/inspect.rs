//! Reading the store: `status` (table, JSON, tmux line), `items`, `show`,
//! `dlq` (grouped and JSON lines), `log` (filters and `--follow`).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use crate::support::Env;

/// RFC 3339 in UTC, as every exported time must be.
fn assert_utc_rfc3339(value: &serde_json::Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text:?} is not RFC 3339: {e}"));
    assert_eq!(parsed.offset().local_minus_utc(), 0, "{text} is not UTC");
    assert!(text.ends_with('Z'), "{text} should say Z");
}

#[test]
fn status_json_has_the_documented_fields() {
    let env = Env::new();
    env.failing_batch("b");
    env.add_items("c", 3);
    env.run(&["pause", "c", "--reason", "vendor outage"])
        .code(0);
    let status = env.status();
    let batches = status["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 2);
    for b in batches {
        for field in [
            "name",
            "pending",
            "claimed",
            "done",
            "failed",
            "retry",
            "manual",
            "paused",
            "paused_reason",
        ] {
            assert!(b.get(field).is_some(), "{field} missing in {b}");
        }
    }
    let b = &batches[0];
    assert_eq!(b["name"], "b");
    assert_eq!(
        (&b["pending"], &b["claimed"], &b["done"], &b["failed"]),
        (&0.into(), &0.into(), &4.into(), &4.into())
    );
    assert_eq!((&b["retry"], &b["manual"]), (&1.into(), &3.into()));
    assert_eq!(b["paused"], false);
    assert!(b["paused_reason"].is_null());
    assert_eq!(b["last_run"]["state"], "failed");
    assert_utc_rfc3339(&b["last_run"]["started_at"]);

    let c = &batches[1];
    assert_eq!((&c["name"], &c["pending"]), (&"c".into(), &3.into()));
    assert_eq!(c["paused"], true);
    assert_eq!(c["paused_reason"], "vendor outage");

    // One batch only.
    let one = env.run(&["status", "c", "--json"]).code(0).json();
    assert_eq!(one["batches"].as_array().unwrap().len(), 1);
}

#[test]
fn status_short_is_one_line_for_tmux() {
    let env = Env::new();
    let ran = env.run(&["status", "--short"]);
    ran.code(0);
    assert_eq!(ran.stdout, "nightshift: no batches\n");

    env.failing_batch("articles");
    env.add_items("posts", 3);
    let ran = env.run(&["status", "--short"]);
    ran.code(0);
    assert_eq!(ran.stdout, "articles 4✓ 4✗  posts 0✓ 3…\n");

    env.run(&["pause", "posts"]).code(0);
    let ran = env.run(&["status", "posts", "--short"]);
    assert_eq!(ran.stdout, "posts 0✓ 3… ⏸\n");

    // A long name is cut by display width, with `…`: the marks stay.
    let long = "夜間の記事要約バッチ・とても長い名前のバッチ";
    env.add_items(long, 1);
    let ran = env.run(&["status", long, "--short"]);
    assert_eq!(ran.stdout, "夜間の記事要約バッチ・とても長… 0✓ 1…\n");
}

/// `--short` cut names by a width of each character on its own: a name of
/// halfwidth kana with sound marks (`ｶﾞ`, two cells, counted one) was
/// printed whole at 40 cells, and a cut could stop inside an emoji of
/// several people, leaving a joiner that glued the `…` onto the emoji.
/// Each name is now at most 32 cells, cut between whole graphemes.
#[test]
fn status_short_cuts_names_by_what_a_terminal_shows() {
    use nightshift::util::text::width;
    let env = Env::new();
    let kana = "ｶﾞ".repeat(20);
    let family = format!("{}👨‍👩‍👧{}", "あ".repeat(14), "い".repeat(5));
    env.add_items(&kana, 1);
    env.add_items(&family, 1);
    for (name, shown) in [
        (&kana, format!("{}…", "ｶﾞ".repeat(15))),
        (&family, format!("{}👨‍👩‍👧…", "あ".repeat(14))),
    ] {
        let line = env.run(&["status", name, "--short"]).code(0).stdout.clone();
        assert_eq!(line, format!("{shown} 0✓ 1…\n"));
        assert!(width(&shown) <= 32, "{shown}");
        assert!(!line.contains("\u{200d}…"), "{line:?}");
    }
}

#[test]
fn status_table_and_prometheus() {
    let env = Env::new();
    let ran = env.run(&["status"]);
    ran.code(0);
    assert!(ran.stdout.contains("no batches"), "{ran:?}");

    env.failing_batch("b");
    let ran = env.run(&["status"]);
    ran.code(0);
    let mut lines = ran.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "BATCH", "PENDING", "CLAIMED", "DONE", "EMPTY", "SKIPPED", "RETRY", "MANUAL",
            "PROGRESS"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row, ["b", "0", "0", "4", "0", "0", "1", "3", "50%"]);
    assert!(ran.stdout.contains("last run #1 failed"), "{ran:?}");

    let ran = env.run(&["status", "--prometheus"]);
    ran.code(0);
    assert!(
        ran.stdout
            .contains("nightshift_items{batch=\"b\",status=\"failed\",tier=\"manual\"} 3"),
        "{ran:?}"
    );
    // Why the open items wait, by reason as status counts them: the three
    // quarantined and the one in the retry tier, not due yet; every
    // reason has its sample.
    let waiting: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("nightshift_waiting_items{"))
        .collect();
    assert_eq!(waiting.len(), 15, "{waiting:?}");
    assert!(
        waiting.contains(&"nightshift_waiting_items{batch=\"b\",reason=\"quarantined\"} 3"),
        "{waiting:?}"
    );
    let open: f64 = waiting
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(
        open, 4.0,
        "the reasons add up to the open items: {waiting:?}"
    );
}

#[test]
fn items_lists_and_filters() {
    let env = Env::new();
    env.failing_batch("b");
    let keys = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["items", "b", "--json"];
        all.extend_from_slice(args);
        env.run(&all)
            .code(0)
            .json_lines()
            .iter()
            .map(|i| i["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys(&[]), ["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]);
    assert_eq!(keys(&["--status", "failed"]), ["k1", "k2", "k3", "k4"]);
    assert_eq!(keys(&["--status", "done"]), ["k5", "k6", "k7", "k8"]);
    assert_eq!(keys(&["--status", "pending"]), Vec::<String>::new());
    assert_eq!(keys(&["--tier", "retry"]), ["k3"]);
    assert_eq!(keys(&["--tier", "manual"]), ["k1", "k2", "k4"]);
    assert_eq!(keys(&["--class", "BadInput"]), ["k1", "k2"]);
    assert_eq!(keys(&["--search", "title missing"]), ["k1", "k2"]);
    assert_eq!(keys(&["--limit", "2"]), ["k1", "k2"]);
    // A list cut by --limit says so under it; one that is all is not.
    let cut = env
        .run(&["items", "b", "--limit", "2"])
        .code(0)
        .stdout
        .clone();
    assert!(
        cut.ends_with(
            "… more items match: the first 2 shown (--limit 2; raise it or leave it out for all)\n"
        ),
        "{cut}"
    );
    let whole = env
        .run(&["items", "b", "--limit", "8"])
        .code(0)
        .stdout
        .clone();
    assert!(!whole.contains("more items match"), "{whole}");
    assert_eq!(whole.lines().count(), 1 + 8, "{whole}");

    let item = &env
        .run(&["items", "b", "--json", "--tier", "retry"])
        .json_lines()[0];
    assert_eq!(item["status"], "failed");
    assert_eq!(item["tier"], "retry");
    assert_eq!(item["error_class"], "TempFail");
    assert_eq!(item["payload"], serde_json::json!({"key": "k3", "n": 3}));

    let ran = env.run(&["items", "b", "--status", "failed"]);
    ran.code(0);
    let table: Vec<&str> = ran.stdout.lines().collect();
    assert!(table[0].starts_with("KEY"), "{ran:?}");
    // The failure's words stay after a requeue: the column says "last".
    assert!(table[0].ends_with("LAST ERROR"), "{ran:?}");
    assert_eq!(table.len(), 5, "{ran:?}");
    assert!(table[1].contains("failed/manual") && table[1].contains("BadInput: title missing"));
    let ran = env.run(&["items", "b", "--status", "pending"]);
    assert_eq!(ran.stdout, "no items match\n");

    // What each item waits for, as `show` says it: a quarantined one for a
    // human, a pending one for a runner (none is live, no schedule fires).
    crate::support::add_keys(&env, "b", &["新しい"]);
    let listed = env.run(&["items", "b", "--json"]).code(0).json_lines();
    let waiting = |key: &str| {
        let item = listed.iter().find(|i| i["key"] == key).unwrap();
        item["waiting"]["reason"].clone()
    };
    assert_eq!(waiting("k1"), "quarantined");
    assert_eq!(waiting("新しい"), "no-runner");
    assert_eq!(
        waiting("k5"),
        serde_json::Value::Null,
        "done: waits for nothing"
    );
    let shown = env.run(&["show", "b", "新しい", "--json"]).code(0).json();
    assert_eq!(shown["waiting"]["reason"], "no-runner", "as show says");
    let table = env.run(&["items", "b"]).code(0).stdout.clone();
    let header = table.lines().next().unwrap();
    assert!(header.contains(" WAITING "), "{table}");
    let row = |key: &str| {
        table
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .to_string()
    };
    assert!(row("k1").contains(" quarantined "), "{table}");
    assert!(row("新しい").contains(" no-runner "), "{table}");
    // A list where nothing waits has no such column.
    let done = env
        .run(&["items", "b", "--status", "done"])
        .code(0)
        .stdout
        .clone();
    assert!(!done.contains("WAITING"), "{done}");
}

#[test]
fn show_has_payload_result_attempts_op_id_errors_and_timeline() {
    let env = Env::new();
    env.failing_batch("b");

    let ran = env.run(&["show", "b", "k1"]);
    ran.code(0);
    for expected in [
        "key:       k1",
        "state:     failed/manual",
        "attempts:  1",
        "error:     BadInput: title missing",
        "\"n\": 1",
        "failures (1), newest first:",
        "events (",
        "claimed",
        "quarantined",
    ] {
        assert!(
            ran.stdout.contains(expected),
            "{expected:?} missing: {ran:?}"
        );
    }

    let ran = env.run(&["show", "b", "k5"]);
    ran.code(0);
    assert!(ran.stdout.contains("op id:     op-555"), "{ran:?}");
    assert!(
        ran.stdout.contains("result:\n  {\n    \"posted\": 5\n  }"),
        "{ran:?}"
    );

    // Every error so far, newest first, after a second failing run.
    env.run(&["requeue", "b", "k1"]).code(0);
    let worker = env.path("failing-worker.sh");
    env.run(&["run", "b", "--", worker.to_str().unwrap()])
        .code(1);
    let show = env.run(&["show", "b", "k1", "--json"]).code(0).json();
    assert_eq!(show["item"]["key"], "k1");
    assert_eq!(show["item"]["attempts"], 2);
    assert_eq!(
        show["item"]["payload"],
        serde_json::json!({"key": "k1", "n": 1})
    );
    let failures = show["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0]["attempt"], 2);
    assert_eq!(failures[1]["attempt"], 1);
    let kinds: Vec<&str> = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "claimed",
            "quarantined",
            "requeued",
            "claimed",
            "quarantined"
        ]
    );
}

#[test]
fn dlq_groups_by_class_last_24h_against_the_24h_before() {
    let env = Env::new();
    env.failing_batch("b");
    // Move the BadInput dead letters (and their hourly rollup) 30 h back.
    {
        let conn = env.sql();
        conn.execute_batch(
            "UPDATE dead_letters SET failed_at = failed_at - 30 * 3600000 WHERE error_class = 'BadInput';
             UPDATE dlq_hourly SET hour = hour - 30 WHERE error_class = 'BadInput';",
        )
        .unwrap();
    }
    let ran = env.run(&["dlq", "b"]);
    ran.code(0);
    let rows: Vec<Vec<&str>> = ran
        .stdout
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows[0],
        [
            "ERROR CLASS",
            "LAST 24H",
            "PREV 24H",
            "DELTA",
            "ALL TIME",
            "FAILED NOW (retry/manual)"
        ]
    );
    assert!(
        rows.contains(&vec!["BadInput", "0", "2", "-2", "2", "2 (0/2)"]),
        "{rows:?}"
    );
    assert!(
        rows.contains(&vec!["TempFail", "1", "0", "+1", "1", "1 (1/0)"]),
        "{rows:?}"
    );
    assert!(
        rows.contains(&vec!["Exit1", "1", "0", "+1", "1", "1 (0/1)"]),
        "{rows:?}"
    );

    let json = env.run(&["dlq", "b", "--json"]).code(0).json();
    assert_eq!(json["window"], "24h");
    let bad = json["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["error_class"] == "BadInput")
        .unwrap();
    assert_eq!((&bad["last_24h"], &bad["prev_24h"]), (&0.into(), &2.into()));

    // --since sets the windows: the last 2 days against the 2 days before.
    let ran = env.run(&["dlq", "b", "--since", "2d"]);
    ran.code(0);
    assert!(
        ran.stdout.starts_with("ERROR CLASS  LAST 2D  PREV 2D"),
        "{ran:?}"
    );
    assert!(
        ran.stdout.lines().any(|l| l
            .split_whitespace()
            .take(4)
            .eq(["BadInput", "2", "0", "+2"])),
        "{ran:?}"
    );

    // A window with a part of a second is refused, not read as `1S`.
    let ran = env.run(&["dlq", "b", "--since", "1500ms"]);
    assert!(
        ran.code(2)
            .stderr
            .contains("--since 1500ms: give the window in whole seconds"),
        "{}",
        ran.stderr
    );

    let empty = Env::new();
    empty.add_items("b", 1);
    let ran = empty.run(&["dlq", "b"]);
    assert_eq!(ran.code(0).stdout, "b: no dead letters\n");
}

/// `items --class` lists failed items of the class, as `dlq` counts them
/// and `requeue --class` takes them: an item requeued (or done) since
/// keeps its last error's class but is not failed of it. A status other
/// than failed beside it is refused; so is one beside `--tier`.
#[test]
fn items_of_a_class_are_the_failed_ones() {
    let env = Env::new();
    env.failing_batch("b");
    let keys = |args: &[&str]| -> Vec<String> {
        env.run(args)
            .code(0)
            .stdout
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let before = keys(&["items", "b", "--class", "BadInput", "--json"]);
    assert_eq!(before.len(), 2, "{before:?}");
    env.run(&["requeue", "b", &before[0]]).code(0);
    assert_eq!(
        keys(&["items", "b", "--class", "BadInput", "--json"]),
        [before[1].clone()]
    );
    let refused = env.run(&["items", "b", "--status", "pending", "--class", "BadInput"]);
    assert!(
        refused
            .code(2)
            .stderr
            .contains("--class lists failed items: it cannot be combined with --status pending"),
        "{}",
        refused.stderr
    );
    let refused = env.run(&["items", "b", "--status", "done", "--tier", "manual"]);
    assert!(
        refused.code(2).stderr.contains("--tier lists failed items"),
        "{}",
        refused.stderr
    );
    // Shown with its last error, which it is not failed of now.
    let shown = env.run(&["show", "b", &before[0]]).code(0).stdout.clone();
    assert!(
        shown.contains("(its last failure; it is pending now)"),
        "{shown}"
    );
}

/// The default view's windows are exact, as `--since 24h` counts them: a
/// failure 23h59m30s old is in the last 24 h though the hourly rollups
/// count its hour whole in the day before, and one 24h0m30s old in the day
/// before.
#[test]
fn dlq_windows_are_exact_at_their_edges() {
    let env = Env::new();
    env.failing_batch("b");
    {
        let conn = env.sql();
        conn.execute_batch(
            // Half a minute inside (or outside) each window's start: in the
            // hour the rollups count in the window before, but in its first
            // half minute.
            "UPDATE dead_letters SET failed_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) - 24 * 3600000 + 30000
               WHERE error_class = 'Exit1';
             UPDATE dead_letters SET failed_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) - 24 * 3600000 - 30000
               WHERE error_class = 'TempFail';
             UPDATE dead_letters SET failed_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) - 48 * 3600000 + 30000
               WHERE error_class = 'BadInput';
             UPDATE dlq_hourly SET hour = (SELECT max(failed_at) / 3600000 FROM dead_letters d
                                            WHERE d.error_class = dlq_hourly.error_class);",
        )
        .unwrap();
    }
    let counts = |args: &[&str]| -> Vec<(String, i64, i64)> {
        let json = env.run(args).code(0).json();
        let mut v: Vec<(String, i64, i64)> = json["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["error_class"].as_str().unwrap().to_string(),
                    c["last_24h"].as_i64().unwrap(),
                    c["prev_24h"].as_i64().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let exact = vec![
        ("BadInput".to_string(), 0, 2),
        ("Exit1".to_string(), 1, 0),
        ("TempFail".to_string(), 0, 1),
    ];
    assert_eq!(counts(&["dlq", "b", "--json"]), exact);
    assert_eq!(counts(&["dlq", "b", "--since", "24h", "--json"]), exact);
}

/// A class with no dead letters is said to have none, not the batch: it
/// said "b: no dead letters" of a batch with four (a typo in --class, or a
/// class that stopped failing, read as a clean night).
#[test]
fn dlq_of_a_class_without_dead_letters_names_the_class() {
    let env = Env::new();
    env.failing_batch("b");
    let ran = env.run(&["dlq", "b", "--class", "入力エラー"]);
    assert_eq!(
        ran.code(0).stdout,
        "b: no dead letters of class 入力エラー\n"
    );
    let ran = env.run(&["dlq", "b", "--class", "BadInput"]);
    assert!(ran.code(0).stdout.starts_with("ERROR CLASS"), "{ran:?}");
}

/// A requeue by a class no failed item has says so and names the classes
/// failed now, where it read "requeued 0 items" like a batch with nothing to
/// send back; a class that is failed but filtered out says that instead.
#[test]
fn requeue_of_a_class_nothing_has_names_the_classes_failed_now() {
    let env = Env::new();
    env.failing_batch("b");
    let ran = env.run(&["requeue", "b", "--class", "入力エラー"]);
    let said = ran.code(0).stdout.clone();
    assert!(said.starts_with("b: requeued 0 items\n"), "{said}");
    assert!(
        said.contains("no failed item has the class 入力エラー; failed now: BadInput (2)"),
        "{said}"
    );
    let ran = env.run(&[
        "requeue",
        "b",
        "--class",
        "BadInput",
        "--tier",
        "retry",
        "--dry-run",
    ]);
    assert!(
        ran.code(0)
            .stdout
            .contains("no failed item of class BadInput matches the other filters"),
        "{ran:?}"
    );
    let ran = env.run(&["requeue", "b", "--class", "BadInput"]);
    assert_eq!(ran.code(0).stdout, "b: requeued 2 items\n");
}

#[test]
fn dlq_jsonl_exports_the_documented_fields_in_utc() {
    let env = Env::new();
    env.failing_batch("b");
    let rows = env.run(&["dlq", "b", "--jsonl"]).code(0).json_lines();
    assert_eq!(rows.len(), 4);
    for row in &rows {
        for field in [
            "job_id",
            "payload",
            "error_class",
            "message",
            "attempt",
            "failed_at",
        ] {
            assert!(row.get(field).is_some(), "{field} missing: {row}");
        }
        assert_utc_rfc3339(&row["failed_at"]);
        assert!(
            row["payload"].is_object(),
            "payload is the item's JSON: {row}"
        );
    }
    let k1 = rows.iter().find(|r| r["job_id"] == "k1").unwrap();
    // The seeds' `job_id`, and the item's `key` and `label` as elsewhere.
    assert_eq!(k1["key"], "k1");
    assert_eq!(k1["label"], "k1");
    assert_eq!(k1["error_class"], "BadInput");
    assert_eq!(k1["message"], "title missing");
    assert_eq!(k1["attempt"], 1);
    assert_eq!(k1["payload"], serde_json::json!({"key": "k1", "n": 1}));

    // --since and --class narrow the export.
    {
        let conn = env.sql();
        conn.execute_batch(
            "UPDATE dead_letters SET failed_at = failed_at - 30 * 3600000 WHERE key = 'k1'",
        )
        .unwrap();
    }
    let recent = env
        .run(&["dlq", "b", "--jsonl", "--since", "24h"])
        .json_lines();
    assert_eq!(recent.len(), 3);
    assert!(recent.iter().all(|r| r["job_id"] != "k1"));
    let bad = env
        .run(&["dlq", "b", "--jsonl", "--class", "BadInput"])
        .json_lines();
    assert_eq!(bad.len(), 2);
}

/// No number in `value` is a time in epoch milliseconds (from 2001 on):
/// every time a JSON view prints is text.
fn assert_no_epoch_ms(value: &serde_json::Value, path: &str) {
    match value {
        serde_json::Value::Number(n) => assert!(
            n.as_i64().is_none_or(|n| n < 1_000_000_000_000),
            "{path} is {n}, a time in epoch milliseconds"
        ),
        serde_json::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                assert_no_epoch_ms(v, &format!("{path}[{i}]"));
            }
        }
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                assert_no_epoch_ms(v, &format!("{path}.{k}"));
            }
        }
        _ => {}
    }
}

// `items --json`, `log --json` and `show --json` printed their times as
// epoch milliseconds (`"created_at": 1796414731769`) where `status --json`
// and `dlq --jsonl` print RFC 3339: now every one says the same moment in
// the same text, which `jq`'s `fromdateiso8601` reads.
#[test]
fn items_log_and_show_json_give_times_as_status_does() {
    let env = Env::new();
    env.failing_batch("b");
    // One moment (with milliseconds, which the text drops) for the run,
    // k1's item, its events, its dead letter and its kept stderr.
    let t: i64 = 1_796_414_731_769;
    env.sql()
        .execute_batch(&format!(
            "UPDATE runs SET started_at = {t};
             UPDATE items SET created_at = {t}, updated_at = {t} WHERE key = 'k1';
             UPDATE events SET at = {t} WHERE key = 'k1';
             UPDATE dead_letters SET failed_at = {t} WHERE key = 'k1';
             UPDATE attempt_logs SET at = {t};"
        ))
        .unwrap();
    let b = env.status()["batches"][0].clone();
    let moment = b["last_run"]["started_at"].clone();
    assert_eq!(moment, "2026-12-04T20:05:31Z", "{b}");
    // What jq's `fromdateiso8601` takes: exactly this form.
    let jq = |v: &serde_json::Value| {
        let text = v.as_str().unwrap_or_else(|| panic!("not text: {v}"));
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%SZ")
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .and_utc()
            .timestamp()
    };
    assert_eq!(jq(&moment), t / 1000);

    let items = env.run(&["items", "b", "--json"]).code(0).json_lines();
    assert_no_epoch_ms(&serde_json::json!(items), "items");
    let k1 = items.iter().find(|i| i["key"] == "k1").unwrap();
    assert_eq!((&k1["created_at"], &k1["updated_at"]), (&moment, &moment));
    // None stays null; a retry's next attempt is text like the rest.
    assert!(
        k1["next_attempt_at"].is_null() && k1["lease_until"].is_null(),
        "{k1}"
    );
    let k3 = items.iter().find(|i| i["key"] == "k3").unwrap();
    assert_utc_rfc3339(&k3["next_attempt_at"]);
    jq(&k3["next_attempt_at"]);

    let log = env
        .run(&["log", "b", "--key", "k1", "--json"])
        .code(0)
        .json_lines();
    assert!(!log.is_empty());
    assert_no_epoch_ms(&serde_json::json!(log), "log");
    assert!(log.iter().all(|e| e["at"] == moment), "{log:?}");

    let show = env
        .run(&["show", "b", "k1", "--json", "--attempts"])
        .code(0)
        .json();
    assert_no_epoch_ms(&show, "show");
    assert_eq!(show["item"]["created_at"], moment);
    let events = show["events"].as_array().unwrap();
    assert!(
        !events.is_empty() && events.iter().all(|e| e["at"] == moment),
        "{show}"
    );
    assert_eq!(show["failures"][0]["failed_at"], moment, "{show}");
    assert_eq!(show["attempts"][0]["at"], moment, "{show}");

    // The dead letter's export said it so already: the same text.
    let dlq = env.run(&["dlq", "b", "--jsonl"]).code(0).json_lines();
    let k1 = dlq.iter().find(|r| r["key"] == "k1").unwrap();
    assert_eq!(k1["failed_at"], moment);
}

#[test]
fn log_lists_and_filters_events() {
    let env = Env::new();
    env.failing_batch("b");
    env.add_items("c", 1);
    let all = env.run(&["log", "--json"]).code(0).json_lines();
    assert!(all.len() > 10);
    for e in &all {
        for field in ["id", "at", "batch", "kind", "message"] {
            assert!(e.get(field).is_some(), "{field} missing: {e}");
        }
    }
    let ids: Vec<i64> = all.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first");

    let failed = env
        .run(&["log", "b", "--json", "--kind", "quarantined"])
        .json_lines();
    let keys: Vec<&str> = failed.iter().map(|e| e["key"].as_str().unwrap()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, ["k1", "k2", "k4"]);

    let two_kinds = env
        .run(&[
            "log",
            "b",
            "--json",
            "--kind",
            "quarantined",
            "--kind",
            "failed",
        ])
        .json_lines();
    assert_eq!(two_kinds.len(), 4);
    // As the dashboard's kind filter takes them: comma-separated.
    let comma = env
        .run(&["log", "b", "--json", "--kind", "quarantined,failed"])
        .json_lines();
    assert_eq!(comma, two_kinds);

    let k5 = env.run(&["log", "b", "--json", "--key", "k5"]).json_lines();
    assert!(k5.iter().all(|e| e["key"] == "k5"));
    assert!(k5.iter().any(|e| e["kind"] == "done"));
    // Without the batch: the item k5 of any batch (only b has one).
    let any = env.run(&["log", "--json", "--key", "k5"]).json_lines();
    assert_eq!(any, k5);
    // A name no batch has is refused, as with the batch named.
    let none = env.run(&["log", "--json", "--key", "k99"]);
    assert_eq!(none.code(2).json()["error"]["command"], "log");
    assert!(
        none.stderr.contains("no batch has an item \"k99\""),
        "{none:?}"
    );

    let c = env.run(&["log", "c", "--json"]).json_lines();
    assert!(c.iter().all(|e| e["batch"] == "c"));
    assert_eq!(c.last().unwrap()["kind"], "added");

    let last_two = env.run(&["log", "-n", "2", "--json"]).json_lines();
    assert_eq!(last_two.len(), 2);
    assert_eq!(last_two[1]["id"], all.last().unwrap()["id"]);

    let ran = env.run(&["log", "b", "--kind", "quarantined"]);
    ran.code(0);
    assert_eq!(ran.stdout.lines().count(), 3);
    assert!(
        ran.stdout.lines().all(|l| l.contains(" quarantined ")),
        "{ran:?}"
    );
}

#[test]
fn log_follow_prints_an_event_appended_while_it_runs() {
    let env = Env::new();
    env.add_items("b", 2);
    let mut child = env
        .spawnable()
        .args(["log", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    // What is already there comes first.
    let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(first.contains(" added "), "{first}");

    env.run(&["pause", "b", "--reason", "follow me"]).code(0);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("follow me") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    let line = found.unwrap_or_else(|| panic!("the pause never showed up; saw {seen:?}"));
    assert!(line.contains(" paused "), "{line}");
    // A batch made while followed, its name wider than the column was
    // when the log began: shown whole, not cut to that width.
    env.add_items("ブログ記事の投稿", 1);
    let added = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(" added ") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let added = added.unwrap_or_else(|| panic!("the add never showed up; saw {seen:?}"));
    assert!(added.contains(" ブログ記事の投稿 "), "{added}");
}

#[test]
fn an_unknown_kind_is_an_error_naming_the_valid_ones() {
    let env = Env::new();
    env.failing_batch("b");
    let before = env.fingerprint();
    let ran = env.run(&["log", "--kind", "failed,faild"]);
    ran.code(2);
    assert_eq!(ran.stdout, "");
    assert!(
        ran.stderr
            .contains("invalid value 'faild' for '--kind <KIND>'"),
        "{ran:?}"
    );
    assert!(
        ran.stderr.contains("a similar value exists: 'failed'"),
        "{ran:?}"
    );
    for kind in nightshift::model::EventKind::ALL {
        assert!(
            ran.stderr.contains(kind.as_str()),
            "{kind} not listed: {ran:?}"
        );
    }
    assert_eq!(env.fingerprint(), before);
    // The README's morning line: the permanent failures (`quarantined`)
    // come with the transient ones.
    let shown = env
        .run(&["log", "b", "--json", "--kind", "failed,quarantined,empty"])
        .code(0)
        .json_lines();
    let kinds: std::collections::BTreeSet<&str> =
        shown.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["failed", "quarantined"].into());
    assert_eq!(shown.len(), 4, "k1, k2, k4 quarantined and k3 failed");
}

#[test]
fn log_help_lists_every_kind_with_what_it_records() {
    let env = Env::bare();
    let help = env.run(&["log", "--help"]).code(0).stdout.clone();
    // Help wraps long lines: compare word by word.
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let help = words(&help);
    for kind in nightshift::model::EventKind::ALL {
        let entry = format!("- {}: {}", kind.as_str(), words(kind.doc()));
        assert!(help.contains(&entry), "{entry:?} not in {help}");
    }
    assert!(help.contains("(0: every one)"), "{help}");
}

#[test]
fn log_n_0_prints_every_event_oldest_first() {
    let env = Env::new();
    env.add_items("b", 3);
    // More events than a page, and more than the default 50.
    env.sql()
        .execute_batch(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2345)
             INSERT INTO events (at, batch_id, kind, message)
             SELECT 1700000000000 + i, (SELECT id FROM batches WHERE name = 'b'),
                    CASE WHEN i % 2 = 0 THEN 'fire' ELSE 'daemon' END, 'event ' || i
               FROM n;",
        )
        .unwrap();
    let total = env.int("SELECT count(*) FROM events");
    assert!(total > 2345);
    let all = env.run(&["log", "-n", "0", "--json"]).code(0).json_lines();
    assert_eq!(all.len() as i64, total);
    let ids: Vec<i64> = all.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "oldest first, each once"
    );
    let fires = env
        .run(&["log", "b", "-n", "0", "--kind", "fire"])
        .code(0)
        .stdout
        .lines()
        .count();
    assert_eq!(fires, 1172);
    assert_eq!(env.run(&["log"]).code(0).stdout.lines().count(), 50);
    // A count past SQL's integers asks for every event (it was refused as
    // a store fault, exit 3).
    let huge = env
        .run(&["log", "-n", "9223372036854775808", "--json"])
        .code(0)
        .json_lines();
    assert_eq!(huge.len() as i64, total);
}

/// Costs are summed as floats (0.1 + 0.2 is 0.30000000000000004): every
/// view shows the amount by one rule, in cents or millionths, never the
/// float's noise.
#[test]
fn a_summed_cost_is_shown_as_money_in_show_and_the_run_summary() {
    let env = Env::new();
    env.config("[batch.b]\n");
    env.add_items("b", 1);
    let worker = env.script(
        "costly.sh",
        "#!/bin/sh\necho '@nightshift cost=0.1' >&2\necho '@nightshift cost=0.2' >&2\necho '{\"ok\":true}'\n",
    );
    let ran = env.run(&["run", "b", "--", worker.to_str().unwrap()]);
    ran.code(0);
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert!(said.contains("spent $0.30,"), "{ran:?}");
    let show = env.run(&["show", "b", "k1"]);
    show.code(0);
    assert!(show.stdout.contains("cost:      $0.30\n"), "{show:?}");
}

both_backends! {
    /// `log` of several batches: the kind and the message start at the
    /// same cell on every line, whatever each batch's name (`記事` or
    /// `ブログ記事の投稿`, wider than the column's eight cells) and each
    /// kind (`keys-forgotten`, wider than its twelve); a name past 32
    /// cells is cut with `…`, never mid-character. The longer ones pushed
    /// the rest of their line right.
    fn log_columns_line_up_whatever_the_batch_and_kind(env) {
        use nightshift::util::text::width;
        let long = "とても長いバッチの名前で三十二セルを超えるもの";
        env.config("[batch.\"記事\"]\nworker = [\"cat\"]\n");
        // The prune (its events with no batch, and `keys-forgotten`)
        // first: it deletes the events before it.
        env.add_items("記事", 1);
        env.run(&["run", "記事"]).code(0);
        env.run(&["prune", "--older-than", "1ms", "--forget-keys"]).code(0);
        for batch in ["a", "記事", "ブログ記事の投稿", long] {
            env.add_items(batch, 1);
        }
        env.run(&["pause", "ブログ記事の投稿"]).code(0);
        env.run(&["run", "記事"]).code(0);
        let json = env.run(&["log", "-n", "0", "--json"]).code(0).stdout.clone();
        let events: Vec<serde_json::Value> =
            json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(events.iter().any(|e| e["kind"] == "keys-forgotten"), "{json}");
        let text = env.run(&["log", "-n", "0"]).code(0).stdout.clone();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), events.len(), "{text}");
        let mut starts = std::collections::BTreeSet::new();
        for (line, e) in lines.iter().zip(&events) {
            let batch = e["batch"].as_str().unwrap_or("-");
            let kind = e["kind"].as_str().unwrap();
            // Time, batch (cut past 32 cells), kind, then the rest.
            let rest = &line[21..];
            let shown = if width(batch) > 32 {
                let cut = nightshift::util::text::cut(batch, 32).into_owned();
                assert!(cut.ends_with('…') && width(&cut) <= 32, "{line}");
                cut
            } else {
                batch.to_string()
            };
            assert!(rest.starts_with(&shown), "{line}");
            let after = rest[shown.len()..].trim_start();
            assert!(after.starts_with(kind), "{line}");
            let kind_at = width(&line[..line.len() - after.len()]);
            let body = after[kind.len()..].trim_start();
            let body_at = width(&line[..line.len() - body.len()]);
            starts.insert((kind_at, body_at));
        }
        assert_eq!(starts.len(), 1, "every line's kind and message start at one cell each: {starts:?}\n{text}");
    }
}
