//! `nightshift daemon` in real time: the real binary on a per-second
//! schedule, real workers, a pause from the CLI, the PAUSED file, SIGTERM;
//! and catch-up after downtime.

#![cfg(unix)]

use crate::support as common;

use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use chrono::Timelike;
use common::Env;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use predicates::prelude::*;
use serde_json::Value;

/// Generous: only reached when something is wrong. The happy paths take
/// a second or two each.
const PATIENCE: Duration = Duration::from_secs(20);

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running daemon; killed if the test fails before stopping it.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(env: &Env) -> Daemon {
        Daemon::start_with(env, &[])
    }

    /// `nightshift daemon ARGS`.
    fn start_with(env: &Env, args: &[&str]) -> Daemon {
        let child = env
            .spawn_cmd()
            .arg("daemon")
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(env.path("daemon.out")).unwrap())
            .stderr(std::fs::File::create(env.path("daemon.err")).unwrap())
            .spawn()
            .unwrap();
        Daemon { child }
    }

    /// `nightshift daemon ARGS` as if on `host` (`NIGHTSHIFT_HOST`), its
    /// output in `TAG.out` and `TAG.err`.
    fn start_on(env: &Env, tag: &str, host: &str, args: &[&str]) -> Daemon {
        let child = env
            .spawn_cmd()
            .arg("daemon")
            .args(args)
            .env("NIGHTSHIFT_HOST", host)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(env.path(&format!("{tag}.out"))).unwrap())
            .stderr(std::fs::File::create(env.path(&format!("{tag}.err"))).unwrap())
            .spawn()
            .unwrap();
        Daemon { child }
    }

    fn signal(&self, signal: Signal) {
        kill(
            Pid::from_raw(i32::try_from(self.child.id()).unwrap()),
            signal,
        )
        .unwrap();
    }

    /// SIGTERM, then the exit status.
    fn terminate(&mut self) -> ExitStatus {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        kill(pid, Signal::SIGTERM).unwrap();
        self.exited()
    }

    /// The exit status, once it exits (within [`PATIENCE`]).
    fn exited(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < PATIENCE, "the daemon did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

fn add(env: &Env, batch: &str, keys: &[&str]) {
    let lines: String = keys
        .iter()
        .map(|k| format!("{{\"key\":\"{k}\"}}\n"))
        .collect();
    let file = env.write("more.jsonl", &lines);
    env.cmd().args(["add", batch]).arg(file).assert().success();
}

/// Fire events whose outcome is `outcome`.
fn fires(env: &Env, batch: &str, outcome: &str) -> Vec<Value> {
    env.events(batch, "fire")
        .into_iter()
        .filter(|e| e["fields"]["outcome"] == outcome)
        .collect()
}

/// Waits for `n` more fires skipped because paused, with nothing running.
fn wait_for_paused_fires(env: &Env, n: usize, reason_has: &str) {
    let seen = fires(env, "b", "skipped-paused").len();
    wait_for("fires skipped as paused", || {
        let skipped = fires(env, "b", "skipped-paused");
        skipped.len() >= seen + n
            && skipped
                .last()
                .is_some_and(|e| e["fields"]["reason"].as_str().unwrap().contains(reason_has))
    });
}

#[test]
fn the_daemon_runs_cycles_honours_pauses_and_stops_on_sigterm() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\ntimezone = \"Asia/Tokyo\"\n",
    );
    env.add_items("b", 5);
    let mut daemon = Daemon::start(&env);

    // Fires run cycles: the items get done, by scheduled runs.
    wait_for("the items to be done", || {
        batch(&env.status(), "b")["done"] == 5
    });
    let status = env.status();
    let b = batch(&status, "b");
    assert_eq!(b["last_run"]["trigger"], "schedule", "{b}");
    assert_eq!(b["next_fires"].as_array().unwrap().len(), 3, "{b}");
    // The fire is recorded as ran, naming its run, once that run ended.
    wait_for("a ran fire naming its run", || {
        fires(&env, "b", "ran").iter().any(|e| e["run_id"].is_i64())
    });

    // A pause from the CLI counts at the next fire, without a restart.
    env.cmd()
        .args(["pause", "b", "--reason", "deploying"])
        .assert()
        .success();
    wait_for_paused_fires(&env, 1, "deploying");
    wait_for("the last cycle to end", || {
        batch(&env.status(), "b")["lock"].is_null()
    });
    let runs_before = batch(&env.status(), "b")["last_run"]["id"].clone();
    add(&env, "b", &["p1", "p2", "p3"]);
    wait_for_paused_fires(&env, 2, "deploying");
    let b = batch(&env.status(), "b");
    assert_eq!(b["pending"], 3, "nothing ran while paused: {b}");
    assert_eq!(b["last_run"]["id"], runs_before, "no run while paused: {b}");
    assert_eq!(b["last_fire"]["outcome"], "skipped-paused", "{b}");
    assert!(
        b["last_fire"]["reason"]
            .as_str()
            .unwrap()
            .contains("deploying"),
        "{b}"
    );
    // A live daemon's next fire runs nothing while paused: every view says so.
    assert_eq!(b["next_fire"]["fires"], false, "{b}");
    assert_eq!(
        b["next_fire"]["why"], "the batch is paused, so its fires are skipped",
        "{b}"
    );
    let human = env.cmd().arg("status").output().unwrap();
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(
        human.contains("did not run: the batch was paused — paused by"),
        "{human}"
    );
    assert!(
        human.contains("the batch is paused, so its fires are skipped; its next fire times:"),
        "{human}"
    );

    // Unpaused: the next fire runs again.
    env.cmd().args(["unpause", "b"]).assert().success();
    assert_eq!(batch(&env.status(), "b")["next_fire"]["fires"], true);
    wait_for("the paused items to be done", || {
        batch(&env.status(), "b")["done"] == 8
    });

    // The PAUSED file beside the store stops everything, and says so.
    env.write("PAUSED", "");
    wait_for_paused_fires(&env, 1, "emergency stop file");
    wait_for("the last cycle to end", || {
        batch(&env.status(), "b")["lock"].is_null()
    });
    add(&env, "b", &["e1", "e2"]);
    wait_for_paused_fires(&env, 2, "emergency stop file");
    let status = env.status();
    assert_eq!(batch(&status, "b")["pending"], 2, "{status}");
    assert!(status["emergency_stop"].is_string(), "{status}");
    let human = env.cmd().arg("status").output().unwrap();
    assert!(
        String::from_utf8(human.stdout)
            .unwrap()
            .starts_with("EMERGENCY STOP: ")
    );
    assert!(
        env.events("b", "emergency-stop")
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("PAUSED exists"))
    );
    std::fs::remove_file(env.path("PAUSED")).unwrap();
    wait_for("work to resume", || batch(&env.status(), "b")["done"] == 10);

    // SIGTERM: a clean exit 0, and the log says the daemon stopped.
    let exit = daemon.terminate();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    let out = std::fs::read_to_string(env.path("daemon.out")).unwrap();
    assert!(out.contains("nightshift daemon: stopped"), "{out}");
    let daemon_events = env.events("b", "daemon");
    assert!(
        daemon_events
            .last()
            .is_some_and(|e| e["message"] == "daemon stopped"),
        "{daemon_events:?}"
    );
    let logs: Vec<_> = std::fs::read_dir(env.path("logs")).unwrap().collect();
    assert!(!logs.is_empty(), "events go to the rolling log files too");
}

#[test]
fn sigterm_lets_the_running_cycle_finish_its_item() {
    let env = Env::new();
    env.script("slow.sh", "cat >/dev/null; sleep 2; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./slow.sh\"]\nconcurrency = 1\ngrace = \"20s\"\n\
         schedule = \"* * * * * *\"\ntimezone = \"UTC\"\n",
    );
    env.add_items("b", 3);
    let mut daemon = Daemon::start(&env);
    wait_for("an item in flight", || {
        batch(&env.status(), "b")["claimed"] == 1
    });
    let exit = daemon.terminate();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    let b = batch(&env.status(), "b");
    // The in-flight item finished within the grace period; nothing was
    // claimed after the signal, nothing is left claimed.
    assert_eq!(
        (&b["done"], &b["claimed"], &b["pending"]),
        (&Value::from(1), &Value::from(0), &Value::from(2)),
        "{b}"
    );
    assert_eq!(b["last_run"]["state"], "aborted", "{b}");
    // Recorded `stopped` (its work owed to the next daemon), not `ran`.
    assert_eq!(
        fires(&env, "b", "stopped").len(),
        1,
        "the cycle's fire is recorded"
    );
    assert!(fires(&env, "b", "ran").is_empty());
}

#[test]
fn a_fire_while_a_manual_run_holds_the_lock_steps_down() {
    let env = Env::new();
    env.script("slow.sh", "cat >/dev/null; sleep 3; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./slow.sh\"]\nconcurrency = 1\n\
         schedule = \"* * * * * *\"\ntimezone = \"UTC\"\n",
    );
    env.add_items("b", 1);
    let mut manual = env
        .spawn_cmd()
        .args(["run", "b"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the manual run to hold the lock", || {
        !batch(&env.status(), "b")["lock"].is_null()
    });
    let mut daemon = Daemon::start(&env);
    wait_for("a fire that stepped down", || {
        !fires(&env, "b", "lock-held").is_empty()
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    let held = fires(&env, "b", "lock-held");
    let reason = held[0]["fields"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("lock held by "), "{reason}");
    assert!(
        held[0]["run_id"].is_i64(),
        "the step-down is a recorded run"
    );
    assert!(manual.wait().unwrap().success());
    assert_eq!(batch(&env.status(), "b")["done"], 1);
}

#[test]
fn catch_up_runs_a_recent_miss_once_and_records_older_ones() {
    // Both batches fire daily at the time of day three hours ago; each
    // daemon run before this one stored that fire time as the next.
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    let fire = (nightshift::util::time::now() - chrono::TimeDelta::hours(3))
        .with_nanosecond(0)
        .unwrap();
    let cron = format!("{} {} {} * * *", fire.second(), fire.minute(), fire.hour());
    env.write(
        "nightshift.toml",
        &format!(
            "[batch.recent]\nworker = [\"./w.sh\"]\nschedule = \"{cron}\"\ntimezone = \"UTC\"\ncatch_up = \"6h\"\n\n\
             [batch.late]\nworker = [\"./w.sh\"]\nschedule = \"{cron}\"\ntimezone = \"UTC\"\ncatch_up = \"1h\"\n"
        ),
    );
    env.add_items("recent", 2);
    env.add_items("late", 2);
    env.sql()
        .execute(
            "UPDATE batches SET next_fire = ?1",
            [fire.timestamp_millis()],
        )
        .unwrap();

    let mut daemon = Daemon::start(&env);
    wait_for("the catch-up run", || {
        batch(&env.status(), "recent")["done"] == 2
    });
    wait_for("the missed fire to be recorded", || {
        !batch(&env.status(), "late")["last_fire"].is_null()
    });
    assert_eq!(daemon.terminate().code(), Some(0));

    let status = env.status();
    let recent = batch(&status, "recent");
    assert_eq!(recent["last_fire"]["outcome"], "ran", "{recent}");
    assert!(
        recent["last_fire"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("catch-up"),
        "{recent}"
    );
    assert_eq!(fires(&env, "recent", "ran").len(), 1, "caught up once");
    assert!(fires(&env, "recent", "missed").is_empty());

    let late = batch(&status, "late");
    assert_eq!(late["last_fire"]["outcome"], "missed", "{late}");
    assert!(
        late["last_fire"]["reason"]
            .as_str()
            .unwrap()
            .contains("older than the catch_up window (1h0m)"),
        "{late}"
    );
    assert_eq!(
        (&late["pending"], &late["last_run"]),
        (&Value::from(2), &Value::Null)
    );
    // The next fire is tomorrow's, stored for the dashboard.
    let next: i64 = env
        .sql()
        .query_row(
            "SELECT next_fire FROM batches WHERE name = 'late'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(next, (fire + chrono::TimeDelta::days(1)).timestamp_millis());
}

#[test]
fn the_schedule_command_and_its_errors() {
    let env = Env::new();
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"true\"]\nschedule = \"30 2 * * *\"\ntimezone = \"America/New_York\"\n\n[batch.plain]\nworker = [\"true\"]\n",
    );
    let out = env
        .cmd()
        .args(["schedule", "b", "--next", "4", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fires = v["next_fires"].as_array().unwrap();
    assert_eq!(fires.len(), 4, "{v}");
    for f in fires {
        let local = f["local"].as_str().unwrap();
        // 02:30 local, or 03:00 on spring-forward day.
        assert!(
            local.contains("T02:30:00-0") || local.contains("T03:00:00-04:00"),
            "{local}"
        );
        assert!(f["utc"].as_str().unwrap().ends_with('Z'));
    }
    let out = env.cmd().args(["schedule", "b"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("b: `30 2 * * *` in America/New_York"),
        "{text}"
    );
    // With no daemon, a line says nothing fires them.
    assert_eq!(text.lines().count(), 3 + 5, "{text}");

    env.cmd()
        .args(["schedule", "plain"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("batch \"plain\" has no schedule"));
    env.cmd()
        .args(["daemon", "--batch", "nope"])
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("no batch \"nope\"")
                .and(predicates::str::contains("scheduled batches: b")),
        );

    // A bad cron or zone: the config error names file, line and field.
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"true\"]\nschedule = \"0 25 * * *\"\n",
    );
    env.cmd()
        .args(["schedule", "b"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "nightshift.toml:3: batch.b.schedule: invalid cron expression",
        ));
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"true\"]\nschedule = \"0 2 * * *\"\ntimezone = \"Asia/Tokio\"\n",
    );
    env.cmd()
        .arg("daemon")
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "nightshift.toml:4: batch.b.timezone: unknown time zone \"Asia/Tokio\" (did you mean \"Asia/Tokyo\"?)",
        ));
}

/// A daemon refused for one batch's worker that cannot start names that
/// batch and the line of the file that sets its worker, as any config
/// error does (it named the program alone), and records nothing; `run`
/// says the same, and a worker given after `--` is said to be there.
#[test]
fn a_daemon_refused_for_one_batchs_worker_names_the_batch_and_its_line() {
    let env = Env::new();
    env.write(
        "nightshift.toml",
        "[batch.good]\nworker = [\"cat\"]\nschedule = \"*/3 * * * * *\"\n\n\
         [batch.\"記事\"]\nschedule = \"*/3 * * * * *\"\nworker = [\"./nope.sh\"]\n",
    );
    let before = env.fingerprint();
    let said = "nightshift.toml:7: batch.\"記事\".worker: worker program \"./nope.sh\" not found";
    env.cmd()
        .arg("daemon")
        .assert()
        .code(2)
        .stderr(predicates::str::contains(said));
    assert_eq!(env.fingerprint(), before, "nothing recorded");
    env.cmd()
        .args(["run", "記事"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(said));
    env.cmd()
        .args(["run", "good", "--", "./nope.sh"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "worker program \"./nope.sh\" not found (check the command after `--`)",
        ));
}

/// A schedule edited and not reloaded: every view gives the fires the
/// live daemon plans, by the schedule it read, and says that the file
/// differs and how to apply it (`schedule` and `status`' `next_fires`
/// listed the file's fires, which the daemon never fires); once reloaded,
/// the file's.
#[test]
fn an_edited_schedule_not_reloaded_is_said_as_the_live_daemon_fires_it() {
    let env = Env::new();
    let yearly = "[batch.b]\nworker = [\"cat\"]\nschedule = \"0 0 1 1 *\"\n";
    env.write("nightshift.toml", yearly);
    let mut daemon = Daemon::start(&env);
    wait_for("the daemon to be live", || {
        batch(&env.status(), "b")["next_fire"]["fires"] == true
    });
    env.write(
        "nightshift.toml",
        &yearly.replace("0 0 1 1 *", "*/5 * * * * *"),
    );
    let new_year = |t: &Value| t.as_str().unwrap().ends_with("-01-01T00:00:00Z");

    let out = env
        .cmd()
        .args(["schedule", "b", "-n", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("b: `0 0 1 1 *` in UTC (the live daemon's)"),
        "{text}"
    );
    assert!(
        text.contains("the file's schedule differs (`*/5 * * * * *` in UTC)")
            && text.contains("SIGHUP it"),
        "{text}"
    );
    let rows = text.lines().filter(|l| l.contains("-01-01 00:00:00 UTC"));
    assert_eq!(rows.count(), 2, "{text}");
    let out = env
        .cmd()
        .args(["schedule", "b", "-n", "2", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            &v["schedule"],
            &v["config_differs"],
            &v["config"]["schedule"]
        ),
        (
            &Value::from("0 0 1 1 *"),
            &Value::from(true),
            &Value::from("*/5 * * * * *")
        ),
        "{v}"
    );
    assert!(
        v["next_fires"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| new_year(&f["utc"])),
        "{v}"
    );

    let b = batch(&env.status(), "b");
    assert_eq!(b["schedule"], "0 0 1 1 *", "{b}");
    let next = b["next_fires"].as_array().unwrap();
    assert!(next.iter().all(new_year), "{b}");
    assert_eq!(next[0], b["next_fire"]["at"], "{b}");
    assert_eq!(b["next_fire"]["config_differs"], true, "{b}");
    assert_eq!(b["next_fire"]["config"]["schedule"], "*/5 * * * * *", "{b}");
    let text = String::from_utf8(env.cmd().arg("status").output().unwrap().stdout).unwrap();
    assert!(
        text.contains("schedule `0 0 1 1 *` in UTC; next fires:"),
        "{text}"
    );
    assert!(text.contains("the file's schedule differs"), "{text}");

    // Reloaded: the file's schedule is the daemon's, and nothing differs.
    let pid = Pid::from_raw(i32::try_from(daemon.child.id()).unwrap());
    kill(pid, Signal::SIGHUP).unwrap();
    wait_for("the reload", || {
        batch(&env.status(), "b")["schedule"] == "*/5 * * * * *"
    });
    let b = batch(&env.status(), "b");
    assert_eq!(b["next_fire"]["config_differs"], false, "{b}");
    assert!(b["next_fire"]["config"].is_null(), "{b}");
    assert_eq!(daemon.terminate().code(), Some(0));
}

/// A slow alert holds up no fire: the fires after the run that alerts
/// ended start runs of their own while the alert still runs, and none is
/// recorded skipped behind a cycle that no longer runs.
#[test]
fn a_slow_alert_holds_up_no_fire() {
    let env = Env::new();
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"false\"]\nretries = 0\nalert = [\"sleep\", \"6\"]\n\
         schedule = \"*/2 * * * * *\"\n",
    );
    env.add_items("b", 1);
    let mut daemon = Daemon::start(&env);
    wait_for("the slow alert to end", || {
        !env.events("b", "alert").is_empty()
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    let id = |e: &Value| e["id"].as_i64().unwrap();
    let alerted = id(&env.events("b", "alert")[0]);
    let started: Vec<i64> = env.events("b", "run-started").iter().map(id).collect();
    assert!(
        started.iter().filter(|s| **s < alerted).count() >= 2,
        "runs started while the alert ran: {started:?}, alert {alerted}"
    );
    let skipped = fires(&env, "b", "skipped-overlap");
    assert!(skipped.is_empty(), "{skipped:?}");
}

/// A fire's record is stamped when it was written: a cycle's outcome,
/// written when the cycle ended, said the fire time, seconds before the
/// run's events it follows in the log. The fire time is a field of its
/// own, and in the text.
#[test]
fn a_fires_record_is_stamped_when_it_was_written() {
    let env = Env::new();
    env.script("slow.sh", "cat >/dev/null; sleep 2; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./slow.sh\"]\nschedule = \"* * * * * *\"\n",
    );
    env.add_items("b", 1);
    let mut daemon = Daemon::start(&env);
    wait_for("a ran fire naming its run", || {
        fires(&env, "b", "ran").iter().any(|e| e["run_id"].is_i64())
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    let out = env
        .cmd()
        .args(["log", "b", "--json", "-n", "0"])
        .output()
        .unwrap();
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |e: &Value| e["at"].as_str().unwrap().to_string();
    for (i, e) in events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["kind"] == "fire")
    {
        let before = events[..i].iter().map(at).max().unwrap_or_default();
        assert!(before <= at(e), "{e} is stamped before {before}");
    }
    let ran = events
        .iter()
        .find(|e| e["kind"] == "fire" && e["fields"]["outcome"] == "ran" && e["run_id"].is_i64())
        .unwrap();
    let fire_at = ran["fields"]["fire_at"].as_str().unwrap();
    assert!(fire_at < at(ran).as_str(), "{ran}");
    assert!(
        ran["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("fire at {fire_at} ran")),
        "{ran}"
    );
}

/// A failing hook is in the daemon's journal (its stdout), not only in the
/// log: which hook, how, and the last line of its stderr.
#[test]
fn a_failing_alert_is_in_the_journal() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; exit 1");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nretries = 0\nschedule = \"* * * * * *\"\n\
         alert = [\"sh\", \"-c\", \"echo 'smtp: connection refused' >&2; exit 4\"]\n",
    );
    env.add_items("b", 1);
    let mut daemon = Daemon::start(&env);
    let journal = || std::fs::read_to_string(env.path("daemon.out")).unwrap_or_default();
    wait_for("the alert's failure in the journal", || {
        journal().contains("b: alert `sh` failed: exit status: 4: smtp: connection refused")
    });
    assert_eq!(daemon.terminate().code(), Some(0));
}

/// SIGHUP reloads the config, as systemd's `ExecReload` expects: a changed
/// worker and a newly scheduled batch take effect without a restart; a bad
/// config is refused, the error said on stderr and logged, and the old
/// config runs on; SIGTERM still stops it.
#[test]
fn sighup_reloads_the_config_and_a_bad_one_is_refused() {
    let env = Env::new();
    let ran = env.path("ran.log");
    for name in ["one", "two"] {
        env.script(
            &format!("{name}.sh"),
            &format!("cat >/dev/null; echo \"{name} $NIGHTSHIFT_BATCH $NIGHTSHIFT_KEY\" >> {}; echo '{{\"ok\":true}}'", ran.display()),
        );
    }
    let every_second = "schedule = \"* * * * * *\"\ntimezone = \"UTC\"\n";
    env.write(
        "nightshift.toml",
        &format!("[batch.b]\nworker = [\"./one.sh\"]\n{every_second}"),
    );
    add(&env, "b", &["k1"]);
    let mut daemon = Daemon::start(&env);
    let log = || std::fs::read_to_string(&ran).unwrap_or_default();
    wait_for("k1 run by the first worker", || {
        log().contains("one b k1\n")
    });
    let hup = || {
        kill(
            Pid::from_raw(i32::try_from(daemon.child.id()).unwrap()),
            Signal::SIGHUP,
        )
        .unwrap()
    };

    env.write(
        "nightshift.toml",
        &format!("[batch.b]\nworker = [\"./two.sh\"]\n{every_second}[batch.c]\nworker = [\"./two.sh\"]\n{every_second}"),
    );
    hup();
    // Through SQL: until the reload, the store has no batch `c` to log.
    let reloaded = "SELECT count(*) FROM events e JOIN batches b ON b.id = e.batch_id
                     WHERE b.name = 'c' AND e.kind = 'daemon' AND e.message LIKE 'config reloaded: daemon on %'";
    wait_for("the reload to be logged", || env.int(reloaded) == 1);
    add(&env, "b", &["k2"]);
    add(&env, "c", &["c1"]);
    wait_for("k2 and c1 run by the new worker", || {
        let l = log();
        l.contains("two b k2\n") && l.contains("two c c1\n")
    });

    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./one.sh\"\nschedule = \"* * * * * *\"\n",
    );
    hup();
    wait_for("the refusal on stderr", || {
        std::fs::read_to_string(env.path("daemon.err"))
            .unwrap()
            .contains("config reload refused, the old config stays")
    });
    let err = std::fs::read_to_string(env.path("daemon.err")).unwrap();
    assert!(
        err.contains("nightshift.toml"),
        "the error names the file: {err}"
    );
    // The CLI reads the bad config too: the log through SQL, the add
    // through a config of its own.
    let refused = "SELECT count(*) FROM events WHERE kind = 'daemon' AND message LIKE 'config reload refused%'";
    wait_for("the refusal logged for b and c", || env.int(refused) == 2);
    env.write("empty.toml", "");
    let file = env.write("k3.jsonl", "{\"key\":\"k3\"}\n");
    env.cmd()
        .args(["--config", "empty.toml", "add", "b"])
        .arg(file)
        .assert()
        .success();
    wait_for("k3 run by the kept config", || log().contains("two b k3\n"));
    assert!(!log().contains("one b k3"), "{}", log());

    let exit = daemon.terminate();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

/// A store deleted or replaced under the daemon (`mv` a backup into its
/// place): the daemon went on firing, its cycles ran in the new store
/// while its fire records and heartbeat went to the old file, and with the
/// store gone it failed every fire forever without exiting. It stops, as
/// a run does: exit 3, nothing run in the new store.
#[test]
fn a_store_replaced_under_the_daemon_stops_it() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\n",
    );
    env.add_items("b", 1);
    let mut daemon = Daemon::start(&env);
    wait_for("the first item done", || {
        batch(&env.status(), "b")["done"] == 1
    });
    let old = env.path("old");
    std::fs::create_dir(&old).unwrap();
    for entry in std::fs::read_dir(env.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("nightshift.db") {
            std::fs::rename(&path, old.join(name)).unwrap();
        }
    }
    env.cmd().arg("init").assert().success();
    add(&env, "b", &["fresh"]);
    assert_eq!(daemon.exited().code(), Some(3));
    let err = std::fs::read_to_string(env.path("daemon.err")).unwrap();
    assert!(err.contains("deleted or replaced"), "{err}");
    let b = batch(&env.status(), "b");
    assert_eq!(
        (b["pending"].as_i64(), b["last_run"].is_null()),
        (Some(1), true),
        "{b}"
    );
}

/// The config edited while the daemon runs, with no SIGHUP: every view
/// said the file's next fires while the daemon fired the schedule it had
/// read. They say the fire the live daemon planned, and that the file
/// differs.
#[test]
fn status_says_what_the_live_daemon_fires_when_the_file_differs() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    // Once a day: no fire moves the plan while the test reads it.
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n",
    );
    env.add_items("b", 1);
    let mut daemon = Daemon::start(&env);
    wait_for("the daemon's plan", || {
        batch(&env.status(), "b")["next_fire"]["fires"] == true
    });
    let planned = batch(&env.status(), "b")["next_fire"]["at"].clone();
    assert!(
        planned.as_str().unwrap().ends_with("T04:30:00Z"),
        "{planned}"
    );
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"0 3 * * *\"\ntimezone = \"Asia/Tokyo\"\n",
    );
    let b = batch(&env.status(), "b");
    assert_eq!(b["next_fire"]["at"], planned, "{b}");
    assert_eq!(b["next_fire"]["config_differs"], true, "{b}");
    let text = env.run(&["status"]).code(0).stdout.clone();
    assert!(
        text.contains("schedule `30 4 * * *` in UTC; next fires:")
            && text.contains("the file's schedule differs (`0 3 * * *` in Asia/Tokyo)"),
        "{text}"
    );
    assert!(daemon.terminate().success());
}

/// The daemon's stdout read for one line and then closed (`daemon | head
/// -1`; a tmux window closed gives EIO the same way), its stderr closed
/// from the start: it panicked at its next line (exit 101) mid-cycle, the
/// run left crashed, its claims orphaned, nothing fired after. It goes on
/// scheduling, says once in the batch's log that its output is gone, and
/// stops on SIGTERM as usual (exit 0, recorded stopped).
#[test]
fn a_daemon_whose_output_is_closed_keeps_scheduling() {
    use std::io::BufRead;
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; sleep 0.2; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\n",
    );
    env.add_items("b", 2);
    let (out, out_w) = std::io::pipe().unwrap();
    let (err, err_w) = std::io::pipe().unwrap();
    drop(err);
    let child = env
        .spawn_cmd()
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(out_w)
        .stderr(err_w)
        .spawn()
        .unwrap();
    let mut daemon = Daemon { child };
    let mut first = String::new();
    std::io::BufReader::new(out).read_line(&mut first).unwrap();
    assert!(
        first.starts_with("nightshift daemon: scheduling b"),
        "{first}"
    );
    wait_for("both items done", || batch(&env.status(), "b")["done"] == 2);
    add(&env, "b", &["later"]);
    wait_for("an item added later done", || {
        batch(&env.status(), "b")["done"] == 3
    });
    assert!(daemon.child.try_wait().unwrap().is_none(), "still running");
    let said = env.events("b", "daemon");
    assert!(
        said.iter().any(|e| e["message"]
            .as_str()
            .unwrap()
            .starts_with("the daemon's stdout is gone")),
        "{said:?}"
    );
    assert_eq!(daemon.terminate().code(), Some(0));
    assert_eq!(env.status()["daemons"][0]["state"], "stopped");
}

/// A second daemon for the batches a live one schedules ran beside it:
/// each fire taken by both, recorded twice with outcomes that disagreed,
/// a stepped-down run each time. It is refused (exit 2), naming the live
/// one, and says nothing but the error (it said it was scheduling and
/// that it stopped, first); a daemon for other batches (`--batch`) still
/// starts.
#[test]
fn a_second_daemon_for_the_same_batches_is_refused() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n\
         [batch.c]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n",
    );
    let mut first = Daemon::start_with(&env, &["--batch", "b"]);
    wait_for("the first daemon live", || {
        batch(&env.status(), "b")["next_fire"]["fires"] == true
    });
    let ran = env.run(&["daemon"]);
    ran.code(2);
    let error = ran.error_line();
    assert!(
        error.starts_with("nightshift: error: a live daemon (")
            && error.contains("already schedules \"b\""),
        "{error}"
    );
    assert_eq!(ran.stdout, "", "only the error");
    assert_eq!(env.status()["daemons"].as_array().unwrap().len(), 1);
    let mut other = Daemon::start_with(&env, &["--batch", "c"]);
    wait_for("the daemon of c live", || {
        batch(&env.status(), "c")["next_fire"]["fires"] == true
    });
    assert!(other.terminate().success());
    assert!(first.terminate().success());
}

/// Batch `b` of `items`, scheduled daily a few seconds from now (the only
/// fire today; `extra` config beside it), whose daemon is killed with
/// SIGKILL once the fire's cycle has an item `counted` (`done`, `claimed`).
fn killed_mid_fire(extra: &str, items: usize, counted: &str) -> Env {
    let env = Env::new();
    env.script("slow.sh", "cat >/dev/null; sleep 1; echo '{\"ok\":true}'");
    let fire = (nightshift::util::time::now() + chrono::TimeDelta::seconds(4))
        .with_nanosecond(0)
        .unwrap();
    let cron = format!("{} {} {} * * *", fire.second(), fire.minute(), fire.hour());
    env.write(
        "nightshift.toml",
        &format!(
            "[batch.b]\nworker = [\"./slow.sh\"]\nconcurrency = 1\n\
             schedule = \"{cron}\"\ntimezone = \"UTC\"\n{extra}"
        ),
    );
    env.add_items("b", items);
    let mut daemon = Daemon::start(&env);
    wait_for("an item of the fire's cycle", || {
        batch(&env.status(), "b")[counted] == 1
    });
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    env
}

/// A daemon killed after it recorded a fire `running` and before the
/// fire's run started: the fire is said crashed at once, as one whose run
/// had started is (it said `running now` until a daemon started again),
/// and the next daemon records it so.
#[test]
fn a_fire_whose_daemon_died_before_its_run_is_said_crashed_at_once() {
    let env = Env::new();
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"cat\"]\nschedule = \"0 0 1 1 *\"\n",
    );
    env.add_items("b", 1);
    let mut daemon = Daemon::start(&env);
    wait_for("the daemon to be live", || {
        batch(&env.status(), "b")["next_fire"]["fires"] == true
    });
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    // What it left had it died between the fire's record and its run.
    let at = nightshift::util::time::now_ms() - 1_000;
    env.sql()
        .execute(
            "UPDATE batches SET last_fire_at = ?1, last_fire_outcome = 'running', \
             last_fire_reason = NULL, last_fire_run = NULL, cycle_fire_at = ?1 WHERE name = 'b'",
            [at],
        )
        .unwrap();
    let status = env.status();
    assert_eq!(status["daemons"][0]["state"], "crashed", "{status}");
    let b = batch(&status, "b");
    assert_eq!(b["last_fire"]["outcome"], "crashed", "{b}");
    assert!(
        b["last_fire"]["reason"]
            .as_str()
            .unwrap()
            .contains("is gone (killed, or crashed) before its run started"),
        "{b}"
    );
    let text = String::from_utf8(env.cmd().arg("status").output().unwrap().stdout).unwrap();
    assert!(text.contains("its run crashed — its daemon "), "{text}");
    assert!(!text.contains("running now"), "{text}");
    // The next daemon records it crashed.
    let mut next = Daemon::start(&env);
    wait_for("the crash recorded", || {
        !fires(&env, "b", "crashed").is_empty()
    });
    assert!(next.terminate().success());
}

/// A daemon killed mid-cycle never wrote its fire's outcome. A run that
/// finds the dead run records the fire crashed (`log --kind fire`), and the
/// next daemon resumes the fire once on start, within `catch_up`: the
/// night's work does not wait for tomorrow's fire.
#[test]
fn a_fire_cut_short_by_a_killed_daemon_is_recorded_crashed_and_resumed() {
    let env = killed_mid_fire("catch_up = \"1h\"\n", 5, "done");
    let b = batch(&env.status(), "b");
    assert_eq!(
        b["last_fire"]["outcome"], "crashed",
        "said before recorded: {b}"
    );

    // A manual run finds the dead run: the fire is recorded crashed, once.
    env.cmd()
        .args(["run", "b", "--limit", "1"])
        .assert()
        .success();
    let crashed = fires(&env, "b", "crashed");
    assert_eq!(crashed.len(), 1, "{crashed:?}");
    assert!(crashed[0]["run_id"].is_i64(), "{}", crashed[0]);
    assert!(
        crashed[0]["message"]
            .as_str()
            .unwrap()
            .contains("crashed: the daemon stopped mid-cycle"),
        "{}",
        crashed[0]
    );

    // The next daemon resumes it at once: every item done, one more fire.
    let mut daemon = Daemon::start(&env);
    wait_for("the resumed fire to finish", || {
        !fires(&env, "b", "ran").is_empty()
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    let b = batch(&env.status(), "b");
    assert_eq!(
        (&b["done"], &b["pending"]),
        (&Value::from(5), &Value::from(0)),
        "{b}"
    );
    let ran = fires(&env, "b", "ran");
    assert_eq!(ran.len(), 1, "{ran:?}");
    let reason = ran[0]["fields"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("catch-up: resumes the fire at "),
        "{reason}"
    );
    assert_eq!(fires(&env, "b", "crashed").len(), 1, "recorded once");
}

/// Killed again with nothing run in between: the starting daemon itself
/// records the fire it finds still `running` as crashed.
#[test]
fn a_starting_daemon_records_the_fire_its_predecessor_left_running() {
    // No catch_up: the work waits for the next fire, and the record says
    // what happened.
    let env = killed_mid_fire("", 3, "claimed");
    let mut daemon = Daemon::start(&env);
    wait_for("the crashed fire's record", || {
        !fires(&env, "b", "crashed").is_empty()
    });
    assert_eq!(daemon.terminate().code(), Some(0));
    let crashed = fires(&env, "b", "crashed");
    assert_eq!(crashed.len(), 1, "{crashed:?}");
    assert!(
        crashed[0]["fields"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("its cycle never ended"),
        "{}",
        crashed[0]
    );
    let b = batch(&env.status(), "b");
    assert_eq!(b["last_fire"]["outcome"], "crashed", "{b}");
    assert!(
        fires(&env, "b", "ran").is_empty(),
        "nothing resumed without catch_up"
    );
}

/// Between SIGTERM and its exit, while its cycle finishes the item in
/// flight, the daemon says it is stopping: no view gives a next fire it
/// will not fire.
#[test]
fn a_stopping_daemon_is_said_stopping_while_its_cycle_finishes() {
    let env = Env::new();
    // The item finishes when the test says so.
    env.script(
        "gated.sh",
        "cat >/dev/null; while [ ! -f go ]; do sleep 0.05; done; echo '{\"ok\":true}'",
    );
    env.write(
        "nightshift.toml",
        "[batch.b]\nworker = [\"./gated.sh\"]\nconcurrency = 1\ngrace = \"1h\"\n\
         schedule = \"* * * * * *\"\ntimezone = \"UTC\"\n",
    );
    env.add_items("b", 2);
    let mut daemon = Daemon::start(&env);
    wait_for("an item in flight", || {
        batch(&env.status(), "b")["claimed"] == 1
    });
    assert_eq!(batch(&env.status(), "b")["next_fire"]["fires"], true);
    let pid = Pid::from_raw(i32::try_from(daemon.child.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    wait_for("the daemon to say it stops", || {
        env.status()["daemons"][0]["stopping_at"].is_string()
    });
    let status = env.status();
    let b = batch(&status, "b");
    assert_eq!(b["next_fire"]["fires"], false, "{b}");
    let why = b["next_fire"]["why"].as_str().unwrap();
    assert!(
        why.starts_with("daemon stopping on ")
            && why.contains("it fires nothing more while its running cycles finish"),
        "{why}"
    );
    assert_eq!(
        status["daemons"][0]["live"], true,
        "it still runs: {status}"
    );
    let human = env.cmd().arg("status").output().unwrap();
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(human.contains("daemon: stopping on "), "{human}");
    assert!(
        human.contains(", so nothing fires; its next fire times:"),
        "{human}"
    );
    let short = env.cmd().args(["status", "--short"]).output().unwrap();
    let short = String::from_utf8(short.stdout).unwrap();
    assert!(short.contains(" daemon stopping"), "{short}");
    // The item finishes; the daemon exits, stopped.
    env.write("go", "");
    let exit = daemon.exited();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    let status = env.status();
    assert_eq!(status["daemons"][0]["state"], "stopped", "{status}");
    assert_eq!(batch(&status, "b")["done"], 1);
}

/// Batch `b` of 3 items, scheduled at two fire times two seconds apart a
/// few seconds from now (the only fires today; `extra` config beside it),
/// whose worker waits for a file `go`: the second fire comes while the
/// first one's cycle runs. The daemon is killed with SIGKILL once the
/// second fire is recorded `outcome`; then `go` is written, so the worker
/// left behind ends and the next daemon's cycle can finish.
fn killed_behind_a_later_fire(env: &Env, extra: &str, outcome: &str) {
    env.script(
        "gated.sh",
        "cat >/dev/null; while [ ! -f go ]; do sleep 0.05; done; echo '{\"ok\":true}'",
    );
    let mut first = (nightshift::util::time::now() + chrono::TimeDelta::seconds(4))
        .with_nanosecond(0)
        .unwrap();
    if first.second() > 57 {
        // Both in one minute: one cron line names them.
        first += chrono::TimeDelta::seconds(i64::from(60 - first.second()));
    }
    let cron = format!(
        "{},{} {} {} * * *",
        first.second(),
        first.second() + 2,
        first.minute(),
        first.hour()
    );
    env.write(
        "nightshift.toml",
        &format!(
            "[batch.b]\nworker = [\"./gated.sh\"]\nconcurrency = 1\n\
             schedule = \"{cron}\"\ntimezone = \"UTC\"\ncatch_up = \"1h\"\n{extra}"
        ),
    );
    env.add_items("b", 3);
    let mut daemon = Daemon::start(env);
    wait_for("the second fire recorded behind the first's cycle", || {
        !fires(env, "b", outcome).is_empty()
    });
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    env.write("go", "");
}

/// `status` of batch `b`, in words.
fn status_text(env: &Env) -> String {
    String::from_utf8(env.cmd().arg("status").output().unwrap().stdout).unwrap()
}

/// The last fire, `outcome`, behind a cycle whose daemon was killed: every
/// view says that cycle crashed (the reason starts `reason`), and the
/// words it said before (`never`) are gone.
#[track_caller]
fn said_behind_a_dead_cycle(env: &Env, outcome: &str, reason: &str, never: &str) {
    let b = batch(&env.status(), "b");
    assert_eq!(b["last_fire"]["outcome"], outcome, "{b}");
    let said = b["last_fire"]["reason"].as_str().unwrap();
    assert!(said.starts_with(reason), "{said}");
    let text = status_text(env);
    assert!(!text.contains(never), "{text}");
}

/// Starts the next daemon and stops it once a fire ran.
fn next_daemon_until_a_fire_ran(env: &Env) {
    let mut daemon = Daemon::start(env);
    wait_for("a fire to run", || !fires(env, "b", "ran").is_empty());
    assert_eq!(daemon.terminate().code(), Some(0));
}

both_backends! {
    /// A daemon killed mid-cycle after a later fire was skipped as an
    /// overlap: the next daemon found only the skipped fire as the last
    /// one, recorded no crash, resumed nothing, and `status` said the dead
    /// cycle picked up the work. It records the cut fire crashed and
    /// resumes it once on start (`catch_up`), as for a fire recorded last.
    fn a_fire_cut_short_behind_a_skipped_fire_is_recorded_crashed_and_resumed(env) {
        killed_behind_a_later_fire(&env, "", "skipped-overlap");
        let cut = fires(&env, "b", "running");
        assert_eq!(cut.len(), 1, "{cut:?}");
        said_behind_a_dead_cycle(
            &env,
            "skipped-overlap",
            "the cycle it left the work to crashed since",
            "picks up the work",
        );
        next_daemon_until_a_fire_ran(&env);
        let crashed = fires(&env, "b", "crashed");
        assert_eq!(crashed.len(), 1, "{crashed:?}");
        assert_eq!(crashed[0]["fields"]["fire_at"], cut[0]["fields"]["fire_at"], "{crashed:?}");
        assert!(
            crashed[0]["fields"]["reason"]
                .as_str()
                .unwrap()
                .starts_with("its cycle never ended"),
            "{}",
            crashed[0]
        );
        let ran = fires(&env, "b", "ran");
        assert_eq!(ran.len(), 1, "{ran:?}");
        let reason = ran[0]["fields"]["reason"].as_str().unwrap();
        assert!(reason.starts_with("catch-up: resumes the fire at "), "{reason}");
        let b = batch(&env.status(), "b");
        assert_eq!((&b["done"], &b["pending"]), (&Value::from(3), &Value::from(0)), "{b}");
    }

    /// The same with `overlap = "queue"`: the fire queued behind the cut
    /// cycle was dropped without a word while `status` said it would run as
    /// soon as that cycle ended. It runs on start, once, and its cycle does
    /// the cut fire's work too (no second cycle to resume it).
    fn a_fire_queued_behind_a_cut_cycle_runs_when_the_next_daemon_starts(env) {
        killed_behind_a_later_fire(&env, "overlap = \"queue\"\n", "queued");
        let queued = fires(&env, "b", "queued");
        said_behind_a_dead_cycle(
            &env,
            "queued",
            "the cycle it waited for crashed since",
            "as soon as the previous cycle ends",
        );
        next_daemon_until_a_fire_ran(&env);
        assert_eq!(fires(&env, "b", "crashed").len(), 1);
        let ran = fires(&env, "b", "ran");
        assert_eq!(ran.len(), 1, "one cycle: {ran:?}");
        assert_eq!(ran[0]["fields"]["fire_at"], queued[0]["fields"]["fire_at"], "{ran:?}");
        assert_eq!(fires(&env, "b", "running").len(), 2, "the cut fire, then the queued one");
        let b = batch(&env.status(), "b");
        assert_eq!((&b["done"], &b["pending"]), (&Value::from(3), &Value::from(0)), "{b}");
    }
}

/// The batches each live daemon schedules, by host.
fn live_daemons(env: &Env) -> Vec<(String, Vec<String>)> {
    let mut live: Vec<(String, Vec<String>)> = env.status()["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["state"] == "live")
        .map(|d| {
            let batches = d["batches"].as_array().unwrap();
            (
                d["host"].as_str().unwrap().to_string(),
                batches
                    .iter()
                    .map(|b| b.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    live.sort();
    live
}

/// Runs of `batch` started by a daemon on `host`.
fn runs_on(env: &Env, batch: &str, host: &str) -> i64 {
    env.int(&format!(
        "SELECT count(*) FROM runs r JOIN batches b ON b.id = r.batch_id \
          WHERE b.name = '{batch}' AND r.host = '{host}'"
    ))
}

/// Whether `batch`'s log has a `daemon` event whose message has `text`.
fn daemon_said(env: &Env, batch: &str, text: &str) -> bool {
    env.events(batch, "daemon")
        .iter()
        .any(|e| e["message"].as_str().unwrap().contains(text))
}

/// One daemon a batch, on both stores: two started at once, a reload, a
/// daemon replaced while it was stopped.
mod one_daemon_a_batch {
    use super::*;

    both_backends! {
        /// Two daemons of one batch started at the same moment: on PostgreSQL
        /// both passed the check (one in five or ten tries) and both fired
        /// every fire time. Each time, one runs and the other is refused
        /// (exit 2) with the error alone: it said it was scheduling and that
        /// it stopped before the error.
        fn two_daemons_started_together_one_is_refused(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            env.write(
                "nightshift.toml",
                "[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n",
            );
            for round in 0..8 {
                let mut two = [
                    Daemon::start_on(&env, "a", "host-a", &[]),
                    Daemon::start_on(&env, "b", "host-b", &[]),
                ];
                let start = Instant::now();
                let (refused, kept) = loop {
                    if let Some(status) = two[0].child.try_wait().unwrap() {
                        break (("a", status), 1);
                    }
                    if let Some(status) = two[1].child.try_wait().unwrap() {
                        break (("b", status), 0);
                    }
                    assert!(start.elapsed() < PATIENCE, "round {round}: both still run");
                    std::thread::sleep(Duration::from_millis(20));
                };
                let (tag, status) = refused;
                let (out, err) = env.output_of(tag);
                assert_eq!(status.code(), Some(2), "round {round}: {out}{err}");
                assert_eq!(out, "", "round {round}: only the error");
                assert!(err.starts_with("nightshift: error: a live daemon ("), "round {round}: {err}");
                assert_eq!(err.lines().count(), 1, "{err}");
                std::thread::sleep(Duration::from_millis(300));
                assert!(two[kept].child.try_wait().unwrap().is_none(), "round {round}: the other runs");
                assert_eq!(two[kept].terminate().code(), Some(0));
            }
        }

        /// A daemon given SIGHUP with a config that names a batch another live
        /// daemon schedules took it on, and both fired it. The reload leaves
        /// that batch out and says so in its log; a reload that would leave the
        /// daemon no batch is refused, the old config kept.
        fn a_reload_leaves_out_a_batch_another_daemon_schedules(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            let s = "[batch.s]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n";
            let t = "[batch.t]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\n";
            env.write("nightshift.toml", s);
            let mut a = Daemon::start_on(&env, "a", "host-a", &[]);
            wait_for("a live", || live_daemons(&env).len() == 1);
            env.write("nightshift.toml", &format!("{s}{t}"));
            let mut b = Daemon::start_on(&env, "b", "host-b", &["--batch", "t"]);
            wait_for("b live", || live_daemons(&env).len() == 2);
            a.signal(Signal::SIGHUP);
            wait_for("the reload said", || daemon_said(&env, "s", "config reloaded: daemon on host-a"));
            assert!(daemon_said(&env, "t", "leaves this batch out: a live daemon (host-b:"));
            wait_for("a fire of t", || runs_on(&env, "t", "host-b") >= 2);
            assert_eq!(runs_on(&env, "t", "host-a"), 0);
            assert_eq!(
                live_daemons(&env),
                [("host-a".to_string(), vec!["s".to_string()]), ("host-b".to_string(), vec!["t".to_string()])]
            );

            env.write("nightshift.toml", t);
            a.signal(Signal::SIGHUP);
            wait_for("the refusal", || daemon_said(&env, "s", "config reload refused, the old config stays: every batch it names has another live daemon"));
            assert_eq!(live_daemons(&env).len(), 2);
            assert_eq!(runs_on(&env, "t", "host-a"), 0);
            assert_eq!(a.terminate().code(), Some(0));
            assert_eq!(b.terminate().code(), Some(0));
        }

        /// A daemon stopped (SIGSTOP) until it was judged silent, and replaced
        /// by a daemon on another host: after SIGCONT both fired the batch
        /// forever. It learns at its first pass that it was replaced, fires
        /// nothing more, says so in the batch's log, and, with no batch left,
        /// stops (exit 0).
        fn a_daemon_replaced_while_stopped_steps_down(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            env.write(
                "nightshift.toml",
                "[batch.s]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\n",
            );
            let mut a = Daemon::start_on(&env, "a", "host-a", &[]);
            wait_for("a fire by a", || runs_on(&env, "s", "host-a") >= 1);
            // As if unheard for a minute: silent for every view (and for the
            // next daemon), which judges a daemon elsewhere by its heartbeat.
            // A stop that lands inside one of a's write transactions holds
            // the store locked: a is let go on and stopped again until the
            // write gets through.
            let stopped = loop {
                a.signal(Signal::SIGSTOP);
                let stopped = Instant::now();
                let aged = std::panic::catch_unwind(|| {
                    env.exec("UPDATE daemons SET beat_at = beat_at - 60000 WHERE host = 'host-a'")
                });
                if aged.is_ok() {
                    break stopped;
                }
                a.signal(Signal::SIGCONT);
                std::thread::sleep(Duration::from_millis(50));
            };
            let mut b = Daemon::start_on(&env, "b", "host-b", &[]);
            wait_for("a fire by b", || runs_on(&env, "s", "host-b") >= 1);
            let by_a = runs_on(&env, "s", "host-a");
            // Stopped for a few seconds more than a pass of its loop takes:
            // what it sees of the minute it was not heard from.
            std::thread::sleep(Duration::from_secs(4).saturating_sub(stopped.elapsed()));
            a.signal(Signal::SIGCONT);
            assert_eq!(a.exited().code(), Some(0));
            assert!(daemon_said(&env, "s", "steps down from this batch: a live daemon (host-b:"));
            let err = std::fs::read_to_string(env.path("a.err")).unwrap();
            assert!(err.contains("it steps down"), "{err}");
            assert_eq!(runs_on(&env, "s", "host-a"), by_a, "a fired nothing after SIGCONT");
            assert_eq!(live_daemons(&env), [("host-b".to_string(), vec!["s".to_string()])]);
            let runs = runs_on(&env, "s", "host-b");
            wait_for("b fires on", || runs_on(&env, "s", "host-b") > runs);
            assert_eq!(b.terminate().code(), Some(0));
        }
    }
}

/// The fire records of `batch` after the first `skip`, as `outcome: reason`.
fn fire_records_after(env: &Env, batch: &str, skip: usize) -> Vec<String> {
    env.events(batch, "fire")
        .into_iter()
        .skip(skip)
        .map(|e| {
            format!(
                "{}: {}",
                e["fields"]["outcome"].as_str().unwrap(),
                e["fields"]["reason"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Waits for an on-time fire of `batch` recorded after the first `skip`
/// fire records, and says what those records were.
fn on_time_fire_after(env: &Env, batch: &str, skip: usize) -> Vec<String> {
    wait_for("an on-time fire", || {
        fire_records_after(env, batch, skip)
            .iter()
            .any(|r| r == "ran: ")
    });
    fire_records_after(env, batch, skip)
}

/// A batch the config stops scheduling owes no fires for the time it was
/// not scheduled, on both stores.
mod unscheduled {
    use super::*;

    const KEEP: &str = "[batch.keep]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n";
    const KIJI: &str = "[batch.\"記事\"]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\ntimezone = \"Asia/Tokyo\"\ncatch_up = \"1h\"\n";

    /// `status --json`'s `missed` of 記事.
    fn missed(env: &Env) -> Value {
        batch(&env.status(), "記事")["missed"].clone()
    }

    both_backends! {
        /// A schedule taken out of the config and reloaded (SIGHUP), then put
        /// back: the daemon recorded the seconds it was out as fires it
        /// missed "while the daemon was not running" (it ran all along) and
        /// ran a catch-up cycle at once, one nobody had scheduled, and
        /// `status` said those fires were missed. Nothing is owed: the next
        /// fire runs on time, and no view says a fire was missed.
        fn a_schedule_taken_out_and_put_back_by_reload_owes_nothing(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            env.write("nightshift.toml", &format!("{KEEP}{KIJI}"));
            let mut daemon = Daemon::start(&env);
            on_time_fire_after(&env, "記事", 0);
            env.write("nightshift.toml", KEEP);
            daemon.signal(Signal::SIGHUP);
            wait_for("the batch left out", || {
                daemon_said(&env, "記事", "the daemon no longer schedules this batch")
            });
            // Fire times of the old schedule pass while it is out.
            std::thread::sleep(Duration::from_secs(3));
            env.write("nightshift.toml", &format!("{KEEP}{KIJI}"));
            assert_eq!(missed(&env), Value::Null, "before the reload");
            let seen = env.events("記事", "fire").len();
            daemon.signal(Signal::SIGHUP);
            let records = on_time_fire_after(&env, "記事", seen);
            assert!(
                records.iter().all(|r| !r.starts_with("missed") && !r.contains("catch-up")),
                "{records:#?}"
            );
            assert_eq!(missed(&env), Value::Null);
            assert_eq!(daemon.terminate().code(), Some(0));
        }

        /// The same through restarts: a daemon started with a config that
        /// no longer schedules the batch, and later one that does again.
        fn a_schedule_taken_out_across_restarts_owes_nothing(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            env.write("nightshift.toml", &format!("{KEEP}{KIJI}"));
            let mut daemon = Daemon::start(&env);
            on_time_fire_after(&env, "記事", 0);
            assert_eq!(daemon.terminate().code(), Some(0));
            env.write("nightshift.toml", KEEP);
            let mut daemon = Daemon::start(&env);
            wait_for("the daemon live", || live_daemons(&env).len() == 1);
            assert_eq!(daemon.terminate().code(), Some(0));
            std::thread::sleep(Duration::from_secs(3));
            env.write("nightshift.toml", &format!("{KEEP}{KIJI}"));
            assert_eq!(missed(&env), Value::Null, "before the daemon starts");
            let seen = env.events("記事", "fire").len();
            let mut daemon = Daemon::start(&env);
            let records = on_time_fire_after(&env, "記事", seen);
            assert!(
                records.iter().all(|r| !r.starts_with("missed") && !r.contains("catch-up")),
                "{records:#?}"
            );
            assert_eq!(daemon.terminate().code(), Some(0));
        }
    }
}

/// A batch scheduled in the file while a daemon runs that does not
/// schedule it, on both stores.
mod left_out {
    use super::*;

    both_backends! {
        /// A schedule added to the file while the daemon ran (not yet
        /// reloaded): `status` said `daemon not running (never started for
        /// this batch)` beside `daemon: running on …`, so the user started a
        /// second daemon, which was refused. It names the live daemon that
        /// leaves the batch out and how to have it fire it.
        fn a_batch_the_live_daemon_leaves_out_says_so_not_that_none_runs(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            let keep = "[batch.keep]\nworker = [\"./w.sh\"]\nschedule = \"30 4 * * *\"\n";
            env.write("nightshift.toml", keep);
            let mut daemon = Daemon::start(&env);
            wait_for("the daemon live", || live_daemons(&env).len() == 1);
            env.write(
                "nightshift.toml",
                &format!("{keep}[batch.\"記事\"]\nworker = [\"./w.sh\"]\nschedule = \"0 2 * * *\"\ntimezone = \"Asia/Tokyo\"\n"),
            );
            let text = status_text(&env);
            let said = text.split("記事:").nth(1).unwrap_or_default().to_string();
            assert!(!said.contains("daemon not running"), "{text}");
            assert!(said.contains("SIGHUP"), "{text}");
            let pid = daemon.child.id().to_string();
            assert!(said.contains(&pid), "names the live daemon: {text}");
            let why = batch(&env.status(), "記事")["next_fire"]["why"].clone();
            let why = why.as_str().unwrap_or_default();
            assert!(!why.contains("not running") && why.contains("SIGHUP"), "{why}");
            daemon.signal(Signal::SIGHUP);
            wait_for("the batch taken on", || {
                batch(&env.status(), "記事")["next_fire"]["fires"] == true
            });
            assert_eq!(daemon.terminate().code(), Some(0));
        }
    }
}

/// A cycle stopped with its daemon (SIGTERM: a restart, an orderly
/// shutdown), on both stores.
mod stopped_mid_cycle {
    use super::*;

    /// Items of 記事 done.
    fn done(env: &Env) -> i64 {
        batch(&env.status(), "記事")["done"].as_i64().unwrap()
    }

    both_backends! {
        /// `systemctl restart` (or a reboot) one item into the nightly
        /// cycle: the rest waited for the next night, though `catch_up`
        /// covered the fire and a daemon killed with `kill -9` had them
        /// resumed. The next daemon resumes the cut cycle once, as it does
        /// one cut by a kill.
        fn a_cycle_stopped_with_its_daemon_is_resumed_by_the_next(env) {
            env.script("w.sh", "cat >/dev/null; sleep 0.3; echo '{\"ok\":true}'");
            let cfg = |schedule: &str| {
                format!("[batch.\"記事\"]\nworker = [\"./w.sh\"]\nschedule = \"{schedule}\"\ntimezone = \"Asia/Tokyo\"\ncatch_up = \"1h\"\nconcurrency = 1\ngrace = \"10s\"\n")
            };
            env.write("nightshift.toml", &cfg("* * * * * *"));
            add(&env, "記事", &["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10"]);
            let mut daemon = Daemon::start(&env);
            wait_for("an item done", || done(&env) >= 1);
            assert_eq!(daemon.terminate().code(), Some(0));
            let left = 10 - done(&env);
            assert!(left > 0, "the cycle was cut");
            // The next daemon fires no on-time fire that would do the work.
            env.write("nightshift.toml", &cfg("30 4 1 1 *"));
            let mut daemon = Daemon::start(&env);
            wait_for("the rest done", || done(&env) == 10);
            assert!(
                fires(&env, "記事", "running")
                    .iter()
                    .any(|f| f["fields"]["reason"].as_str().unwrap_or_default().contains("resumes the fire at")),
                "{:#?}",
                env.events("記事", "fire")
            );
            assert_eq!(daemon.terminate().code(), Some(0));
        }
    }
}

/// `nightshift schedule` beside no live daemon, on both stores.
mod schedule_command {
    use super::*;

    /// `schedule 記事` in words and as `--json`'s `fires` and `why`.
    fn said(env: &Env) -> (String, Value) {
        let out = env.cmd().args(["schedule", "記事"]).output().unwrap();
        assert!(out.status.success());
        let json = env
            .cmd()
            .args(["schedule", "記事", "--json"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        (String::from_utf8(out.stdout).unwrap(), v)
    }

    both_backends! {
        /// `schedule` listed the next fire times `in 4h59m` with no daemon
        /// running, or one killed, where every other view says nothing
        /// fires; now it says so, and `--json` has `fires` and `why`.
        fn the_schedule_command_says_when_no_daemon_fires_it(env) {
            env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
            env.write(
                "nightshift.toml",
                "[batch.\"記事\"]\nworker = [\"./w.sh\"]\nschedule = \"0 2 * * *\"\ntimezone = \"Asia/Tokyo\"\n",
            );
            let (text, v) = said(&env);
            assert!(text.contains("daemon not running (never started for this batch), so nothing fires"), "{text}");
            assert_eq!(v["fires"], false, "{v}");
            assert!(v["why"].as_str().unwrap_or_default().contains("not running"), "{v}");
            let mut daemon = Daemon::start(&env);
            wait_for("the daemon live", || live_daemons(&env).len() == 1);
            let (text, v) = said(&env);
            assert!(!text.contains("nothing fires"), "{text}");
            assert_eq!((&v["fires"], &v["why"]), (&Value::from(true), &Value::Null), "{v}");
            daemon.signal(Signal::SIGKILL);
            daemon.exited();
            let (text, v) = said(&env);
            assert!(text.contains("is gone (killed, or crashed)), so nothing fires"), "{text}");
            assert_eq!(v["fires"], false, "{v}");
        }
    }
}

/// Fire times noticed late but on time: after a stop, after a restart.
mod late;
