//! Fire times a daemon notices late but within the on-time tolerance
//! (`schedule::plan::ON_TIME`): a daemon stopped for seconds, a daemon
//! restarted just after a fire time. They are run once, and every view
//! says so, not that they were missed.

use super::*;

use nightshift::util::time::{now, rfc3339};

/// Waits until the clock reads `t` or later: the fire time has come.
fn wait_for_the_clock(t: chrono::DateTime<chrono::Utc>) {
    wait_for("the clock", || now() >= t);
}

/// `systemctl restart` just as a fire time came, for a batch with no
/// `catch_up`: the new daemon recorded that fire `missed` ("no catch_up
/// window is set") though it noticed it well under a second late, and
/// its items waited for the next day. It runs it, on time.
#[test]
fn a_daemon_restarted_just_after_a_fire_time_runs_that_fire() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    // Room for the first daemon to start and plan it on a loaded machine.
    let fire = (now() + chrono::TimeDelta::seconds(15))
        .with_nanosecond(0)
        .unwrap();
    let cron = format!("{} {} {} * * *", fire.second(), fire.minute(), fire.hour());
    env.write(
        "nightshift.toml",
        &format!(
            "[batch.\"記事\"]\nworker = [\"./w.sh\"]\nschedule = \"{cron}\"\ntimezone = \"UTC\"\n"
        ),
    );
    env.add_items("記事", 2);
    let mut first = Daemon::start(&env);
    wait_for("the fire planned", || {
        batch(&env.status(), "記事")["next_fire"]["fires"] == true
    });
    assert_eq!(first.terminate().code(), Some(0));
    assert!(
        now() < fire && env.events("記事", "fire").is_empty(),
        "the first daemon stopped before the fire time"
    );
    wait_for_the_clock(fire);
    let mut second = Daemon::start(&env);
    wait_for("the items done", || {
        batch(&env.status(), "記事")["done"] == 2
    });
    wait_for("the fire ran", || !fires(&env, "記事", "ran").is_empty());
    let records = fire_records_after(&env, "記事", 0);
    assert_eq!(records, ["running: ", "ran: "], "on time, nothing missed");
    let b = batch(&env.status(), "記事");
    assert_eq!(
        b["last_fire"]["at"],
        rfc3339(fire.timestamp_millis()),
        "{b}"
    );
    assert_eq!(b["missed"], Value::Null, "{b}");
    assert_eq!(second.terminate().code(), Some(0));
}

/// A daemon stopped (SIGSTOP) for seconds, with a per-second schedule:
/// while it was stopped `status` said "missed: N fire times …; when the
/// daemon starts it records them as missed" (`schedule` said nothing of
/// them), and on SIGCONT it recorded none missed and ran them once, on
/// time. Views now say what it does: the fire times are late, not
/// missed, and the latest runs once for them; the fire it runs says how
/// many it stands for.
#[test]
fn a_daemon_stopped_for_seconds_runs_its_late_fires_once_and_every_view_says_so() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.\"記事\"]\nworker = [\"./w.sh\"]\nschedule = \"* * * * * *\"\ntimezone = \"Asia/Tokyo\"\n",
    );
    let mut daemon = Daemon::start(&env);
    on_time_fire_after(&env, "記事", 0);
    // As if unheard for a minute: silent for every view. A stop that lands
    // inside one of its write transactions holds the store locked: it is
    // let go on and stopped again until the write gets through.
    let stopped = loop {
        daemon.signal(Signal::SIGSTOP);
        let stopped = now();
        let aged =
            std::panic::catch_unwind(|| env.exec("UPDATE daemons SET beat_at = beat_at - 60000"));
        if aged.is_ok() {
            break stopped;
        }
        daemon.signal(Signal::SIGCONT);
        std::thread::sleep(Duration::from_millis(50));
    };
    let seen = env.events("記事", "fire").len();
    // Three fire times come and go while it is stopped.
    wait_for_the_clock(stopped + chrono::TimeDelta::seconds(3));

    let b = batch(&env.status(), "記事");
    assert_eq!(b["daemon"]["state"], "silent", "{b}");
    assert_eq!(
        b["missed"],
        Value::Null,
        "late by seconds is not missed: {b}"
    );
    let late = &b["late"];
    assert!(late["count"].as_u64().unwrap() >= 3, "{b}");
    let text = status_text(&env);
    assert!(!text.contains("missed:"), "{text}");
    assert!(
        text.contains("late: ") && text.contains("a daemon back now runs the latest once for them"),
        "{text}"
    );
    let out = env.cmd().args(["schedule", "記事"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains("missed:")
            && text.contains("a daemon back now runs the latest once for them"),
        "{text}"
    );
    let out = env
        .cmd()
        .args(["schedule", "記事", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["missed"].is_null() && v["late"]["count"].as_u64().unwrap() >= 3,
        "{v}"
    );
    // The one-line view and the metrics too (they said nothing of them).
    let out = env.cmd().args(["status", "--short"]).output().unwrap();
    let short = String::from_utf8(out.stdout).unwrap();
    assert!(
        short.contains(" no daemon ")
            && short.trim_end().ends_with(" late")
            && !short.contains("missed"),
        "{short}"
    );
    let out = env.cmd().args(["status", "--prometheus"]).output().unwrap();
    let metrics = String::from_utf8(out.stdout).unwrap();
    assert!(
        crate::support::metric(&metrics, "nightshift_late_fires{batch=\"記事\"}") >= 3.0,
        "{metrics}"
    );
    assert_eq!(
        crate::support::metric(&metrics, "nightshift_missed_fires{batch=\"記事\"}"),
        0.0,
        "{metrics}"
    );

    daemon.signal(Signal::SIGCONT);
    wait_for("the fire that stands for them", || {
        fire_records_after(&env, "記事", seen)
            .iter()
            .any(|r| r.starts_with("ran: "))
    });
    let records = fire_records_after(&env, "記事", seen);
    assert!(
        records.iter().all(|r| !r.starts_with("missed")),
        "{records:#?}"
    );
    let ran = records.iter().find(|r| r.starts_with("ran: ")).unwrap();
    assert!(
        ran.contains("earlier fire times came late")
            && ran.contains("this fire runs once for them"),
        "{ran}"
    );
    let b = batch(&env.status(), "記事");
    assert_eq!(
        (&b["missed"], &b["late"]),
        (&Value::Null, &Value::Null),
        "{b}"
    );
    assert_eq!(daemon.terminate().code(), Some(0));
}
