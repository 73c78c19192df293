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
}
