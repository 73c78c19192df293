//! Every view tells who is alive: a runner killed with SIGKILL is crashed
//! at once (its lock not held, its claims orphaned) in `status`, `--json`,
//! `--short` and `--prometheus`, without waiting for its TTL and without a
//! read writing anything; a holder on another host is "silent since" its
//! last renewal once its seat expired; a daemon killed leaves "not
//! running (last seen T)" and the fire times it missed, which it records
//! when it starts again; the `PAUSED` file shows in `--short` and the
//! metrics. Real runners, real daemons, real signals, both backends.

#![cfg(unix)]

use crate::support as common;

use common::{Background, Env, pids_with, signal, wait_for};
use nix::sys::signal::Signal;
use serde_json::Value;

/// A worker that hangs (`HANG` set) in a process whose command line names
/// this test's directory, so the test can find what a killed runner left.
fn worker(env: &Env) -> String {
    env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\n\
             if [ -n \"$HANG\" ]; then sh -c 'sleep 60; :' {}; fi\n\
             echo '{{\"ok\":true}}'",
            marker(env)
        ),
    )
    .display()
    .to_string()
}

fn marker(env: &Env) -> String {
    format!("hang-{}", env.dir.path().display())
}

/// Kills what a killed runner left running elsewhere than here (a run on
/// this host reaps its own host's orphans).
fn kill_hung(env: &Env) {
    for pid in pids_with(&marker(env)) {
        signal(pid, Signal::SIGKILL);
    }
}

fn out(env: &Env, args: &[&str]) -> String {
    let ran = env.run(args);
    ran.code(0);
    ran.stdout.clone()
}

fn batch(status: &Value, name: &str) -> Value {
    status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no batch {name} in {status}"))
}

/// Starts `run s` with the hanging worker and waits until both items are
/// claimed (the run holds its seat and its claims).
fn hung_runner(env: &Env, vars: &[(&str, &str)]) -> Background {
    let mut vars = vars.to_vec();
    vars.push(("HANG", "1"));
    let runner = env.spawn_with("runner", &["run", "s"], &vars);
    wait_for("both items claimed", || {
        env.int("SELECT count(*) FROM items WHERE status = 'claimed'") == 2
    });
    runner
}

fn setup(env: &Env, ttl: &str) {
    let w = worker(env);
    env.config(&format!(
        "[batch.s]\nworker = [\"{w}\"]\nconcurrency = 2\nlock_ttl = \"{ttl}\"\n"
    ));
    env.add_items("s", 2);
}

both_backends! {
    /// The reproduction: `run s` killed with SIGKILL. With an hour
    /// of TTL left, every view says crashed at once, and reading changes
    /// nothing; the next run takes the claims back and records the crash.
    fn a_killed_runner_is_crashed_at_once_in_every_view(env) {
        setup(&env, "1h");
        let mut runner = hung_runner(&env, &[]);
        assert!(out(&env, &["status", "--short"]).contains('▶'));
        let text = out(&env, &["status", "s"]);
        assert!(text.contains("running: lock held by"), "{text}");
        let shown = out(&env, &["show", "s", "k1"]);
        assert!(shown.contains("\nclaim:     in flight in run #1 ("), "{shown}");
        signal(runner.id(), Signal::SIGKILL);
        runner.wait().unwrap();

        let before = env.snapshot();
        let text = out(&env, &["status", "s"]);
        assert!(text.contains("crashed: runner "), "{text}");
        assert!(text.contains("is gone; the lock is not held"), "{text}");
        assert!(!text.contains("lock held by"), "{text}");
        assert!(text.contains("orphaned: 2 claimed items, taken back by the next run"), "{text}");
        assert!(text.contains("last run #1 crashed ("), "{text}");
        assert!(text.contains("is gone; not yet recorded"), "{text}");
        assert!(!text.contains("in progress"), "{text}");

        let s = batch(&env.status(), "s");
        assert_eq!(s["last_run"]["state"], "crashed", "{s}");
        assert_eq!(s["last_run"]["recorded_state"], "running", "{s}");
        assert_eq!((&s["running"], &s["lock"]["held"], &s["lock"]["state"]),
                   (&Value::from(false), &Value::from(false), &Value::from("crashed")), "{s}");
        assert_eq!(s["orphaned"], 2, "{s}");

        // `show` of an orphaned item says whose claim it is and its fate,
        // not only "claimed".
        let shown = out(&env, &["show", "s", "k1"]);
        assert!(shown.contains("\nstate:     claimed\n"), "{shown}");
        let holder = s["lock"]["holder"].as_str().unwrap();
        assert!(shown.contains(&format!(
            "\nclaim:     run #1 ({holder}) crashed: its runner is gone; the next run takes this item back\n"
        )), "{shown}");
        let mut shown: Value = serde_json::from_str(&out(&env, &["show", "s", "k1", "--json"])).unwrap();
        let lease = shown["claim"].as_object_mut().unwrap().remove("lease_until").unwrap();
        assert!(lease.as_str().is_some_and(|t| t.ends_with('Z')), "{lease}");
        assert_eq!(shown["claim"], serde_json::json!({
            "run_id": 1, "runner": holder, "state": "crashed", "orphaned": true, "silent_since": null,
            "pool_wait_since": null, "held_until": null, "retry_at": null, "next_run_quarantines": false,
        }));

        let short = out(&env, &["status", "--short"]);
        assert!(short.contains("s 0✓ 2… crashed"), "{short}");
        assert!(!short.contains('▶'), "{short}");

        let metrics = out(&env, &["status", "--prometheus"]);
        for line in [
            "nightshift_lock_held{batch=\"s\"} 0",
            "nightshift_runner_dead{batch=\"s\"} 1",
            "nightshift_orphaned_items{batch=\"s\"} 2",
            "nightshift_last_run_success{batch=\"s\",state=\"crashed\"} 0",
        ] {
            assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
        }
        assert_eq!(env.snapshot(), before, "a view writes nothing");

        // The next run takes the orphans back, stops the hung workers and
        // records the crash: the views then say what the store says.
        env.run(&["run", "s"]).code(0);
        let s = batch(&env.status(), "s");
        assert_eq!((&s["done"], &s["orphaned"], &s["running"]), (&Value::from(2), &Value::from(0), &Value::from(false)), "{s}");
        assert_eq!(env.run_states(), ["crashed", "ok"]);
        let text = out(&env, &["status", "s"]);
        assert!(!text.contains("orphaned") && !text.contains("crashed: runner"), "{text}");
        common::assert_no_process_left(&marker(&env));
    }

    /// With `max_attempts = 1` a dead runner's claims are on their last
    /// attempt: every view says the next run takes them back to quarantine
    /// them, where they said only "taken back", and the next run does;
    /// they are that run's failures: its summary counts them, it exits 1
    /// and its alert runs (it said "0 manual", exited 0 and alerted no one:
    /// the dead run they were charged to never could).
    fn orphans_on_their_last_attempt_are_said_to_be_quarantined_next(env) {
        let w = worker(&env);
        let alert = env.path("alert.json");
        env.config(&format!(
            "[batch.s]\nworker = [\"{w}\"]\nconcurrency = 2\nlock_ttl = \"1h\"\nmax_attempts = 1\n\
             alert = [\"sh\", \"-c\", \"cat > {}\"]\n",
            alert.display()
        ));
        env.add_items("s", 2);
        let mut runner = hung_runner(&env, &[]);
        signal(runner.id(), Signal::SIGKILL);
        runner.wait().unwrap();

        let text = out(&env, &["status", "s"]);
        assert!(text.contains(
            "orphaned: 2 claimed items, taken back by the next run (2 to quarantine: their attempts are used)"
        ), "{text}");
        let s = batch(&env.status(), "s");
        assert_eq!((&s["orphaned"], &s["orphaned_to_quarantine"]), (&Value::from(2), &Value::from(2)), "{s}");
        let shown = out(&env, &["show", "s", "k1"]);
        assert!(shown.contains(
            "the next run takes this item back and quarantines it: its attempts are used (attempt 1, max_attempts 1)"
        ), "{shown}");

        let ran = env.run(&["run", "s"]);
        ran.code(1);
        assert!(ran.stdout.contains("0 done, 0 empty, 2 failed (0 retry, 2 manual)"), "{ran:?}");
        let said = std::fs::read_to_string(&alert).expect("the alert ran");
        assert!(said.contains("\"manual\":2") || said.contains("2 manual"), "{said}");
        let s = batch(&env.status(), "s");
        assert_eq!((&s["manual"], &s["done"], &s["orphaned"]), (&Value::from(2), &Value::from(0), &Value::from(0)), "{s}");
        assert_eq!(s["last_run"]["counts"]["manual"], 2, "{s}");
        let shown = out(&env, &["show", "s", "k1"]);
        assert!(shown.contains(
            "Interrupted: its runner (run 1) stopped while the item was in flight, its attempts used (attempt 1, max_attempts 1)"
        ), "{shown}");
        common::assert_no_process_left(&marker(&env));
    }

    /// A runner on another host cannot be seen: its seat is judged by its
    /// expiry, and once that passed every view says its lock expired and
    /// since when its holder is silent (its last renewal).
    fn a_holder_elsewhere_is_silent_since_its_last_renewal_once_expired(env) {
        setup(&env, "1s");
        let mut runner = hung_runner(&env, &[("NIGHTSHIFT_HOST", "far-host")]);
        signal(runner.id(), Signal::SIGKILL);
        runner.wait().unwrap();
        wait_for("the seat to expire", || {
            batch(&env.status(), "s")["lock"]["state"] == "silent"
        });
        let s = batch(&env.status(), "s");
        let since = s["lock"]["silent_since"].as_str().unwrap().to_string();
        let expires = chrono::DateTime::parse_from_rfc3339(s["lock"]["expires_at"].as_str().unwrap()).unwrap();
        let renewed = chrono::DateTime::parse_from_rfc3339(&since).unwrap();
        assert_eq!((expires - renewed).num_seconds(), 1, "the last renewal is the expiry less the TTL: {s}");
        assert_eq!((&s["running"], &s["lock"]["held"], &s["last_run"]["state"]),
                   (&Value::from(false), &Value::from(false), &Value::from("silent")), "{s}");
        assert_eq!(s["orphaned"], 2, "{s}");
        let text = out(&env, &["status", "s"]);
        assert!(text.contains(&format!("lock expired, holder silent since {since}")), "{text}");
        assert!(text.contains("far-host:"), "{text}");
        assert!(text.contains("last run #1 silent ("), "{text}");
        let shown = out(&env, &["show", "s", "k2"]);
        assert!(shown.contains("\nclaim:     run #1 (far-host:"), "{shown}");
        assert!(shown.contains(&format!(
            " silent since {since} ("
        )) && shown.contains("): its lock expired; the next run takes this item back\n"), "{shown}");
        let short = out(&env, &["status", "--short"]);
        assert!(short.contains("silent") && !short.contains('▶'), "{short}");
        let metrics = out(&env, &["status", "--prometheus"]);
        assert!(metrics.lines().any(|l| l == "nightshift_lock_held{batch=\"s\"} 0"), "{metrics}");
        assert!(metrics.lines().any(|l| l == "nightshift_last_run_success{batch=\"s\",state=\"silent\"} 0"), "{metrics}");
        kill_hung(&env);
        env.run(&["run", "s"]).code(0);
        assert_eq!(batch(&env.status(), "s")["done"], 2);
    }

    /// A daemon killed with SIGKILL says nothing: the views see its
    /// process gone, say it is not running and since when, and count the
    /// fire times that pass unfired (late under a minute, then missed);
    /// started again, it records them.
    fn a_killed_daemon_is_not_running_and_the_fires_it_misses_show(env) {
        let w = worker(&env);
        env.config(&format!(
            "[batch.n]\nworker = [\"{w}\"]\nschedule = \"* * * * * *\"\ntimezone = \"Asia/Tokyo\"\n"
        ));
        let text = out(&env, &["status"]);
        assert!(text.contains("daemon: not running (never started here"), "{text}");
        let mut daemon = env.spawn("daemon", &["daemon"]);
        wait_for("the daemon to fire", || {
            // The daemon creates the store as it starts (see
            // `status_when_readable`).
            env.status_when_readable().is_some_and(|s| {
                let n = batch(&s, "n");
                n["daemon"]["live"] == true && n["last_fire"]["outcome"] == "ran"
            })
        });
        let text = out(&env, &["status"]);
        assert!(text.contains("daemon: running on "), "{text}");
        assert!(text.contains("next fires:"), "{text}");
        let metrics = out(&env, &["status", "--prometheus"]);
        assert!(metrics.lines().any(|l| l == "nightshift_daemon_up{batch=\"n\"} 1"), "{metrics}");
        assert!(!out(&env, &["status", "--short"]).contains("no daemon"));

        signal(daemon.id(), Signal::SIGKILL);
        daemon.wait().unwrap();
        let n = batch(&env.status(), "n");
        assert_eq!((&n["daemon"]["live"], &n["daemon"]["state"], &n["next_fire"]["fires"]),
                   (&Value::from(false), &Value::from("crashed"), &Value::from(false)), "{n}");
        let why = n["next_fire"]["why"].as_str().unwrap();
        assert!(why.starts_with("daemon not running (last seen "), "{why}");
        let text = out(&env, &["status"]);
        assert!(text.contains("daemon: not running (last seen "), "{text}");
        assert!(text.contains("is gone (killed, or crashed)"), "{text}");
        assert!(text.contains("so nothing fires"), "{text}");

        // Under a minute unfired, they are late: a daemon started now runs
        // the latest once for them.
        wait_for("two fire times to pass unfired", || {
            env.status_when_readable()
                .is_some_and(|s| batch(&s, "n")["late"]["count"].as_u64().unwrap_or(0) >= 2)
        });
        assert!(batch(&env.status(), "n")["missed"].is_null());
        let text = out(&env, &["status"]);
        assert!(text.contains("late: ") && text.contains("a daemon back now runs the latest once"), "{text}");
        // As if killed two minutes ago: those more than a minute old are missed.
        env.exec("UPDATE batches SET next_fire = next_fire - 120000, last_fire_at = last_fire_at - 120000 WHERE name = 'n'");
        let before = env.snapshot();
        let text = out(&env, &["status"]);
        assert!(text.contains("fire times, from "), "{text}");
        assert!(text.contains("when the daemon starts it records them as missed"), "{text}");
        let short = out(&env, &["status", "--short"]);
        // Those of the last minute are late, said after (`N missed M late`).
        assert!(short.contains(" no daemon ") && short.contains(" missed ") && short.trim_end().ends_with(" late"), "{short}");
        let metrics = out(&env, &["status", "--prometheus"]);
        assert!(metrics.lines().any(|l| l == "nightshift_daemon_up{batch=\"n\"} 0"), "{metrics}");
        let missed = common::metric(&metrics, "nightshift_missed_fires{batch=\"n\"}");
        assert!(missed >= 2.0, "{metrics}");
        assert_eq!(env.snapshot(), before, "a view writes nothing");

        // Started again, it records what it missed, replaces the dead
        // one's record, and the views say it runs.
        let mut daemon = env.spawn("daemon2", &["daemon"]);
        wait_for("the missed fires recorded", || {
            env.events("n", "fire").iter().any(|e| {
                e["fields"]["outcome"] == "missed"
                    && e["fields"]["reason"].as_str().unwrap_or("").ends_with("no catch_up window is set")
            })
        });
        wait_for("the daemon live again", || {
            env.status_when_readable()
                .is_some_and(|s| batch(&s, "n")["daemon"]["live"] == true)
        });
        let status = env.status();
        assert_eq!(status["daemons"].as_array().unwrap().len(), 1, "{status}");
        assert!(batch(&status, "n")["missed"].is_null(), "{status}");
        signal(daemon.id(), Signal::SIGTERM);
        assert!(daemon.wait().unwrap().success());
        let n = batch(&env.status(), "n");
        assert_eq!(n["daemon"]["state"], "stopped", "{n}");
        let text = out(&env, &["status"]);
        assert!(text.contains("stopped)"), "{text}");
    }

    /// The defect: a daemon killed while its cycle ran left the fire
    /// stored `running`, and every view said "running now" of it until the
    /// next fire, beside a run they said crashed. The fire is said as its
    /// run is: crashed (why, before any run records it; then as recorded).
    fn a_fire_whose_daemon_was_killed_mid_cycle_is_said_crashed(env) {
        let w = worker(&env);
        // Fires 20 s apart: no later fire is recorded (skipped, behind the
        // hung cycle) before the kill, which a fire each second raced on
        // a loaded machine.
        env.config(&format!(
            "[batch.n]\nworker = [\"{w}\"]\nschedule = \"*/20 * * * * *\"\ntimezone = \"Asia/Tokyo\"\n"
        ));
        env.add_items("n", 1);
        let mut daemon = env.spawn_with("daemon", &["daemon"], &[("HANG", "1")]);
        wait_for("the fire's cycle running", || {
            env.status_when_readable().is_some_and(|s| {
                let n = batch(&s, "n");
                n["last_fire"]["outcome"] == "running" && n["claimed"] == 1
            })
        });
        let text = out(&env, &["status", "n"]);
        assert!(text.contains("): running now (run "), "{text}");
        signal(daemon.id(), Signal::SIGKILL);
        daemon.wait().unwrap();
        let n = batch(&env.status(), "n");
        assert_eq!(n["last_fire"]["outcome"], "crashed", "{n}");
        assert!(n["last_fire"]["reason"].as_str().unwrap().ends_with("is gone; not yet recorded"), "{n}");
        let text = out(&env, &["status", "n"]);
        assert!(text.contains("): its run crashed — runner pid "), "{text}");
        assert!(!text.contains("running now"), "{text}");
        // A run takes the seat over and records the crash: the store says
        // so too, whichever run is the last.
        kill_hung(&env);
        env.run(&["run", "n"]).code(0);
        let n = batch(&env.status(), "n");
        assert_eq!(n["last_run"]["id"], 2, "{n}");
        assert_eq!((&n["last_fire"]["outcome"], &n["last_fire"]["run_id"]),
                   (&Value::from("crashed"), &Value::from(1)), "{n}");
        assert_eq!(env.strings("SELECT last_fire_outcome FROM batches"), ["crashed"]);
        let text = out(&env, &["status", "n"]);
        assert!(text.contains("): its run crashed (run 1)"), "{text}");
    }

    /// A daemon on another host is judged by its heartbeat: live while it
    /// beats, silent once it has not for longer than four beats.
    fn a_daemon_elsewhere_is_live_while_it_beats_and_silent_after(env) {
        let w = worker(&env);
        env.config(&format!(
            "[batch.n]\nworker = [\"{w}\"]\nschedule = \"0 2 * * *\"\ntimezone = \"Asia/Tokyo\"\n"
        ));
        let mut daemon = env.spawn_with("daemon", &["daemon"], &[("NIGHTSHIFT_HOST", "far-host")]);
        wait_for("the daemon's record", || {
            env.status_when_readable()
                .is_some_and(|s| !s["daemons"][0].is_null())
        });
        let first = env.status()["daemons"][0]["last_seen"].clone();
        wait_for("a later heartbeat", || {
            env.status_when_readable().is_some_and(|s| {
                let d = &s["daemons"][0];
                d["last_seen"] != first && d["live"] == true
            })
        });
        assert_eq!(env.status()["daemons"][0]["host"], "far-host");
        signal(daemon.id(), Signal::SIGKILL);
        daemon.wait().unwrap();
        // Four beats missed, without waiting 20 s for them: its last beat
        // is moved that far back (the rule's edges: store::ops::liveness).
        let silent = nightshift::model::DAEMON_SILENT;
        env.exec(&format!("UPDATE daemons SET beat_at = beat_at - {silent}"));
        wait_for("its heartbeat to be missed", || {
            env.status()["daemons"][0]["state"] == "silent"
        });
        let text = out(&env, &["status"]);
        assert!(text.contains("daemon: not running (last seen "), "{text}");
        assert!(text.contains("went silent"), "{text}");
        assert!(out(&env, &["status", "--short"]).contains("no daemon"));
    }

    /// The emergency stop at a glance: a tmux status bar and the metrics
    /// show it, for every batch.
    fn the_paused_file_shows_in_short_and_the_metrics(env) {
        env.add_items("a", 1);
        env.add_items("b", 1);
        let short = out(&env, &["status", "--short"]);
        assert!(!short.contains("EMERGENCY") && !short.contains('⏸'), "{short}");
        std::fs::write(env.path("PAUSED"), "").unwrap();
        let short = out(&env, &["status", "--short"]);
        match env.backend {
            // Beside the database file.
            common::Backend::Sqlite => {
                assert!(short.starts_with("⛔ EMERGENCY STOP  a 0✓ 1… ⏸  b 0✓ 1… ⏸"), "{short}");
                let metrics = out(&env, &["status", "--prometheus"]);
                for line in [
                    "nightshift_emergency_stop 1",
                    "nightshift_batch_paused{batch=\"a\"} 1",
                    "nightshift_batch_paused{batch=\"b\"} 1",
                ] {
                    assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
                }
                assert_eq!(env.status()["batches"][0]["emergency_stop"], true);
                std::fs::remove_file(env.path("PAUSED")).unwrap();
                let metrics = out(&env, &["status", "--prometheus"]);
                assert!(metrics.lines().any(|l| l == "nightshift_emergency_stop 0"), "{metrics}");
                assert!(metrics.lines().any(|l| l == "nightshift_batch_paused{batch=\"a\"} 0"), "{metrics}");
            }
            // A database server has no file beside it: nothing is stopped,
            // and nothing says so.
            common::Backend::Pg => {
                assert!(!short.contains("EMERGENCY"), "{short}");
                let metrics = out(&env, &["status", "--prometheus"]);
                assert!(metrics.lines().any(|l| l == "nightshift_emergency_stop 0"), "{metrics}");
            }
        }
    }
}
