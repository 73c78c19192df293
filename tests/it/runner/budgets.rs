//! Budgets (`budget = "AMOUNT/PERIOD"` on a batch or a `[limit.NAME]`
//! pool) end to end, on both stores, with real runner processes and real
//! workers reporting costs: at the budget no call starts (first calls and
//! retries), calls in flight finish, the hold is recorded and shown with
//! its reset time, the next run waits for the reset, a pool's budget is
//! shared by its batches, and failed attempts count.
//!
//! No assertion races a sleep against a window: day windows are used
//! where the reset must not come (away from 00:00Z), and the short window
//! is checked by the times the runner reported against the workers' own.

use crate::support as common;
use nightshift::util::time::now_ms;

use crate::support::require::Tool;
use common::{Env, starts, wait_for};
use nix::sys::signal::Signal;

use common::{away_from_midnight, next_midnight};

/// A worker that logs `batch key start_ms attempt` to `starts.log`,
/// reports `cost`, and then runs `then` (shell). The item `slow` waits for
/// the file `release` first.
fn worker(env: &Env, cost: &str, then: &str) -> String {
    let log = env.path("starts.log");
    let release = env.path("release");
    let path = env.script(
        "worker.sh",
        &format!(
            "cat >/dev/null\necho \"$NIGHTSHIFT_BATCH $NIGHTSHIFT_KEY $(date +%s%3N) $NIGHTSHIFT_ATTEMPT\" >> '{}'\n\
             if [ \"$NIGHTSHIFT_KEY\" = slow ]; then while [ ! -f '{}' ]; do sleep 0.05; done; fi\n\
             echo '@nightshift cost={cost}' >&2\n{then}",
            log.display(),
            release.display()
        ),
    );
    path.display().to_string()
}

fn add(env: &Env, batch: &str, keys: &[&str]) {
    common::add_keys(env, batch, keys);
}

fn batch_json<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap()
}

fn budget_waiting(b: &serde_json::Value) -> Option<serde_json::Value> {
    b["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["reason"] == "budget")
        .cloned()
}

/// Stops a run waiting for its budget's reset, and waits for it to exit.
fn interrupt(mut run: common::Background) {
    common::signal(run.id(), Signal::SIGINT);
    run.wait().unwrap();
}

both_backends! {
    /// 0.25 a call against 0.50 a day, two slots: the slow item's call is
    /// in flight while two fast ones spend the budget. No call starts after
    /// the hold; the slow one finishes and is done; the rest wait for the
    /// reset, in every view.
    fn a_budget_reached_mid_run_stops_new_calls_and_lets_in_flight_ones_finish(env) {
        away_from_midnight();
        let w = worker(&env, "0.25", "echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 2\nbudget = \"0.50/day\"\n"
        ));
        add(&env, "a", &["slow", "k2", "k3", "k4", "k5", "k6"]);
        let run = env.spawn("a", &["run", "a"]);
        wait_for("the budget hold", || !env.events("a", "budget").is_empty());
        let held = env.events("a", "budget");
        assert_eq!(held.len(), 1, "{held:?}");
        assert_eq!(held[0]["fields"]["until"], next_midnight().as_str(), "{held:?}");
        let mut before: Vec<_> = starts(&env).into_iter().map(|s| s.1).collect();
        before.sort();
        assert_eq!(before, ["k2", "k3", "slow"], "two fast calls spent it; the slow one is in flight");
        // In flight at the hold: it finishes, and is done.
        std::fs::write(env.path("release"), "").unwrap();
        wait_for("the slow item done", || env.item("slow").0 == "done");
        // Its cost is queued to the store after its done mark.
        wait_for("its cost in the ledger", || batch_json(&env.status(), "a")["budget"]["spent"] == 0.75);
        let status = env.status();
        let b = batch_json(&status, "a");
        assert_eq!(b["budget"]["limit"], 0.5);
        assert_eq!(b["budget"]["spent"], 0.75, "the in-flight call counted too: {b}");
        assert_eq!(b["budget"]["reached"], true);
        assert_eq!(b["budget"]["window_end"], next_midnight().as_str());
        // The run is live, waiting for the reset: what it has not claimed
        // waits for the budget in every view, not for "the runner that
        // holds the lock" (the runner waits for the budget too).
        let w = budget_waiting(b).expect("a budget wait while the run is live");
        assert_eq!(w["until"], next_midnight().as_str(), "{w}");
        assert!(!b["waiting"].to_string().contains("lock-held"), "{b}");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("wait: budget reached, resets"), "{text}");
        assert!(!text.contains("holds the lock"), "{text}");
        let show = env.run(&["show", "a", "k6"]).code(0).stdout.clone();
        assert!(show.contains("budget reached, resets"), "{show}");
        interrupt(run);
        // No call started after the hold, the run's stop included.
        assert_eq!(starts(&env).len(), 3, "{:?}", starts(&env));
        let status = env.status();
        let w = budget_waiting(batch_json(&status, "a")).expect("a budget wait");
        assert_eq!((w["count"].as_i64(), w["until"].as_str()), (Some(3), Some(next_midnight().as_str())), "{w}");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("budget reached ($0.75 of $0.50 today), resets 00:00Z"), "{text}");
        assert!(text.contains("3 wait: budget reached, resets"), "{text}");
        let short = env.run(&["status", "--short"]).code(0).stdout.clone();
        assert!(short.contains(" budget"), "{short}");
        let metrics = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        assert!(metrics.contains("nightshift_budget_spent{batch=\"a\",scope=\"batch\",name=\"a\"} 0.75"), "{metrics}");
        assert!(metrics.contains("nightshift_budget_limit{batch=\"a\",scope=\"batch\",name=\"a\"} 0.5"), "{metrics}");
        let show = env.run(&["show", "a", "k4"]).code(0).stdout.clone();
        assert!(show.contains("budget reached, resets"), "{show}");
        // The next run waits for the reset too: it starts no call.
        let next = env.spawn("b", &["run", "a"]);
        wait_for("the next run's hold", || env.events("a", "budget").len() == 2);
        interrupt(next);
        assert_eq!(starts(&env).len(), 3, "{:?}", starts(&env));
    }

    /// A 10 s window: a run spends it with one call; the next run, started
    /// in the same window, says until when it holds, starts no call before
    /// then, and runs the rest once the window has reset.
    fn the_next_run_waits_for_the_reset(env) {
        let w = worker(&env, "0.30", "echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nbudget = \"0.30/10s\"\n"
        ));
        // Start early in a window, so the next run starts inside it.
        let mut tries = 0;
        loop {
            tries += 1;
            assert!(tries <= 5, "never started a second run inside the first one's window");
            let key = format!("first{tries}");
            add(&env, "a", &[&key]);
            wait_for("the start of a window", || now_ms().rem_euclid(10_000) < 1000);
            env.run(&["run", "a"]).code(0);
            let status = env.status();
            let b = batch_json(&status, "a");
            let end = b["budget"]["window_end"].as_str().unwrap().to_string();
            let end_ms = chrono::DateTime::parse_from_rfc3339(&end).unwrap().timestamp_millis();
            if b["budget"]["reached"] != true || now_ms() > end_ms - 2000 {
                continue;
            }
            let second = format!("second{tries}");
            add(&env, "a", &[&second]);
            let holds = env.events("a", "budget").len();
            env.run(&["run", "a"]).code(0);
            let held = env.events("a", "budget");
            let next = &held[holds..];
            if next.is_empty() {
                // It read the ledger only after the window ended: no hold
                // to say, and nothing to assert of this try.
                continue;
            }
            assert_eq!(next[0]["fields"]["until"], end.as_str(), "{next:?}");
            let start = starts(&env).into_iter().find(|s| s.1 == second).unwrap();
            assert!(start.2 >= end_ms, "the call started {} ms before the reset", end_ms - start.2);
            assert_eq!(env.item(&second).0, "done");
            break;
        }
    }

    /// Two batches of one pool with a budget of 0.50 a day: batch a spends
    /// it, and batch b, which spent nothing, waits for the pool's reset.
    fn a_pool_budget_is_shared_by_its_batches(env) {
        away_from_midnight();
        let w = worker(&env, "0.25", "echo ok");
        env.config(&format!(
            "[limit.openai]\nbudget = \"0.50/day\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\nconcurrency = 1\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"openai\"\nconcurrency = 1\n"
        ));
        add(&env, "a", &["a1", "a2"]);
        add(&env, "b", &["b1", "b2"]);
        env.run(&["run", "a"]).code(0);
        let run = env.spawn("b", &["run", "b"]);
        wait_for("b's hold", || !env.events("b", "budget").is_empty());
        let held = env.events("b", "budget");
        assert_eq!(held[0]["fields"]["scope"], "pool");
        assert_eq!(held[0]["fields"]["name"], "openai");
        assert_eq!(held[0]["fields"]["until"], next_midnight().as_str());
        interrupt(run);
        assert!(starts(&env).iter().all(|s| s.0 == "a"), "{:?}", starts(&env));
        let status = env.status();
        let pool = &status["pools"][0];
        assert_eq!((pool["budget"]["spent"].as_f64(), pool["budget"]["reached"].as_bool()), (Some(0.5), Some(true)), "{pool}");
        let b = batch_json(&status, "b");
        assert_eq!(b["budget"], serde_json::Value::Null, "b has no budget of its own");
        let w = budget_waiting(b).expect("b waits for the pool's budget");
        assert_eq!(w["count"], 2);
        let text = env.run(&["status", "b"]).code(0).stdout.clone();
        assert!(text.contains("pool openai budget reached ($0.50 of $0.50 today)"), "{text}");
        // A pool of a budget alone has no limit to list before its calls.
        assert!(text.contains("pool openai: no rate or concurrency limit; today 2 calls"), "{text}");
    }

    /// Calls claimed before the budget was reached wait for their places
    /// in the pool's rate (one call every half second); the budget is
    /// reached meanwhile: none of them starts (the run spent $2.50 of $1.00
    /// when they did). At most one call may have started before the
    /// second's cost came in, on a slow machine.
    fn calls_waiting_for_the_pool_do_not_start_past_a_budget_reached(env) {
        away_from_midnight();
        let w = worker(&env, "0.50", "echo ok");
        env.config(&format!(
            "[limit.agent]\nrequests = \"2/s\"\nbudget = \"1.0/day\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"agent\"\nconcurrency = 4\n"
        ));
        add(&env, "a", &["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]);
        let run = env.spawn("a", &["run", "a"]);
        wait_for("the budget hold", || !env.events("a", "budget").is_empty());
        // Long enough for every waiting call to have had its place.
        std::thread::sleep(std::time::Duration::from_secs(3));
        interrupt(run);
        let started = starts(&env).len();
        assert!((2..=3).contains(&started), "{:?}", starts(&env));
        let pool = &env.status()["pools"][0];
        assert!(pool["budget"]["spent"].as_f64().unwrap() <= 1.5, "{pool}");
    }

    /// Failed attempts cost too: 0.20 per failing attempt against 0.50 a
    /// day stops the retries after the third attempt.
    fn failed_and_retried_attempts_count(env) {
        away_from_midnight();
        let w = worker(&env, "0.20", "exit 75");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nretries = 5\nmax_attempts = 10\nbackoff = \"0s\"\nbudget = \"0.50/day\"\n"
        ));
        add(&env, "a", &["k1"]);
        let run = env.spawn("a", &["run", "a"]);
        wait_for("the budget hold", || !env.events("a", "budget").is_empty());
        interrupt(run);
        let tried: Vec<_> = starts(&env).into_iter().map(|s| s.3).collect();
        assert_eq!(tried, [1, 2, 3], "the retry after the budget never started");
        let status = env.status();
        let b = &batch_json(&status, "a")["budget"];
        assert_eq!((b["attempts"].as_i64(), b["reached"].as_bool()), (Some(3), Some(true)), "{b}");
        assert!((b["spent"].as_f64().unwrap() - 0.6).abs() < 1e-9, "{b}");
    }

    /// `run --dry-run` estimates the pending items from the batch's recent
    /// mean cost per attempt, against the budget left, and says how many fit.
    fn a_dry_run_estimates_the_cost_against_the_budget_left(env) {
        away_from_midnight();
        let w = worker(&env, "0.25", "echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nbudget = \"2.0/day\"\n"
        ));
        add(&env, "a", &["k1", "k2", "k3", "k4"]);
        env.run(&["run", "a"]).code(0);
        let keys: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add(&env, "a", &keys);
        let before = env.snapshot();
        let text = env.run(&["run", "a", "--dry-run"]).code(0).stdout.clone();
        assert!(
            text.contains("estimate: 10 items would cost about $2.50 (mean $0.25 per attempt over 4 attempts of the last 1 run)"),
            "{text}"
        );
        assert!(
            text.contains("budget $1.00 of $2.00 today, resets 00:00Z: $1.00 left, 4 of the 10 fit before the reset"),
            "{text}"
        );
        let json = env.run(&["run", "a", "--dry-run", "--json"]).code(0).json();
        let e = &json["estimate"];
        assert_eq!((e["items"].as_i64(), e["cost"].as_f64(), e["attempts"].as_i64()), (Some(10), Some(2.5), Some(4)), "{e}");
        assert_eq!(e["budgets"][0]["fits"], 4);
        assert_eq!(e["budgets"][0]["left"], 1.0);
        assert_eq!(env.snapshot(), before, "a dry run writes nothing");
        assert_eq!(starts(&env).len(), 4);
    }

    /// Sums of costs are the ledger's millionths in every view: three
    /// calls at 0.10 spent 0.3, not 0.30000000000000004, and the 0.70
    /// left fits 7 more at 0.10 (in floats 6.99…, so 6).
    fn sums_of_costs_are_millionths_not_float_noise(env) {
        away_from_midnight();
        let w = worker(&env, "0.1", "echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nbudget = \"1.0/day\"\n"
        ));
        add(&env, "a", &["k1", "k2", "k3"]);
        env.run(&["run", "a"]).code(0);
        let status = env.status();
        let last = &batch_json(&status, "a")["last_run"];
        assert_eq!(last["counts"]["cost"], 0.3, "{last}");
        let keys: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add(&env, "a", &keys);
        let json = env.run(&["run", "a", "--dry-run", "--json"]).code(0).json();
        let e = &json["estimate"];
        assert_eq!((e["mean_cost"].as_f64(), e["cost"].as_f64()), (Some(0.1), Some(1.0)), "{e}");
        assert_eq!((e["budgets"][0]["left"].as_f64(), e["budgets"][0]["fits"].as_i64()), (Some(0.7), Some(7)), "{e}");
    }

    /// `max_cost` stops immediate retries too: a retry is a paid call, and
    /// three ran past a cap of 0.05 at 0.02 an attempt (to 0.12).
    fn max_cost_stops_immediate_retries_too(env) {
        let w = worker(&env, "0.02", "echo '{\"error_class\":\"Down\",\"transient\":true}' >&2; exit 75");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nmax_cost = 0.05\n\
             retries = 5\nbackoff = \"0s\"\nbackoff_max = \"0s\"\nmax_attempts = 10\n"
        ));
        add(&env, "a", &["k1", "k2", "k3"]);
        env.run(&["run", "a"]).code(1);
        // 0.02, 0.04, then 0.06 reaches the cap: nothing starts after it.
        assert_eq!(starts(&env).len(), 3, "{:?}", starts(&env));
        let summary = env.status()["batches"][0]["last_run"]["summary"].as_str().unwrap().to_string();
        assert!(summary.contains("stopped: max_cost reached"), "{summary}");
    }

    /// With `max_cost`, the dry run says how many items a run takes before
    /// it has spent that, where it said only that it would run them all;
    /// and a run then takes that many.
    fn a_dry_run_says_where_max_cost_stops_the_run(env) {
        let w = worker(&env, "0.25", "echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nmax_cost = 0.6\n"
        ));
        add(&env, "a", &["k1", "k2", "k3", "k4"]);
        env.run(&["run", "a"]).code(0);
        assert_eq!(starts(&env).len(), 3, "it claims while it has spent less than 0.60");
        let text = env.run(&["run", "a", "--dry-run"]).code(0).stdout.clone();
        assert!(
            text.contains("max_cost $0.60 a run: all 1 fit"),
            "{text}"
        );
        let keys: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add(&env, "a", &keys);
        let text = env.run(&["run", "a", "--dry-run"]).code(0).stdout.clone();
        assert!(
            text.contains("max_cost $0.60 a run: the run stops claiming once it has spent that, after about 3 of the 11"),
            "{text}"
        );
        let json = env.run(&["run", "a", "--dry-run", "--json"]).code(0).json();
        assert_eq!(json["estimate"]["max_cost"], serde_json::json!({"limit": 0.6, "fits": 3}));
        env.run(&["run", "a"]).code(0);
        assert_eq!(starts(&env).len(), 6, "the run took the 3 the dry run said");
    }

    /// Slots whose claims were made as the budget was reached give them
    /// back rather than keep them, claimed and counted "in flight" by
    /// every view, until the reset: once the calls in flight have
    /// finished, nothing is claimed, the rest wait for the budget, and a
    /// stop releases nothing more. (Four slots answering together: some
    /// claim as another's answer reaches the budget; before, those claims
    /// stayed until the reset.)
    fn claims_made_as_the_budget_is_reached_are_given_back(env) {
        away_from_midnight();
        let w = worker(&env, "0.3", "sleep 0.3; echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 4\nbudget = \"1.0/day\"\n"
        ));
        let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add(&env, "a", &keys);
        let run = env.spawn("a", &["run", "a"]);
        wait_for("the budget hold", || !env.events("a", "budget").is_empty());
        wait_for("the calls in flight to end, nothing kept claimed", || {
            env.int("SELECT count(*) FROM items WHERE status = 'claimed'") == 0
        });
        let status = env.status();
        let b = batch_json(&status, "a");
        let waiting = budget_waiting(b).expect("the rest wait for the budget");
        assert_eq!(waiting["count"], b["pending"], "{b}");
        let text = env.run(&["status", "a"]).code(0).stdout.clone();
        assert!(!text.contains("in flight"), "{text}");
        let given_back = env.events("a", "released");
        for e in &given_back {
            let m = e["message"].as_str().unwrap();
            assert!(m.starts_with("released back to pending: the batch is held until "), "{m}");
        }
        interrupt(run);
    }

    /// A claim given back at a hold does not use up `--limit`: the run
    /// still runs as many items as it was asked to. (k3's 429 holds the
    /// batch 2 s as the other slots answer and claim; before, each claim
    /// given back left the run one item short.)
    fn a_claim_given_back_at_a_hold_does_not_count_against_the_limit(env) {
        let w = worker(
            &env,
            "0",
            "sleep 0.3\nif [ \"$NIGHTSHIFT_KEY\" = k3 ] && [ \"$NIGHTSHIFT_ATTEMPT\" = 1 ]; then\n\
             echo '{\"error_class\":\"RateLimitError\",\"transient\":true,\"message\":\"429\",\"retry_after_s\":2}' >&2; exit 75\nfi\n\
             echo ok",
        );
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 4\nbackoff = \"0s\"\n"
        ));
        let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add(&env, "a", &keys);
        env.run(&["run", "a", "--limit", "10"]).code(0);
        let started: std::collections::BTreeSet<String> = starts(&env).into_iter().map(|s| s.1).collect();
        assert_eq!(started.len(), 10, "{started:?}");
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 10);
    }

    /// Persistent mode the same: a long-lived worker gets no request after
    /// the hold, and its answers' costs (at the top of the answer) count.
    fn a_persistent_worker_gets_no_request_after_the_budget(env) {
        require!(Tool::Python3);
        away_from_midnight();
        env.write(
            "pw.py",
            "import json, sys\nfor line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    with open(\"asked.log\", \"a\") as f:\n        f.write(k + \"\\n\")\n    print(json.dumps({\"key\": k, \"result\": 1, \"cost\": 0.25}), flush=True)\n",
        );
        env.config(
            "[batch.p]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\nconcurrency = 1\nbudget = \"0.50/day\"\n",
        );
        add(&env, "p", &["k1", "k2", "k3", "k4", "k5"]);
        let run = env.spawn("p", &["run", "p"]);
        wait_for("the budget hold", || !env.events("p", "budget").is_empty());
        interrupt(run);
        let asked = common::lines(&env.path("asked.log"));
        assert_eq!(asked, ["k1", "k2"], "no request after the budget");
        let status = env.status();
        let b = &batch_json(&status, "p")["budget"];
        assert_eq!((b["spent"].as_f64(), b["reached"].as_bool()), (Some(0.5), Some(true)), "{b}");
    }

    /// An attempt retried at once is a paid call: its cost is in the run's
    /// and the item's, as in the ledger and the summary. Two failures at
    /// 0.10, then a success at 0.10: 0.30 everywhere, and the dry run's
    /// mean is 0.10 an attempt (the run's stored 0.10 made it 0.033).
    fn a_retried_attempts_cost_is_in_its_run_and_its_item(env) {
        away_from_midnight();
        let w = worker(
            &env,
            "0.1",
            "if [ \"$NIGHTSHIFT_ATTEMPT\" -le 2 ]; then echo '{\"error_class\":\"Overloaded\",\"transient\":true}' >&2; exit 75; fi\necho ok",
        );
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nbackoff = \"0s\"\nbackoff_max = \"0s\"\nbudget = \"10/day\"\n"
        ));
        add(&env, "a", &["k1"]);
        let ran = env.run(&["run", "a", "--json"]).code(0).json();
        assert_eq!(ran["counts"]["cost"], 0.3, "{ran}");
        let status = env.status();
        let b = batch_json(&status, "a");
        assert_eq!(b["last_run"]["counts"]["cost"], 0.3, "{b}");
        assert_eq!(b["budget"]["spent"], 0.3, "{b}");
        let shown = env.run(&["show", "a", "k1"]).code(0).stdout.clone();
        assert!(shown.contains("cost:      $0.30"), "{shown}");
        add(&env, "a", &["k2"]);
        let json = env.run(&["run", "a", "--dry-run", "--json"]).code(0).json();
        assert_eq!(json["estimate"]["mean_cost"], 0.1, "{json}");
    }

    /// A call stopped before its answer (a cancel, a stop) was paid all
    /// the same: what it reported it cost counts in the budget, the run and
    /// the item, and its tokens in its pool.
    fn a_call_stopped_before_its_answer_counts_what_it_reported(env) {
        away_from_midnight();
        let log = env.path("starts.log");
        let w = env.script(
            "reports_then_hangs.sh",
            &format!(
                "cat >/dev/null\necho '@nightshift cost=0.5' >&2\necho '@nightshift usage input_tokens=100 output_tokens=7' >&2\n\
                 echo \"$NIGHTSHIFT_BATCH $NIGHTSHIFT_KEY $(date +%s%3N) $NIGHTSHIFT_ATTEMPT\" >> '{}'\nexec sleep 60\n",
                log.display()
            ),
        );
        env.config(&format!(
            "[batch.a]\nworker = [\"{}\"]\nconcurrency = 1\ngrace = \"1s\"\nbudget = \"10/day\"\nlimit = \"p\"\n\n\
             [limit.p]\ntokens = \"100000/min\"\n",
            w.display()
        ));
        add(&env, "a", &["k1", "k2"]);
        let run = env.spawn("a", &["run", "a"]);
        wait_for("k1 started", || starts(&env).len() == 1);
        env.run(&["cancel", "a", "k1"]).code(0);
        wait_for("k2 started", || starts(&env).len() == 2);
        env.run(&["stop", "a"]).code(0);
        let mut run = run;
        run.wait().unwrap();
        let status = env.status();
        let b = batch_json(&status, "a");
        assert_eq!(b["budget"]["spent"], 1.0, "both calls count: {b}");
        assert_eq!(b["last_run"]["counts"]["cost"], 1.0, "{b}");
        for key in ["k1", "k2"] {
            let shown = env.run(&["show", "a", key]).code(0).stdout.clone();
            assert!(shown.contains("cost:      $0.50"), "{key}: {shown}");
            assert!(shown.contains("100 in + 7 out"), "{key}: {shown}");
        }
    }

    /// Costs under a millionth (20 tokens of an embedding: $0.0000004) add
    /// up in the ledger, the run and `show`: each was rounded alone to 0,
    /// and a budget they should reach never was.
    fn costs_under_a_millionth_add_up(env) {
        away_from_midnight();
        let w = worker(&env, "0.0000004", "echo ok");
        env.config(&format!(
            "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nbudget = \"0.000002/day\"\n"
        ));
        let keys: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add(&env, "a", &keys);
        let run = env.spawn("a", &["run", "a"]);
        wait_for("the budget hold", || !env.events("a", "budget").is_empty());
        interrupt(run);
        // 0.0000004 × 5 reaches 0.000002: no sixth call starts.
        assert_eq!(starts(&env).len(), 5, "{:?}", starts(&env));
        let status = env.status();
        let b = batch_json(&status, "a");
        assert_eq!(b["budget"]["spent"], 0.000002, "{b}");
        let shown = env.run(&["show", "a", "e0"]).code(0).stdout.clone();
        assert!(shown.contains("cost:      $0.0000004"), "{shown}");
    }

    /// One amount, one rounding: a cost finer than a millionth is cut down
    /// to it alike in the run's summary, its `counts`, the budget it drew
    /// on and `show` (the summary and the budget cut it down while the
    /// counts and `show` rounded it up: two amounts in one JSON object).
    fn a_cost_reads_the_same_in_every_view(env) {
        away_from_midnight();
        for (batch, cost, shown, amount) in [
            ("a", "0.123456789", "$0.123456", 0.123456),
            ("b", "0.0000019", "$0.000001", 0.000001),
        ] {
            let w = common::cost_worker(&env, cost);
            env.config(&format!(
                "[batch.{batch}]\nworker = [\"{}\"]\nbudget = \"100/day\"\n",
                w.display()
            ));
            add(&env, batch, &["x"]);
            let out = env.run(&["run", batch]).code(0).stdout.clone();
            assert!(out.contains(&format!("spent {shown},")), "{out}");
            let status = env.status();
            let b = batch_json(&status, batch);
            assert_eq!(b["last_run"]["counts"]["cost"], amount, "{b}");
            assert_eq!(b["budget"]["spent"], amount, "{b}");
            let summary = b["last_run"]["summary"].as_str().unwrap();
            assert!(summary.contains(&format!("spent {shown},")), "{summary}");
            let show = env.run(&["show", batch, "x"]).code(0).stdout.clone();
            assert!(show.contains(&format!("cost:      {shown}\n")), "{show}");
            let text = env.run(&["status"]).code(0).stdout.clone();
            assert!(text.contains(&format!("budget {shown} of $100.00 today")), "{text}");
        }
    }

    /// The defect: a budget changed in the config file while a run lived
    /// was not the live run's (`status` reads the file at once). Raised
    /// past its spend, the run kept waiting for the reset (the day's end)
    /// while `status` said the runner holding the lock was taking its
    /// items; lowered under its spend, the run went on spending while
    /// every view said `budget reached`. The run follows the file, as it
    /// does its pool's limits.
    fn a_budget_changed_in_the_config_applies_to_the_live_run(env) {
        away_from_midnight();
        let w = worker(&env, "0.25", "echo ok");
        let config = |budget: &str| {
            env.config(&format!(
                "[batch.a]\nworker = [\"{w}\"]\nconcurrency = 1\nbudget = \"{budget}/day\"\n"
            ));
        };
        // Raised: the run waiting for the reset goes on at once.
        config("0.50");
        add(&env, "a", &["k1", "k2", "k3", "k4"]);
        let mut run = env.spawn("a", &["run", "a"]);
        wait_for("the budget hold", || !env.events("a", "budget").is_empty());
        assert_eq!(starts(&env).len(), 2, "{:?}", starts(&env));
        config("10.00");
        wait_for("the run going on under the raised budget", || starts(&env).len() == 4);
        assert!(run.wait().unwrap().success(), "{:?}", env.output_of("a"));
        let status = env.status();
        let b = batch_json(&status, "a");
        assert_eq!((b["budget"]["spent"].as_f64(), b["budget"]["reached"].as_bool()), (Some(1.0), Some(false)), "{b}");
        // Lowered under what is spent while a call is in flight: no call
        // starts after it.
        config("10.00");
        add(&env, "a", &["slow", "k5", "k6"]);
        let run = env.spawn("b", &["run", "a"]);
        wait_for("the slow call in flight", || starts(&env).len() == 5);
        config("0.80");
        wait_for("the hold of the lowered budget", || env.events("a", "budget").len() == 2);
        std::fs::write(env.path("release"), "").unwrap();
        wait_for("the slow item done", || env.item("slow").0 == "done");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("2 wait: budget reached"), "{text}");
        interrupt(run);
        assert_eq!(starts(&env).len(), 5, "{:?}", starts(&env));
    }
}
