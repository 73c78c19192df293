//! The batch lock and fencing: never two runners on one batch, a crashed
//! runner replaced at once on its own host and after the TTL elsewhere, a
//! live one kept by its heartbeat, and results of a runner that was taken
//! over rejected by their lease tokens. Each test on both backends.
#![cfg(unix)]

use crate::support as common;
use nightshift::util::time::now_ms;

use std::path::Path;

use common::{Env, lines, pids_with, signal, tally, wait_for};
use nix::sys::signal::Signal;

use nightshift::model::{EventKind, Holder, NewEvent, NewItem, Outcome, Tier, Trigger};
use nightshift::store::{Completion, Failure, LockOutcome, Retrying, Store};

fn p(path: &Path) -> String {
    path.display().to_string()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Kills what a test left running on purpose: the workers of a runner it
/// SIGKILLed, found by the marker, with their whole process group (the
/// worker, its `sh -c`, and the `sleep` whose command line has no marker).
fn kill_leftovers(env: &Env) {
    for pid in pids_with(&marker(env)) {
        let pid = nix::unistd::Pid::from_raw(pid as i32);
        if let Ok(group) = nix::unistd::getpgid(Some(pid))
            && group != nix::unistd::getpgrp()
        {
            let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
        }
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
    }
}

fn marker(env: &Env) -> String {
    format!("{}/slow-marker", env.dir.path().display())
}

/// A worker that appends `HOST KEY` to `side-effects.log` and answers with
/// its host (`NIGHTSHIFT_HOST`, inherited from its runner). When its runner
/// was started with `SLOW=N`, it first sleeps N seconds.
fn worker(env: &Env) -> String {
    p(&env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\ntouch {dir}/started-$NIGHTSHIFT_KEY\n\
             if [ -n \"$SLOW\" ]; then sh -c \"sleep $SLOW; :\" {marker} || exit 1; fi\n\
             echo \"${{NIGHTSHIFT_HOST:-local}} $NIGHTSHIFT_KEY\" >> {dir}/side-effects.log\n\
             echo \"\\\"${{NIGHTSHIFT_HOST:-local}}\\\"\"",
            dir = env.dir.path().display(),
            marker = marker(env),
        ),
    ))
}

fn side_effects(env: &Env) -> Vec<String> {
    lines(&env.path("side-effects.log"))
}

/// Runner `a` of batch `b` on "another host" (`host-x`), `-j 1`, its
/// workers slow (`SLOW`), once it has started k1.
fn slow_on_host_x(env: &Env, w: &str) -> common::Background {
    let a = env.spawn_with(
        "a",
        &["run", "b", "-j", "1", "--", w],
        &[("NIGHTSHIFT_HOST", "host-x"), ("SLOW", "1000")],
    );
    wait_for("k1 started", || env.path("started-k1").exists());
    a
}

/// A run of batch `b` on "another host" (`host-y`), as it ended.
fn run_on_host_y(env: &Env, w: &str) -> std::process::Output {
    env.cmd()
        .env("NIGHTSHIFT_HOST", "host-y")
        .args(["run", "b", "--", w])
        .output()
        .unwrap()
}

/// Waits until the batch lock in the store has expired.
fn wait_for_lock_expiry(env: &Env) {
    wait_for("the lock to expire", || {
        env.int("SELECT coalesce(max(expires_at), 0) FROM locks") < now_ms() - 50
    });
}

/// A runner of batch `b` (`-j 1`, slow workers) SIGKILLed while k1 runs:
/// k1 stays claimed, its seat stays, and its worker hangs on in its own
/// process group (marked, so it can be found).
fn crash_while_k1_runs(env: &Env, w: &str) {
    let mut a = env.spawn_with("a", &["run", "b", "-j", "1", "--", w], &[("SLOW", "1000")]);
    wait_for("k1 started", || env.path("started-k1").exists());
    // The guard as well, or it stops the worker itself.
    common::kill_runner_and_guard(a.id());
    a.wait().unwrap();
    assert_eq!(env.item("k1").0, "claimed");
    assert_eq!(env.int("SELECT count(*) FROM locks"), 1, "the lock stayed");
    // It marks its start before it starts the marked sleep: wait for that.
    wait_for("the orphaned worker's sleep", || {
        pids_with(&marker(env)).len() == 1
    });
}

/// The re-run after [`crash_while_k1_runs`]: it stops the orphaned worker
/// before it runs k1 again (the item never runs twice at once, its side
/// effect happens once), takes back its claim, runs all three and leaves
/// no seat.
fn rerun_replaces_it(env: &Env, w: &str) {
    let out = env.cmd().args(["run", "b", "--", w]).output().unwrap();
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("3 done"), "{}", stdout(&out));
    assert_eq!(env.run_states(), ["crashed", "ok"]);
    assert!(
        pids_with(&marker(env)).is_empty(),
        "the dead run's worker stopped"
    );
    let mut effects = side_effects(env);
    effects.sort();
    assert_eq!(effects, ["local k1", "local k2", "local k3"]);
    assert_eq!(
        env.int("SELECT count(*) FROM locks"),
        0,
        "released at the end"
    );
}

fn event(batch: &str, kind: EventKind) -> NewEvent {
    NewEvent::new(now_ms(), batch, kind, kind.as_str())
}

both_backends! {
    fn two_runs_started_at_once_one_processes_the_other_steps_down(env) {
        env.config("[batch.b]\nconcurrency = 2\n");
        let log = env.path("side-effects.log");
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\nsleep 0.2\necho \"$NIGHTSHIFT_KEY\" >> {}\necho '\"ok\"'",
                p(&log)
            ),
        ));
        for round in 0..3 {
            let items: String = (0..6)
                .map(|i| format!("{{\"key\":\"r{round}-{i}\"}}\n"))
                .collect();
            let file = env.write("round.jsonl", &items);
            env.cmd().args(["add", "b"]).arg(file).assert().success();

            let (ta, tb) = (format!("a{round}"), format!("b{round}"));
            let mut a = env.spawn(&ta, &["run", "b", "--", &w]);
            let mut b = env.spawn(&tb, &["run", "b", "--", &w]);
            assert!(a.wait().unwrap().success(), "{:?}", env.output_of(&ta));
            assert!(b.wait().unwrap().success(), "{:?}", env.output_of(&tb));
            let outs = [env.output_of(&ta).0, env.output_of(&tb).0];
            let held = outs.iter().filter(|o| o.contains("lock-held")).count();
            assert_eq!(held, 1, "exactly one stepped down: {outs:?}");
            assert!(outs.iter().any(|o| o.contains("6 done")), "{outs:?}");
        }
        let mut states = env.run_states();
        states.sort();
        assert_eq!(
            states,
            ["lock-held", "lock-held", "lock-held", "ok", "ok", "ok"]
        );
        let seen = tally(&lines(&log));
        assert_eq!(seen.len(), 18);
        assert!(seen.values().all(|n| *n == 1), "a key ran twice: {seen:?}");
    }

    /// A dry run beside a live runner holding the lock: a run would step
    /// down and run nothing. It said so, then "would run 2 items" and
    /// listed them beside "2 wait for the runner that holds the lock".
    /// With --wait, the list is what the batch holds now, said so.
    fn a_dry_run_beside_the_lock_holder_lists_nothing_it_would_not_run(env) {
        env.add_items("b", 3);
        let w = worker(&env);
        let mut a = env.spawn_with("a", &["run", "b", "-j", "1", "--", &w], &[("SLOW", "1000")]);
        wait_for("k1 started", || env.path("started-k1").exists());
        let dry = env.run(&["run", "b", "--dry-run", "--", &w]).code(0).stdout.clone();
        assert!(dry.contains("holds the lock: a run would step down (or wait with --wait)"), "{dry}");
        assert!(!dry.contains("would run"), "{dry}");
        assert!(!dry.contains("KEY"), "no list: {dry}");
        assert!(dry.contains("nothing to run now: 2 wait for the runner that holds the lock"), "{dry}");
        let waiting = env.run(&["run", "b", "--dry-run", "--wait", "--", &w]).code(0).stdout.clone();
        assert!(waiting.contains("b: with --wait, once the lock is free, as the batch stands now:\nb: would run 2 items"), "{waiting}");
        signal(a.id(), Signal::SIGTERM);
        a.wait().unwrap();
        kill_leftovers(&env);
    }

    fn a_crashed_runner_on_this_host_is_replaced_at_once(env) {
        env.add_items("b", 3);
        let w = worker(&env);
        crash_while_k1_runs(&env, &w);
        // Same host, holder's pid gone: no TTL (60 s by default) to wait out.
        rerun_replaces_it(&env, &w);
        assert!(env.event_kinds().contains(&"orphans-stopped".to_string()));
        assert_eq!(
            env.strings("SELECT message FROM events WHERE kind = 'lock-takeover'")
                .len(),
            1
        );
    }

    /// With seats to spare (`runners = 2`) the re-run took a free seat and
    /// left the dead runner's: its run kept the seat, so the re-run's
    /// take-over passed over it, its worker ran on beside the re-run and
    /// its claim waited for the heartbeat's sweep (a second in), while a
    /// short re-run ended "ok" with the claim still out. A dead holder's
    /// seat is freed by the run that comes after it, whatever seats are free.
    fn a_crashed_runner_sharing_the_batch_is_replaced_at_once_though_seats_are_free(env) {
        env.config("[batch.b]\nrunners = 2\n");
        env.add_items("b", 3);
        let w = worker(&env);
        crash_while_k1_runs(&env, &w);
        rerun_replaces_it(&env, &w);
    }

    fn claims_of_a_run_already_marked_crashed_are_taken_back_at_once(env) {
        env.add_items("b", 3);
        let w = worker(&env);
        let mut a = env.spawn_with("a", &["run", "b", "-j", "1", "--", &w], &[("SLOW", "1000")]);
        wait_for("k1 started", || env.path("started-k1").exists());
        signal(a.id(), Signal::SIGKILL);
        a.wait().unwrap();
        kill_leftovers(&env);
        // As left by a re-run that was itself killed after stopping the dead
        // run's workers and marking it crashed, before taking its claims back.
        env.exec("UPDATE runs SET state = 'crashed'");
        assert_eq!(env.item("k1").0, "claimed");

        // The claim's lease (60 s) has not expired; it is taken back anyway.
        let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
        assert!(stdout(&out).contains("3 done"), "{}", stdout(&out));
        assert_eq!(env.item("k1"), ("done".into(), None, 2));
    }

    /// The seat's expiry is set in the store rather than waited for: a
    /// fixed wait would race the TTL on a busy machine (the dead holder's
    /// last renewal, and this runner's start, come at unknown moments).
    fn a_lock_held_under_another_host_is_taken_over_only_after_its_ttl(env) {
        env.config("[batch.b]\nlock_ttl = \"3s\"\n");
        env.add_items("b", 2);
        let w = worker(&env);
        let mut a = slow_on_host_x(&env, &w);
        signal(a.id(), Signal::SIGKILL);
        a.wait().unwrap();
        kill_leftovers(&env);

        // From host-y, host-x's pid means nothing: the lock stands until its TTL.
        env.exec(&format!("UPDATE locks SET expires_at = {}", now_ms() + 3_600_000));
        let run_y = || run_on_host_y(&env, &w);
        let out = run_y();
        assert!(out.status.success());
        assert!(stdout(&out).contains("lock-held"), "{}", stdout(&out));
        assert!(
            stdout(&out).contains("host-x"),
            "names the holder: {}",
            stdout(&out)
        );
        assert_eq!(env.item("k1").0, "claimed");

        env.exec(&format!("UPDATE locks SET expires_at = {}", now_ms() + 500));
        wait_for_lock_expiry(&env);
        let out = run_y();
        assert!(out.status.success(), "{}", stdout(&out));
        assert!(stdout(&out).contains("2 done"), "{}", stdout(&out));
        assert_eq!(env.run_states(), ["crashed", "lock-held", "ok"]);
        let why = env.strings("SELECT message FROM events WHERE kind = 'lock-takeover'");
        assert!(
            why[0].contains("host-x") && why[0].contains("expired"),
            "{why:?}"
        );
        let mut effects = side_effects(&env);
        effects.sort();
        assert_eq!(effects, ["host-y k1", "host-y k2"]);
    }

    /// A runner stopped past its TTL (SIGSTOP: a debugger, a frozen VM)
    /// on another host cannot be reached from the host that takes its
    /// items over: its own guard stops its workers once its seat lapses,
    /// so no item runs twice at once; resumed, it finds its lock lost and
    /// records nothing of them.
    fn a_stopped_runners_workers_stop_when_its_seat_lapses(env) {
        env.config("[batch.b]\nlock_ttl = \"3s\"\n");
        env.add_items("b", 2);
        let w = worker(&env);
        let mut a = slow_on_host_x(&env, &w);
        wait_for("its worker's sleep", || pids_with(&marker(&env)).len() == 1);
        signal(a.id(), Signal::SIGSTOP);
        wait_for_lock_expiry(&env);
        // From now on host-y may take k1 over: the frozen runner's worker
        // must not run on beside it.
        wait_for("the stopped runner's worker stopped", || {
            pids_with(&marker(&env)).is_empty()
        });

        let out = run_on_host_y(&env, &w);
        assert!(out.status.success(), "{}", stdout(&out));
        assert!(stdout(&out).contains("2 done"), "{}", stdout(&out));

        signal(a.id(), Signal::SIGCONT);
        let code = a.wait().unwrap();
        let (out_a, err_a) = env.output_of("a");
        assert_eq!(code.code(), Some(1), "{out_a}{err_a}");
        assert!(out_a.contains("lost the batch lock"), "{out_a}");
        let mut effects = side_effects(&env);
        effects.sort();
        assert_eq!(effects, ["host-y k1", "host-y k2"]);
        assert_eq!(env.item("k1").0, "done");
        kill_leftovers(&env);
    }

    // Slow (about 4 s): an item that outlives two TTLs. Each try comes
    // right after a renewal was seen, past the expiry before it: a fixed
    // sleep would race the heartbeat, and a 1 s TTL a busy machine's
    // scheduling (its heartbeat then lapses in earnest, and a remote
    // runner rightly takes over).
    fn a_live_runner_slower_than_the_ttl_keeps_its_lock(env) {
        env.config("[batch.b]\nlock_ttl = \"2s\"\n");
        env.add_items("b", 1);
        let w = worker(&env);
        // One item that runs until the test is done trying.
        let go = env.path("go");
        let slow = p(&env.script(
            "slow.sh",
            &format!(
                "cat >/dev/null
touch {dir}/started-$NIGHTSHIFT_KEY
                 while [ ! -e {go} ]; do sleep 0.02; done
                 echo \"$NIGHTSHIFT_HOST $NIGHTSHIFT_KEY\" >> {dir}/side-effects.log
                 echo '\"done\"'",
                dir = env.dir.path().display(),
                go = go.display(),
            ),
        ));
        let mut a = env.spawn_with(
            "a",
            &["run", "b", "--", &slow],
            &[("NIGHTSHIFT_HOST", "host-x")],
        );
        wait_for("k1 started", || env.path("started-k1").exists());
        let expiry = || env.int("SELECT coalesce(max(expires_at), 0) FROM locks");
        let mut seen = expiry();
        for _ in 0..2 {
            // Past the expiry seen last, and renewed since.
            wait_for("a renewal past the last expiry", || {
                let now = now_ms();
                let e = expiry();
                now > seen && e > now
            });
            seen = expiry();
            let out = run_on_host_y(&env, &w);
            assert!(stdout(&out).contains("lock-held"), "{}", stdout(&out));
        }
        env.write("go", "");
        assert!(a.wait().unwrap().success(), "{:?}", env.output_of("a"));
        assert_eq!(env.item("k1"), ("done".into(), None, 1));
        assert_eq!(side_effects(&env), ["host-x k1"]);
        assert_eq!(env.run_states(), ["ok", "lock-held", "lock-held"]);
        assert!(
            !env.event_kinds()
                .iter()
                .any(|k| k.starts_with("lock-lost") || k == "lease-lost")
        );
    }

    // Slow (about 2 s): waits out a 1 s TTL and a 2 s worker.
    fn a_stopped_runner_taken_over_has_its_results_discarded_and_stops(env) {
        env.config("[batch.b]\nlock_ttl = \"1s\"\nconcurrency = 1\n");
        env.add_items("b", 3);
        let w = worker(&env);
        let mut a = env.spawn_with(
            "a",
            &["run", "b", "--", &w],
            &[("NIGHTSHIFT_HOST", "host-x"), ("SLOW", "2")],
        );
        wait_for("k1 started", || env.path("started-k1").exists());
        // Freeze runner A past its TTL (its guard stops its worker as the
        // seat lapses: see a_stopped_runners_workers_stop_when_its_seat_lapses).
        signal(a.id(), Signal::SIGSTOP);
        wait_for_lock_expiry(&env);
        let out = run_on_host_y(&env, &w);
        assert!(out.status.success(), "{}", stdout(&out));
        assert!(stdout(&out).contains("3 done"), "{}", stdout(&out));
        signal(a.id(), Signal::SIGCONT);
        let status = a.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(1),
            "A exited by itself, as failed: {status:?}"
        );

        // B's results stand; A's completion was rejected and A claimed nothing.
        assert_eq!(
            env.strings("SELECT result FROM items ORDER BY key"),
            ["\"host-y\"", "\"host-y\"", "\"host-y\""]
        );
        assert_eq!(
            env.int("SELECT count(*) FROM events WHERE kind IN ('done', 'empty')"),
            3,
            "one accepted completion per key"
        );
        let mut effects = side_effects(&env);
        effects.sort();
        assert_eq!(effects, ["host-y k1", "host-y k2", "host-y k3"]);
        let (out, err) = env.output_of("a");
        assert!(out.contains("lost the batch lock"), "{out} {err}");
        let a_run = env.int("SELECT min(id) FROM runs");
        assert_eq!(
            env.int(&format!(
                "SELECT count(*) FROM events WHERE kind = 'lock-lost' AND run_id = {a_run}"
            )),
            1
        );
        assert_eq!(
            env.int(&format!(
                "SELECT done + empty + failed FROM runs WHERE id = {a_run}"
            )),
            0
        );
        // B marked A's run crashed when it took over; A's own end keeps that.
        assert_eq!(
            env.strings(&format!("SELECT state FROM runs WHERE id = {a_run}")),
            ["crashed"]
        );
    }

    /// A frozen runner taken over whose worker then failed (the taker
    /// stopped it) wrote a `retry` event promising a retry that never came,
    /// on an item another run held, and, its backoff over, a lease-lost
    /// "its worker was stopped" with no worker running. Whatever path it
    /// takes, a runner that lost an item says what it let go, once.
    // Slow (about 3 s): waits out a 1 s TTL.
    fn a_runner_that_lost_its_lease_promises_no_retry(env) {
        env.config("[batch.b]\nlock_ttl = \"1s\"\nconcurrency = 1\nbackoff = \"10ms\"\nbackoff_max = \"10ms\"\n");
        env.add_items("b", 1);
        let w = worker(&env);
        let mut a = env.spawn_with(
            "a",
            &["run", "b", "--", &w],
            &[("NIGHTSHIFT_HOST", "host-x"), ("SLOW", "1000")],
        );
        wait_for("k1 started", || env.path("started-k1").exists());
        signal(a.id(), Signal::SIGSTOP);
        wait_for_lock_expiry(&env);
        // B stops A's worker first, then does k1 itself.
        let out = run_on_host_y(&env, &w);
        assert!(stdout(&out).contains("1 done"), "{}", stdout(&out));
        signal(a.id(), Signal::SIGCONT);
        a.wait().unwrap();
        kill_leftovers(&env);
        assert_eq!(env.item("k1").0, "done");
        let a_run = env.int("SELECT min(id) FROM runs");
        let said = env.rows(&format!(
            "SELECT kind, message FROM events WHERE key = 'k1' AND run_id = {a_run} ORDER BY id"
        ));
        let said: Vec<(String, String)> = said
            .into_iter()
            .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()))
            .collect();
        // A heard the loss from its heartbeat (its worker stopped) or
        // from the store refusing its failure (result discarded): either
        // way one event, and no retry promised.
        assert!(!said.iter().any(|(k, _)| k == "retry"), "{said:?}");
        let lost: Vec<_> = said.iter().filter(|(k, _)| k == "lease-lost").collect();
        assert_eq!(lost.len(), 1, "{said:?}");
    }

    // ---- Fencing through the library API ----

    fn a_completion_with_a_stale_lease_token_is_rejected(env) {
        // The library on the test's store (already initialised).
        let (mut s, created) = Store::create(&env.db).unwrap();
        assert!(!created);
        let t0 = now_ms();
        let item = NewItem {
            key: "k".into(),
            label: "k".into(),
            payload: "{}".into(),
            ..Default::default()
        };
        s.add_items("b", &[item], t0, |_| {}).unwrap();
        let holder = |host: &str| Holder {
            host: host.into(),
            pid: 4_000_000,
            pid_start: None,
        };

        // Runner A takes the lock and claims the item.
        let run_a = s
            .start_run("b", Trigger::Manual, None, &holder("a"), t0, None)
            .unwrap();
        let got = s
            .acquire_lock(
                "b",
                "tok-a",
                &holder("a"),
                Some(run_a),
                t0 + 1000,
                t0,
                &[],
                1,
            )
            .unwrap();
        assert!(matches!(got, LockOutcome::Acquired { took_over: None }));
        let a = s
            .claim("b", run_a, 1, t0 + 1000, t0)
            .unwrap()
            .unwrap()
            .remove(0);

        // Its lock and lease expire; runner B takes over, reclaims, claims again.
        let t1 = t0 + 5000;
        let run_b = s
            .start_run("b", Trigger::Manual, None, &holder("b"), t1, None)
            .unwrap();
        let got = s
            .acquire_lock(
                "b",
                "tok-b",
                &holder("b"),
                Some(run_b),
                t1 + 1000,
                t1,
                &[],
                1,
            )
            .unwrap();
        assert!(matches!(got, LockOutcome::Acquired { took_over: Some(_) }));
        assert_eq!(s.reclaim("b", run_b, 5, t1).unwrap(), (1, 0));
        // A is cut off: it can no longer claim anything.
        assert_eq!(s.claim("b", run_a, 1, t1 + 1000, t1).unwrap(), None);
        let b = s
            .claim("b", run_b, 1, t1 + 1000, t1)
            .unwrap()
            .unwrap()
            .remove(0);
        assert_eq!(b.item_id, a.item_id);
        assert!(b.token > a.token);

        // Every write of A with its old token is refused.
        let done = |token: i64, run_id: i64, result: &'static str| Completion { usage: None,
            item_id: a.item_id,
            token,
            run_id,
            outcome: Outcome::Done,
            result: Some(result),
            cost: None,
            version: None, now: t1,
        };
        assert!(
            !s.complete(&done(a.token, run_a, "\"A\""), &event("b", EventKind::Done))
                .unwrap()
        );
        let fail = Failure {
            item_id: a.item_id,
            token: a.token,
            run_id: run_a,
            tier: Tier::Manual,
            error_class: "X",
            message: "m",
            next_attempt_at: None,
            cost: None,
            now: t1,
        };
        assert!(!s.fail(&fail, &event("b", EventKind::Failed)).unwrap());
        assert!(
            !s.release(a.item_id, a.token, run_a, true, &event("b", EventKind::Released))
                .unwrap()
        );
        assert!(
            !s.set_op_id(a.item_id, a.token, "op-a", &event("b", EventKind::OpId))
                .unwrap()
        );
        assert_eq!(s.begin_attempt(a.item_id, a.token, t1).unwrap(), None);
        // A's failed attempt waits for no retry of A's: refused, and no
        // `retry` event promises one on the item B holds.
        let retrying = Retrying {
            item_id: a.item_id,
            token: a.token,
            run_id: run_a,
            cost: None,
            at: t1 + 1000,
            error_class: "Busy",
            message: "503",
            now: t1,
        };
        assert!(!s.await_retry(&retrying, &event("b", EventKind::Retry)).unwrap());
        assert_eq!(env.int("SELECT count(*) FROM events WHERE kind = 'retry'"), 0);
        assert_eq!(
            s.renew_leases("b", run_a, t1 + 9000).unwrap(),
            Vec::<i64>::new()
        );

        // B's completion is accepted; A's, even later, still is not.
        assert!(
            s.complete(&done(b.token, run_b, "\"B\""), &event("b", EventKind::Done))
                .unwrap()
        );
        assert!(
            !s.complete(&done(a.token, run_a, "\"A\""), &event("b", EventKind::Done))
                .unwrap()
        );
        let item = s.item("b", "k").unwrap();
        assert_eq!(item.result.map(|r| r.value()), Some(serde_json::json!("B")));
        assert_eq!(item.attempts, 2);
        assert_eq!(item.op_id, None);
        assert_eq!(s.dead_letters("b", None, None).unwrap().len(), 0);
        // Only the lock's owner can release it.
        assert!(!s.release_lock("b", "tok-a").unwrap());
        assert!(s.release_lock("b", "tok-b").unwrap());
    }

    fn a_checkpoint_that_shares_a_group_commit_is_not_an_error(env) {
        // The runner's last write (finish the run, log it, checkpoint) can be
        // folded into one transaction with a heartbeat that arrives at the same
        // moment; a checkpoint cannot run inside a transaction.
        let (mut s, _) = Store::create(&env.db).unwrap();
        let t0 = now_ms();
        s.ensure_batch("b", t0).unwrap();
        let out = s
            .group(|s| {
                s.log_event(&event("b", EventKind::RunFinished))?;
                s.checkpoint()
            })
            .unwrap();
        assert!(out.is_ok(), "{out:?}");
        assert!(s.checkpoint().is_ok());
        assert_eq!(
            s.events(&nightshift::store::EventFilter::default())
                .unwrap()
                .len(),
            1
        );
    }
}

/// A runner whose host's clock is stepped back mid-run (NTP correcting it,
/// a VM resumed, `date -s`) keeps its lock: another host must not find it
/// "silent" and take its items over while it works. PostgreSQL only: there
/// each host's times are moved onto the database's clock by an offset it
/// measured on connecting, which a later step of the host's clock made
/// wrong (the runner renewed its seat five minutes in the past). A SQLite
/// store has no clock of its own: its runners share one host's clock,
/// stepped for all of them alike.
#[test]
fn a_clock_stepped_back_under_a_live_runner_keeps_its_lock_on_postgres() {
    require!(common::require::Tool::Faketime);
    let Some(env) = Env::for_backend(common::Backend::Pg) else {
        return;
    };
    env.config("[batch.b]\nlock_ttl = \"10s\"\nconcurrency = 1\n");
    env.add_items("b", 2);
    let go = env.path("go");
    let w = env.waiting_worker(
        &format!("while [ ! -e {} ]; do sleep 0.05; done", go.display()),
        &marker(&env),
    );
    // libfaketime reads the offset from this file at every clock call.
    let step = env.write("clock-step", "+0\n");
    let lib = common::require::faketime_lib().unwrap();
    let mut a = env.spawn_with(
        "a",
        &["run", "b", "--", &w],
        &[
            ("NIGHTSHIFT_HOST", "host-a"),
            ("LD_PRELOAD", lib),
            ("FAKETIME_TIMESTAMP_FILE", &p(&step)),
            ("FAKETIME_NO_CACHE", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    wait_for("k1 started", || env.started("k1"));
    std::fs::write(&step, "-300\n").unwrap();
    // Two renewals after the step: the second was surely made on the
    // stepped clock.
    let expiry = || env.int("SELECT max(expires_at) FROM locks");
    for _ in 0..2 {
        let before = expiry();
        wait_for("a renewal of the seat", || expiry() != before);
    }

    let b = env
        .cmd()
        .env("NIGHTSHIFT_HOST", "host-b")
        .args(["status", "b", "--json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    let batch = &status["batches"][0];
    assert_eq!(batch["lock"]["state"], "live", "{batch:#}");
    assert_eq!(batch["last_run"]["state"], "running", "{batch:#}");

    let b = env
        .cmd()
        .env("NIGHTSHIFT_HOST", "host-b")
        .args(["run", "b", "--", &w])
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", stdout(&b));
    assert!(stdout(&b).contains("lock-held"), "{}", stdout(&b));
    assert!(stdout(&b).contains("host-a"), "{}", stdout(&b));

    std::fs::write(&go, "").unwrap();
    let code = a.wait().unwrap();
    let (out, err) = env.output_of("a");
    assert!(code.success(), "{out}{err}");
    assert!(out.contains("2 done"), "{out}");
    assert_eq!(env.run_states(), ["ok", "lock-held"]);
    assert!(
        env.events("b", "lock-takeover").is_empty(),
        "{:?}",
        env.events("b", "lock-takeover")
    );
}

/// On PostgreSQL a persistent run's lanes (a session per slot) hold the
/// run's seat shared in every commit, and its writer's session takes it
/// exclusively to renew it. PostgreSQL lets new shared lockers pass a
/// waiting exclusive one, so with the lanes committing back to back the
/// renewal waited for a moment with none inside: at `-j16` a 3 s seat went
/// 12 s unrenewed, the live run seen as lapsed (and taken over by another
/// host). The runner now gives its writer the turn once it waits. Here
/// every count of the run's row takes 30 ms more (a trigger): a lane
/// writes it last, holding the seat, and the lanes queue for it, so they
/// are never all outside at once, and the old runner's seat lapsed for
/// the whole run. It is read every 50 ms while the run works: never past
/// its end.
#[test]
fn a_busy_persistent_run_on_postgresql_renews_its_seat_in_time() {
    use crate::support::require::Tool;
    let Some(env) = Env::for_backend(common::Backend::Pg) else {
        return;
    };
    require!(Tool::Python3);
    env.write(
        "noop.py",
        "import json, sys\nfor line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    \
         sys.stdout.write(json.dumps({\"key\": k, \"result\": 1}) + \"\\n\")\n    sys.stdout.flush()\n",
    );
    // A renewal every second, 2 s of room: a loaded machine's stalls fit
    // in it; the lanes' starvation (the whole run) did not.
    env.config(
        "[batch.b]\nworker = [\"python3\", \"noop.py\"]\nmode = \"persistent\"\n\
         concurrency = 8\nlock_ttl = \"3s\"\n",
    );
    env.add_items("b", 1_500);
    env.pg_sql()
        .batch_execute(
            "CREATE FUNCTION slow_write() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_sleep(0.03); RETURN NULL; END $$; \
             CREATE TRIGGER slow_write AFTER UPDATE ON runs \
             FOR EACH STATEMENT EXECUTE FUNCTION slow_write();",
        )
        .unwrap();
    let mut run = env.spawn("run", &["run", "b"]);
    let (mut latest, mut read) = (i64::MIN, 0);
    while run.try_wait().unwrap().is_none() {
        let now = now_ms();
        let expires = env.int("SELECT coalesce(max(expires_at), 0) FROM locks");
        if expires > 0 {
            latest = latest.max(now - expires);
            read += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (out, err) = env.output_of("run");
    assert!(run.wait().unwrap().success(), "{out}{err}");
    assert_eq!(
        env.int("SELECT count(*) FROM items WHERE status = 'done'"),
        1_500
    );
    assert!(read > 0, "the seat was never read while the run worked");
    assert!(
        latest < 0,
        "the live run's seat was {latest} ms past its end"
    );
}
