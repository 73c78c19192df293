//! The runner's pace and its stops: rate-limit holds, max_cost,
//! max_duration, SIGTERM with a grace period, a pause from the CLI. Real
//! binary, real workers, real signals; each test on both backends.
#![cfg(unix)]

use crate::support as common;

use std::path::Path;

use common::{add_keys, assert_no_process_left, signal, stdout, wait_for};
use nix::sys::signal::Signal;

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Immediate retries and redrives that never wait.
const NO_WAIT: &str = "retries = 2\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n";

/// The time windows of the tests that need one, shortest first (seconds).
/// A loaded machine can take seconds to start a run, and a window it
/// missed proves nothing: such a test goes again with the next one.
const PACES: [u32; 3] = [1, 4, 16];

/// Runs `attempt` at each of [`PACES`] in turn, on a fresh store after the
/// first, until one is conclusive (`Ok`); the last one's `Err` fails.
fn at_some_pace(env: common::Env, attempt: impl Fn(&common::Env, u32) -> Result<(), String>) {
    let mut env = env;
    for (i, pace) in PACES.into_iter().enumerate() {
        match attempt(&env, pace) {
            Ok(()) => return,
            Err(why) if i + 1 < PACES.len() => {
                eprintln!("inconclusive with a window of {pace} s ({why}): again, longer");
                env = common::Env::for_backend(env.backend).unwrap();
            }
            Err(why) => panic!("{why}"),
        }
    }
}

/// A run told to hold for `2 × pace` s, with nothing else pending, ends at
/// once; the next run, started within the hold, waits it out before
/// claiming and says so. `Err` when this machine was too slow to tell.
fn hold_outlives_its_run(env: &common::Env, pace: u32) -> Result<(), String> {
    env.config("[batch.b]\nretries = 0\nconcurrency = 1\n");
    add_keys(env, "b", &["r"]);
    let w = p(&env.script(
        "w.sh",
        &format!(
            r#"cat >/dev/null
if [ "$NIGHTSHIFT_KEY" = r ]; then
  echo '{{"error_class":"RateLimitError","transient":true,"retry_after_s":{}}}' >&2
  exit 1
fi
echo '"ok"'"#,
            2 * pace
        ),
    ));
    let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let hold_until = env.int("SELECT hold_until FROM batches WHERE name = 'b'");
    let finished = env.int("SELECT at FROM events WHERE kind = 'run-finished'");
    // The next cycle, started at once, waits out the hold before claiming.
    add_keys(env, "b", &["x"]);
    env.cmd().args(["run", "b", "--", &w]).assert().success();
    assert_eq!(env.item("x").0, "done");
    let claimed_at = env.int("SELECT at FROM events WHERE kind = 'claimed' AND key = 'x'");
    assert!(
        claimed_at >= hold_until,
        "claimed {} ms early",
        hold_until - claimed_at
    );
    // Nothing else was pending: the run did not sit out its hold.
    if finished >= hold_until {
        return Err(format!(
            "the run waited for nothing: it ended {} ms after its hold",
            finished - hold_until
        ));
    }
    let told = env.int("SELECT count(*) FROM events WHERE kind = 'hold'");
    if told != 2 {
        return Err(format!(
            "{told} hold events, not 2 (the answer, and the next run waiting for it)"
        ));
    }
    Ok(())
}

/// `--max-duration` of `pace` s on four times the work: the run stops
/// claiming, ends what it holds and leaves the rest pending. `Err` when
/// starting the run took the whole window (nothing done).
fn max_duration_stops_claiming_at(env: &common::Env, pace: u32) -> Result<(), String> {
    let n = 20 * i64::from(pace);
    env.config("[batch.b]\nconcurrency = 1\n");
    env.add_items("b", n as usize);
    let w = p(&env.script("w.sh", "cat >/dev/null\nsleep 0.2\necho '\"ok\"'"));
    let limit = format!("{pace}s");
    let out = env
        .cmd()
        .args(["run", "b", "--max-duration", &limit, "--", &w])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("stopped: max_duration reached"),
        "{}",
        stdout(&out)
    );
    let done = env.int("SELECT count(*) FROM items WHERE status = 'done'");
    assert!(done < n, "{done} done: all of them");
    assert_eq!(
        env.int("SELECT count(*) FROM items WHERE status = 'claimed'"),
        0
    );
    assert_eq!(
        env.int("SELECT count(*) FROM items WHERE status = 'pending'"),
        n - done
    );
    if done == 0 {
        return Err(format!("nothing done within {pace} s"));
    }
    // It stopped where it was set to: ok (it was `aborted`), and why.
    assert_eq!(
        env.strings("SELECT state || ' ' || stopped FROM runs"),
        ["ok max_duration"]
    );
    Ok(())
}

both_backends! {
    // ---- Pace and cost ----

    // Slow (about 2 s): waits out a 2 s hold.
    fn a_rate_limit_answer_holds_the_whole_batch(env) {
        env.config(&format!("[batch.b]\n{NO_WAIT}concurrency = 2\n"));
        add_keys(&env, "b", &["r", "a1", "a2", "a3", "a4", "a5", "a6"]);
        let w = p(&env.script(
            "w.sh",
            r#"cat >/dev/null
if [ "$NIGHTSHIFT_KEY" = r ] && [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
  echo '{"error_class":"RateLimitError","transient":true,"message":"429","retry_after_s":2}' >&2
  date +%s%3N >answered
  exit 1
fi
sleep 0.1
echo '"ok"'"#,
        ));
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            7
        );
        // The runner reads the answer after the worker wrote it, so the hold
        // ends 2 s after that at the earliest (the hold event is written later
        // still, by how much depends on the machine's load).
        let answered: i64 = std::fs::read_to_string(env.path("answered"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let hold_until = env.int("SELECT hold_until FROM batches WHERE name = 'b'");
        assert!(hold_until >= answered + 2000, "{hold_until} < {answered} + 2000");
        let hold_at = env.int("SELECT at FROM events WHERE kind = 'hold'");
        // While held, no slot claimed anything (the 100 ms margin covers a claim
        // already on its way when the answer came).
        let claims_while_held = env.int(&format!(
            "SELECT count(*) FROM events WHERE kind = 'claimed' AND at > {} AND at < {}",
            hold_at + 100,
            hold_until
        ));
        assert_eq!(claims_while_held, 0, "claims during the hold");
        // The rate-limited item waited out its retry_after and then succeeded.
        assert_eq!(env.item("r"), ("done".into(), None, 2));
    }

    // Slow (about 2 s): waits out a 2 s hold.
    fn a_rate_limit_hold_outlives_the_run_that_got_it(env) {
        at_some_pace(env, hold_outlives_its_run);
    }

    fn max_cost_stops_claiming(env) {
        env.config("[batch.b]\nconcurrency = 1\nmax_cost = 2.5\n");
        env.add_items("b", 10);
        let w = p(&env.script("w.sh", "cat >/dev/null\necho '{\"cost\": 1.0}'"));
        let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
        assert!(
            out.status.success(),
            "stopping at max_cost is not a failure"
        );
        let line = stdout(&out);
        assert!(
            line.contains("3 done") && line.contains("spent $3.00"),
            "{line}"
        );
        assert!(line.contains("stopped: max_cost reached"), "{line}");
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'pending'"),
            7
        );
        // It did what it was set to: ok, not aborted, and why it stopped
        // is kept with it.
        assert_eq!(env.strings("SELECT state || ' ' || stopped FROM runs"), ["ok max_cost"]);
    }

    /// A run its `max_duration` or `max_cost` stopped, with nothing failed,
    /// is `ok` in every view, as its exit code 0 says, and each view says
    /// why it stopped: `status` and `--json` (`stopped`), `--short` (while
    /// what it left waits), the metrics (`nightshift_last_run_success` 1,
    /// its `stopped` label). It was `aborted` everywhere and a failure to
    /// the metrics, where the README keeps `aborted` for a signal or
    /// `nightshift stop`. With a failure in it, it is `failed`, exits 1
    /// and alerts.
    fn a_run_its_limit_stopped_is_ok_in_every_view_and_says_why(env) {
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\nif [ \"$NIGHTSHIFT_KEY\" = bad ]; then\n  \
             echo '{\"error_class\":\"BadInput\",\"transient\":false,\"cost\":1.0}' >&2; exit 1\nfi\n\
             echo '{\"cost\": 1.0}'",
        ));
        let alert = "alert = [\"sh\", \"-c\", \"cat > \\\"alerted-$NIGHTSHIFT_BATCH.json\\\"\"]";
        env.config(&format!(
            "[batch.b]\nworker = [\"{w}\"]\nconcurrency = 1\nmax_cost = 2.5\n{alert}\n"
        ));
        env.add_items("b", 10);
        let ran = env.run(&["run", "b", "--json"]);
        ran.code(0);
        let json: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
        assert_eq!((&json["state"], &json["stopped"]), (&"ok".into(), &"max_cost".into()), "{json}");
        assert!(!env.path("alerted-b.json").exists(), "nothing failed: no alert");

        let status = env.status();
        let last = &status["batches"][0]["last_run"];
        assert_eq!(
            (&last["state"], &last["recorded_state"], &last["stopped"]),
            (&"ok".into(), &"ok".into(), &"max_cost".into()),
            "{last}"
        );
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("last run #1 ok ("), "{text}");
        assert!(text.contains("stopped: max_cost reached"), "{text}");
        let short = env.run(&["status", "--short"]).code(0).stdout.clone();
        assert_eq!(short.trim(), "b 3✓ 7… max_cost");
        let metrics = env.run(&["status", "--prometheus"]).code(0).stdout.clone();
        let sample = "nightshift_last_run_success{batch=\"b\",state=\"ok\",stopped=\"max_cost\"}";
        assert_eq!(common::metric(&metrics, sample), 1.0, "{metrics}");
        // The next run that takes what it left ends the mark.
        env.config(&format!("[batch.b]\nworker = [\"{w}\"]\nconcurrency = 1\n"));
        env.run(&["run", "b"]).code(0);
        let short = env.run(&["status", "--short"]).code(0).stdout.clone();
        assert_eq!(short.trim(), "b 10✓");

        // A failure in a run its limit stopped: failed, 1, alerted.
        env.config(&format!(
            "[batch.f]\nworker = [\"{w}\"]\nconcurrency = 1\nmax_cost = 2.5\nretries = 0\n{alert}\n"
        ));
        common::add_keys(&env, "f", &["bad", "k1", "k2", "k3"]);
        let ran = env.run(&["run", "f"]);
        ran.code(1);
        assert!(ran.stdout.contains("stopped: max_cost reached"), "{ran:?}");
        let status = env.status();
        let f = status["batches"].as_array().unwrap().iter().find(|b| b["name"] == "f");
        let last = &f.unwrap()["last_run"];
        assert_eq!((&last["state"], &last["stopped"]), (&"failed".into(), &"max_cost".into()), "{last}");
        let alerted: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(env.path("alerted-f.json")).unwrap()).unwrap();
        assert_eq!(alerted["state"], "failed", "{alerted}");
    }

    // ---- Stopping: deadline, signals, pause ----

    fn max_duration_stops_claiming(env) {
        at_some_pace(env, max_duration_stops_claiming_at);
    }

    // Slow (about 3 s): the grace period.
    fn sigterm_gives_in_flight_items_the_grace_period_then_releases_them(env) {
        env.config("[batch.b]\nconcurrency = 2\ngrace = \"3s\"\nmax_attempts = 1\n");
        add_keys(&env, "b", &["quick", "slow", "later1", "later2"]);
        let started = env.path("started");
        std::fs::create_dir(&started).unwrap();
        let marker = format!("sigterm-{}", env.dir.path().display());
        let gate = env.path("gate");
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\ntouch {dir}/$NIGHTSHIFT_KEY\n\
                 if [ \"$NIGHTSHIFT_KEY\" = quick ]; then\n\
                   while [ ! -e {gate} ]; do sleep 0.02; done; echo '\"ok\"'; exit 0\n\
                 fi\n\
                 sh -c 'sleep 1000; :' {marker}\necho '\"ok\"'",
                dir = p(&started),
                gate = p(&gate)
            ),
        ));
        let mut runner = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("both workers started", || {
            started.join("quick").exists() && started.join("slow").exists()
        });
        signal(runner.id(), Signal::SIGTERM);
        // `quick` ends once the stop is taken (said after it is set), so
        // its slot cannot claim `later1` ahead of the signal.
        wait_for("the graceful stop to begin", || {
            env.output_of("run").1.contains("nightshift: stopping")
        });
        std::fs::write(&gate, "").unwrap();
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{:?}", env.output_of("run"));

        assert_eq!(
            env.item("quick").0,
            "done",
            "finished within the grace period"
        );
        // Released, and the interrupted attempt does not count against
        // max_attempts (1 here): the next cycle may run it.
        assert_eq!(env.item("slow"), ("pending".into(), None, 0));
        assert_eq!(env.item("later1"), ("pending".into(), None, 0));
        assert_eq!(env.run_states(), ["aborted"]);
        assert_eq!(env.int("SELECT released FROM runs"), 1);
        assert!(env.event_kinds().contains(&"released".to_string()));
        assert_no_process_left(&marker);
        let (out, _) = env.output_of("run");
        assert!(out.contains("stopped: interrupted"), "{out}");
    }

    // Slow (about 4 s): three cycles of 0.1 s items.
    fn pausing_from_the_cli_mid_run_stops_claiming(env) {
        // Default lock_ttl (60 s): the pause is noticed well before the next
        // lock renewal (20 s), while 30 items take 3 s.
        env.config("[batch.b]\nconcurrency = 1\n");
        env.add_items("b", 30);
        let w = p(&env.script("w.sh", "cat >/dev/null\nsleep 0.1\necho '\"ok\"'"));
        let mut runner = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("two items done", || {
            env.int("SELECT count(*) FROM items WHERE status = 'done'") >= 2
        });
        env.cmd()
            .args(["pause", "b", "--reason", "deploy in progress"])
            .assert()
            .success();
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{:?}", env.output_of("run"));
        let done = env.int("SELECT count(*) FROM items WHERE status = 'done'");
        assert!(done < 30, "stopped claiming ({done} done)");
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'claimed'"),
            0
        );
        assert_eq!(env.run_states(), ["paused"]);
        let (out, _) = env.output_of("run");
        assert!(out.contains("paused: deploy in progress"), "{out}");

        // Paused: a run does nothing; unpaused: it finishes the rest.
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            done
        );
        env.cmd().args(["unpause", "b"]).assert().success();
        env.cmd().args(["run", "b", "--", &w]).assert().success();
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            30
        );
    }
}
