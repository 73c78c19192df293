//! The runner end to end: the real binary, real worker processes (small
//! shell scripts), real signals, each test on both backends (a
//! temp-dir SQLite file and a PostgreSQL database). Pace and stops are in
//! `runner::stop`, locks and fencing in `runner::locks`, the crash soak
//! in `soak::chaos`.
#![cfg(unix)]

use crate::support as common;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use common::{add_keys, assert_no_process_left, lines, stdout, tally, wait_for};

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Immediate retries and redrives that never wait.
const NO_WAIT: &str = "retries = 2\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n";

/// The worker of the transient vs permanent test.
const CLASSIFY_WORKER: &str = r#"cat >/dev/null
case "$NIGHTSHIFT_KEY" in
  flaky) [ "$NIGHTSHIFT_ATTEMPT" -lt 3 ] && exit 75; echo '"third time lucky"' ;;
  bad) echo 'no such article' >&2; exit 1 ;;
  badjson) echo '{"error_class":"BadRequest","transient":false,"message":"400: title missing"}' >&2; exit 75 ;;
  always) echo 'upstream 503' >&2; exit 75 ;;
esac"#;

both_backends! {
    /// A worker that stops being runnable mid-run (its file made not
    /// executable) stops the run at the first item that could not start:
    /// no item spends an attempt on it, each waits as it was, and the
    /// summary says why. Its exit code 1, its recorded state (`failed`, it
    /// was `aborted`) and its alert (it had none) say one thing. Both
    /// modes.
    fn a_worker_that_can_no_longer_start_stops_the_run_without_spending_attempts(env) {
        // Process mode: the first worker takes its own execute bit.
        let w = env.script("takes_its_x.sh", "cat >/dev/null\nchmod a-x \"$0\"\necho ok");
        env.config(
            "[batch.a]\nconcurrency = 1\nretries = 5\nbackoff = \"0s\"\n\
             alert = [\"sh\", \"-c\", \"cat > alerted.json\"]\n",
        );
        env.add_items("a", 5);
        let ran = env.run(&["run", "a", "--", w.to_str().unwrap()]);
        ran.code(1);
        assert!(
            ran.stdout.contains("the worker cannot start") && ran.stdout.contains("Permission denied"),
            "{ran:?}"
        );
        assert_eq!(
            env.strings("SELECT state || ' ' || stopped FROM runs"),
            ["failed worker-cannot-start"]
        );
        let alerted = std::fs::read_to_string(env.path("alerted.json")).expect("the alert ran");
        assert!(alerted.contains("\"state\":\"failed\""), "{alerted}");
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 1);
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'pending' AND attempts = 0"), 4);
        // Persistent mode: its worker exits, and cannot start again.
        let p = env.script("persistent.sh", "chmod a-x \"$0\"\nexit 3");
        env.config(&format!(
            "[batch.a]\nconcurrency = 1\nretries = 5\nbackoff = \"0s\"\n\n[batch.p]\nmode = \"persistent\"\nworker = [\"{}\"]\nretries = 5\nbackoff = \"0s\"\n",
            p.display()
        ));
        env.add_items("p", 3);
        let ran = env.run(&["run", "p"]);
        ran.code(1);
        assert!(ran.stdout.contains("the worker cannot start"), "{ran:?}");
        // What was sent to the worker that died spent its attempt; no
        // retry that could not start spent another.
        let most = env.int(
            "SELECT coalesce(max(attempts), 0) FROM items WHERE batch_id = (SELECT id FROM batches WHERE name = 'p')",
        );
        assert_eq!(most, 1, "{:?}", env.rows("SELECT key, status, attempts FROM items"));
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 1);
    }

    /// A worker whose `#!` line stops working mid-run (rewritten with
    /// Windows line ends, so the kernel looks for "/bin/sh\r") stops the run
    /// saying what is wrong with the line: it said only "No such file or
    /// directory" of a file that is there. No item spends an attempt on it.
    fn a_worker_whose_interpreter_goes_mid_run_is_named(env) {
        let w = env.script(
            "goes_crlf.sh",
            "cat >/dev/null\nprintf '#!/bin/sh\\r\\necho ok\\r\\n' > \"$0\"\necho ok",
        );
        env.config("[batch.a]\nconcurrency = 1\nretries = 0\n");
        env.add_items("a", 3);
        let ran = env.run(&["run", "a", "--", w.to_str().unwrap()]);
        ran.code(1);
        assert!(
            ran.stdout.contains("the worker cannot start")
                && ran.stdout.contains("`#!` line ends in a carriage return")
                && ran.stdout.contains(r#""/bin/sh\r""#),
            "{ran:?}"
        );
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 1);
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'pending' AND attempts = 0"), 2);
    }

    // ---- The seeds' scenario ----

    fn killed_at_item_137_a_rerun_resumes_without_paying_twice(env) {
        env.add_items("b", 200);
        let log = env.path("side-effects.log");
        let flag = env.path("killed");
        // Append the key (the side effect), then the worker that brings the log
        // to 137 lines SIGKILLs the runner (its parent) — once.
        let worker = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\necho \"$NIGHTSHIFT_KEY\" >> {log}\nn=$(wc -l < {log})\n\
                 if [ \"$n\" -ge 137 ] && mkdir {flag} 2>/dev/null; then kill -KILL $PPID; fi\n\
                 echo '{{\"ok\":true}}'",
                log = p(&log),
                flag = p(&flag)
            ),
        );
        let w = p(&worker);
        let status = env
            .std_cmd()
            .args(["run", "b", "-j", "4", "--", &w])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.signal(), Some(9), "the runner was SIGKILLed");

        let done_before: BTreeSet<String> = env
            .strings("SELECT key FROM items WHERE status = 'done'")
            .into_iter()
            .collect();
        let in_flight: BTreeSet<String> = env
            .strings("SELECT key FROM items WHERE status = 'claimed'")
            .into_iter()
            .collect();
        // The 137th line's worker killed the runner; up to three others may
        // have appended and been recorded around it.
        assert!(
            (120..140).contains(&done_before.len()),
            "{} done at the kill",
            done_before.len()
        );
        assert!(
            !in_flight.is_empty() && in_flight.len() <= 4,
            "{in_flight:?}"
        );

        // A dry run now names what a run would take back, and writes nothing.
        let before = env.snapshot();
        let plan = env
            .cmd()
            .args(["run", "b", "--dry-run", "--json", "--", &w])
            .output()
            .unwrap();
        assert_eq!(env.snapshot(), before);
        let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
        let reclaim: BTreeSet<String> = plan["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["why"] == "reclaim")
            .map(|i| i["key"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(reclaim, in_flight);

        // Immediate re-run: no TTL to wait out (the holder's pid is gone).
        let out = env
            .cmd()
            .args(["run", "b", "-j", "4", "--", &w])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stdout(&out));
        assert!(
            stdout(&out).contains(&format!("{} skipped-done", done_before.len())),
            "{}",
            stdout(&out)
        );
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            200
        );
        assert_eq!(env.run_states(), ["crashed", "ok"]);

        // Workers orphaned by the kill may still be finishing their append.
        assert_no_process_left(&w);
        let seen = tally(&lines(&log));
        assert_eq!(seen.len(), 200, "every key executed");
        for (key, n) in &seen {
            if in_flight.contains(key) {
                assert!(*n <= 2, "{key} in flight at the kill ran {n} times");
            } else {
                assert_eq!(*n, 1, "{key} ran {n} times");
            }
        }
    }

    // ---- Transient vs permanent ----

    /// A first worker's slip: its error object printed on stdout, exit 1.
    /// The failure said only "exited with status 1"; it now quotes stdout's
    /// last line and says where the error object is read from.
    fn a_failure_with_nothing_on_stderr_quotes_stdout(env) {
        add_keys(&env, "b", &["k"]);
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\necho '{\"error_class\":\"投稿エラー\",\"message\":\"失敗\"}'\nexit 1",
        ));
        let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let shown = env.run(&["show", "b", "k", "--json"]).code(0).json();
        assert_eq!(shown["item"]["error_class"], "Exit1", "{shown}");
        assert_eq!(
            shown["item"]["error_message"],
            "exited with status 1; stdout: {\"error_class\":\"投稿エラー\",\"message\":\"失敗\"} \
             (an error object is read from stderr's last line, not stdout)",
            "{shown}"
        );
    }

    fn transient_failures_retry_and_permanent_ones_are_quarantined_with_a_dead_letter(env) {
        env.config(&format!("[batch.b]\n{NO_WAIT}max_attempts = 5\n"));
        add_keys(&env, "b", &["flaky", "bad", "badjson", "always"]);
        let w = p(&env.script("w.sh", CLASSIFY_WORKER));

        let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "something failed: exit 1");
        assert_eq!(env.item("flaky"), ("done".into(), None, 3));
        assert_eq!(env.item("bad"), ("failed".into(), Some("manual".into()), 1));
        assert_eq!(
            env.item("badjson"),
            ("failed".into(), Some("manual".into()), 1)
        );
        assert_eq!(
            env.item("always"),
            ("failed".into(), Some("retry".into()), 3)
        );

        // The dead letters carry payload, class, message, attempt and time.
        let out = env.cmd().args(["dlq", "b", "--jsonl"]).output().unwrap();
        let letters: Vec<serde_json::Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let letter = |key: &str| {
            letters
                .iter()
                .find(|l| l["job_id"] == key)
                .unwrap_or_else(|| panic!("no dead letter for {key}: {letters:?}"))
                .clone()
        };
        let bad = letter("bad");
        assert_eq!(bad["payload"]["key"], "bad");
        assert_eq!(bad["error_class"], "Exit1");
        assert_eq!(bad["message"], "exited with status 1: no such article");
        assert_eq!(bad["attempt"], 1);
        assert_eq!(bad["tier"], "manual");
        assert!(bad["failed_at"].as_str().unwrap().ends_with('Z'));
        let badjson = letter("badjson");
        assert_eq!(badjson["error_class"], "BadRequest");
        assert_eq!(badjson["message"], "400: title missing");
        assert_eq!(badjson["attempt"], 1);
        let always = letter("always");
        assert_eq!(
            (always["tier"].clone(), always["attempt"].clone()),
            ("retry".into(), 3.into())
        );

        // Next cycle: redriven, two more attempts, then quarantined at max_attempts.
        env.cmd().args(["run", "b", "--", &w]).assert().code(1);
        assert_eq!(
            env.item("always"),
            ("failed".into(), Some("manual".into()), 5)
        );
        assert_eq!(
            env.strings(
                "SELECT tier || ':' || attempt FROM dead_letters WHERE key = 'always' ORDER BY id"
            ),
            ["retry:3", "manual:5"]
        );
        // A quarantined item is not run again by later cycles.
        let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
        assert!(out.status.success());
        assert!(
            stdout(&out).contains("0 done, 0 empty, 0 failed"),
            "{}",
            stdout(&out)
        );
        assert_eq!(env.item("always").2, 5);
    }

    // ---- Operation ids ----

    fn an_op_id_reported_before_a_timeout_or_a_kill_reaches_the_retry(env) {
        env.config(
            "[batch.b]\nretries = 0\nbackoff = \"0s\"\nbackoff_max = \"0s\"\nitem_timeout = \"1s\"\n",
        );
        add_keys(&env, "b", &["slow", "dies"]);
        let log = env.path("attempts.log");
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\necho \"$NIGHTSHIFT_KEY $NIGHTSHIFT_ATTEMPT ${{NIGHTSHIFT_OP_ID:-none}}\" >> {log}\n\
                 if [ \"$NIGHTSHIFT_ATTEMPT\" = 1 ]; then\n\
                   echo \"@nightshift op_id=op-$NIGHTSHIFT_KEY\" >&2\n\
                   if [ \"$NIGHTSHIFT_KEY\" = slow ]; then sleep 1000; else kill -KILL $$; fi\n\
                 fi\necho '\"polled the existing operation\"'",
                log = p(&log)
            ),
        ));
        // First cycle: both attempts die (timeout, SIGKILL): transient, retry tier.
        env.cmd().args(["run", "b", "--", &w]).assert().code(1);
        assert_eq!(
            env.strings("SELECT op_id FROM items ORDER BY key"),
            ["op-dies", "op-slow"]
        );
        assert_eq!(
            env.strings("SELECT error_class FROM items ORDER BY key"),
            ["Signal", "Timeout"]
        );
        // Next cycle: the retry gets the stored operation id back.
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        let mut seen = lines(&log);
        seen.sort();
        assert_eq!(
            seen,
            [
                "dies 1 none",
                "dies 2 op-dies",
                "slow 1 none",
                "slow 2 op-slow"
            ]
        );
    }

    // ---- Timeouts leave nothing behind ----

    fn a_timeout_kills_the_workers_grandchildren(env) {
        env.config("[batch.b]\nretries = 0\nitem_timeout = \"1s\"\n");
        add_keys(&env, "b", &["k"]);
        let marker = format!("grandchild-of-{}", env.dir.path().display());
        // A background child, a grandchild, and a worker waiting on them.
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\nsh -c 'sleep 1000; echo never' {marker} &\n\
                 (sh -c 'sleep 1000; echo never' {marker}-sub &) \nwait"
            ),
        ));
        env.cmd().args(["run", "b", "--", &w]).assert().code(1);
        assert_eq!(env.strings("SELECT error_class FROM items"), ["Timeout"]);
        assert_no_process_left(&marker);
    }

    fn a_worker_that_exits_leaves_no_background_process_either(env) {
        add_keys(&env, "b", &["k"]);
        let marker = format!("left-behind-{}", env.dir.path().display());
        let w = p(&env.script(
            "w.sh",
            &format!("cat >/dev/null\nsh -c 'sleep 1000; echo never' {marker} &\necho '\"ok\"'"),
        ));
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        assert_eq!(env.item("k").0, "done");
        assert_no_process_left(&marker);
    }

    // ---- --limit, --key, --dry-run ----

    fn limit_and_key_run_only_what_they_name(env) {
        env.add_items("b", 10);
        let log = env.path("ran.log");
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\necho \"$NIGHTSHIFT_KEY\" >> {}\necho '\"ok\"'",
                p(&log)
            ),
        ));
        env.cmd()
            .args(["run", "b", "--limit", "3", "-j", "2", "--", &w])
            .assert()
            .success();
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            3
        );
        env.cmd()
            .args(["run", "b", "--key", "k9", "--", &w])
            .assert()
            .success();
        assert_eq!(env.item("k9").0, "done");
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            4
        );
        assert_eq!(lines(&log).len(), 4);
        // A done item is not run again by key.
        let out = env
            .cmd()
            .args(["run", "b", "--key", "k9", "--", &w])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("already done"));
        assert_eq!(lines(&log).len(), 4);
    }

    /// Exit 2 says nothing was changed: a key the run cannot take (done,
    /// in no item) is refused before a run is recorded, the lock taken or
    /// the source run. With a source, the key may come from it; a key
    /// that still names no item then ends the run recorded as aborted,
    /// not as an ok run of nothing.
    fn a_key_the_run_cannot_take_is_refused_before_anything_changes(env) {
        add_keys(&env, "b", &["a", "b"]);
        let w = p(&env.script("w.sh", "cat >/dev/null\necho '\"ok\"'"));
        env.cmd().args(["run", "b", "--key", "b", "--", &w]).assert().success();
        let before = env.snapshot();
        for key in ["typo", "b"] {
            let out = env.cmd().args(["run", "b", "--key", key, "--", &w]).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "--key {key}");
            assert_eq!(env.snapshot(), before, "--key {key}: the store unchanged");
        }
        let out = env.cmd().args(["run", "nobatch", "--key", "x", "--", &w]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(env.snapshot(), before, "an unknown batch: the store unchanged");

        env.config("[batch.b]\nsource = [\"sh\", \"-c\", \"echo '{\\\"key\\\": \\\"fed\\\"}'\"]\n");
        env.cmd().args(["run", "b", "--key", "fed", "--", &w]).assert().success();
        assert_eq!(env.item("fed").0, "done", "a key the source adds runs");
        let out = env.cmd().args(["run", "b", "--key", "typo", "--", &w]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no item \"typo\""));
        assert_eq!(env.run_states().last().map(String::as_str), Some("aborted"));
    }

    /// With `runners = 2` a second run got a seat beside the one holding
    /// the key and only then found the claim: it exited 2 ("nothing was
    /// changed") but left a run recorded aborted with no reason. Refused
    /// now before any run is recorded.
    fn a_key_in_flight_in_a_live_run_is_refused_before_a_run_is_recorded(env) {
        env.config("[batch.b]\nrunners = 2\n");
        add_keys(&env, "b", &["a", "b"]);
        let go = env.path("go");
        let w = env.waiting_worker(&format!("while [ ! -e {} ]; do sleep 0.05; done", p(&go)), "key-in-flight");
        let mut first = env.spawn("first", &["run", "b", "-j", "1", "--", &w]);
        wait_for("a started", || env.started("a"));
        let out = env.cmd().args(["run", "b", "--key", "a", "--", &w]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("\"a\" is in flight in another run"), "{out:?}");
        assert_eq!(env.int("SELECT count(*) FROM runs"), 1, "no run recorded for the refused one");
        assert_eq!(env.events("b", "run-started").len(), 1);
        env.write("go", "");
        assert!(first.wait().unwrap().success(), "{:?}", env.output_of("first"));
        assert_eq!(env.run_states(), ["ok"]);
    }

    fn a_dry_run_writes_nothing(env) {
        env.config(&format!("[batch.b]\n{NO_WAIT}"));
        env.add_items("b", 5);
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\n[ \"$NIGHTSHIFT_KEY\" = k2 ] && exit 75\necho '\"ok\"'",
        ));
        env.cmd()
            .args(["run", "b", "--limit", "2", "--", &w])
            .assert()
            .code(1);
        let before = env.snapshot();
        let out = env
            .cmd()
            .args(["run", "b", "--dry-run", "--json", "--", &w])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(env.snapshot(), before, "the store unchanged");
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let items: Vec<(String, String)> = plan["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["key"].as_str().unwrap().to_string(),
                    i["why"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = [
            ("k2", "redrive"),
            ("k3", "pending"),
            ("k4", "pending"),
            ("k5", "pending"),
        ]
        .iter()
        .map(|(k, w)| (k.to_string(), w.to_string()))
        .collect();
        assert_eq!(items, expected);
        // The plain listing too.
        let out = env
            .cmd()
            .args(["run", "b", "--dry-run", "--", &w])
            .output()
            .unwrap();
        assert!(
            stdout(&out).contains("would run 4 items"),
            "{}",
            stdout(&out)
        );
        // A label that is only the key again is left out, as `items` does.
        assert!(
            stdout(&out).contains("\nk3          1        pending\n"),
            "{}",
            stdout(&out)
        );
        assert_eq!(env.snapshot(), before);
    }

    /// A result and a payload are kept and shown as they were written: a
    /// number past a float's 17 digits, the order of the keys; a `\u`
    /// escape of Python's `ensure_ascii` read as the character. They came
    /// back as `1.2345678901234568e29`, keys sorted, in every view.
    fn results_and_payloads_keep_their_numbers_and_key_order(env) {
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\nprintf '{\"z\": 123456789012345678901234567890, \"a\": \"\\\\u65e5\\\\u672c\", \"f\": 0.1000000000000000055511151231257827}\\n'",
        ));
        let pw = p(&env.script(
            "pw.sh",
            "while read line; do\n  key=$(printf '%s' \"$line\" | sed 's/.*\"key\":\"\\([^\"]*\\)\".*/\\1/')\n  printf '{\"key\":\"%s\",\"result\":{\"z\":123456789012345678901234567890,\"a\":1}}\\n' \"$key\"\ndone",
        ));
        env.config(&format!(
            "[batch.b]\nworker = [\"{w}\"]\n[batch.pb]\nmode = \"persistent\"\nworker = [\"{pw}\"]\n"
        ));
        let input = env.write(
            "big.jsonl",
            "{\"key\": \"big\", \"n\": 123456789012345678901234567891}\n",
        );
        for batch in ["b", "pb"] {
            env.cmd().args(["add", batch]).arg(&input).assert().success();
            env.cmd().args(["run", batch]).assert().success();
        }
        let listed = env.run(&["items", "b", "--json"]).code(0).stdout.clone();
        assert!(
            listed.contains(r#""payload":{"key":"big","n":123456789012345678901234567891}"#),
            "{listed}"
        );
        assert!(
            listed.contains(
                r#""result":{"z":123456789012345678901234567890,"a":"日本","f":0.1000000000000000055511151231257827}"#
            ),
            "{listed}"
        );
        let shown = env.run(&["show", "b", "big"]).code(0).stdout.clone();
        assert!(
            shown.contains("result:\n  {\n    \"z\": 123456789012345678901234567890,\n    \"a\": \"日本\",\n"),
            "{shown}"
        );
        let json = env.run(&["show", "b", "big", "--json"]).code(0).stdout.clone();
        assert!(json.contains("123456789012345678901234567891"), "{json}");
        assert!(json.contains("0.1000000000000000055511151231257827"), "{json}");
        let persistent = env.run(&["items", "pb", "--json"]).code(0).stdout.clone();
        assert!(
            persistent.contains(r#""result":{"z":123456789012345678901234567890,"a":1}"#),
            "{persistent}"
        );
    }

    // ---- Alert, source ----

    fn the_alert_runs_only_when_something_failed(env) {
        let alert = env.path("alert.json");
        env.config(&format!(
            "[batch.b]\nretries = 0\nalert = [\"sh\", \"-c\", \"cat > {}\"]\n",
            p(&alert)
        ));
        add_keys(&env, "b", &["good"]);
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\n[ \"$NIGHTSHIFT_KEY\" = broken ] && exit 3\necho '\"ok\"'",
        ));
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        assert!(!alert.exists(), "no failure, no alert");
        add_keys(&env, "b", &["broken"]);
        env.cmd().args(["run", "b", "--", &w]).assert().code(1);
        let body: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&alert).unwrap()).unwrap();
        assert_eq!(body["batch"], "b");
        assert_eq!(body["counts"]["manual"], 1);
        assert!(body["summary"].as_str().unwrap().contains("1 failed"));
    }

    /// The alert runs once the batch lock is released: a slow one holds up
    /// no other run (it held the lock for its whole timeout), and a signal
    /// stops it, with what it started (it was ignored for 60 s).
    fn a_hung_alert_holds_no_lock_and_a_signal_stops_it(env) {
        env.config(
            "[batch.b]\nretries = 0\n\
             alert = [\"sh\", \"-c\", \"cat > alerted; sleep 300 & echo $! > bg.pid; sleep 301\"]\n",
        );
        add_keys(&env, "b", &["broken"]);
        let w = p(&env.script("w.sh", "cat >/dev/null; exit 3"));
        let mut run = env.spawn("b", &["run", "b", "--", &w]);
        let (alerted, bg) = (env.path("alerted"), env.path("bg.pid"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !(alerted.exists() && std::fs::read_to_string(&bg).is_ok_and(|s| s.ends_with('\n'))) {
            assert!(std::time::Instant::now() < deadline, "the alert never ran");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let b = env.batch_status("b");
        assert!(b["lock"].is_null(), "released before the alert: {b}");
        // The summary is said before the alert runs, not after it.
        let said = env.output_of("b").0;
        assert!(said.contains("b: 0 done, 0 empty, 1 failed"), "{said:?}");
        let started = std::time::Instant::now();
        common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
        run.wait().unwrap();
        let said = env.output_of("b").0;
        assert_eq!(said.matches("1 failed").count(), 1, "said once: {said:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
        let alert = env.strings("SELECT message FROM events WHERE kind = 'alert'");
        assert!(alert[0].ends_with("failed: stopped by a signal"), "{alert:?}");
        // What it left in the background went with it.
        let pid: i32 = std::fs::read_to_string(&bg).unwrap().trim().parse().unwrap();
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !gone() {
            assert!(std::time::Instant::now() < deadline, "its background process {pid} lives on");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn the_source_command_adds_items_idempotently(env) {
        let list = env.write("list.jsonl", "{\"key\":\"s1\"}\n{\"key\":\"s2\"}\n");
        env.config(&format!(
            "[batch.b]\nsource = [\"cat\", \"{}\"]\n",
            p(&list)
        ));
        let log = env.path("ran.log");
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\necho \"$NIGHTSHIFT_KEY\" >> {}\necho '\"ok\"'",
                p(&log)
            ),
        ));
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        std::fs::write(
            &list,
            "{\"key\":\"s1\"}\n{\"key\":\"s2\"}\n{\"key\":\"s3\"}\n",
        )
        .unwrap();
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        assert_eq!(env.int("SELECT count(*) FROM items"), 3);
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            3
        );
        assert_eq!(
            env.strings("SELECT message FROM events WHERE kind = 'source' ORDER BY id"),
            [
                "source added 2, already present 0",
                "source added 1, already present 2",
                "source added 0, already present 3"
            ]
        );
        let mut ran = lines(&log);
        ran.sort();
        assert_eq!(ran, ["s1", "s2", "s3"], "each item ran once");

        // A failing source is a failure of the run (exit 1, for cron), and the
        // cycle still runs what is queued.
        env.config("[batch.b]\nsource = [\"sh\", \"-c\", \"echo 'listing API down' >&2; exit 3\"]\n");
        env.cmd()
            .args(["add", "b"])
            .arg(env.write("more.jsonl", "{\"key\":\"s4\"}\n"))
            .assert()
            .success();
        let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(
            stdout(&out).contains("the source command failed"),
            "{}",
            stdout(&out)
        );
        assert_eq!(env.item("s4").0, "done");
        let failed = env.strings("SELECT message FROM events WHERE kind = 'source-failed'");
        assert!(failed[0].contains("listing API down"), "{failed:?}");
        assert_eq!(env.run_states().last().unwrap(), "failed");
    }

    fn a_worker_named_without_a_path_is_found_in_path(env) {
        add_keys(&env, "b", &["k"]);
        let bin = env.path("bin");
        std::fs::create_dir(&bin).unwrap();
        let script = env.script("myworker", "cat >/dev/null\necho \"\\\"$0\\\"\"");
        std::fs::rename(&script, bin.join("myworker")).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        env.cmd()
            .env("PATH", path)
            .args(["run", "b", "--", "myworker"])
            .assert()
            .success();
        // (A script's $0 is the path the kernel ran it by.)
        let result = env.strings("SELECT result FROM items");
        assert_eq!(result, [format!("\"{}\"", bin.join("myworker").display())]);
    }

    fn a_runner_started_with_its_standard_streams_closed_still_gives_workers_their_pipes(env) {
        add_keys(&env, "b", &["k1", "k2", "k3"]);
        let seen = env.path("seen.log");
        // What the worker's 0, 1 and 2 are, and its payload read from 0.
        let worker = env.script(
            "w.sh",
            &format!(
                "read -r line\nfds=$(for fd in 0 1 2; do readlink /proc/$$/fd/$fd | cut -d: -f1; done | tr '\\n' ' ')\n\
                 echo \"$fds$NIGHTSHIFT_KEY ${{#line}}\" >> {log}\necho '\"ok\"'\necho note >&2",
                log = p(&seen)
            ),
        );
        let status = std::process::Command::new("sh")
            .args(["-c", "exec \"$0\" run b -j 2 -- \"$1\" <&- >&- 2>&-"])
            .arg(common::bin())
            .arg(&worker)
            .current_dir(env.dir.path())
            .env("NIGHTSHIFT_DB", &env.db)
            .env_remove("NIGHTSHIFT_CONFIG")
            .status()
            .unwrap();
        assert!(status.success(), "{status:?}");
        let mut seen = lines(&seen);
        seen.sort();
        assert_eq!(seen.len(), 3, "{seen:?}");
        for (line, key) in seen.iter().zip(["k1", "k2", "k3"]) {
            assert!(line.starts_with(&format!("pipe pipe pipe {key} ")), "{line}");
            assert!(!line.ends_with(" 0"), "the payload reached stdin: {line}");
        }
        assert_eq!(env.strings("SELECT status FROM items"), ["done", "done", "done"]);
    }
}

/// A source reads its lines as `add` does: a byte-order mark at the start
/// is skipped (a source that `cat`s an Excel export), and numeric keys keep
/// every digit (two ids one apart are two items, each run once).
#[test]
fn a_source_reads_its_lines_as_add_does() {
    let env = common::Env::new();
    let list = env.write(
        "list.jsonl",
        "\u{feff}{\"key\":12345678901234567890123}\r\n{\"key\":12345678901234567890124}\r\n",
    );
    env.config(&format!(
        "[batch.b]\nsource = [\"cat\", \"{}\"]\n",
        p(&list)
    ));
    let log = env.path("ran.log");
    let w = env.script(
        "w.sh",
        &format!(
            "cat >/dev/null; echo \"$NIGHTSHIFT_KEY\" >> {}; echo '\"ok\"'",
            p(&log)
        ),
    );
    env.cmd()
        .args(["run", "b", "--", &p(&w)])
        .assert()
        .success();
    assert_eq!(
        env.strings("SELECT message FROM events WHERE kind = 'source'"),
        ["source added 2, already present 0"]
    );
    let mut ran = lines(&log);
    ran.sort();
    assert_eq!(ran, ["12345678901234567890123", "12345678901234567890124"]);
    // A mark further down is named, and nothing is added.
    std::fs::write(&list, "{\"key\":\"a\"}\n\u{feff}{\"key\":\"b\"}\n").unwrap();
    let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let failed = env.strings("SELECT message FROM events WHERE kind = 'source-failed'");
    assert!(
        failed[0].contains("line 2: starts with a byte-order mark"),
        "{failed:?}"
    );
    assert_eq!(env.int("SELECT count(*) FROM items"), 2);
    // A name twice in one object, and lines ended by a bare CR, are
    // named as `add` names them; nothing is added.
    for (list_text, says) in [
        (
            "{\"key\":\"c\",\"key\":\"d\"}\n",
            "line 1: the name \"key\" is given twice in one object",
        ),
        (
            "{\"key\":\"c\"}\r{\"key\":\"d\"}\r",
            "line 1: lines end in CR only (\\r)",
        ),
    ] {
        std::fs::write(&list, list_text).unwrap();
        let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let failed =
            env.strings("SELECT message FROM events WHERE kind = 'source-failed' ORDER BY id");
        assert!(failed.last().unwrap().contains(says), "{failed:?}");
        assert_eq!(env.int("SELECT count(*) FROM items"), 2);
    }
}

/// A source line that is not UTF-8 is refused as `add` refuses it, not
/// mended: two keys mended alike became one item that never ran again. A
/// source that exits leaving a process behind (`cmd &`) is read when it
/// exits, not when that process closes its pipes (the run said "timed
/// out" and added nothing); one that hangs is stopped with the run by a
/// signal, not waited for until `item_timeout`.
#[test]
fn a_source_is_read_as_add_reads_and_stopped_with_the_run() {
    let env = common::Env::new();
    let list = env.path("list.jsonl");
    std::fs::write(&list, b"{\"key\":\"ok\"}\n{\"key\":\"id-\xff\"}\n").unwrap();
    env.config(&format!(
        "[batch.b]\nworker = [\"true\"]\nsource = [\"cat\", \"{}\"]\n",
        p(&list)
    ));
    let out = env.cmd().args(["run", "b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let failed = env.strings("SELECT message FROM events WHERE kind = 'source-failed'");
    assert!(failed[0].contains("line 2: not valid UTF-8"), "{failed:?}");
    assert_eq!(env.int("SELECT count(*) FROM items"), 0, "nothing added");

    env.config(
        "[batch.b]\nworker = [\"true\"]\nitem_timeout = \"1h\"\n\
         source = [\"sh\", \"-c\", \"echo '{\\\"key\\\":\\\"bg1\\\"}'; sleep 300 & exit 0\"]\n",
    );
    let started = std::time::Instant::now();
    env.cmd().args(["run", "b"]).assert().success();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(env.item("bg1").0, "done");

    env.config(
        "[batch.b]\nworker = [\"true\"]\nitem_timeout = \"1h\"\nsource = [\"sleep\", \"300\"]\n",
    );
    let mut run = env.spawn("b", &["run", "b"]);
    // The source runs: its process is the run's child.
    let pid = run.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| {
            std::fs::read_to_string(format!("/proc/{c}/cmdline"))
                .unwrap_or_default()
                .starts_with("sleep")
        })
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the source never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    common::signal(pid, nix::sys::signal::Signal::SIGINT);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let failed = env.strings("SELECT message FROM events WHERE kind = 'source-failed'");
    assert!(
        failed
            .last()
            .unwrap()
            .contains("stopped by a signal before it finished"),
        "{failed:?}"
    );
}

/// A runaway source (here 300 MB of lines) is stopped at 256 MiB: the run
/// says so, adds nothing and goes on; its stderr flood is kept bounded.
/// (Runner-side reading only: one store is enough.)
#[test]
fn a_source_that_prints_too_much_is_stopped_and_adds_nothing() {
    let env = common::Env::new();
    env.config(
        "[batch.b]\nsource = [\"sh\", \"-c\", \
         \"yes x | head -c 50000000 >&2; yes '{\\\"key\\\":\\\"k\\\"}' | head -c 300000000\"]\n",
    );
    let w = env.script("w.sh", "cat >/dev/null; echo '\"ok\"'");
    let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a failed source fails the run");
    let failed = env.strings("SELECT message FROM events WHERE kind = 'source-failed'");
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].contains("more than 256 MiB, nothing added"),
        "{failed:?}"
    );
    assert_eq!(env.int("SELECT count(*) FROM items"), 0);
}

/// A source or alert script whose `#!` line cannot start (Windows line
/// ends: the kernel looks for "/bin/sh\r") says so: it said "could not
/// start: No such file or directory" of a file that is there.
#[test]
fn hooks_whose_interpreter_cannot_start_say_why() {
    use std::os::unix::fs::PermissionsExt;
    let env = common::Env::new();
    for name in ["list.sh", "alert.sh"] {
        let path = env.write(name, "#!/bin/sh\r\ncat >/dev/null\r\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    env.config("[batch.b]\nretries = 0\nsource = [\"./list.sh\"]\nalert = [\"./alert.sh\"]\n");
    add_keys(&env, "b", &["k"]);
    let w = env.script("w.sh", "cat >/dev/null; exit 1");
    let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    for hook in ["source `./list.sh`", "alert `./alert.sh`"] {
        assert!(
            err.lines().any(|l| l.contains(hook)
                && l.contains("could not start: ")
                && l.contains("`#!` line ends in a carriage return")
                && l.contains(r#""/bin/sh\r""#)),
            "{hook}: {err}"
        );
    }
}

/// A failing hook is said on the terminal, not only in the log: which hook,
/// its exit status and the last line of its stderr (inert, cut with `…`).
/// Real failing commands: a source that exits 3, an alert that is not
/// installed (127 from the shell), one that cannot start at all.
#[test]
fn failing_hooks_say_which_failed_and_why_on_stderr() {
    let env = common::Env::new();
    env.config(
        "[batch.b]\nretries = 0\n\
         source = [\"sh\", \"-c\", \"echo 'listing…' >&2; printf 'API down: 503 \\\\033[2J\\\\n' >&2; exit 3\"]\n\
         alert = [\"sh\", \"-c\", \"cat >/dev/null; notify-nobody-xyz\"]\n",
    );
    add_keys(&env, "b", &["k"]);
    let w = env.script("w.sh", "cat >/dev/null; exit 1");
    let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        "nightshift: source `sh` failed: exit status: 3: API down: 503 \\x1b[2J"
    );
    // (The shell's own words for "not found" differ between shells.)
    assert!(
        lines[1].starts_with("nightshift: alert `sh` failed: exit status: 127: ")
            && lines[1].contains("notify-nobody-xyz")
            && lines[1].contains("not found"),
        "{err}"
    );
    assert!(
        stdout(&out)
            .contains("; the source command failed (exit status: 3), nothing added from it"),
        "{}",
        stdout(&out)
    );
    // The log says the same.
    let alert = env.strings("SELECT message FROM events WHERE kind = 'alert'");
    assert_eq!(alert, [lines[1].trim_start_matches("nightshift: ")]);

    // --json carries them too; an alert that cannot start says so.
    env.config("[batch.b]\nretries = 0\nalert = [\"./no-such-alert\"]\n");
    add_keys(&env, "b", &["k2"]);
    let out = env
        .cmd()
        .args(["run", "b", "--json", "--", &p(&w)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hooks = report["hooks_failed"].as_array().unwrap();
    assert_eq!(hooks.len(), 1, "{report}");
    assert_eq!(
        (&hooks[0]["hook"], &hooks[0]["program"], &hooks[0]["stderr"]),
        (
            &"alert".into(),
            &"./no-such-alert".into(),
            &serde_json::Value::Null
        )
    );
    assert!(
        hooks[0]["problem"]
            .as_str()
            .unwrap()
            .starts_with("could not start: "),
        "{report}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("nightshift: alert `./no-such-alert` failed: could not start: "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A long last line is cut to fit a terminal, with `…`.
    let long = "エラー".repeat(100);
    env.config(&format!(
        "[batch.b]\nretries = 0\nalert = [\"sh\", \"-c\", \"echo {long} >&2; exit 2\"]\n"
    ));
    add_keys(&env, "b", &["k3"]);
    let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let line = err.lines().find(|l| l.contains("alert")).unwrap();
    let shown = line.rsplit(": ").next().unwrap();
    assert!(
        shown.ends_with('…') && shown.starts_with("エラーエラー"),
        "{line}"
    );
    assert!(
        unicode_width::UnicodeWidthStr::width(shown) <= 200,
        "{line}"
    );
}
