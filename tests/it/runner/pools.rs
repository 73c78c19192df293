//! Limit pools (`[limit.NAME]`) end to end, on both stores, with real
//! runner processes and real workers: batches and runners share one
//! bucket (persistent slots claiming ahead too), a retry-after answer of one batch holds every batch of its
//! pool, retries wait for the pool, calls in flight stay within the
//! pool's concurrency across runners, and the tokens workers report are
//! stored per attempt and summed per run and per pool.
//!
//! Every timing assertion is a lower bound the pool guarantees whatever
//! the load (a call starts no earlier than the store let it), measured by
//! the workers' own timestamps against a time taken before the runners
//! started; none races a sleep.

use crate::support as common;
use nightshift::util::time::now_ms;

use common::{Env, starts, wait_for};
use serde_json::Value;

/// A worker that writes `batch key start_ms` to `starts.log`, then does
/// what `then` says (shell).
fn worker(env: &Env, then: &str) -> String {
    let log = env.path("starts.log");
    let path = env.script(
        "worker.sh",
        &format!(
            "cat >/dev/null\necho \"$NIGHTSHIFT_BATCH $NIGHTSHIFT_KEY $(date +%s%3N) $NIGHTSHIFT_ATTEMPT\" >> '{}'\n{then}",
            log.display()
        ),
    );
    path.display().to_string()
}

/// A persistent worker (`w.py`) that answers every request with a result
/// and writes `batch key 0 attempt` to `starts.log`, as [`worker`] does
/// (no time: `starts` keeps them in the order written).
fn persistent_worker(env: &Env) {
    persistent_worker_as(env, "w.py", "");
}

/// [`persistent_worker`] as `file`, `more` (Python dict entries, `, ` first)
/// added to each answer.
fn persistent_worker_as(env: &Env, file: &str, more: &str) {
    env.write(
        file,
        &format!(
            r#"import json, os, sys
for line in sys.stdin:
    r = json.loads(line)
    with open({log:?}, "a") as f:
        f.write("%s %s 0 %d\n" % (os.environ["NIGHTSHIFT_BATCH"], r["key"], r["attempt"]))
    print(json.dumps({{"key": r["key"], "result": {{"ok": 1}}{more}}}), flush=True)
"#,
            log = env.path("starts.log")
        ),
    );
}

fn add(env: &Env, batch: &str, n: usize) {
    let lines: String = (1..=n)
        .map(|i| format!("{{\"key\":\"{batch}{i}\"}}\n"))
        .collect();
    let file = env.write(&format!("{batch}.jsonl"), &lines);
    env.cmd().args(["add", batch]).arg(file).assert().success();
}

fn done(env: &Env, batch: &str) -> i64 {
    env.int(&format!(
        "SELECT count(*) FROM items i JOIN batches b ON b.id = i.batch_id \
         WHERE b.name = '{batch}' AND i.status = 'done'"
    ))
}

/// Waits for each background run to exit successfully.
fn finish(runs: Vec<common::Background>) {
    for mut r in runs {
        let status = r.wait().unwrap();
        assert!(status.success(), "a run failed: {status:?}");
    }
}

const USAGE: &str = r#"echo '{"ok":1,"usage":{"input_tokens":60,"output_tokens":40}}'"#;

/// 600 tokens a minute at 100 a call: 6 calls at once, then one every
/// 10 s. The 7th call starts 10 s after the bucket was first drawn from at
/// the earliest, the 8th 20 s after, whoever asks.
fn assert_bucket(starts: &[(String, String, i64, i64)], launched: i64) {
    assert_eq!(starts.len(), 8, "{starts:?}");
    let at = |i: usize| starts[i].2 - launched;
    assert!(
        at(6) >= 10_000,
        "7th call {} ms after launch: {starts:?}",
        at(6)
    );
    assert!(
        at(7) >= 20_000,
        "8th call {} ms after launch: {starts:?}",
        at(7)
    );
}

both_backends! {
    fn two_batches_draw_from_one_token_bucket(env) {
        let w = worker(&env, USAGE);
        env.config(&format!(
            "[limit.openai]\ntokens = \"600/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\ntoken_estimate = 100\nconcurrency = 4\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"openai\"\ntoken_estimate = 100\nconcurrency = 4\n"
        ));
        add(&env, "a", 4);
        add(&env, "b", 4);
        let launched = now_ms();
        let runs = vec![env.spawn("a", &["run", "a"]), env.spawn("b", &["run", "b"])];
        finish(runs);
        let s = starts(&env);
        assert_bucket(&s, launched);
        // Both batches were held back, not one starved: each has 4 done.
        assert_eq!((done(&env, "a"), done(&env, "b")), (4, 4));
        // The tokens are summed per run and per pool.
        let status = env.status();
        for b in status["batches"].as_array().unwrap() {
            let u = &b["last_run"]["usage"];
            assert_eq!((u["input_tokens"].as_i64(), u["output_tokens"].as_i64()), (Some(240), Some(160)), "{b}");
            assert_eq!(b["limit"], "openai");
        }
        let pool = &status["pools"][0];
        assert_eq!(pool["name"], "openai");
        assert_eq!(pool["today"]["input_tokens"], 480);
        assert_eq!(pool["today"]["output_tokens"], 320);
        assert_eq!(pool["limits"][0]["dimension"], "tokens/min");
        assert_eq!(pool["limits"][0]["limit"], 600);
        let per_minute: i64 = pool["tokens_per_minute"].as_array().unwrap().iter().map(|n| n.as_i64().unwrap()).sum();
        assert_eq!(per_minute, 800);
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("pool openai: tokens/min "), "{text}");
        assert!(text.contains("tokens: 240 in + 160 out over 4 attempts"), "{text}");
    }

    fn two_runners_of_one_batch_draw_from_one_bucket(env) {
        let w = worker(&env, USAGE);
        env.config(&format!(
            "[limit.openai]\ntokens = \"600/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\ntoken_estimate = 100\nconcurrency = 1\nrunners = 2\n"
        ));
        // One call per runner, claimed before it waits for the pool: after
        // the bucket's first 6 calls the first runner holds one item for
        // 10 s (the refill) and the last stays pending meanwhile, so the
        // second, however late a loaded machine starts it, has work.
        add(&env, "a", 8);
        let launched = now_ms();
        let runs = vec![env.spawn("r1", &["run", "a"]), env.spawn("r2", &["run", "a"])];
        finish(runs);
        assert_bucket(&starts(&env), launched);
        assert_eq!(done(&env, "a"), 8);
        // Both runners took part (each ran at least one call).
        let runs_with_work = env.int("SELECT count(*) FROM run_usage");
        assert_eq!(runs_with_work, 2, "both runners called");
    }

    fn persistent_slots_claiming_ahead_draw_from_one_bucket(env) {
        // Persistent slots claim items in batches and take their calls'
        // places in the claim's own transaction: those calls draw from the
        // one bucket too (6 requests a minute: 6 at once, then one every
        // 10 s), and every place comes back.
        let log = env.path("starts.log");
        env.write("w.py", &format!(r#"import json, os, sys, time
for line in sys.stdin:
    r = json.loads(line)
    with open({log:?}, "a") as f:
        f.write("%s %s %d %d\n" % (os.environ["NIGHTSHIFT_BATCH"], r["key"], time.time() * 1000, r["attempt"]))
    print(json.dumps({{"key": r["key"], "result": {{"ok": 1}}}}), flush=True)
"#));
        env.config(
            "[limit.p]\nrequests = \"6/min\"\nconcurrency = 4\n\n\
             [batch.a]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nlimit = \"p\"\nconcurrency = 2\n",
        );
        add(&env, "a", 8);
        let launched = now_ms();
        env.run(&["run", "a"]).code(0);
        assert_bucket(&starts(&env), launched);
        assert_eq!(done(&env, "a"), 8);
        assert_eq!(env.int("SELECT coalesce(sum(n), 0) FROM pool_places"), 0, "every place given back");
    }

    fn a_retry_after_from_one_batch_holds_every_batch_of_the_pool(env) {
        // Batch a's `x` answers 429 (retry after 3 s) the first time.
        let w = worker(&env, r#"if [ "$NIGHTSHIFT_KEY" = a1 ] && [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
  echo '{"error_class":"RateLimitError","transient":true,"retry_after_s":3}' >&2; exit 75
fi
echo '{"ok":1}'"#);
        env.config(&format!(
            "[limit.openai]\nrequests = \"1000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\nbackoff = \"10ms\"\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"openai\"\n"
        ));
        add(&env, "a", 1);
        add(&env, "b", 3);
        let a = env.spawn("a", &["run", "a"]);
        // b starts once the pool holds: a's worker logs its start before it
        // answers, and a loaded machine can let b claim between the two.
        // A hold already over (a's retry began) holds nothing any more.
        wait_for("a's 429 to hold the pool", || {
            env.status()["pools"][0]["hold_until"].is_string()
                || starts(&env).iter().any(|s| s.1 == "a1" && s.3 == 2)
        });
        let b = env.spawn("b", &["run", "b"]);
        finish(vec![a, b]);
        let s = starts(&env);
        let asked = s.iter().find(|s| s.1 == "a1" && s.3 == 1).unwrap().2;
        // Every later call, batch b's and a's retry, started after the hold.
        let later: Vec<_> = s.iter().filter(|s| !(s.1 == "a1" && s.3 == 1)).collect();
        assert_eq!(later.len(), 4, "{s:?}");
        for call in later {
            assert!(call.2 >= asked + 3000, "{call:?} started within the hold asked at {asked}: {s:?}");
        }
        assert_eq!((done(&env, "a"), done(&env, "b")), (1, 3));
        // b's run log says what it waited for: the pool's hold.
        let holds = env.events("b", "hold");
        assert!(!holds.is_empty(), "b logged no hold");
        let said = holds[0]["message"].as_str().unwrap();
        assert!(said.starts_with("rate limited: every call of the batch held until "), "{:?}", holds[0]);
        assert!(said.ends_with(" (retry-after for pool openai), asked by a1 of a"), "{:?}", holds[0]);
        assert!(env.events("b", "rate-limit").is_empty(), "a hold is no rate limit");
    }

    /// A pool held by another batch's retry-after: the run waiting for it
    /// logged a `rate-limit` event (`waiting for pool openai: hold, next
    /// slot T`), as if the pool were short of room, where `status` said a
    /// hold. It logs a `hold` of every call of the batch, naming the pool,
    /// until when (`status`'s time) and whose answer asked for it; a wait
    /// for the pool's rate is still a `rate-limit`.
    fn a_pools_hold_is_logged_as_a_hold_naming_the_pool_and_who_asked(env) {
        let w = worker(&env, r#"if [ "$NIGHTSHIFT_BATCH" = a ]; then
  echo '{"error_class":"RateLimitError","transient":true,"retry_after_s":3600}' >&2; exit 75
fi
echo '{"ok":1}'"#);
        env.config(&format!(
            "[limit.\"本番アカウント\"]\nrequests = \"1000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"本番アカウント\"\nretries = 0\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"本番アカウント\"\n"
        ));
        add(&env, "a", 1);
        add(&env, "b", 2);
        env.run(&["run", "a"]);
        let until = env.status()["pools"][0]["hold_until"].as_str().unwrap_or_else(|| panic!("no hold")).to_string();
        let mut run = env.spawn("b", &["run", "b"]);
        wait_for("b's run to log the pool's hold", || !env.events("b", "hold").is_empty());
        let holds = env.events("b", "hold");
        assert_eq!(holds.len(), 1, "once, not at each ask: {holds:?}");
        let hold = &holds[0];
        let fields = &hold["fields"];
        assert_eq!(
            (fields["pool"].as_str(), fields["until"].as_str(), fields["from_batch"].as_str(), fields["from_key"].as_str()),
            (Some("本番アカウント"), Some(until.as_str()), Some("a"), Some("a1")),
            "{hold}"
        );
        let said = hold["message"].as_str().unwrap();
        assert!(
            said.starts_with("rate limited: every call of the batch held until ")
                && said.ends_with(&format!("{}Z (retry-after for pool 本番アカウント), asked by a1 of a", &until[11..19])),
            "{hold}"
        );
        assert!(env.events("b", "rate-limit").is_empty(), "a hold is no rate limit");
        // The text log says it whole, as `status` says the hold.
        let log = env.run(&["log", "b"]).code(0).stdout.clone();
        assert!(log.lines().any(|l| l.contains(" hold ") && l.contains("(retry-after for pool 本番アカウント), asked by a1 of a")), "{log}");
        let text = env.run(&["status", "b"]).code(0).stdout.clone();
        assert!(text.contains(&format!("{}Z (retry-after for pool 本番アカウント)", &until[11..19])), "{text}");
        common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
        run.wait().unwrap();
    }

    /// A persistent slot of a pooled batch sent requests ahead; after a
    /// 429 held the pool they still reached the worker (10–11 calls in a
    /// 4 s hold). One at a time, the next call waits the hold out.
    fn a_persistent_pool_batch_starts_no_call_during_a_hold_it_was_given(env) {
        let calls = env.path("calls.log");
        let worker = r#"import json, sys, time
seen = set()
for line in sys.stdin:
    k = json.loads(line)["key"]
    open(CALLS, "a").write(f"{time.time()} {k}\n")
    if k == "k25" and k not in seen:
        seen.add(k)
        error = {"error_class": "HTTP429", "transient": True, "retry_after_s": 2}
        print(json.dumps({"key": k, "error": error}), flush=True)
    else:
        print(json.dumps({"key": k, "result": 1}), flush=True)
"#;
        env.write("pw.py", &worker.replace("CALLS", &format!("{:?}", calls.display().to_string())));
        env.config(
            "[limit.api]\ntokens = \"1000000/min\"\n\
             [batch.b]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\n\
             concurrency = 1\nlimit = \"api\"\ntoken_estimate = 10\n",
        );
        let keys: Vec<String> = (0..60).map(|i| format!("k{i:02}")).collect();
        common::add_keys(&env, "b", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        env.run(&["run", "b"]).code(0);
        let log: Vec<(f64, String)> = common::lines(&calls)
            .iter()
            .map(|l| {
                let (t, k) = l.split_once(' ').unwrap();
                (t.parse().unwrap(), k.to_string())
            })
            .collect();
        let at = log.iter().position(|(_, k)| k == "k25").unwrap();
        let (t429, next) = (log[at].0, log[at + 1].0);
        assert!(next >= t429 + 1.9, "a call {:.3} s into a 2 s hold: {log:?}", next - t429);
        assert_eq!(env.status()["batches"][0]["done"], 60);
    }

    fn unpause_leaves_a_pool_hold_on_and_says_so(env) {
        // Batch a's call answers 429, retry after an hour: the pool is held.
        let w = worker(&env, r#"echo '{"error_class":"RateLimitError","transient":true,"retry_after_s":3600}' >&2; exit 75"#);
        env.config(&format!(
            "[limit.openai]\nrequests = \"1000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\nretries = 0\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"openai\"\n"
        ));
        add(&env, "a", 1);
        add(&env, "b", 1);
        env.run(&["run", "a"]);
        env.run(&["pause", "b", "--reason", "r"]).code(0);
        let out = env.run(&["unpause", "b"]).code(0).stdout.clone();
        assert!(out.starts_with("b: unpaused; its pool openai stays held until "), "{out}");
        assert!(out.contains("by a retry-after from a: the provider's limit for every batch of the pool, not lifted here"), "{out}");
        let j: Value = env.run(&["unpause", "b", "--json"]).code(0).json();
        assert_eq!((j["pool_hold"]["pool"].as_str(), j["pool_hold"]["lifted"].as_bool()), (Some("openai"), Some(false)), "{j}");
        // Still held: b's item waits for the pool's hold.
        let status = env.status();
        let b = status["batches"].as_array().unwrap().iter().find(|b| b["name"] == "b").unwrap().clone();
        assert_eq!((b["waiting"][0]["reason"].as_str(), b["waiting"][0]["pool"].as_str()), (Some("hold"), Some("openai")), "{b}");
        let pool = &status["pools"][0];
        assert!(pool["hold_until"].is_string(), "{status}");
        // A dry run of b says it would wait for the pool first.
        let dry = env.run(&["run", "b", "--dry-run"]).code(0).stdout.clone();
        assert!(dry.contains("b: held until ") && dry.contains(" (retry-after for pool openai), in "), "{dry}");
        assert!(dry.lines().any(|l| l.starts_with("b: held until ") && l.ends_with(": no call starts before")), "{dry}");
        let dry: Value = env.run(&["run", "b", "--dry-run", "--json"]).code(0).json();
        assert_eq!((dry["pool_wait"]["pool"].as_str(), dry["pool_wait"]["dimension"].as_str()), (Some("openai"), Some("hold")), "{dry}");
        assert!(dry["pool_wait"]["until"].is_string(), "{dry}");
        // The tmux line marks b held too: its pool holds every call of it.
        let short = env.run(&["status", "--short"]).code(0).stdout.clone();
        let b = short.trim().split("  ").find(|p| p.starts_with("b ")).unwrap_or_default();
        assert!(b.ends_with(" held"), "{short}");
        // And the metrics: an alert on the hold's seconds missed the pool's.
        let metrics = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        let left = common::metric(&metrics, "nightshift_batch_hold_seconds{batch=\"b\"}");
        assert!(left > 3000.0, "{metrics}");
    }

    /// A worker's retry-after holds the pool: the items of another batch
    /// of it wait for that hold, and every view counts them under `hold`
    /// naming the pool, as `status --short` (`held`) and the hold's
    /// seconds did. `status`, `status --json`, `items` and the
    /// `nightshift_waiting_items` metric counted them under `rate-limit`
    /// (an alert on `reason="hold"` missed them).
    fn a_pool_held_by_a_retry_after_is_a_hold_in_every_view(env) {
        common::away_from_midnight();
        let w = worker(&env, r#"echo '{"error_class":"RateLimitError","transient":true,"retry_after_s":3600}' >&2; exit 75"#);
        env.config(&format!(
            "[limit.openai]\nrequests = \"1000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\nretries = 0\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"openai\"\n"
        ));
        add(&env, "a", 1);
        add(&env, "b", 2);
        env.run(&["run", "a"]);
        let until = env.status()["pools"][0]["hold_until"].as_str().unwrap_or_else(|| panic!("no hold")).to_string();
        let clock = &until[11..19];
        let text = env.run(&["status", "b"]).code(0).stdout.clone();
        // An hour's hold: past midnight it is said with its date.
        assert!(
            text.contains("2 held until ") && text.contains(&format!("{clock}Z (retry-after for pool openai)")),
            "{text}"
        );
        assert!(!text.contains("waiting for pool openai, hold"), "{text}");
        let b = env.batch_status("b");
        let first = &b["waiting"][0];
        assert_eq!(
            (first["reason"].as_str(), first["count"].as_i64(), first["pool"].as_str(), first["until"].as_str()),
            (Some("hold"), Some(2), Some("openai"), Some(until.as_str())),
            "{b}"
        );
        let table = env.run(&["items", "b"]).code(0).stdout.clone();
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("b1 ") || l.starts_with("b2 ")).collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(
            rows.iter().all(|r| r.contains("hold until ") && r.contains(&format!("{clock}Z")) && !r.contains("rate-limit")),
            "{table}"
        );
        let listed = env.run(&["items", "b", "--json"]).code(0).stdout.clone();
        for line in listed.lines() {
            let item: Value = serde_json::from_str(line).unwrap();
            assert_eq!((item["waiting"]["reason"].as_str(), item["waiting"]["pool"].as_str()), (Some("hold"), Some("openai")), "{item}");
        }
        let metrics = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        let waiting = |reason: &str| common::metric(&metrics, &format!("nightshift_waiting_items{{batch=\"b\",reason=\"{reason}\"}}"));
        assert_eq!((waiting("hold"), waiting("rate-limit")), (2.0, 0.0), "{metrics}");
        assert!(common::metric(&metrics, "nightshift_batch_hold_seconds{batch=\"b\"}") > 3000.0, "{metrics}");
    }

    /// A live run waiting for its pool's next slot: the item it has not
    /// claimed waits for the pool in `status`, `--json` and `show`, not
    /// for "the runner that holds the lock" (which waits for the pool too).
    fn a_live_run_waiting_for_the_pool_says_what_it_waits_for(env) {
        let w = worker(&env, "echo '{\"ok\":1}'");
        env.config(&format!(
            "[limit.p]\nrequests = \"2/h\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"p\"\nconcurrency = 1\n"
        ));
        add(&env, "a", 4);
        let mut run = env.spawn("a", &["run", "a"]);
        wait_for("the run's wait for the pool", || !env.events("a", "rate-limit").is_empty());
        let b = env.batch_status("a");
        let first = &b["waiting"][0];
        assert_eq!((first["reason"].as_str(), first["count"].as_i64()), (Some("rate-limit"), Some(1)), "{b}");
        assert!(first["until"].is_string(), "{b}");
        assert!(!b["waiting"].to_string().contains("lock-held"), "{b}");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("1 pending: waiting for pool p, requests/h, next slot "), "{text}");
        let show = env.run(&["show", "a", "a4"]).code(0).stdout.clone();
        assert!(show.contains("waiting for pool p, requests/h"), "{show}");
        common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
        run.wait().unwrap();
    }

    /// The defect: a runner claims an item, then waits for its place in
    /// the pool; every view said it was in flight ("2 in flight in another
    /// run", `show`: "in flight in run #1") while the pool said no call
    /// was. Now `status`, `--json` and `show` say the claims wait for a
    /// place in the pool, in both modes.
    fn claims_waiting_for_their_pool_are_not_said_in_flight(env) {
        env.write("w.py", r#"import json, sys
for line in sys.stdin:
    print(json.dumps({"key": json.loads(line)["key"], "result": {"ok": 1}}), flush=True)
"#);
        let w = worker(&env, "echo '{\"ok\":1}'");
        env.config(&format!(
            "[limit.p]\nrequests = \"1/h\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"p\"\nconcurrency = 3\n\n\
             [batch.b]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nlimit = \"p\"\nconcurrency = 3\n"
        ));
        add(&env, "a", 3);
        add(&env, "b", 3);
        let mut a = env.spawn("a", &["run", "a"]);
        let waits = |batch: &str| {
            env.batch_status(batch)["waiting"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["reason"] == "pool-place")
                .map(|w| (w["count"].as_i64().unwrap(), w["pool"].clone()))
        };
        // One call has the pool's one request an hour; two claims wait.
        // (Its worker in flight until it is done: a loaded machine read
        // the status while it ran.)
        let done = || {
            env.strings(
                "SELECT CAST(count(*) AS TEXT) FROM items i JOIN batches b ON b.id = i.batch_id \
                 WHERE b.name = 'a' AND i.status = 'done'",
            )
        };
        wait_for("a's two claims waiting for the pool, its one call done", || {
            waits("a") == Some((2, "p".into())) && done() == ["1"]
        });
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(text.contains("2 claimed, waiting for a place in pool p"), "{text}");
        assert!(!text.contains(" in flight"), "{text}");
        let claimed = env.strings(
            "SELECT i.key FROM items i JOIN batches b ON b.id = i.batch_id \
             WHERE b.name = 'a' AND i.status = 'claimed' ORDER BY i.key",
        );
        let claimed = claimed[0].clone();
        let show = env.run(&["show", "a", &claimed]).code(0).stdout.clone();
        assert!(show.contains(", waiting for a place in pool p since "), "{show}");
        assert!(show.contains("waiting:   1 claimed, waiting for a place in pool p"), "{show}");
        assert!(!show.contains("in flight in run"), "{show}");
        let json: Value = serde_json::from_str(&env.run(&["show", "a", &claimed, "--json"]).code(0).stdout).unwrap();
        assert_eq!(json["waiting"]["reason"], "pool-place", "{json}");
        assert!(json["claim"]["pool_wait_since"].is_string(), "{json}");
        // Cancelled while it waits, it is said not started, and dropped.
        let cancel = env.run(&["cancel", "a", &claimed]).code(0).stdout.clone();
        assert!(
            cancel.contains(": claimed, not started (waiting for a place in its pool); asked the runner holding it (run ")
                && cancel.contains(" to drop it: it moves to manual within a second"),
            "{cancel}"
        );
        wait_for("the waiting claim dropped to manual", || {
            env.strings(&format!("SELECT status || '/' || coalesce(tier, '') FROM items WHERE key = '{claimed}'")) == ["failed/manual"]
        });
        assert_eq!(common::tally(&starts(&env).iter().map(|s| s.1.clone()).collect::<Vec<_>>()).get(&claimed), None, "never started");
        // A persistent slot claims ahead: its claims the pool defers wait too.
        let mut b = env.spawn("b", &["run", "b"]);
        wait_for("b's claims waiting for the pool", || waits("b").is_some_and(|(n, _)| n > 0));
        let text = env.run(&["status", "b"]).code(0).stdout.clone();
        assert!(text.contains("claimed, waiting for a place in pool p"), "{text}");
        assert!(!text.contains(" in flight"), "{text}");
        for run in [&mut a, &mut b] {
            common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
            run.wait().unwrap();
        }
        // Stopped, the claims go back to pending: nothing waits for a place.
        assert_eq!(waits("a"), None);
    }

    /// The defect: a pool's limit raised in the config file (`status`
    /// reads it at once) left the live run's calls waiting for the slot
    /// the old limit gave (an hour away here). The run follows the file:
    /// a waiting call asks again with the new limit, in both modes.
    fn a_pool_limit_raised_while_calls_wait_applies_to_them(env) {
        persistent_worker(&env);
        let w = worker(&env, "echo '{\"ok\":1}'");
        let process = format!("\"{w}\"");
        for (batch, mode, worker) in [("a", "process", process.as_str()), ("b", "persistent", "\"python3\", \"w.py\"")] {
            env.config(&format!(
                "[limit.{batch}p]\nrequests = \"1/h\"\n\n\
                 [batch.{batch}]\nworker = [{worker}]\nlimit = \"{batch}p\"\nmode = \"{mode}\"\n"
            ));
            add(&env, batch, 2);
            let mut run = env.spawn(batch, &["run", batch]);
            let calls = || starts(&env).iter().filter(|s| s.0 == batch).count();
            wait_for(&format!("{mode}: one call, the other waiting for the pool"), || {
                calls() == 1
                    && env.batch_status(batch)["waiting"].as_array().unwrap().iter().any(|w| w["reason"] == "pool-place")
            });
            // One call a second now: the waiting call fits at once.
            let raised = env.path("nightshift.toml");
            let text = std::fs::read_to_string(&raised).unwrap().replace("1/h", "3600/h");
            std::fs::write(&raised, text).unwrap();
            wait_for(&format!("{mode}: the waiting call made under the new limit"), || calls() == 2);
            let status = run.wait().unwrap();
            assert!(status.success(), "{mode}: {:?}", env.output_of(batch));
            assert_eq!(done(&env, batch), 2, "{mode}");
        }
    }

    /// The defect: a claim cancelled before its call started kept the
    /// attempt it counted in `manual` (a first attempt waiting for its
    /// pool said `attempts 1` with no call made; a persistent retry
    /// waiting said one more than the calls), and a process-mode retry
    /// waiting for its pool cancelled to `pending` lost the attempt that
    /// had run. An attempt counts when its call starts: the count is the
    /// calls made, in both modes and both places a cancel sends it.
    fn a_cancel_before_the_call_started_leaves_the_attempts_the_calls_made(env) {
        env.write("w.py", r#"import json, os, sys
for line in sys.stdin:
    r = json.loads(line)
    with open("starts.log", "a") as f:
        f.write("%s %s 0 %d\n" % (os.environ["NIGHTSHIFT_BATCH"], r["key"], r["attempt"]))
    print(json.dumps({"key": r["key"], "error": {"error_class": "busy", "transient": True}}), flush=True)
"#);
        let w = worker(&env, "exit 75");
        // One call an hour per pool: the first call has it, the next waits.
        env.config(&format!(
            "[limit.p]\nrequests = \"1/h\"\n\n[limit.q]\nrequests = \"1/h\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"p\"\nretries = 1\nbackoff = \"1s\"\n\n\
             [batch.b]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nlimit = \"q\"\nretries = 1\nbackoff = \"1s\"\n"
        ));
        common::add_keys(&env, "a", &["r1", "x1"]);
        common::add_keys(&env, "b", &["r2"]);
        let calls = |key: &str| starts(&env).iter().filter(|s| s.1 == key).count() as i64;
        let waits_for_pool = |batch: &str, key: &str| {
            let show: Value = serde_json::from_str(&env.run(&["show", batch, key, "--json"]).code(0).stdout).unwrap();
            show["claim"]["pool_wait_since"].is_string()
        };
        // Each case: the item's one call made (none for x1), then its next
        // waiting for the pool, cancelled; its attempts are the calls made.
        for (batch, key, to, made) in [("a", "r1", "pending", 1), ("a", "x1", "manual", 0), ("b", "r2", "manual", 1)] {
            let mut run = env.spawn(key, &["run", batch, "--key", key]);
            wait_for(&format!("{key}'s next call waiting for its pool"), || {
                calls(key) == made && waits_for_pool(batch, key)
            });
            env.run(&["cancel", batch, key, "--to", to]).code(0);
            let status = run.wait().unwrap();
            assert!(status.code().is_some(), "{key}: {:?}", env.output_of(key));
            assert_eq!(calls(key), made, "{key}");
            let show: Value = serde_json::from_str(&env.run(&["show", batch, key, "--json"]).code(0).stdout).unwrap();
            assert_eq!(show["item"]["attempts"], made, "{key}: {show} {:?}", env.output_of(key));
            let state = if to == "manual" { "failed" } else { "pending" };
            assert_eq!(env.item(key).0, state, "{key}");
        }
        // The dead letters say the calls made too.
        for (batch, key, made) in [("a", "x1", 0), ("b", "r2", 1)] {
            let out = env.run(&["dlq", batch, "--jsonl"]).code(0).stdout.clone();
            let dl: Value = serde_json::from_str(out.lines().find(|l| l.contains(key)).unwrap()).unwrap();
            assert_eq!(dl["attempt"], made, "{key}: {dl}");
        }
        env.assert_counts_consistent();
    }

    /// The defect: a claim counts its first attempt, and its runner's death
    /// kept that count even when the call had not started (it waited for a
    /// place in its pool), so a runner killed in a long pool wait used the
    /// items' attempts; with `max_attempts = 1` one crash quarantined items
    /// never called. Now such a claim is taken back uncounted, in both
    /// modes, and its event says why.
    fn a_claim_that_waited_for_its_pool_loses_no_attempt_when_its_runner_dies(env) {
        persistent_worker(&env);
        let w = worker(&env, "echo '{\"ok\":1}'");
        let config = |rate: &str| {
            env.config(&format!(
                "[limit.p]\nrequests = \"{rate}\"\n\n\
                 [batch.a]\nworker = [\"{w}\"]\nlimit = \"p\"\nconcurrency = 3\nmax_attempts = 1\n\n\
                 [batch.b]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nlimit = \"p\"\n\
                 concurrency = 2\nmax_attempts = 2\n"
            ));
        };
        config("1/h");
        add(&env, "a", 3);
        add(&env, "b", 3);
        let count = |batch: &str, cond: &str| {
            env.int(&format!(
                "SELECT count(*) FROM items i JOIN batches b ON b.id = i.batch_id \
                 WHERE b.name = '{batch}' AND {cond}"
            ))
        };
        let waiting = |batch: &str| count(batch, "i.pool_wait_since IS NOT NULL");
        // The pool's one request goes to a1; a process slot waiting for its
        // place claims nothing more, so a's state is settled once a1 is done.
        let mut a = env.spawn("a", &["run", "a"]);
        wait_for("a1 done and a's two claims waiting for the pool", || {
            done(&env, "a") == 1 && waiting("a") == 2
        });
        let mut b = env.spawn("b", &["run", "b"]);
        wait_for("b's claims all waiting for the pool", || {
            let claimed = count("b", "i.status = 'claimed'");
            claimed > 0 && waiting("b") == claimed
        });
        for run in [&mut a, &mut b] {
            common::signal(run.id(), nix::sys::signal::Signal::SIGKILL);
            run.wait().unwrap();
        }
        // A persistent slot may claim ahead between the look and the kill:
        // such a claim, not yet deferred, is a started attempt (`b` allows
        // two); those the pool deferred are checked.
        let b_marked = env.strings(
            "SELECT i.key FROM items i JOIN batches b ON b.id = i.batch_id \
             WHERE b.name = 'b' AND i.pool_wait_since IS NOT NULL ORDER BY i.key",
        );
        // The views say what the next run will do: take them back, not
        // quarantine them.
        let a_now = env.batch_status("a");
        assert_eq!((&a_now["orphaned"], &a_now["orphaned_to_quarantine"]), (&Value::from(2), &Value::from(0)), "{a_now}");
        let waiting = env.strings(
            "SELECT i.key FROM items i JOIN batches b ON b.id = i.batch_id \
             WHERE b.name = 'a' AND i.pool_wait_since IS NOT NULL ORDER BY i.key",
        );
        let show: Value = serde_json::from_str(&env.run(&["show", "a", &waiting[0], "--json"]).code(0).stdout).unwrap();
        assert_eq!(show["claim"]["next_run_quarantines"], false, "{show}");
        // A dead run's claims are no pending items: they wait for the pool.
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(text.contains("waiting: 2 wait for pool p, requests/h, next slot "), "{text}");
        // Nothing takes them at that slot: no runner is live.
        assert!(text.contains(", and no runner is live (`nightshift run` starts one)"), "{text}");
        assert_eq!(a_now["waiting"][0]["no_runner"], true, "{a_now}");
        let shown = env.run(&["show", "a", &waiting[0]]).code(0).stdout.clone();
        assert!(shown.contains("waiting:   1 waits for pool p, requests/h, next slot "), "{shown}");
        // Its attempt is not said used while its call never started.
        assert!(
            shown.contains("attempts:  0 (attempt 1 has not started: its call waits for its pool)"),
            "{shown}"
        );
        config("1000/min");
        env.run(&["run", "a"]).code(0);
        env.run(&["run", "b"]).code(0);
        assert_eq!((done(&env, "a"), done(&env, "b")), (3, 3), "none quarantined");
        let calls = starts(&env);
        // The pool's one request went to a1: every other call was made by
        // the second runs.
        let mut keys: Vec<&str> = calls.iter().map(|c| c.1.as_str()).collect();
        keys.sort();
        assert_eq!(keys, ["a1", "a2", "a3", "b1", "b2", "b3"], "each item called once: {calls:?}");
        let deferred: Vec<&str> = ["a2", "a3"].into_iter().chain(b_marked.iter().map(String::as_str)).collect();
        for key in &deferred {
            assert!(calls.iter().any(|c| c.1 == *key && c.3 == 1), "{key} called at attempt 1: {calls:?}");
            let reclaimed = env.strings(&format!("SELECT message FROM events WHERE kind = 'reclaimed' AND key = '{key}'"));
            assert!(
                reclaimed.len() == 1 && reclaimed[0].contains("its call never started (it waited for a place in its pool), so the attempt does not count"),
                "{key}: {reclaimed:?}"
            );
        }
    }

    /// Calls reporting more tokens than the estimate they reserved let the
    /// pool's window pass its limit (the rest is settled after them):
    /// `status` says so under the run's tokens, with the mean against the
    /// estimate, and `--json` has it; a run within its estimate says nothing.
    fn a_run_reporting_more_than_its_estimate_says_so(env) {
        let w = worker(&env, USAGE);
        env.config(&format!(
            "[limit.p]\ntokens = \"100000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"p\"\ntoken_estimate = 40\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"p\"\ntoken_estimate = 100\n"
        ));
        add(&env, "a", 3);
        add(&env, "b", 3);
        env.run(&["run", "a"]).code(0);
        env.run(&["run", "b"]).code(0);
        let a = env.batch_status("a");
        assert_eq!(a["last_run"]["usage"]["over_estimate"], serde_json::json!({"mean": 100, "reserved": 40, "token_estimate": 40}), "{a}");
        let b = env.batch_status("b");
        assert_eq!(b["last_run"]["usage"]["over_estimate"], Value::Null, "{b}");
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(text.contains("reported 100 tokens a call on average, over the 40 each reserved (token_estimate)"), "{text}");
        let text = env.run(&["status", "b"]).code(0).stdout.clone();
        assert!(!text.contains("on average"), "{text}");
    }

    /// The same for estimates each item gives (`estimate_field`), which
    /// were never compared: the reporting calls' tokens against what they
    /// reserved, on average (here 30 and 50, then 200 and 300).
    fn a_run_over_its_items_own_estimates_says_so(env) {
        let w = worker(&env, USAGE);
        env.config(&format!(
            "[limit.p]\ntokens = \"100000/min\"\n\n\
             [batch.c]\nworker = [\"{w}\"]\nlimit = \"p\"\nestimate_field = \"est\"\n\n\
             [batch.d]\nworker = [\"{w}\"]\nlimit = \"p\"\nestimate_field = \"est\"\n"
        ));
        let items = |batch: &str, ests: [i64; 2]| {
            let lines: String = ests.iter().enumerate()
                .map(|(i, e)| format!("{{\"key\":\"{batch}{i}\",\"est\":{e}}}\n"))
                .collect();
            let file = env.write(&format!("{batch}.jsonl"), &lines);
            env.cmd().args(["add", batch]).arg(file).assert().success();
        };
        items("c", [30, 50]);
        items("d", [200, 300]);
        env.run(&["run", "c"]).code(0);
        env.run(&["run", "d"]).code(0);
        let c = env.batch_status("c");
        assert_eq!(c["last_run"]["usage"]["over_estimate"], serde_json::json!({"mean": 100, "reserved": 40, "estimate_field": "est"}), "{c}");
        let text = env.run(&["status", "c"]).code(0).stdout.clone();
        assert!(text.contains("reported 100 tokens a call on average, over the 40 they reserved on average (estimate_field \"est\")"), "{text}");
        let d = env.batch_status("d");
        assert_eq!(d["last_run"]["usage"]["over_estimate"], Value::Null, "{d}");
        assert!(!env.run(&["status", "d"]).code(0).stdout.contains("on average"));
    }

    /// Items stored before `estimate_field` was set, whose field holds no
    /// estimate, reserve `token_estimate`: the run says so once (on stderr
    /// and as an `estimate-ignored` event naming the first such item and its
    /// value), where it fell back in silence; every run says it again.
    fn an_ignored_estimate_is_said_once_a_run(env) {
        let w = worker(&env, USAGE);
        let config = |field: &str| env.config(&format!(
            "[limit.p]\ntokens = \"100000/min\"\n\n\
             [batch.c]\nworker = [\"{w}\"]\nlimit = \"p\"\nconcurrency = 1\ntoken_estimate = 40\n{field}"
        ));
        config("");
        let file = env.write(
            "c.jsonl",
            "{\"key\":\"c0\",\"est\":\"たくさん\"}\n{\"key\":\"c1\",\"est\":-5}\n{\"key\":\"c2\",\"est\":70}\n",
        );
        env.cmd().args(["add", "c"]).arg(file).assert().success();
        config("estimate_field = \"est\"\n");
        let said = "item c0: its estimate_field \"est\" is \"たくさん\", not a token estimate \
                    (a whole number from 0 to 100000000): it reserved token_estimate (40) instead";
        let ran = env.run(&["run", "c"]);
        ran.code(0);
        assert_eq!(ran.stderr.matches("its estimate_field").count(), 1, "{ran:?}");
        assert!(ran.stderr.contains(&format!("nightshift: c: {said}")), "{ran:?}");
        // Two of them: the run's end counts them.
        let count = "estimate ignored for 2 items (first: c0): their estimate_field \"est\" held \
                     no token estimate; each reserved token_estimate (40) instead";
        assert!(ran.stderr.contains(&format!("nightshift: c: {count}\n")), "{ran:?}");
        let events = env.events("c", "estimate-ignored");
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0]["key"], "c0", "{events:?}");
        assert!(events[0]["message"].as_str().unwrap().starts_with(said), "{events:?}");
        assert_eq!(events[1]["message"], count, "{events:?}");
        env.run(&["requeue", "c", "c1", "--outcome", "done"]).code(0);
        let ran = env.run(&["run", "c"]);
        assert!(ran.code(0).stderr.contains("item c1: its estimate_field \"est\" is -5"), "{ran:?}");
        assert!(!ran.stderr.contains("estimate ignored for"), "one item, said once: {ran:?}");
        let events = env.events("c", "estimate-ignored");
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[2]["key"], "c1", "{events:?}");
    }

    /// Thirty items with no estimate in one run (each failing once, so
    /// each asks its pool twice), beside good ones: the first is named
    /// at once, and the run's end says how many there were, once (stderr
    /// and an `estimate-ignored` event `log --kind` shows); it named the
    /// first alone, with no word of the other 29.
    fn several_ignored_estimates_are_counted_once_a_run(env) {
        let w = worker(&env, r#"if [ "$NIGHTSHIFT_ATTEMPT" -lt 2 ]; then exit 75; fi
echo '{"ok":1}'"#);
        let config = |field: &str| env.config(&format!(
            "[limit.p]\ntokens = \"1000000/min\"\n\n\
             [batch.\"記事\"]\nworker = [\"{w}\"]\nlimit = \"p\"\nconcurrency = 3\ntoken_estimate = 40\n\
             retries = 2\nbackoff = \"1ms\"\nbackoff_max = \"1ms\"\n{field}"
        ));
        config("");
        let mut lines: String = (0..30).map(|i| format!("{{\"key\":\"要約{i:02}\",\"est\":\"多い\"}}\n")).collect();
        lines.push_str("{\"key\":\"good1\",\"est\":70}\n{\"key\":\"good2\"}\n");
        let file = env.write("c.jsonl", &lines);
        env.cmd().args(["add", "記事"]).arg(file).assert().success();
        config("estimate_field = \"est\"\n");
        let ran = env.run(&["run", "記事"]);
        ran.code(0);
        let events = env.events("記事", "estimate-ignored");
        assert_eq!(events.len(), 2, "the first item, then the count: {events:?}");
        // The first said (three slots claim side by side): named again.
        let first = events[0]["key"].as_str().unwrap();
        assert!(first.starts_with("要約"), "{events:?}");
        let count = format!("estimate ignored for 30 items (first: {first})");
        assert!(events[1]["message"].as_str().unwrap().starts_with(&count), "{events:?}");
        assert_eq!(events[1]["fields"]["items"], 30, "{events:?}");
        assert_eq!(ran.stderr.matches("estimate ignored for").count(), 1, "{ran:?}");
        assert!(ran.stderr.contains(&format!("nightshift: 記事: {count}")), "{ran:?}");
        let log = env.run(&["log", "記事", "--kind", "estimate-ignored"]);
        assert!(log.code(0).stdout.contains(&count), "{log:?}");
    }

    /// A runner killed with SIGKILL while its call holds the pool's one
    /// place: the next run takes over (stopping the dead run's worker) and
    /// has the place back at once, not after the place's lapse
    /// (`item_timeout` + `grace`, an hour here).
    fn a_crashed_runners_places_come_back_when_its_run_is_taken_over(env) {
        let release = env.path("release");
        let w = worker(&env, &format!(
            "while [ ! -f '{}' ]; do sleep 0.05; done; echo '{{\"ok\":1}}'",
            release.display()
        ));
        env.config(&format!(
            "[limit.one]\nconcurrency = 1\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"one\"\nconcurrency = 1\nitem_timeout = \"1h\"\n"
        ));
        add(&env, "a", 1);
        let mut first = env.spawn("a", &["run", "a"]);
        wait_for("the first call", || !starts(&env).is_empty());
        common::signal(first.id(), nix::sys::signal::Signal::SIGKILL);
        first.wait().unwrap();
        // Its process is seen dead here: its place is free, said as its.
        let pool = env.status()["pools"][0].clone();
        assert_eq!((pool["in_flight"].as_i64(), pool["gone_places"][0]["places"].as_i64()), (Some(0), Some(1)), "{pool}");
        std::fs::write(&release, "").unwrap();
        let second = env.spawn("b", &["run", "a"]);
        wait_for("a1 done by the run that took over", || done(&env, "a") == 1);
        finish(vec![second]);
        assert_eq!(env.int("SELECT coalesce(sum(n), 0) FROM pool_places"), 0, "every place given back");
    }

    /// A runner on another host is SIGKILLed while its two calls hold both
    /// places of the pool (`item_timeout` an hour: they would lapse in an
    /// hour). Once its seat lapses it is gone (its guard stopped its
    /// workers): `status`, its JSON and the dashboard's Pools pane say the
    /// places are its, gone, not in flight, and a runner on host-a has them
    /// at once. Every view said `2/2 in flight` for an hour, and host-a's
    /// calls waited that hour.
    fn a_runner_gone_on_another_host_leaves_its_pool_places_free(env) {
        let w = worker(&env, "sleep ${SLOW:-0}; echo '{\"ok\":1}'");
        env.config(&format!(
            "[limit.two]\nconcurrency = 2\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"two\"\nconcurrency = 2\n\
             item_timeout = \"1h\"\nlock_ttl = \"3s\"\n"
        ));
        add(&env, "a", 4);
        let mut b = env.spawn_with("b", &["run", "a"], &[("NIGHTSHIFT_HOST", "host-b"), ("SLOW", "30")]);
        wait_for("host-b's two calls", || starts(&env).len() == 2);
        assert_eq!(env.status()["pools"][0]["in_flight"], 2, "a live runner's calls");
        let pid = b.id();
        common::signal(pid, nix::sys::signal::Signal::SIGKILL);
        b.wait().unwrap();
        // As a runner on another host sees it: host-b's seat stands until
        // it lapses, a lock_ttl after its last renewal.
        wait_for("host-b's seat to lapse", || {
            env.int("SELECT coalesce(max(expires_at), 0) FROM locks") < now_ms() - 50
        });
        let runner = format!("host-b:{pid}");
        let pool = env.status()["pools"][0].clone();
        assert_eq!(pool["in_flight"], 0, "{pool}");
        let gone = &pool["gone_places"][0];
        assert_eq!((gone["runner"].as_str(), gone["places"].as_i64()), (Some(runner.as_str()), Some(2)), "{pool}");
        assert!(gone["until"].as_str().is_some_and(|t| t > nightshift::util::time::rfc3339(now_ms() + 3_000_000).as_str()), "{pool}");
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(
            text.contains(&format!("0/2 in flight — 2 places of runner {runner}, gone: free to the next call (else they lapse at ")),
            "{text}"
        );
        for size in [(80, 24), (120, 40)] {
            // No "since you last looked" over the pane.
            let _ = std::fs::remove_dir_all(env.path("state"));
            let mut dash = crate::support::pty::Dash::open(
                std::path::Path::new(env!("CARGO_BIN_EXE_nightshift")),
                env.dir.path(),
                &env.db,
                &["watch", "--read-only"],
                size,
            );
            dash.wait_loaded();
            dash.key("6");
            let screen = dash.wait_text("gone: free");
            let row = |t: &str| screen.lines().find(|l| l.contains(t)).unwrap_or_else(|| panic!("{t}: {screen}")).to_string();
            assert!(row("in flight").contains("0 / 2"), "{size:?}\n{screen}");
            assert!(row("gone: free").contains(&format!("2 places of runner {runner}, gone: free")), "{size:?}\n{screen}");
            dash.key("q");
            assert_eq!(dash.wait_exit(), 0);
        }
        let a = env.spawn_with("a", &["run", "a"], &[("NIGHTSHIFT_HOST", "host-a")]);
        wait_for("host-a to run every item", || done(&env, "a") == 4);
        finish(vec![a]);
        assert_eq!(env.int("SELECT coalesce(sum(n), 0) FROM pool_places"), 0, "every place given back");
    }

    /// A pool of requests whose worker reports no tokens: status counts its
    /// calls, with no "0 in + 0 out tokens" line for the pool or the run.
    fn a_pool_without_tokens_says_its_calls(env) {
        let w = worker(&env, "echo '{\"ok\":1}'");
        env.config(&format!(
            "[limit.p]\nrequests = \"100/min\"\n\n[batch.a]\nworker = [\"{w}\"]\nlimit = \"p\"\n"
        ));
        add(&env, "a", 2);
        env.run(&["run", "a"]).code(0);
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(text.contains("pool p: requests/min ") && text.contains("/100; today 2 calls\n"), "{text}");
        assert!(!text.contains("tokens"), "{text}");
    }

    fn an_immediate_retry_waits_for_the_pool(env) {
        // One call a second; the item fails transiently 3 times, with no
        // backoff to speak of: 4 attempts, a second apart at the least.
        let w = worker(&env, r#"if [ "$NIGHTSHIFT_ATTEMPT" -lt 4 ]; then exit 75; fi
echo '{"ok":1}'"#);
        env.config(&format!(
            "[limit.slow]\nrequests = \"1/s\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"slow\"\nretries = 3\nbackoff = \"1ms\"\nbackoff_max = \"1ms\"\n"
        ));
        add(&env, "a", 1);
        let launched = now_ms();
        env.run(&["run", "a"]).code(0);
        let s = starts(&env);
        assert_eq!(s.iter().map(|s| s.3).collect::<Vec<_>>(), [1, 2, 3, 4], "{s:?}");
        assert!(s[3].2 - launched >= 3000, "4th attempt {} ms after launch: {s:?}", s[3].2 - launched);
        assert_eq!(done(&env, "a"), 1);
    }

    fn calls_in_flight_across_two_runners_stay_within_the_pool(env) {
        let log = env.path("spans.log");
        let w = worker(&env, &format!(
            "b=$(date +%s%3N); sleep 0.5; echo \"$b $(date +%s%3N)\" >> '{}'; echo '{{\"ok\":1}}'",
            log.display()
        ));
        env.config(&format!(
            "[limit.two]\nconcurrency = 2\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"two\"\nconcurrency = 3\nrunners = 2\n"
        ));
        add(&env, "a", 8);
        let runs = vec![env.spawn("r1", &["run", "a"]), env.spawn("r2", &["run", "a"])];
        finish(runs);
        assert_eq!(done(&env, "a"), 8);
        // Overlap of the workers' own [begin, end] spans.
        let mut edges: Vec<(i64, i64)> = Vec::new();
        for l in common::lines(&log) {
            let (b, e) = l.split_once(' ').unwrap();
            edges.push((b.parse().unwrap(), 1));
            edges.push((e.parse().unwrap(), -1));
        }
        assert_eq!(edges.len(), 16);
        // At one instant an end comes before a begin.
        edges.sort();
        let (mut now, mut most) = (0, 0);
        for (_, d) in edges {
            now += d;
            most = most.max(now);
        }
        assert!(most <= 2, "{most} calls in flight at once");
        assert_eq!(env.int("SELECT coalesce(sum(n), 0) FROM pool_places"), 0, "every place given back");
    }

    fn usage_is_stored_per_attempt_and_refused_when_bad(env) {
        // k1: attempt 1 fails with usage in its error line, attempt 2
        // reports it on a stderr line. k2 reports nothing. k3 reports
        // nonsense: refused, the item fails for a human.
        let w = worker(&env, r#"case "$NIGHTSHIFT_KEY/$NIGHTSHIFT_ATTEMPT" in
  a1/1) echo '{"error_class":"Busy","transient":true,"usage":{"input_tokens":10,"output_tokens":0}}' >&2; exit 75;;
  a1/*) echo '@nightshift usage input_tokens=5 output_tokens=7' >&2; echo '{"ok":1}';;
  a2/*) echo '{"ok":2}';;
  a3/*) echo '{"ok":3,"usage":{"input_tokens":-4}}';;
esac"#);
        env.config(&format!(
            "[limit.openai]\ntokens = \"100000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\ntoken_estimate = 50\nbackoff = \"1ms\"\nconcurrency = 1\n"
        ));
        add(&env, "a", 3);
        env.run(&["run", "a"]);
        let show = env.run(&["show", "a", "a1", "--json"]).code(0).json();
        let usage: Vec<(Option<i64>, Option<i64>, i64)> = show["usage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| (u["input_tokens"].as_i64(), u["output_tokens"].as_i64(), u["attempt"].as_i64().unwrap()))
            .collect();
        assert_eq!(usage, [(Some(10), Some(0), 1), (Some(5), Some(7), 2)]);
        let text = env.run(&["show", "a", "a2"]).code(0).stdout.clone();
        assert!(text.contains("attempt 1  nothing reported, 50 estimated"), "{text}");
        let bad = env.run(&["show", "a", "a3", "--json"]).code(0).json();
        assert_eq!(bad["item"]["error_class"], "InvalidUsage", "{bad}");
        assert!(bad["item"]["error_message"].as_str().unwrap().contains("input_tokens: -4"), "{bad}");
        let status = env.status();
        let u = &status["batches"][0]["last_run"]["usage"];
        assert_eq!(u["attempts"], 4, "{u}");
        assert_eq!((u["input_tokens"].as_i64(), u["output_tokens"].as_i64()), (Some(15), Some(7)), "{u}");
        assert_eq!((u["unreported"].as_i64(), u["estimated_tokens"].as_i64()), (Some(2), Some(100)), "{u}");
    }

    /// A persistent slot whose next calls wait for the pool (two requests
    /// an hour) makes the calls its worker answered durable before it
    /// waits, not after: they are done at once, a crash meanwhile costs no
    /// second call of them, and no view counts them in flight.
    fn answered_calls_are_durable_before_their_slot_waits_for_the_pool(env) {
        persistent_worker(&env);
        let config = |rate: &str| {
            env.config(&format!(
                "[limit.p]\nrequests = \"{rate}\"\n\n\
                 [batch.a]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nlimit = \"p\"\nconcurrency = 1\n"
            ));
        };
        config("2/h");
        add(&env, "a", 5);
        let mut run = env.spawn("a", &["run", "a"]);
        let called = || starts(&env);
        wait_for("the pool's two calls", || called().len() == 2);
        wait_for("both answered calls done while the slot waits", || done(&env, "a") == 2);
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(!text.contains(" in flight"), "{text}");
        assert!(text.contains("waiting for pool p"), "{text}");
        common::signal(run.id(), nix::sys::signal::Signal::SIGKILL);
        run.wait().unwrap();
        config("1000/min");
        env.run(&["run", "a"]).code(0);
        assert_eq!(done(&env, "a"), 5);
        let mut keys: Vec<String> = called().into_iter().map(|c| c.1).collect();
        keys.sort();
        assert_eq!(keys, ["a1", "a2", "a3", "a4", "a5"], "each item called once: {:?}", called());
    }
    /// The defect: a call waiting for its pool's token rate slept until
    /// the slot the other calls' reservations gave (20 minutes here: three
    /// calls reserving 2,000 of 6,000 an hour), though they settled for
    /// 100 tokens each and the bucket had room again at once: the run of
    /// 12 calls, 1,200 tokens, waited 20 minutes for its last one while
    /// every view counted it waiting for a place in a pool with room. A
    /// call waiting for a token rate asks again when this runner settles
    /// a call, as one waiting for a place in flight does, in both modes.
    fn a_call_waiting_for_tokens_goes_once_the_calls_before_it_settle_for_less(env) {
        persistent_worker_as(&env, "u.py", r#", "usage": {"input_tokens": 60, "output_tokens": 40}"#);
        let w = worker(&env, USAGE);
        let process = format!("\"{w}\"");
        for (batch, mode, worker) in [("a", "process", process.as_str()), ("b", "persistent", "\"python3\", \"u.py\"")] {
            env.config(&format!(
                "[limit.{batch}p]\ntokens = \"6000/h\"\n\n\
                 [batch.{batch}]\nworker = [{worker}]\nlimit = \"{batch}p\"\nmode = \"{mode}\"\n\
                 concurrency = 4\ntoken_estimate = 2000\n"
            ));
            add(&env, batch, 12);
            let run = env.spawn(batch, &["run", batch]);
            wait_for(&format!("{mode}: every call made, 1,200 tokens of 6,000"), || done(&env, batch) == 12);
            finish(vec![run]);
            let calls = starts(&env).iter().filter(|s| s.0 == batch).count();
            assert_eq!(calls, 12, "{mode}");
        }
    }
}

#[test]
fn a_batch_naming_an_unknown_pool_is_refused_naming_it() {
    let env = Env::new();
    env.config("[limit.openai]\nrequests = \"10/min\"\n\n[batch.a]\nworker = [\"cat\"]\nlimit = \"opneai\"\n");
    let ran = env.run(&["status"]);
    ran.code(2);
    assert!(
        ran.error_line().contains(r#"nightshift.toml:6: batch.a.limit: no [limit.opneai] table for "opneai": the file defines "openai""#),
        "{ran:?}"
    );
    // A name TOML must quote is quoted in the table the error names.
    env.config("[limit.\"本番\"]\nrequests = \"10/min\"\n\n[batch.a]\nworker = [\"cat\"]\nlimit = \"本番x\"\n");
    let ran = env.run(&["status"]);
    assert!(
        ran.error_line()
            .contains(r#"no [limit."本番x"] table for "本番x": the file defines "本番""#),
        "{ran:?}"
    );
    env.config("[limit.openai]\nrequests = \"10/week\"\n");
    let ran = env.run(&["status"]);
    assert!(
        ran.error_line()
            .contains("limit.openai.requests: invalid rate \"10/week\""),
        "{ran:?}"
    );
    env.config("[batch.a]\nworker = [\"cat\"]\ntoken_estimate = 5\n");
    let ran = env.run(&["status"]);
    assert!(
        ran.error_line()
            .contains("batch.a.token_estimate: token_estimate needs a limit"),
        "{ran:?}"
    );
}

#[test]
fn a_persistent_worker_reports_usage_in_its_answer() {
    let env = Env::new();
    env.write(
        "w.py",
        r#"import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"key": r["key"], "result": {"ok": 1}, "usage": {"input_tokens": 3, "output_tokens": 4}}), flush=True)
"#,
    );
    env.config("[limit.p]\ntokens = \"100000/min\"\nconcurrency = 2\n\n[batch.a]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nlimit = \"p\"\ntoken_estimate = 10\n");
    add(&env, "a", 5);
    env.run(&["run", "a"]).code(0);
    let status = env.status();
    let u: &Value = &status["batches"][0]["last_run"]["usage"];
    assert_eq!(
        (u["input_tokens"].as_i64(), u["output_tokens"].as_i64()),
        (Some(15), Some(20)),
        "{u}"
    );
    assert_eq!(
        env.int("SELECT coalesce(sum(n), 0) FROM pool_places"),
        0,
        "every place given back"
    );
}
