//! Pace end to end: every worker call, first attempt or immediate retry, in
//! process and persistent mode, passes one gate: the batch's retry-after
//! hold, then a token of its rate limit. A run with nothing to do waits for
//! nothing; a long retry-after is clamped to `max_hold`, shown in every
//! view and lifted by `unpause`. The real binary, real workers (shell and
//! Python), each test on both backends.
#![cfg(unix)]

use crate::support as common;
use crate::support::require::Tool;
use nightshift::util::time::now_ms;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Env, add_keys, wait_for};

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Worker starts recorded as `KEY MILLIS` lines (`starts.log`), in the order
/// they came.
fn starts(env: &Env) -> Vec<(String, i64)> {
    std::fs::read_to_string(env.path("starts.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (key, ms) = l.split_once(' ').unwrap();
            (key.to_string(), ms.trim().parse().unwrap())
        })
        .collect()
}

fn starts_of(env: &Env, key: &str) -> Vec<i64> {
    starts(env)
        .into_iter()
        .filter(|(k, _)| k == key)
        .map(|(_, t)| t)
        .collect()
}

/// A process-mode worker: logs its start, then runs `body` (the key is in
/// `$NIGHTSHIFT_KEY`).
fn shell_worker(env: &Env, body: &str) -> String {
    let log = p(&env.path("starts.log"));
    p(&env.script(
        "w.sh",
        &format!("echo \"$NIGHTSHIFT_KEY $(date +%s%3N)\" >> {log}\ncat >/dev/null\n{body}"),
    ))
}

/// A persistent worker: logs each request as it reads it, then answers with
/// `answer(key, attempt)` (Python, returning the answer object). Its test
/// starts with `require!(Tool::Python3)`.
fn python_worker(env: &Env, answer: &str) -> String {
    let log = p(&env.path("starts.log"));
    let script = format!(
        r#"import json, os, subprocess, sys, time
{answer}
for line in sys.stdin:
    r = json.loads(line)
    with open("{log}", "a") as f:
        f.write("%s %d\n" % (r["key"], int(time.time() * 1000)))
    out = answer(r["key"], r["attempt"])
    out["key"] = r["key"]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#
    );
    p(&env.write("w.py", &script))
}

/// The `worker = ...` value of a worker that answers "ok" in `mode`
/// (`process` or `persistent`).
fn ok_worker(env: &Env, mode: &str) -> String {
    if mode == "process" {
        format!("[\"{}\"]", shell_worker(env, "echo '\"ok\"'"))
    } else {
        let w = python_worker(env, "def answer(k, a):\n    return {\"result\": \"ok\"}");
        format!("[\"python3\", \"{w}\"]")
    }
}

/// `nightshift run b` to its end: how long it took, and its exit code.
fn timed_run(env: &Env) -> (Duration, i32) {
    let t = Instant::now();
    let out = env.cmd().args(["run", "b"]).output().unwrap();
    (t.elapsed(), out.status.code().unwrap_or(-1))
}

/// The batch `b` of `status --json`.
fn batch_status(env: &Env) -> serde_json::Value {
    let status = env.status();
    status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "b")
        .cloned()
        .unwrap()
}

/// Call `n` (from 0) of a run launched at `launched` takes the rate limit's
/// `n`-th token, which is `n` intervals after the first at the earliest; the
/// first is not before the launch. A worker logs a call when it sees it,
/// which a busy machine only delays, so each logged time is at least that
/// bound. (Gaps between logged times are not: a late first reading
/// shortens the next gap.) The old code made the calls 20 ms apart.
fn assert_paced(times: &[i64], launched: i64, first_call: i64, interval_ms: i64) {
    for (i, t) in times.iter().enumerate() {
        let n = first_call + i64::try_from(i).unwrap();
        assert!(
            t - launched >= n * interval_ms,
            "call {n} {} ms after the launch, before token {n} at {interval_ms} ms each: {times:?}",
            t - launched
        );
    }
}

both_backends! {
    // ---- A run with nothing to do ----

    // The token is taken only for a call that is made: with nothing to do,
    // no slot waits (the old code made each of the 4 slots wait its turn:
    // 30 s at 6/min, 18 minutes at 10/hour).
    fn an_empty_run_under_a_rate_limit_ends_at_once(env) {
        require!(Tool::Python3);
        for mode in ["process", "persistent"] {
            let worker = ok_worker(&env, mode);
            env.config(&format!(
                "[batch.b]\nworker = {worker}\nmode = \"{mode}\"\nconcurrency = 4\nrate_limit = \"6/min\"\n"
            ));
            let (took, code) = timed_run(&env);
            assert_eq!(code, 0);
            assert!(took < Duration::from_secs(5), "{mode}: an empty run took {took:?}");
            // One item at 10/hour: the run ends once it is done.
            env.config(&format!(
                "[batch.b]\nworker = {worker}\nmode = \"{mode}\"\nconcurrency = 4\nrate_limit = \"10/hour\"\n"
            ));
            add_keys(&env, "b", &[&format!("one-{mode}")]);
            let (took, code) = timed_run(&env);
            assert_eq!(code, 0);
            assert_eq!(env.item(&format!("one-{mode}")).0, "done");
            assert!(took < Duration::from_secs(5), "{mode}: one item at 10/hour took {took:?}");
        }
    }

    // ---- Immediate retries pass the rate limit ----

    fn immediate_retries_take_rate_limit_tokens_in_process_mode(env) {
        let w = shell_worker(&env, "exit 75");
        env.config(&format!(
            "[batch.b]\nworker = [\"{w}\"]\nconcurrency = 1\nrate_limit = \"2/s\"\n\
             retries = 3\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n"
        ));
        add_keys(&env, "b", &["flaky"]);
        let launched = now_ms();
        assert_eq!(timed_run(&env).1, 1, "the item failed");
        let times = starts_of(&env, "flaky");
        assert_eq!(times.len(), 4, "the first call and 3 retries");
        assert_eq!(env.item("flaky"), ("failed".into(), Some("retry".into()), 4));
        assert_paced(&times, launched, 0, 500);
    }

    // The worker reads a request as soon as it is written once it runs:
    // `warm` first, so that its start-up does not delay `flaky`'s first.
    fn immediate_retries_take_rate_limit_tokens_in_persistent_mode(env) {
        require!(Tool::Python3);
        let w = python_worker(&env, r#"def answer(k, a):
    if k == "warm":
        return {"result": "ok"}
    return {"error": {"error_class": "Busy", "transient": True, "message": "503"}}"#);
        env.config(&format!(
            "[batch.b]\nworker = [\"python3\", \"{w}\"]\nmode = \"persistent\"\nconcurrency = 1\n\
             rate_limit = \"2/s\"\nretries = 3\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n"
        ));
        add_keys(&env, "b", &["warm", "flaky"]);
        let launched = now_ms();
        assert_eq!(timed_run(&env).1, 1, "the item failed");
        assert_eq!(env.item("warm").0, "done");
        let times = starts_of(&env, "flaky");
        assert_eq!(times.len(), 4, "the first request and 3 retries");
        // `warm` took the first token.
        assert_paced(&times, launched, 1, 500);
    }

    // ---- Nothing is claimed while its call cannot start ----

    // At 15/min (4 s apart), `b`'s call starts 4 s after `a`'s: the slot
    // waits for that before it claims, so `b` is not held claimed (and
    // counted in flight by every view) meanwhile. The old code claimed it
    // at once beside `a` and held the claim through the wait. Measured
    // from `a`'s claim, which the runner makes before its call starts (the
    // worker's own clock of that start comes late by its start-up, 2 s
    // and more on a loaded machine): `b`'s claim is 4 s later less the
    // slot's lead, and 2 s is far below that.
    fn a_paced_slot_claims_only_when_its_call_may_start(env) {
        require!(Tool::Python3);
        for mode in ["process", "persistent"] {
            let worker = ok_worker(&env, mode);
            env.config(&format!(
                "[batch.b]\nworker = {worker}\nmode = \"{mode}\"\nconcurrency = 2\nrate_limit = \"15/min\"\n"
            ));
            let (a, b) = (format!("{mode}-a"), format!("{mode}-b"));
            add_keys(&env, "b", &[&a, &b]);
            assert_eq!(timed_run(&env).1, 0, "{mode}");
            // The stored milliseconds: `log --json` says the time to the second.
            let claimed = |key: &str| -> i64 {
                let n = env.int(&format!("SELECT count(*) FROM events WHERE kind = 'claimed' AND key = '{key}'"));
                assert_eq!(n, 1, "{mode}: {key} claimed once");
                env.int(&format!("SELECT max(at) FROM events WHERE kind = 'claimed' AND key = '{key}'"))
            };
            let (first, second) = if claimed(&a) <= claimed(&b) { (&a, &b) } else { (&b, &a) };
            let apart = claimed(second) - claimed(first);
            assert!(
                apart >= 2_000,
                "{mode}: {second} claimed {apart} ms after {first}, before its own call could start"
            );
        }
    }

    // At 1/hour the second item's call is an hour away: while the runner
    // waits for it, nothing is claimed, and every view says what the rest
    // wait for and by what they are paced; a stop ends the wait at once.
    fn items_a_runner_paces_are_said_to_wait_for_its_rate_limit(env) {
        let w = shell_worker(&env, "echo '\"ok\"'");
        env.config(&format!(
            "[batch.b]\nworker = [\"{w}\"]\nconcurrency = 2\nrate_limit = \"1/hour\"\n"
        ));
        add_keys(&env, "b", &["k1", "k2", "k3"]);
        let mut runner = env.spawn("run", &["run", "b"]);
        wait_for("the first item done", || env.item("k1").0 == "done");
        let b = batch_status(&env);
        assert_eq!(b["claimed"], 0, "nothing is claimed while no call may start: {b}");
        let lock_held = b["waiting"].as_array().unwrap().iter()
            .find(|w| w["reason"] == "lock-held").cloned().unwrap_or_default();
        assert_eq!((&lock_held["count"], &lock_held["rate_limit"]), (&2.into(), &"1/hour".into()), "{b}");
        let status = env.run(&["status", "b"]);
        assert!(
            status.stdout.contains("2 wait for the runner that holds the lock, paced at 1/hour (rate_limit)"),
            "{status:?}"
        );
        let show = env.run(&["show", "b", "k2"]);
        assert!(show.stdout.contains("paced at 1/hour (rate_limit)"), "{show:?}");
        env.run(&["stop", "b"]).code(0);
        let code = runner.wait().unwrap().code();
        assert_eq!(code, Some(130), "a stop during the wait ends the run, aborted");
        assert_eq!((env.item("k2").0, env.item("k3").0), ("pending".into(), "pending".into()));
    }

    // ---- Every call waits out the hold ----

    // Slow (about 3 s): waits out a 3 s hold. `a` is rate limited for 3 s;
    // `b` fails while the batch is held (its worker waits for the hold's
    // event, written as the hold is set: polling `status` for the hold
    // itself, a loaded machine's slow polls could miss the 3 s and spin
    // for all 600): none of its 3 immediate retries starts before the hold
    // ends (the old code ran them at once, 20 ms apart).
    fn retries_of_another_item_wait_out_the_hold_in_process_mode(env) {
        let bin = p(&common::bin());
        let w = shell_worker(&env, &format!(
            r#"case "$NIGHTSHIFT_KEY" in
  a) if [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
       echo '{{"error_class":"RateLimitError","transient":true,"message":"429","retry_after_s":3}}' >&2; exit 75
     fi
     echo '"ok"' ;;
  b) if [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
       n=0
       until {bin} log b --json --kind hold | grep -q '"kind":"hold"'; do n=$((n+1)); [ $n -gt 600 ] && break; sleep 0.05; done
     fi
     echo 'upstream 503' >&2; exit 75 ;;
esac"#));
        env.config(&format!(
            "[batch.b]\nworker = [\"{w}\"]\nconcurrency = 2\nretries = 3\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n"
        ));
        add_keys(&env, "b", &["a", "b"]);
        assert_eq!(timed_run(&env).1, 1, "b failed");
        check_retries_after_the_hold(&env);
    }

    fn retries_of_another_item_wait_out_the_hold_in_persistent_mode(env) {
        require!(Tool::Python3);
        let bin = p(&common::bin());
        let w = python_worker(&env, &format!(r#"def answer(k, a):
    if k == "a":
        if a == 1:
            return {{"error": {{"error_class": "RateLimitError", "transient": True, "message": "429", "retry_after_s": 3}}}}
        return {{"result": "ok"}}
    if a == 1:
        for _ in range(600):
            if '"kind":"hold"' in subprocess.run(["{bin}", "log", "b", "--json", "--kind", "hold"], capture_output=True, text=True).stdout:
                break
            time.sleep(0.05)
    return {{"error": {{"error_class": "Busy", "transient": True, "message": "503"}}}}"#));
        env.config(&format!(
            "[batch.b]\nworker = [\"python3\", \"{w}\"]\nmode = \"persistent\"\nconcurrency = 2\n\
             retries = 3\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n"
        ));
        add_keys(&env, "b", &["a", "b"]);
        assert_eq!(timed_run(&env).1, 1, "b failed");
        check_retries_after_the_hold(&env);
    }

    // ---- A long retry-after: clamped, shown, lifted ----

    // A worker asks for 30000 s (8h20m): the hold is clamped to `max_hold`
    // (1 h), the event says so, `status` (every format) and the dry run show
    // it, a run with work waits at the gate without claiming, and `unpause`
    // lifts the hold, also for that run, which then does its work at once.
    fn a_long_retry_after_is_clamped_shown_everywhere_and_lifted_by_unpause(env) {
        let w = shell_worker(&env, r#"if [ "$NIGHTSHIFT_KEY" = slow ]; then
  echo '{"error_class":"RateLimitError","transient":true,"message":"429","retry_after_s":30000}' >&2; exit 75
fi
echo '"ok"'"#);
        env.config(&format!("[batch.b]\nworker = [\"{w}\"]\nretries = 0\n"));
        add_keys(&env, "b", &["slow"]);
        let before = nightshift::util::time::now_ms();
        assert_eq!(timed_run(&env).1, 1);

        let hold = &env.events("b", "hold")[0];
        assert_eq!(hold["key"], "slow");
        let message = hold["message"].as_str().unwrap();
        assert!(message.contains("held for 1h until "), "{message}");
        assert!(message.contains("(clamped from 8h20m to 1h (max_hold))"), "{message}");
        assert_eq!(hold["fields"]["clamped"], true);

        // status --json: until when (about an hour from now), and by whom.
        let b = batch_status(&env);
        assert_eq!(b["hold_by"], "slow");
        let until = chrono::DateTime::parse_from_rfc3339(b["hold_until"].as_str().unwrap())
            .unwrap()
            .timestamp_millis();
        assert!(
            until >= before + 3_599_000 && until <= nightshift::util::time::now_ms() + 3_600_000,
            "held until {until}, not an hour after {before}"
        );
        let clock = nightshift::util::time::utc_clock(until, nightshift::util::time::now_ms());
        // The text views.
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(
            text.contains(&format!("held until {clock} by a retry-after from slow; ")),
            "{text}"
        );
        assert!(text.contains("`nightshift unpause b` lifts it"), "{text}");
        assert!(env.run(&["status", "--short"]).stdout.contains("b 0✓ 1✗ held"));
        let metrics = env.run(&["status", "--prometheus"]).stdout.clone();
        let left = common::metric(&metrics, "nightshift_batch_hold_seconds{batch=\"b\"}");
        assert!((3000.0..=3600.0).contains(&left), "{left}");

        // The dry run: with work to do it says the run would wait.
        add_keys(&env, "b", &["x"]);
        let dry = env.run(&["run", "b", "--dry-run"]).code(0).stdout.clone();
        assert!(
            dry.contains(&format!("b: would wait until {clock} (in ")) && dry.contains("for the retry-after hold from slow: no call starts before"),
            "{dry}"
        );
        let dry = env.run(&["run", "b", "--dry-run", "--json"]).json();
        assert_eq!((dry["hold_until"].clone(), dry["hold_by"].clone()), (b["hold_until"].clone(), "slow".into()));

        // A run with work waits at the gate, claiming nothing ...
        let mut run = env.spawn("run", &["run", "b"]);
        wait_for("the run to see the hold", || env.events("b", "hold").len() == 2);
        assert_eq!(env.item("x").0, "pending", "nothing is claimed while held");
        // ... until `unpause` lifts the hold (recorded, with who did it).
        let lifted = env.run(&["unpause", "b", "--json"]).code(0).json();
        assert_eq!((lifted["hold_lifted"].clone(), lifted["was_paused"].clone()), (true.into(), false.into()));
        assert_eq!(lifted["lifted_hold"]["by"], "slow");
        assert_eq!(lifted["lifted_hold"]["until"], b["hold_until"]);
        assert!(lifted["by"].as_str().unwrap().contains('@'), "{lifted}");
        wait_for("the run to end", || run.try_wait().unwrap().is_some());
        assert!(run.wait().unwrap().success(), "{:?}", env.output_of("run"));
        assert_eq!(env.item("x").0, "done");
        let event = &env.events("b", "hold-lifted")[0];
        assert_eq!(event["actor"], lifted["by"]);
        assert_eq!(event["key"], "slow");
        assert!(event["message"].as_str().unwrap().contains(&format!("it was held until {clock} by a retry-after from slow")), "{event}");
        let b = batch_status(&env);
        assert_eq!((b["hold_until"].clone(), b["hold_by"].clone()), (serde_json::Value::Null, serde_json::Value::Null));
        assert_eq!(env.run(&["unpause", "b"]).code(0).stdout, "b: was not paused and not held\n");
        assert_eq!(env.events("b", "hold-lifted").len(), 1, "nothing more was recorded");
    }

    // Slow (about 4 s). Two runners share the batch; one gets a 4 s
    // retry-after once both are calling (the worker waits for that): the
    // other learns of the hold from the store within a heartbeat (a second)
    // and starts nothing more until it ends (the old code held only the run
    // that got the answer).
    fn a_hold_one_runner_is_given_holds_the_runners_sharing_the_batch(env) {
        let log = p(&env.path("starts.log"));
        let w = p(&env.script("w.sh", &format!(r#"cat >/dev/null
echo "$NIGHTSHIFT_HOST $(date +%s%3N) $NIGHTSHIFT_KEY" >> {log}
if [ "$NIGHTSHIFT_KEY" = limited ] && [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
  n=0
  until grep -q '^host-a ' {log} && grep -q '^host-b ' {log}; do n=$((n+1)); [ $n -gt 600 ] && break; sleep 0.05; done
  echo '{{"error_class":"RateLimitError","transient":true,"message":"429","retry_after_s":4}}' >&2; exit 75
fi
sleep 0.1
echo '"ok"'"#)));
        env.config(&format!("[batch.b]\nworker = [\"{w}\"]\nrunners = 2\nconcurrency = 1\nretries = 0\n"));
        let keys: Vec<String> = (0..80).map(|i| if i == 5 { "limited".into() } else { format!("k{i:02}") }).collect();
        add_keys(&env, "b", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        let mut a = env.spawn_with("a", &["run", "b"], &[("NIGHTSHIFT_HOST", "host-a")]);
        let mut b = env.spawn_with("b", &["run", "b"], &[("NIGHTSHIFT_HOST", "host-b")]);
        for (run, tag) in [(&mut a, "a"), (&mut b, "b")] {
            wait_for("the runs to end", || run.try_wait().unwrap().is_some());
            let code = run.wait().unwrap().code();
            assert!(matches!(code, Some(0 | 1)), "{tag}: {code:?} {:?}", env.output_of(tag));
        }
        let calls: Vec<(String, i64, String)> = common::lines(&env.path("starts.log"))
            .iter()
            .map(|l| {
                let mut f = l.split(' ');
                let (host, ms, key) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                (host.to_string(), ms.parse().unwrap(), key.to_string())
            })
            .collect();
        let limited = calls.iter().find(|c| c.2 == "limited").unwrap();
        // The 429 came after this start: the hold ends 4 s after it at the
        // earliest. The other runner may start calls until it learns of
        // the hold (a heartbeat, a second; two allowed for a busy machine).
        let (from, to) = (limited.1 + 2000, limited.1 + 4000);
        let during: Vec<_> = calls.iter().filter(|c| c.1 >= from && c.1 < to).collect();
        assert!(during.is_empty(), "calls during the hold: {during:?}");
        assert!(calls.iter().any(|c| c.1 >= to), "work went on after the hold");
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 79);
    }

    // `max_hold` set lower: a 30 s retry-after holds for 2 s only.
    fn max_hold_bounds_a_retry_after(env) {
        let w = shell_worker(&env, r#"if [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
  echo '{"error_class":"RateLimitError","transient":true,"message":"429","retry_after_s":30}' >&2; exit 75
fi
echo '"ok"'"#);
        env.config(&format!("[batch.b]\nworker = [\"{w}\"]\nmax_hold = \"2s\"\nretries = 1\nbackoff = \"0s\"\n"));
        add_keys(&env, "b", &["r"]);
        let (took, code) = timed_run(&env);
        assert_eq!(code, 0);
        assert_eq!(env.item("r"), ("done".into(), None, 2));
        let times = starts_of(&env, "r");
        assert!(times[1] - times[0] >= 2000, "the retry waited out the hold: {times:?}");
        assert!(took < Duration::from_secs(20), "{took:?}: not the 30 s asked for");
        let hold = &env.events("b", "hold")[0];
        assert!(hold["message"].as_str().unwrap().contains("held for 2s until ") , "{hold}");
        assert!(hold["message"].as_str().unwrap().contains("(clamped from 30s to 2s (max_hold))"), "{hold}");
    }
}

/// `a` was held 3 s from its 429 (logged before its worker exited): every
/// later call, `a`'s retry and each of `b`'s three, starts after that.
fn check_retries_after_the_hold(env: &Env) {
    let a = starts_of(env, "a");
    let b = starts_of(env, "b");
    assert_eq!(a.len(), 2, "a: the 429, then done: {a:?}");
    assert_eq!(b.len(), 4, "b: the first call and 3 retries: {b:?}");
    let held_from = a[0];
    for t in a[1..].iter().chain(&b[1..]) {
        assert!(
            *t >= held_from + 3000,
            "a call {} ms into the 3 s hold: a {a:?}, b {b:?}",
            t - held_from
        );
    }
    assert_eq!(env.item("a").0, "done");
    assert_eq!(env.item("b"), ("failed".into(), Some("retry".into()), 4));
}
