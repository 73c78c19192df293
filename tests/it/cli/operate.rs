//! Operator actions: `requeue`, `skip`, `pause`, `unpause`, `prune`. Each is
//! recorded as an event naming `user@host`.

use crate::support::Env;

/// The actor the commands below run as.
const ACTOR: &str = "operator@nightbox";

fn as_operator(env: &Env, args: &[&str]) -> crate::support::Ran {
    crate::support::ran(
        env.cmd()
            .env("USER", "operator")
            .env("NIGHTSHIFT_HOST", "nightbox")
            .args(args)
            .output()
            .unwrap(),
    )
}

fn state(env: &Env, key: &str) -> (String, Option<String>, u64) {
    let item = env.run(&["show", "b", key, "--json"]).code(0).json()["item"].clone();
    (
        item["status"].as_str().unwrap().to_string(),
        item["tier"].as_str().map(String::from),
        item["attempts"].as_u64().unwrap(),
    )
}

/// The newest event of `kind`, as JSON.
fn last_event(env: &Env, kind: &str) -> serde_json::Value {
    env.run(&["log", "--json", "--kind", kind])
        .code(0)
        .json_lines()
        .pop()
        .unwrap_or_else(|| panic!("no {kind} event"))
}

#[test]
fn requeue_keys_moves_failed_items_back_to_pending_and_records_who() {
    let env = Env::new();
    env.failing_batch("b");
    let ran = as_operator(&env, &["requeue", "b", "k1", "k3"]);
    ran.code(0);
    assert_eq!(ran.stdout, "b: requeued 2 items\n");
    assert_eq!(state(&env, "k1"), ("pending".into(), None, 1));
    assert_eq!(state(&env, "k3"), ("pending".into(), None, 1));
    assert_eq!(state(&env, "k2").0, "failed");
    let event = last_event(&env, "requeued");
    assert_eq!(event["actor"], ACTOR);
    assert!(
        event["message"].as_str().unwrap().contains(ACTOR),
        "{event}"
    );
    env.assert_counts_consistent();

    // The next run picks them up again.
    let worker = env.path("failing-worker.sh");
    env.run(&["run", "b", "--", worker.to_str().unwrap()])
        .code(1);
    assert_eq!(
        state(&env, "k1"),
        ("failed".into(), Some("manual".into()), 2)
    );
}

#[test]
fn requeue_by_class_tier_or_all_and_reset_attempts() {
    let env = Env::new();
    env.failing_batch("b");
    let moved = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["requeue", "b", "--json"];
        all.extend_from_slice(args);
        let json = env.run(&all).code(0).json();
        json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(moved(&["--class", "BadInput", "--dry-run"]), ["k1", "k2"]);
    assert_eq!(moved(&["--tier", "retry", "--dry-run"]), ["k3"]);
    assert_eq!(
        moved(&["--tier", "manual", "--dry-run"]),
        ["k1", "k2", "k4"]
    );
    assert_eq!(
        moved(&["--class", "BadInput", "--tier", "retry", "--dry-run"]),
        Vec::<String>::new()
    );
    assert_eq!(
        moved(&["--all-failed", "--dry-run"]),
        ["k1", "k2", "k3", "k4"]
    );

    assert_eq!(
        moved(&["--class", "BadInput", "--reset-attempts"]),
        ["k1", "k2"]
    );
    assert_eq!(state(&env, "k1"), ("pending".into(), None, 0));
    assert_eq!(moved(&["--all-failed"]), ["k3", "k4"]);
    assert_eq!(
        state(&env, "k4"),
        ("pending".into(), None, 1),
        "attempts kept"
    );
    assert_eq!(moved(&["--all-failed"]), Vec::<String>::new());
    let status = env.status();
    assert_eq!(status["batches"][0]["pending"], 4);
    assert_eq!(status["batches"][0]["failed"], 0);
    env.assert_counts_consistent();
}

#[test]
fn requeue_dry_run_lists_exactly_what_would_move_and_changes_nothing() {
    let env = Env::new();
    env.failing_batch("b");
    let before = env.fingerprint();
    let ran = env.run(&["requeue", "b", "--tier", "manual", "--dry-run"]);
    ran.code(0);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[0], "b: would requeue 3 items");
    assert!(lines[1].starts_with("KEY"), "{ran:?}");
    let keys: Vec<&str> = lines[2..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(keys, ["k1", "k2", "k4"]);
    assert!(
        lines[2].contains("manual") && lines[2].contains("BadInput"),
        "{ran:?}"
    );
    // A label that is only the key again is left out, as `items` does.
    assert_eq!(
        lines[2].split_whitespace().nth(1),
        Some("failed/manual"),
        "{ran:?}"
    );
    assert_eq!(env.fingerprint(), before, "a dry run writes nothing");

    let ran = env.run(&["requeue", "b", "k1", "--dry-run"]);
    ran.code(0);
    assert!(
        ran.stdout.starts_with("b: would requeue 1 item\n"),
        "{ran:?}"
    );
    assert_eq!(env.fingerprint(), before);

    // The real requeue moves exactly the listed items.
    let ran = env.run(&["requeue", "b", "--tier", "manual"]);
    assert_eq!(ran.code(0).stdout, "b: requeued 3 items\n");
    for key in ["k1", "k2", "k4"] {
        assert_eq!(state(&env, key).0, "pending");
    }
    assert_eq!(state(&env, "k3").0, "failed");
}

#[test]
fn skip_marks_items_done_without_running_them() {
    let env = Env::new();
    env.failing_batch("b");
    env.add_items("b", 9);
    let ran = as_operator(
        &env,
        &["skip", "b", "k2", "k9", "k5", "--reason", "posted by hand"],
    );
    ran.code(0);
    assert_eq!(ran.stdout, "b: skipped 2 items, 1 done already\n");
    let item = env.run(&["show", "b", "k9", "--json"]).json()["item"].clone();
    assert_eq!(
        (&item["status"], &item["outcome"]),
        (&"done".into(), &"skipped".into())
    );
    assert_eq!(item["attempts"], 0);
    assert_eq!(item["result"]["skipped"], "posted by hand");
    assert_eq!(item["result"]["by"], ACTOR);
    let event = last_event(&env, "skipped");
    assert_eq!(event["actor"], ACTOR);
    assert_eq!(event["fields"]["reason"], "posted by hand");
    let status = env.status();
    assert_eq!(status["batches"][0]["skipped"], 2);
    assert_eq!(status["batches"][0]["pending"], 0);
    env.assert_counts_consistent();

    // A run does not run skipped items.
    let worker = env.path("failing-worker.sh");
    let ran = env.run(&["run", "b", "--json", "--", worker.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.json()["counts"]["done"], 0);
}

#[test]
fn pause_stops_runs_until_unpause_and_records_who_and_why() {
    let env = Env::new();
    env.add_items("b", 3);
    let ran = as_operator(&env, &["pause", "b", "--reason", "API migration"]);
    ran.code(0);
    assert!(ran.stdout.contains("b: paused (API migration)"), "{ran:?}");
    let event = last_event(&env, "paused");
    assert_eq!(event["actor"], ACTOR);
    assert_eq!(event["fields"]["reason"], "API migration");
    let status = env.status();
    assert_eq!(status["batches"][0]["paused"], true);
    assert_eq!(status["batches"][0]["paused_by"], ACTOR);

    let ran = as_operator(&env, &["pause", "b", "--reason", "still migrating"]);
    assert!(ran.code(0).stdout.contains("already paused"), "{ran:?}");
    assert_eq!(
        env.status()["batches"][0]["paused_reason"],
        "still migrating"
    );
    // Paused again with no reason of its own: the reason given is kept,
    // and the answer says whose pause it is and that nothing changed.
    let before = env.snapshot();
    let ran = env.run(&["pause", "b"]);
    let said = ran.code(0).stdout.clone();
    assert!(
        said.starts_with(&format!("b: already paused by {ACTOR} at "))
            && said.contains("(still migrating); nothing changed"),
        "{said}"
    );
    assert_eq!(env.snapshot(), before, "nothing written");
    let json = env.run(&["pause", "b", "--json"]).code(0).json();
    assert_eq!(
        (&json["changed"], &json["reason"]),
        (&false.into(), &"still migrating".into())
    );

    let worker = env.script("ok.sh", "cat >/dev/null; echo '{}'");
    let ran = env.run(&["run", "b", "--", worker.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(
        env.status()["batches"][0]["pending"],
        3,
        "a paused batch runs nothing"
    );

    let ran = as_operator(&env, &["unpause", "b"]);
    assert_eq!(ran.code(0).stdout, "b: unpaused\n");
    assert_eq!(last_event(&env, "unpaused")["actor"], ACTOR);
    let ran = as_operator(&env, &["unpause", "b"]);
    assert_eq!(ran.code(0).stdout, "b: was not paused and not held\n");
    let status = env.status();
    assert_eq!(status["batches"][0]["paused"], false);
    assert!(status["batches"][0]["paused_reason"].is_null());

    env.run(&["run", "b", "--", worker.to_str().unwrap()])
        .code(0);
    assert_eq!(env.status()["batches"][0]["done"], 3);
}

/// The command a line suggests between backticks, split as a shell
/// splits it (by `sh` itself), without the leading `nightshift`.
fn suggested(line: &str) -> Vec<String> {
    let command = line
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in {line}"));
    let words = std::process::Command::new("sh")
        .args(["-c", &format!("printf '%s\\n' {command}")])
        .output()
        .unwrap();
    let words: Vec<String> = String::from_utf8(words.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(words[0], "nightshift", "{line}");
    words[1..].to_vec()
}

/// A batch name with a space (a name may hold one) is quoted in the
/// commands the output suggests, so that copied into a shell they work:
/// pause said `nightshift unpause my batch`, which unpauses nothing
/// ("unexpected argument 'batch'"), and run --dry-run said "nightshift
/// add my batch FILE".
#[test]
fn suggested_commands_quote_a_batch_name_for_the_shell() {
    let env = Env::new();
    env.config("[batch.\"my batch\"]\nworker = [\"true\"]\n");
    let ran = env.run(&["run", "my batch", "--dry-run"]);
    assert!(
        ran.code(0)
            .stdout
            .contains("(nightshift add 'my batch' FILE)"),
        "{ran:?}"
    );
    let ran = env.run(&["pause", "my batch"]);
    let unpause = suggested(&ran.code(0).stdout);
    assert_eq!(unpause, ["unpause", "my batch"]);
    let args: Vec<&str> = unpause.iter().map(String::as_str).collect();
    assert_eq!(env.run(&args).code(0).stdout, "my batch: unpaused\n");
}

/// Ages every row of the store by `days`, so prune has something to do.
fn age_everything(env: &Env, days: i64) {
    let ms = days * 86_400_000;
    env.sql()
        .execute_batch(&format!(
            "UPDATE items SET created_at = created_at - {ms}, updated_at = updated_at - {ms};
             UPDATE dead_letters SET failed_at = failed_at - {ms};
             UPDATE dlq_hourly SET hour = hour - {days} * 24;
             UPDATE events SET at = at - {ms};
             UPDATE runs SET started_at = started_at - {ms}, ended_at = ended_at - {ms};"
        ))
        .unwrap();
}

#[test]
fn prune_keeps_failures_unless_asked_and_records_who() {
    let env = Env::new();
    env.failing_batch("b");
    age_everything(&env, 40);
    env.add_items("fresh", 2);

    let before = env.fingerprint();
    let ran = env.run(&["prune", "--older-than", "30d", "--dry-run"]);
    ran.code(0);
    assert!(
        ran.stdout.starts_with("would remove: 4 done items,"),
        "{ran:?}"
    );
    assert!(
        ran.stdout.contains("0 failed items, 0 dead letters"),
        "{ran:?}"
    );
    assert!(
        ran.stdout
            .contains("kept: 4 failed items and 4 dead letters"),
        "{ran:?}"
    );
    assert_eq!(env.fingerprint(), before, "a dry run writes nothing");

    let ran = as_operator(&env, &["prune", "--older-than", "30d"]);
    ran.code(0);
    assert!(ran.stdout.starts_with("removed: 4 done items,"), "{ran:?}");
    assert!(
        ran.stdout
            .contains("kept: 4 failed items and 4 dead letters"),
        "{ran:?}"
    );
    let keys: Vec<String> = env
        .run(&["items", "b", "--json"])
        .json_lines()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, ["k1", "k2", "k3", "k4"], "failed items stay");
    assert_eq!(env.run(&["dlq", "b", "--jsonl"]).json_lines().len(), 4);
    assert_eq!(env.status()["batches"][1]["pending"], 2, "new items stay");
    let event = last_event(&env, "pruned");
    assert_eq!(event["actor"], ACTOR);
    assert!(
        event["message"].as_str().unwrap().contains("4 done items"),
        "{event}"
    );
    env.assert_counts_consistent();

    let ran = as_operator(&env, &["prune", "--older-than", "30d", "--include-failed"]);
    ran.code(0);
    assert!(
        ran.stdout.contains("4 failed items, 4 dead letters"),
        "{ran:?}"
    );
    assert!(!ran.stdout.contains("kept"), "{ran:?}");
    assert_eq!(env.run(&["items", "b", "--json"]).stdout, "");
    assert_eq!(env.run(&["dlq", "b", "--jsonl"]).stdout, "");
    assert_eq!(env.run(&["dlq", "b"]).stdout, "b: no dead letters\n");
    assert_eq!(last_event(&env, "pruned")["actor"], ACTOR);
    env.assert_counts_consistent();
}

#[test]
fn exit_codes_are_documented_and_a_failed_run_exits_1() {
    let env = Env::new();
    let ran = env.run(&["--help"]);
    ran.code(0);
    let codes: Vec<&str> = ran
        .stdout
        .lines()
        .skip_while(|l| *l != "Exit codes:")
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(codes, ["0", "1", "2", "3", "4", "130"], "{ran:?}");
    for text in [
        "0    ok",
        "1    the run finished but items failed",
        "2    bad usage",
        "3    the store could not be used",
    ] {
        assert!(ran.stdout.contains(text), "{text:?} missing: {ran:?}");
    }
    env.failing_batch("b"); // asserts exit 1 itself
}

#[test]
fn a_large_requeue_runs_in_several_short_transactions() {
    let env = Env::new();
    env.add_items("b", 5_000);
    // Fail them directly: the triggers keep the counters right.
    env.sql()
        .execute_batch(
            "UPDATE items SET status = 'failed', tier = 'manual', error_class = 'Boom',
                              error_message = 'boom'",
        )
        .unwrap();
    env.assert_counts_consistent();
    let ran = crate::support::ran(
        env.cmd()
            .env("NIGHTSHIFT_TRACE_TX", "1")
            .args(["requeue", "b", "--all-failed"])
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout, "b: requeued 5000 items\n");
    let transactions = ran
        .stderr
        .lines()
        .filter(|l| l.contains("write transaction held the lock"))
        .count();
    // The first chunk is 1,000 items and a chunk at most doubles.
    assert!(transactions >= 3, "{transactions} transactions: {ran:?}");
    let status = env.status();
    assert_eq!(status["batches"][0]["pending"], 5_000);
    assert_eq!(status["batches"][0]["failed"], 0);
    env.assert_counts_consistent();
    let events = env
        .run(&["log", "b", "--json", "--kind", "requeued", "-n", "10000"])
        .json_lines();
    assert_eq!(events.len(), 5_000, "one event per item");
}

/// RFC 3339 in UTC, as every `--json` time.
fn is_utc(value: &serde_json::Value) -> bool {
    value
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .is_some_and(|t| t.offset().local_minus_utc() == 0)
}

#[test]
fn operator_actions_say_what_they_did_as_json() {
    let env = Env::new();
    env.failing_batch("b");
    env.add_items("b", 9);

    let paused = as_operator(&env, &["pause", "b", "--reason", "API migration", "--json"]);
    let p = paused.code(0).json();
    assert_eq!(
        (
            &p["batch"],
            &p["paused"],
            &p["was_paused"],
            &p["reason"],
            &p["by"]
        ),
        (
            &"b".into(),
            &true.into(),
            &false.into(),
            &"API migration".into(),
            &ACTOR.into()
        )
    );
    assert!(is_utc(&p["at"]), "{p}");
    // `changed` is said whether or not it changed (it was left out when it had).
    assert_eq!(p["changed"], true, "{p}");
    let again = as_operator(&env, &["pause", "b", "--reason", "still", "--json"]).json();
    assert_eq!(
        (&again["was_paused"], &again["reason"], &again["changed"]),
        (&true.into(), &"still".into(), &true.into())
    );

    let u = as_operator(&env, &["unpause", "b", "--json"]).json();
    assert_eq!(
        (&u["batch"], &u["paused"], &u["was_paused"], &u["by"]),
        (&"b".into(), &false.into(), &true.into(), &ACTOR.into())
    );
    assert!(is_utc(&u["at"]), "{u}");
    let u = as_operator(&env, &["unpause", "b", "--json"]).json();
    assert_eq!(
        (&u["was_paused"], &u["by"], &u["at"]),
        (
            &false.into(),
            &serde_json::Value::Null,
            &serde_json::Value::Null
        )
    );

    let s = as_operator(
        &env,
        &[
            "skip", "b", "k2", "k9", "k5", "k9", "--reason", "by hand", "--json",
        ],
    )
    .code(0)
    .json();
    assert_eq!(s["skipped"], serde_json::json!(["k2", "k9"]));
    assert_eq!(s["already_done"], serde_json::json!(["k5"]));
    assert_eq!((&s["reason"], &s["by"]), (&"by hand".into(), &ACTOR.into()));
    assert_eq!(env.status()["batches"][0]["skipped"], 2);
    // An unknown key: nothing skipped, exit 2, and the JSON names it as it
    // names several.
    let before = env.fingerprint();
    let bad = env.run(&["skip", "b", "k6", "k99", "--reason", "x", "--json"]);
    bad.code(2);
    let said: serde_json::Value = serde_json::from_str(&bad.stdout).unwrap();
    assert_eq!(said["refused"][0]["why"], "unknown", "{said}");
    assert_eq!(said["refused"][0]["keys"][0]["key"], "k99", "{said}");
    assert!(bad.error_line().contains("k99"), "{bad:?}");
    assert_eq!(env.fingerprint(), before);

    age_everything(&env, 40);
    let before = env.fingerprint();
    let dry = env
        .run(&["prune", "--older-than", "30d", "--dry-run", "--json"])
        .code(0)
        .json();
    assert_eq!(dry["dry_run"], true);
    assert!(dry.get("removed").is_none(), "{dry}");
    assert_eq!(dry["would_remove"]["done_items"], 6, "{dry}");
    assert_eq!(
        dry["kept"],
        serde_json::json!({"failed_items": 3, "dead_letters": 4})
    );
    assert!(is_utc(&dry["older_than"]));
    assert_eq!(env.fingerprint(), before, "a dry run writes nothing");
    let done = as_operator(&env, &["prune", "--older-than", "30d", "--json"])
        .code(0)
        .json();
    assert_eq!(done["removed"], dry["would_remove"]);
    assert_eq!(done["kept"], dry["kept"]);
    assert_eq!(done["include_failed"], false);
}

#[test]
fn a_run_records_who_started_it() {
    let env = Env::new();
    env.add_items("b", 2);
    let worker = env.script("ok.sh", "cat >/dev/null; echo '{}'");
    as_operator(&env, &["run", "b", "--", worker.to_str().unwrap()]).code(0);
    let run = env.status()["batches"][0]["last_run"].clone();
    assert_eq!(
        (&run["trigger"], &run["actor"]),
        (&"manual".into(), &ACTOR.into()),
        "{run}"
    );
    let started = last_event(&env, "run-started");
    assert_eq!(started["actor"], ACTOR, "{started}");
    let text = env.run(&["status"]).code(0).stdout.clone();
    assert!(text.contains(&format!("(manual, {ACTOR}, ")), "{text}");
    let log = env
        .run(&["log", "--kind", "run-started"])
        .code(0)
        .stdout
        .clone();
    assert!(log.contains(&format!("[{ACTOR}]")), "{log}");
}
