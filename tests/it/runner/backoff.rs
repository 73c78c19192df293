//! An item whose attempt failed and that runs again in this cycle waits
//! out its backoff claimed, with no worker: every view says it waits to
//! retry, until when, and after what error, in both worker modes; a stop
//! gives it back, and its next claim forgets the wait. Real runners, real
//! workers, real signals, both backends.
#![cfg(unix)]

use crate::support as common;
use nightshift::util::time::now_ms;

use common::{Env, signal, wait_for};
use nix::sys::signal::Signal;
use serde_json::Value;

/// A process-mode worker whose every attempt fails transiently unless
/// `ok` exists beside it.
fn flaky(env: &Env) -> String {
    env.script(
        "flaky.sh",
        "cat >/dev/null\n\
         if [ -e ok ]; then echo '{\"ok\":1}'; exit 0; fi\n\
         echo '{\"error_class\":\"ConnectionError\",\"transient\":true,\"message\":\"reset by peer\"}' >&2\n\
         exit 75",
    )
    .display()
    .to_string()
}

/// The persistent worker of the same behaviour.
const FLAKY_PY: &str = r#"import json, os, sys
for line in sys.stdin:
    key = json.loads(line)["key"]
    if os.path.exists("ok"):
        print(json.dumps({"key": key, "result": {"ok": 1}}), flush=True)
    else:
        error = {"error_class": "ConnectionError", "transient": True, "message": "reset by peer"}
        print(json.dumps({"key": key, "error": error}), flush=True)
"#;

fn waiting(env: &Env, batch: &str) -> Vec<Value> {
    env.batch_status(batch)["waiting"]
        .as_array()
        .unwrap()
        .clone()
}

fn out(env: &Env, args: &[&str]) -> String {
    env.run(args).code(0).stdout.clone()
}

/// Batch `a` (process mode) and `b` (persistent) of flaky workers whose
/// failed attempt waits an hour to retry.
fn flaky_batches(env: &Env) {
    let w = flaky(env);
    env.write("flaky.py", FLAKY_PY);
    let slow = "retries = 2\nbackoff = \"1h\"\nbackoff_max = \"2h\"\nconcurrency = 1\n";
    env.config(&format!(
        "[batch.a]\nworker = [\"{w}\"]\n{slow}\n\
         [batch.b]\nworker = [\"python3\", \"flaky.py\"]\nmode = \"persistent\"\n{slow}"
    ));
}

both_backends! {
    /// The defect: during an immediate retry's backoff (here an hour) the
    /// claimed item had no worker, yet `status` said "1 in flight", `show`
    /// "in flight in run #1" and `items` gave no error. Now each says it
    /// waits to retry, when, and why, in both modes.
    fn an_item_waiting_to_retry_is_not_said_in_flight(env) {
        flaky_batches(&env);
        env.add_items("a", 1);
        env.add_items("b", 1);
        let before = now_ms();
        let mut runs = Vec::new();
        for batch in ["a", "b"] {
            runs.push(env.spawn(batch, &["run", batch]));
            wait_for("the retry event", || !env.events(batch, "retry").is_empty());
            let list = waiting(&env, batch);
            assert_eq!(list.len(), 1, "{list:?}");
            assert_eq!((list[0]["reason"].as_str(), list[0]["count"].as_i64()), (Some("backoff"), Some(1)), "{list:?}");
            let until = list[0]["until"].as_str().expect("a time");
            let until = chrono::DateTime::parse_from_rfc3339(until).unwrap().timestamp_millis();
            // The view gives whole seconds: an hour after `before`, cut to its second.
            assert!(until >= (before + 3_600_000) / 1000 * 1000, "{until} vs {before}");
            let text = out(&env, &["status", batch]);
            assert!(text.contains("1 claimed, waiting to retry after a failed attempt, the next at "), "{text}");
            assert!(!text.contains("in flight"), "{text}");
            let show = out(&env, &["show", batch, "k1"]);
            assert!(show.contains(", waiting to retry at ") && show.contains(" after a failed attempt"), "{show}");
            assert!(show.contains("waiting:   1 claimed, waiting to retry"), "{show}");
            assert!(!show.contains("in flight"), "{show}");
            let json: Value = serde_json::from_str(&out(&env, &["show", batch, "k1", "--json"])).unwrap();
            assert_eq!(json["waiting"]["reason"], "backoff", "{json}");
            assert!(json["claim"]["retry_at"].is_string(), "{json}");
            let items = out(&env, &["items", batch]);
            assert!(items.contains("ConnectionError: reset by peer"), "{items}");
            // A skip is refused (the run holds the item), in the same words:
            // it said "in flight".
            let skip = env.run(&["skip", batch, "k1", "--reason", "r"]);
            let said = skip.code(2).error_line();
            assert!(said.contains("claimed by a running runner, waiting: k1 (to retry at "), "{said}");
            assert!(said.ends_with(" after a failed attempt) (stop the run or `cancel` first, then skip again)"), "{said}");
            assert!(!said.contains("in flight"), "{said}");
            let json = env.run(&["skip", batch, "k1", "--reason", "r", "--json"]).code(2).json();
            assert_eq!(json["refused"][0]["why"], "waiting", "{json}");
        }
        for run in &mut runs {
            signal(run.id(), Signal::SIGINT);
            run.wait().unwrap();
        }
        // Stopped, the items go back to pending: none waits to retry, and
        // their next claim runs them.
        env.write("ok", "");
        for batch in ["a", "b"] {
            let list = waiting(&env, batch);
            assert!(list.iter().all(|w| w["reason"] != "backoff"), "{list:?}");
            assert!(!out(&env, &["show", batch, "k1"]).contains("waiting to retry"));
            env.run(&["run", batch]).code(0);
            let item: Value = serde_json::from_str(&out(&env, &["items", batch, "--json"])).unwrap();
            assert_eq!((item["status"].as_str(), &item["retry_at"]), (Some("done"), &Value::Null), "{item}");
        }
    }

    /// A cancel of an item waiting out its backoff stops no worker (none
    /// runs): its `cancelled` event said "its worker was stopped". It says
    /// where the item was, in both modes.
    fn a_cancel_while_waiting_to_retry_says_no_worker_ran(env) {
        flaky_batches(&env);
        for batch in ["a", "b"] {
            env.add_items(batch, 1);
            let mut run = env.spawn(batch, &["run", batch]);
            wait_for("the retry event", || !env.events(batch, "retry").is_empty());
            env.run(&["cancel", batch, "k1", "--to", "pending"]).code(0);
            wait_for("the cancel settled", || !env.events(batch, "cancelled").is_empty());
            let said = env.events(batch, "cancelled")[0]["message"].as_str().unwrap().to_string();
            assert!(said.contains("it was waiting to retry; no worker ran; now pending"), "{batch}: {said}");
            assert!(!said.contains("worker was stopped"), "{batch}: {said}");
            // The attempt that failed ran: it stays counted, so a cancel
            // cannot get round `max_attempts`.
            // One read: the item's attempts and its claims so far (the live
            // run claims it again as attempt 2).
            let shown = env.run(&["show", batch, "k1", "--json"]).code(0).json();
            let claims = shown["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "claimed").count();
            assert_eq!(shown["item"]["attempts"], claims, "{batch}: {shown}");
            signal(run.id(), Signal::SIGINT);
            run.wait().unwrap();
        }
    }

    /// A failed attempt retried at once ends no claim (no dead letter) and
    /// was missing from `show`'s failures, its `--json` and the dashboard's
    /// "attempts that failed (0)". Every failed attempt is listed now, the
    /// one retried at once said so; the one left in a tier as before.
    fn a_failed_attempt_retried_at_once_is_listed_with_the_others(env) {
        let w = env.script("w.sh", "cat >/dev/null\n\
            if [ \"$NIGHTSHIFT_ATTEMPT\" = 3 ]; then echo '{}'; exit 0; fi\n\
            echo \"{\\\"error_class\\\":\\\"Boom\\\",\\\"transient\\\":true,\\\"message\\\":\\\"boom $NIGHTSHIFT_ATTEMPT\\\"}\" >&2\n\
            exit 75");
        env.config(&format!("[batch.b]\nworker = [\"{}\"]\nretries = 1\nbackoff = \"100ms\"\n", w.display()));
        env.add_items("b", 1);
        // Attempt 1 retried at once, attempt 2 left in the retry tier.
        env.run(&["run", "b"]).code(1);
        let listed = |env: &Env| -> Vec<(u64, Value, String)> {
            let shown = env.run(&["show", "b", "k1", "--json"]).code(0).json();
            shown["failures"].as_array().unwrap().iter()
                .map(|f| (f["attempt"].as_u64().unwrap(), f["tier"].clone(), format!("{}: {}", f["error_class"].as_str().unwrap(), f["message"].as_str().unwrap())))
                .collect()
        };
        assert_eq!(listed(&env), [
            (2, Value::from("retry"), "Boom: boom 2".to_string()),
            (1, Value::Null, "Boom: boom 1".to_string()),
        ]);
        let text = out(&env, &["show", "b", "k1"]);
        assert!(text.contains("failures (2), newest first:"), "{text}");
        assert!(text.contains("  attempt 2  retry  Boom: boom 2\n"), "{text}");
        assert!(text.contains("  attempt 1  retried  Boom: boom 1\n"), "{text}");
        // The dashboard's item detail reads the same list.
        let store = nightshift::store::Store::open(&env.db, nightshift::store::Access::ReadOnly).unwrap();
        let read = |store: &nightshift::store::Store| {
            let q = nightshift::store::DashQuery { batch: Some("b".into()), detail: Some("k1".into()), ..Default::default() };
            let detail = store.dashboard(&q, now_ms()).unwrap().detail.unwrap().unwrap();
            detail.failures.iter().map(|f| (f.attempt, f.then())).collect::<Vec<_>>()
        };
        assert_eq!(read(&store), [(2, "retry"), (1, "retried")]);
        // Its time come, attempt 3 succeeds: the failures stay listed.
        env.exec("UPDATE items SET next_attempt_at = 1 WHERE key = 'k1'");
        env.run(&["run", "b"]).code(0);
        assert_eq!(env.item("k1"), ("done".into(), None, 3));
        assert_eq!(listed(&env).len(), 2);
        assert_eq!(read(&store), [(2, "retry"), (1, "retried")]);
    }
}
